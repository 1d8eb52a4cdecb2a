"""SLURM's client commands as `pkmixer launch --executor slurm` asks them, and its checks of what it passes to them:
the ``--slurm-arg`` options (:func:`parse_slurm_args`), the request put to ``sbatch --test-only``
(:func:`sbatch_test_only`), a partition's time limits (``sinfo``), the queue (``squeue``) and a job's state
(``scontrol``). Plain functions of text and subprocesses, no submitit (:mod:`.executors` uses them)."""
import re
import subprocess
import time
from typing import Dict, Optional, Sequence, Tuple, Union

from .errors import LaunchError, SlurmUnreachableError

__all__ = ['SLURM_OWNED', 'NO_TIME_LIMIT_MIN', 'parse_slurm_args', 'is_option_value', 'sbatch_test_only', 'squeue',
           'job_state', 'minutes', 'partition_limits', 'sbatch_words']

SQUEUE_TIMEOUT_S = 60
SQUEUE_RETRY_S = (1, 3, 9)  # seconds before each new try of a squeue that could not reach slurmctld

_CONTROL = re.compile(r'[\x00-\x1f\x7f]')
_BOOKKEEPING = tuple(f'#SBATCH --{o}' for o in ('output', 'error', 'open-mode', 'signal', 'wckey', 'job-name'))
_OPTION_NAME = re.compile(r'[a-z][a-z0-9]*(-[a-z0-9]+)*')

# sbatch options the launcher writes itself (through submitit's batch script) or depends on, and why: a --slurm-arg
# cannot set them, nor an abbreviation of them (sbatch takes `--arr=…` as `--array=…`)
SLURM_OWNED: Dict[str, str] = {  # a launch argument named as `name` (the command says its flag)
    'array': 'one array task per run; `array_parallelism` sets how many run at once',
    'job-name': 'pkmixer-<folder>, the name squeue shows',
    'output': "submitit's log of each task (each run's own log is DIR/launch/logs/<run>.log)",
    'error': "submitit's log of each task (each run's own log is DIR/launch/logs/<run>.log)",
    'open-mode': "submitit's log of each task is appended to",
    'signal': "submitit's signal to requeue a task before its time limit",
    'partition': 'give it as `partition`',
    'time': 'give it as `time`',
    'cpus-per-task': 'give it as `cpus_per_run`',
    'gpus-per-node': 'give it as `gpus_per_run`',
    'nodes': 'each run is one task on one node',
    'ntasks': 'each run is one task on one node',
    'ntasks-per-node': 'each run is one task on one node',
    'wrap': 'the launcher submits its own batch script',
    'parsable': "the launcher reads sbatch's answer",
    'test-only': 'the launcher asks sbatch --test-only itself before it submits',
    'wait': 'the launcher follows the job with squeue itself',
    'clusters': 'the launcher follows the job with squeue on this cluster',
}
NO_TIME_LIMIT_MIN = 365 * 24 * 60  # the time limit asked on a partition without one
_EXACT_OPTIONS = ('gpus',)  # sbatch options whose names begin an owned one's (gpus-per-node): taken as they are


def parse_slurm_args(items: Sequence[str]) -> Dict[str, Union[str, bool]]:
    """``KEY=VALUE`` items (an sbatch long option without ``--``: ``account=myproj``; ``KEY`` alone for a flag such
    as ``hold``) → {KEY: VALUE or True}, ``_`` in a KEY read as ``-``.

    Raises:
        LaunchError: a KEY that is not an option name (lowercase letters, digits, ``-``), a VALUE with a control
        character (a newline would end the batch script's line), an option the launcher sets itself
        (:data:`SLURM_OWNED`) or an abbreviation of one. Whether sbatch knows an option, and whether the cluster can
        run what is asked, SLURM says at submission (:meth:`SlurmExecutor.start`).
    """
    out: Dict[str, Union[str, bool]] = {}
    for item in items or ():
        item = str(item)
        key, sep, value = item.partition('=')
        name = key.strip().replace('_', '-')
        if not _OPTION_NAME.fullmatch(name):
            raise LaunchError(f'slurm_arg {item!r}: {key!r} is not the name of an sbatch option (KEY=VALUE with its '
                              f'long name as KEY, e.g. account=myproj or qos=high; KEY alone for a flag, e.g. hold)')
        if _CONTROL.search(value):
            raise LaunchError(f'slurm_arg {item!r}: the value holds a control character '
                              f'({_CONTROL.search(value).group()!r}); an sbatch option is one line')
        owner = name if name in SLURM_OWNED else None if name in _EXACT_OPTIONS else \
            next((o for o in SLURM_OWNED if o.startswith(name)), None)
        if owner == name:
            raise LaunchError(f"slurm_arg {item!r}: --{name} is the launcher's own ({SLURM_OWNED[name]})")
        if owner:
            raise LaunchError(f"slurm_arg {item!r}: --{name} abbreviates --{owner}, which is the launcher's own "
                              f'({SLURM_OWNED[owner]}); give an option by its full name')
        out[name] = value if sep else True
    return out

def is_option_value(text: str) -> bool:
    """A value an sbatch option can take on its line: not empty, no control character."""
    return bool(text) and not _CONTROL.search(text)


def sbatch_test_only(script: str) -> None:
    """Put a batch script to ``sbatch --test-only``, which answers without submitting; raise SLURM's refusal (an
    unknown option, a partition that does not exist, more CPUs, memory or GPUs than any node of the partition has: a
    request that would otherwise wait in the queue for ever) with the options it judged."""
    try:
        out = subprocess.run(['sbatch', '--test-only'], input=script, capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired:
        raise LaunchError('sbatch --test-only did not answer in 120 s (nothing was submitted): is the cluster up? '
                          '(`sinfo`)') from None
    if out.returncode:
        asked = ' '.join(line.split(None, 1)[1] for line in script.splitlines() if line.startswith('#SBATCH ')
                         and not line.startswith(_BOOKKEEPING))
        raise LaunchError(f'SLURM refused the job array (nothing was submitted): '
                          f'{sbatch_words(out.stderr) or f"sbatch exit status {out.returncode}"} '
                          f'(sbatch --test-only {asked})')


def squeue(job: str) -> Dict[str, str]:
    """{array task id ``JOB_i``: SLURM state} of `job`'s tasks still in the queue ({} once it has left it).

    The launcher follows its jobs with ``squeue`` rather than submitit's own watcher (``Job.done()``/``Job.state``):
    submitit asks ``sacct``, which answers only where the cluster keeps accounting (slurmdbd), and many small
    clusters, the tests' own among them, keep none. What squeue shows is enough: a task that has left the queue has
    ended, and how its run ended is in the run's record (written by the task itself).

    Only SLURM's own answer counts as "left the queue" (an empty list, or ``Invalid job id specified``): a squeue
    that cannot reach slurmctld (``Unable to contact slurm controller``, ``Socket timed out``, no answer within
    :data:`SQUEUE_TIMEOUT_S`) is asked again after each of :data:`SQUEUE_RETRY_S`, then raises
    :class:`SlurmUnreachableError`: a job whose fate is unknown is never taken for one that has ended."""
    failure = ''
    for wait in (*SQUEUE_RETRY_S, None):
        try:
            out = subprocess.run(['squeue', '-h', '-r', '-j', str(job), '-o', '%i %T'], capture_output=True,
                                 text=True, timeout=SQUEUE_TIMEOUT_S)
        except FileNotFoundError as e:
            raise SlurmUnreachableError(f'there is no `squeue` on PATH to ask whether job {job} is in the queue') from e
        except subprocess.TimeoutExpired:
            failure = f'no answer within {SQUEUE_TIMEOUT_S} s'
        else:
            if out.returncode == 0:
                return dict(line.split(None, 1) for line in out.stdout.splitlines() if line.strip())
            if 'Invalid job id' in out.stderr:
                return {}  # it has left the queue, and slurmctld has forgotten it
            failure = out.stderr.strip() or f'exit status {out.returncode}'
        if wait is not None:
            time.sleep(wait)
    raise SlurmUnreachableError(f'`squeue -j {job}` failed {len(SQUEUE_RETRY_S) + 1} times ({failure}): SLURM cannot '
                                f'say whether job {job} is in the queue. Its tasks are SLURM\'s and go on without the '
                                f'launcher; `pkmixer status DIR` shows them once slurmctld answers (`scontrol ping`)')


def job_state(job: str) -> str:
    """SLURM's state of a job or array task that has left the queue (``CANCELLED``, ``FAILED``, …) while slurmctld
    still remembers it (``MinJobAge``, 5 minutes by default); '' once it has forgotten."""
    try:
        out = subprocess.run(['scontrol', 'show', 'job', '-o', str(job)], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return ''
    found = re.search(r'\bJobState=(\S+)', out.stdout) if out.returncode == 0 else None
    return found.group(1) if found else ''



def minutes(text: str) -> Optional[int]:
    """SLURM's time (``infinite``, ``MM``, ``MM:SS``, ``HH:MM:SS``, ``D-HH[:MM[:SS]]``) in whole minutes, rounded up;
    None for infinite or what cannot be read."""
    days, _, clock = text.strip().rpartition('-')
    parts = clock.split(':')
    if not all(p.isdigit() for p in parts + ([days] if days else [])) or len(parts) > 3:
        return None
    values = [int(p) for p in parts]
    if days:
        h, m, sec = (values + [0, 0])[:3]
    elif len(values) == 3:
        h, m, sec = values
    else:
        h, (m, sec) = 0, (values + [0])[:2]
    seconds = ((int(days or 0) * 24 + h) * 60 + m) * 60 + sec
    return -(-seconds // 60)


def partition_limits(partition: Optional[str]) -> Optional[Tuple[str, Optional[int], Optional[int]]]:
    """(name, default time limit, maximum time limit) of `partition` (None: the cluster's default partition), in
    minutes (None: none), as ``sinfo`` shows them; None where sinfo does not answer or has no such partition (sbatch
    then says so)."""
    try:
        out = subprocess.run(['sinfo', '-h', '-o', '%P %L %l'], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    for line in out.stdout.splitlines() if out.returncode == 0 else ():
        fields = line.split()
        if len(fields) == 3 and (fields[0].rstrip('*') == partition if partition else fields[0].endswith('*')):
            return fields[0].rstrip('*'), minutes(fields[1]), minutes(fields[2])
    return None


def sbatch_words(stderr: str) -> str:
    """sbatch's error lines, without its prefixes and its pointer to --help, joined by '; '."""
    lines = []
    for line in stderr.splitlines():
        line = line.strip()
        for prefix in ('sbatch: error: ', 'sbatch: ', 'allocation failure: '):
            line = line[len(prefix):] if line.startswith(prefix) else line
        if line and not line.startswith('Try "sbatch --help"'):
            lines.append(line)
    return '; '.join(lines)
