"""Where `pkmixer launch` runs its tasks: :data:`EXECUTORS`, picked by name (``--executor``).

An executor is a dataclass whose fields are its options (the command line makes ``--field-name`` flags of them,
from each field's ``metadata``: ``help``, ``type``), with

* ``start(tasks) -> Batch``: start every task (:class:`~timm_pkmixer.launch.tasks.Task`; each is run by
  :func:`~timm_pkmixer.launch.tasks.execute`), and
* ``holder_alive(record) -> bool``: whether the process or job named in a lock or run record is alive;
* ``stopped_reason(record) -> str`` (optional): why a run whose record never reached its end (queued, running,
  interrupted) and whose holder is gone is not running, in the executor's words (:func:`stopped_reason`);

and a :class:`Batch` with ``wait(on_end)`` (call ``on_end(task, exit status)`` as each task ends; ``None`` when
it ended unseen, e.g. cancelled in the queue) and ``job`` (the batch system's id, or None). ``detached`` says
whether the tasks outlive the launcher (a batch system's do). Adding an executor is one class and one entry in
:data:`EXECUTORS`.

* ``local``: this machine, `workers` runs at once; with `gpus`, each run on its own devices
  (``CUDA_VISIBLE_DEVICES``; `runs_per_gpu` runs share one); on a CPU each run gets its share of the idle cores as
  threads (:func:`~timm_pkmixer.experiments.threads.choose_threads`).
* ``slurm``: one SLURM job array per launch through submitit, one array task per run; a run with several GPUs
  runs under torchrun in its task. Its ``--slurm-arg`` options are checked (:func:`parse_slurm_args`), and the
  whole request is put to ``sbatch --test-only`` before anything is submitted: what the cluster can never run is
  refused in SLURM's words.
"""
import contextlib
import io
import os
import queue
import re
import shutil
import socket
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, ClassVar, Dict, List, Mapping, Optional, Sequence, Set, Tuple, Union

from ..validation import non_negative_int, positive_int
from .tasks import LaunchError, Task, execute, pid_alive, write_record

__all__ = ['EXECUTORS', 'holder_alive', 'stopped_reason', 'Batch', 'LocalExecutor', 'SlurmExecutor', 'parse_gpus',
           'parse_slurm_args', 'SLURM_OWNED', 'NO_SBATCH']

OnEnd = Callable[[Task, Optional[int]], None]
NO_SBATCH = ("--executor slurm: there is no `sbatch` on PATH. Run this on a machine where SLURM's client commands "
             "are (a cluster's login node; `module load slurm` on some), install them (Debian/Ubuntu: "
             "`apt-get install slurm-client`, with the cluster's slurm.conf and munge key), or run on this machine "
             "with --executor local")


class Batch:
    """Tasks started by an executor."""
    job: Optional[str] = None

    def wait(self, on_end: OnEnd) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        """Stop the tasks this launcher runs itself (a batch system's keep running)."""


def parse_gpus(text: str) -> List[str]:
    """``0,1,3`` → ['0', '1', '3'] (CUDA device indices)."""
    items = [t.strip() for t in str(text).split(',')]
    if not items or not all(t.isdigit() for t in items) or len(set(items)) != len(items):
        raise LaunchError(f'gpus must be distinct device indices separated by commas, e.g. 0,1,2,3; got {text!r}')
    return items


_CONTROL = re.compile(r'[\x00-\x1f\x7f]')
_OPTION_VALUE = re.compile(r'[^\x00-\x1f\x7f]+')
_BOOKKEEPING = tuple(f'#SBATCH --{o}' for o in ('output', 'error', 'open-mode', 'signal', 'wckey', 'job-name'))
_OPTION_NAME = re.compile(r'[a-z][a-z0-9]*(-[a-z0-9]+)*')

# sbatch options the launcher writes itself (through submitit's batch script) or depends on, and why: a --slurm-arg
# cannot set them, nor an abbreviation of them (sbatch takes `--arr=…` as `--array=…`)
SLURM_OWNED: Dict[str, str] = {
    'array': 'one array task per run; --array-parallelism sets how many run at once',
    'job-name': 'pkmixer-<folder>, the name squeue shows',
    'output': "submitit's log of each task (each run's own log is DIR/launch/logs/<run>.log)",
    'error': "submitit's log of each task (each run's own log is DIR/launch/logs/<run>.log)",
    'open-mode': "submitit's log of each task is appended to",
    'signal': "submitit's signal to requeue a task before its time limit",
    'partition': 'give it with --partition',
    'time': 'give it with --time',
    'cpus-per-task': 'give it with --cpus-per-run',
    'gpus-per-node': 'give it with --gpus-per-run',
    'nodes': 'each run is one task on one node',
    'ntasks': 'each run is one task on one node',
    'ntasks-per-node': 'each run is one task on one node',
    'wrap': 'the launcher submits its own batch script',
    'parsable': "the launcher reads sbatch's answer",
    'test-only': 'the launcher asks sbatch --test-only itself before it submits',
    'wait': 'the launcher follows the job with squeue (--no-wait returns at once)',
    'clusters': 'the launcher follows the job with squeue on this cluster',
}
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


def _signal(record: Mapping[str, Any]) -> str:
    """'signal N' of an interrupted run's record (exit status -N)."""
    code = record.get('returncode')
    return f'signal {-code}' if isinstance(code, int) and code < 0 else 'a signal'


# ------------------------------------------------------------------------------------------------- local

class _LocalBatch(Batch):
    def __init__(self, tasks: Sequence[Task], slots: Sequence[Dict[str, str]]):
        self.tasks = list(tasks)
        self.slots: queue.Queue[Dict[str, str]] = queue.Queue()
        for slot in slots:
            self.slots.put(slot)
        self.procs: Set[subprocess.Popen] = set()
        self.lock = threading.Lock()
        self.stopping = False
        self.pool = ThreadPoolExecutor(max_workers=len(slots), thread_name_prefix='pkmixer-run')
        self.futures = {self.pool.submit(self._run, task): task for task in self.tasks}

    def _started(self, proc: subprocess.Popen) -> None:
        with self.lock:
            self.procs.add(proc)
            if self.stopping:
                proc.terminate()

    def _run(self, task: Task) -> Optional[int]:
        slot = self.slots.get()
        try:
            if self.stopping:
                return None
            return execute(task, env=slot, on_start=self._started)
        finally:
            self.slots.put(slot)

    def wait(self, on_end: OnEnd) -> None:
        try:
            for future in as_completed(self.futures):
                on_end(self.futures[future], future.result())
        except BaseException:
            self.stop()
            raise
        finally:
            self.pool.shutdown(wait=True)

    def stop(self) -> None:
        with self.lock:
            self.stopping = True
            for proc in self.procs:
                if proc.poll() is None:
                    proc.terminate()


@dataclass
class LocalExecutor:
    """Runs on this machine, `workers` at once (default: one per GPU slot, else 1)."""
    name: ClassVar[str] = 'local'
    detached: ClassVar[bool] = False
    workers: Optional[int] = field(default=None, metadata=dict(
        help='runs at once on this machine (default: one per --gpus slot, else 1)', type=int))
    gpus: Optional[str] = field(default=None, metadata=dict(
        help='CUDA devices to place runs on, e.g. 0,1,2,3 (each run sees its own through CUDA_VISIBLE_DEVICES)'))
    runs_per_gpu: int = field(default=1, metadata=dict(help='runs sharing one device (with --gpus)', type=int))
    gpus_per_run: int = field(default=0, metadata=dict(
        help='GPUs of each run; more than 1 runs train.py under torchrun (default: 1 with --gpus, else 0)', type=int))
    threads: Optional[int] = field(default=None, metadata=dict(
        help='CPU threads per run (default: the idle cores shared among the workers)', type=int))

    def _slots(self) -> List[Dict[str, str]]:
        if self.gpus is None:
            if self.gpus_per_run > 0 or self.runs_per_gpu != 1:
                raise LaunchError('gpus_per_run and runs_per_gpu place runs on devices: give the devices with gpus')
            return [{} for _ in range(positive_int('workers', 1 if self.workers is None else self.workers))]
        devices = parse_gpus(self.gpus)
        per_run = max(1, self.gpus_per_run)
        positive_int('runs_per_gpu', self.runs_per_gpu)
        if len(devices) % per_run:
            raise LaunchError(f'gpus: {len(devices)} devices cannot be split into runs of gpus_per_run={per_run}')
        groups = [devices[i:i + per_run] for i in range(0, len(devices), per_run)]
        slots = [dict(CUDA_VISIBLE_DEVICES=','.join(g)) for g in groups for _ in range(self.runs_per_gpu)]
        if self.workers is not None:
            slots = slots[:positive_int('workers', self.workers)]
        return slots

    def _check_devices(self) -> None:
        """Every device of `gpus` is one of this machine's CUDA devices (torch imported only here)."""
        import torch
        count = torch.cuda.device_count()
        if count == 0:
            raise LaunchError('gpus: this machine has no CUDA device (torch.cuda.device_count() == 0); run on the '
                              'CPU without --gpus')
        missing = [d for d in parse_gpus(self.gpus) if int(d) >= count]
        if missing:
            has = 'one CUDA device (index 0' if count == 1 else f'{count} CUDA devices (indices 0 to {count - 1}'
            raise LaunchError(f'gpus: device {", ".join(missing)} is not on this machine, which has {has}; '
                              f'torch.cuda.device_count() == {count})')

    def plan(self) -> Dict[str, Any]:
        """What `plan_tasks` needs: the processes per run and the CPU threads of each."""
        from ..experiments.threads import choose_threads
        slots = self._slots()
        threads, why = choose_threads(self.threads, processes=len(slots) * max(1, self.gpus_per_run))
        return dict(nproc=max(1, self.gpus_per_run), threads=threads, threads_why=why, slots=len(slots))

    def check(self) -> None:
        """Every option's value, then the devices of `gpus` (raises :class:`LaunchError` naming the option)."""
        non_negative_int('gpus_per_run', self.gpus_per_run)
        if self.threads is not None:
            positive_int('threads', self.threads)
        self._slots()
        if self.gpus is not None:
            self._check_devices()

    def start(self, tasks: Sequence[Task]) -> Batch:
        for task in tasks:  # pending while this launcher lives
            write_record(Path(task.state_dir), task.name, state='queued', pid=os.getpid(), host=socket.gethostname(),
                         job=None, executor=self.name, run_dir=task.run_dir, recipe=task.recipe, returncode=None)
        return _LocalBatch(tasks, self._slots())

    @staticmethod
    def holder_alive(record: Mapping[str, Any]) -> bool:
        return pid_alive(record.get('pid'), record.get('host'))

    @staticmethod
    def stopped_reason(record: Mapping[str, Any]) -> str:
        """Why a run that never reached its first epoch is not running, from its record (its holder is gone)."""
        where, state = f'PID {record.get("pid")} on {record.get("host")}', record.get('state')
        if state == 'queued':
            return f'never started: its launcher ({where}) has ended'
        if state == 'interrupted':
            return f'stopped by {_signal(record)} before its first epoch'
        return f'{where} ended before its first epoch, its end unrecorded'


# ------------------------------------------------------------------------------------------------- slurm

def _squeue(job: str) -> Dict[str, str]:
    """{array task id ``JOB_i``: SLURM state} of `job`'s tasks still in the queue ({} once it has left it).

    The launcher follows its jobs with ``squeue`` rather than submitit's own watcher (``Job.done()``/``Job.state``):
    submitit asks ``sacct``, which answers only where the cluster keeps accounting (slurmdbd), and many small
    clusters, the tests' own among them, keep none. What squeue shows is enough: a task that has left the queue has
    ended, and how its run ended is in the run's record (written by the task itself)."""
    try:
        out = subprocess.run(['squeue', '-h', '-r', '-j', str(job), '-o', '%i %T'], capture_output=True, text=True,
                             timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return {}
    if out.returncode:
        return {}  # "Invalid job id": it has left the queue
    return dict(line.split(None, 1) for line in out.stdout.splitlines() if line.strip())


def _slurm_job_state(job: str) -> str:
    """SLURM's state of a job or array task that has left the queue (``CANCELLED``, ``FAILED``, …) while slurmctld
    still remembers it (``MinJobAge``, 5 minutes by default); '' once it has forgotten."""
    try:
        out = subprocess.run(['scontrol', 'show', 'job', '-o', str(job)], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return ''
    found = re.search(r'\bJobState=(\S+)', out.stdout) if out.returncode == 0 else None
    return found.group(1) if found else ''


_NO_LIMIT_MIN = 365 * 24 * 60  # the time limit asked on a partition without one


def _minutes(text: str) -> Optional[int]:
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


def _partition_limits(partition: Optional[str]) -> Optional[Tuple[str, Optional[int], Optional[int]]]:
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
            return fields[0].rstrip('*'), _minutes(fields[1]), _minutes(fields[2])
    return None


def _sbatch_words(stderr: str) -> str:
    """sbatch's error lines, without its prefixes and its pointer to --help, joined by '; '."""
    lines = []
    for line in stderr.splitlines():
        line = line.strip()
        for prefix in ('sbatch: error: ', 'sbatch: ', 'allocation failure: '):
            line = line[len(prefix):] if line.startswith(prefix) else line
        if line and not line.startswith('Try "sbatch --help"'):
            lines.append(line)
    return '; '.join(lines)


class _SlurmBatch(Batch):
    def __init__(self, job: str, tasks: Sequence[Task], job_ids: Sequence[str], poll_s: float):
        self.job, self.tasks, self.job_ids, self.poll_s = job, list(tasks), list(job_ids), poll_s

    def wait(self, on_end: OnEnd) -> None:
        from .tasks import read_record
        left = dict(zip(self.job_ids, self.tasks))
        while left:
            queued = _squeue(self.job)
            for tid in [t for t in left if t not in queued]:
                task = left.pop(tid)
                record = read_record(Path(task.state_dir), task.name)
                ended = record.get('job') == tid and record.get('state') in ('ended', 'failed', 'interrupted')
                on_end(task, record.get('returncode') if ended else None)
            if left:
                time.sleep(self.poll_s)


@dataclass
class SlurmExecutor:
    """One SLURM job array per launch (submitit), one array task per run."""
    name: ClassVar[str] = 'slurm'
    detached: ClassVar[bool] = True
    partition: Optional[str] = field(default=None, metadata=dict(help='SLURM partition (default: the cluster\'s)'))
    gpus_per_run: int = field(default=0, metadata=dict(help='GPUs of each run (a run with more than 1 runs under '
                                                            'torchrun)', type=int))
    cpus_per_run: int = field(default=1, metadata=dict(help='CPUs of each run\'s SLURM task (default 1)',
                                                       type=int))
    time: Optional[int] = field(default=None, metadata=dict(
        help="time limit of each run, minutes (default: the partition's); a run timed out is requeued and "
             'resumes', type=int))
    array_parallelism: int = field(default=256, metadata=dict(help='runs of the array at once (default 256)',
                                                              type=int))
    slurm_arg: List[str] = field(default_factory=list, metadata=dict(
        help='any other sbatch option, KEY=VALUE (repeatable), e.g. --slurm-arg account=myproj qos=high',
        nargs='+', action='extend'))
    poll_s: float = 5.

    def check(self) -> None:
        """Every option's value, then sbatch, srun and submitit (raises :class:`LaunchError` naming the option)."""
        if self.partition is not None and not _OPTION_VALUE.fullmatch(self.partition):
            raise LaunchError(f'partition must name a SLURM partition (`sinfo -s` lists them), got {self.partition!r}')
        non_negative_int('gpus_per_run', self.gpus_per_run)
        for name in ('cpus_per_run', 'array_parallelism'):
            positive_int(name, getattr(self, name))
        if self.time is not None:
            positive_int('time', self.time)
        parse_slurm_args(self.slurm_arg)
        if shutil.which('sbatch') is None or shutil.which('srun') is None:
            raise LaunchError(NO_SBATCH)
        try:
            import submitit  # noqa: F401
        except ImportError:
            raise LaunchError("--executor slurm needs submitit: pip install submitit (or, in a checkout of "
                              "timm-pkmixer, pip install '.[cluster]')") from None

    def plan(self) -> Dict[str, Any]:
        return dict(nproc=max(1, self.gpus_per_run), threads=None, threads_why='', slots=self.array_parallelism)

    def _time_limit(self) -> Optional[int]:
        """Each task's time limit, minutes: `time`, checked against the partition's limit (sinfo), else the limit
        SLURM would give (the partition's default, else its maximum; 365 days where it has none). Always a number
        where sinfo answers: submitit's requeue of a preempted or timed-out task reads it."""
        limits = _partition_limits(self.partition)
        if limits is None:
            return self.time
        name, default, maximum = limits
        if self.time is not None and maximum is not None and self.time > maximum:
            raise LaunchError(f'time: {self.time} minutes is more than partition {name} allows ({maximum} minutes; '
                              f'sinfo), a job that would wait in the queue for ever')
        return self.time or default or maximum or _NO_LIMIT_MIN

    def _parameters(self, folder_name: str, time_limit: Optional[int]) -> Dict[str, Any]:
        params: Dict[str, Any] = dict(job_name=f'pkmixer-{folder_name}', cpus_per_task=self.cpus_per_run,
                                      array_parallelism=self.array_parallelism, stderr_to_stdout=True, time=time_limit)
        if self.partition is not None:
            params['partition'] = self.partition
        if self.gpus_per_run:
            params['gpus_per_node'] = self.gpus_per_run
        extra = parse_slurm_args(self.slurm_arg)
        if extra:
            params['additional_parameters'] = extra
        return params

    @staticmethod
    def _test_only(executor: Any, count: int) -> None:
        """Put the batch script submitit will submit for `count` tasks to ``sbatch --test-only``, which answers
        without submitting; raise SLURM's refusal (an unknown option, a partition that does not exist, more CPUs,
        memory or GPUs than any node of the partition has: a request that would otherwise wait in the queue for
        ever)."""
        from submitit.slurm.slurm import _make_sbatch_string  # the script submitit's map_array writes
        script = _make_sbatch_string(command='true', folder=executor.folder, map_count=count if count > 1 else None,
                                     **executor.parameters)
        try:
            out = subprocess.run(['sbatch', '--test-only'], input=script, capture_output=True, text=True, timeout=120)
        except subprocess.TimeoutExpired:
            raise LaunchError('sbatch --test-only did not answer in 120 s (nothing was submitted): is the cluster up? '
                              '(`sinfo`)') from None
        if out.returncode:
            asked = ' '.join(line.split(None, 1)[1] for line in script.splitlines() if line.startswith('#SBATCH ')
                             and not line.startswith(_BOOKKEEPING))
            raise LaunchError(f'SLURM refused the job array (nothing was submitted): '
                              f'{_sbatch_words(out.stderr) or f"sbatch exit status {out.returncode}"} '
                              f'(sbatch --test-only {asked})')

    def start(self, tasks: Sequence[Task]) -> Batch:
        import submitit
        from submitit.core.utils import FailedJobError, FailedSubmissionError

        from .slurm_task import SlurmTask
        state_dir = Path(tasks[0].state_dir)
        folder = state_dir / 'slurm' / time.strftime('%Y%m%d-%H%M%S')
        executor = submitit.SlurmExecutor(folder=folder)
        executor.update_parameters(**self._parameters(state_dir.parent.name, self._time_limit()))
        self._test_only(executor, len(tasks))
        try:
            with contextlib.redirect_stderr(io.StringIO()):  # submitit prints sbatch's refusal: it is raised here
                jobs = executor.map_array(SlurmTask(), list(tasks))
        except (FailedJobError, FailedSubmissionError) as e:
            shutil.rmtree(folder, ignore_errors=True)  # nothing was submitted: leave nothing behind
            raise LaunchError(f'SLURM refused the job array (nothing was submitted): '
                              f'{_sbatch_words(str(e)) or type(e).__name__}') from None
        job_ids = [j.job_id for j in jobs]  # JOB_i for the tasks of an array (submitit submits one run as JOB)
        for job_id, task in zip(job_ids, tasks):
            write_record(state_dir, task.name, state='queued', job=job_id, executor=self.name,
                         run_dir=task.run_dir, recipe=task.recipe, pid=None, host=None, returncode=None)
        return _SlurmBatch(job_ids[0].split('_')[0], tasks, job_ids, self.poll_s)

    @staticmethod
    def holder_alive(record: Mapping[str, Any]) -> bool:
        """The job or array task (``JOB_i``) of a run or lock record is in the queue; without a job, its PID lives."""
        job = str(record.get('job') or '')
        if not job:
            return pid_alive(record.get('pid'), record.get('host'))
        if shutil.which('squeue') is None:
            return True  # cannot tell from here
        return job in _squeue(job) if '_' in job else bool(_squeue(job))

    @staticmethod
    def stopped_reason(record: Mapping[str, Any]) -> str:
        """Why a run that never reached its first epoch is not running: its job has left the queue (with SLURM's
        state of it, while slurmctld remembers it)."""
        job = str(record.get('job') or '')
        if not job:
            return LocalExecutor.stopped_reason(record)
        said = _slurm_job_state(job)
        said = f' (SLURM: {said})' if said else ' (cancelled, or its node lost)'
        if record.get('state') == 'queued':
            return f'SLURM job {job} has left the queue and the run never started{said}'
        if record.get('state') == 'interrupted':
            return f'SLURM job {job} was stopped by {_signal(record)} before its first epoch{said}'
        return f'SLURM job {job} has ended before its first epoch, its end unrecorded{said}'


EXECUTORS: Dict[str, Any] = {e.name: e for e in (LocalExecutor, SlurmExecutor)}


def holder_alive(record: Mapping[str, Any]) -> bool:
    """Whether the process or batch job in a lock or run record is alive (its executor says)."""
    executor = EXECUTORS.get(record.get('executor', 'local'))
    return executor.holder_alive(record) if executor else pid_alive(record.get('pid'), record.get('host'))


def stopped_reason(record: Mapping[str, Any]) -> str:
    """Why the run of a record that never reached its end (queued, running, interrupted), whose holder is gone and
    whose run folder has no epoch, is not running (its executor says), and that a relaunch runs it."""
    executor = EXECUTORS.get(record.get('executor', 'local'))
    said = getattr(executor, 'stopped_reason', LocalExecutor.stopped_reason)(record)
    return f'{said}; a relaunch runs it'
