"""The executors' options, checked where they are given, and `--executor slurm` against the real single-node cluster
of tests/slurm/cluster.sh: SLURM arguments checked before the batch script is written, what the cluster can never
run refused in SLURM's words (`sbatch --test-only`), a run cancelled in the queue shown as cancelled, never pending;
SlurmTask is submitit's Checkpointable."""
import contextlib
import functools
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Callable, Iterator

import pytest
from test_sweep_launch import MINI, _launch, _recipe, _status, _summary_epochs, make_images, slurm_cluster

from timm_pkmixer.launch import slurm as slurm_commands
from timm_pkmixer.launch.executors import SlurmExecutor
from timm_pkmixer.launch.slurm import SLURM_OWNED, minutes, parse_slurm_args
from timm_pkmixer.launch.tasks import Task

from conftest import command_messages, until


@pytest.fixture(scope='module')
def slurm():
    return slurm_cluster()


@pytest.fixture
def sweep(tmp_path, slurm, monkeypatch):
    """A folder of one recipe (never trained here: its data folder holds class folders, which the launch's data check
    asks for, but no image), named uniquely so that its SLURM jobs (``pkmixer-<folder>``) are this test's; any left in
    the queue are cancelled afterwards. SLURM_CONF names the test cluster."""
    monkeypatch.setenv('SLURM_CONF', slurm)
    folder = tmp_path / f'sweep{time.time_ns()}'
    for split in ('train', 'validation'):
        (tmp_path / 'no_images' / split / 'c0').mkdir(parents=True)
    _recipe(folder, 'a', tmp_path / 'no_images')
    yield folder
    subprocess.run(['scancel', '--name', f'pkmixer-{folder.name}'], capture_output=True,
                   env=dict(os.environ, SLURM_CONF=slurm))


@pytest.fixture
def short_partition(slurm):
    """A partition of the test cluster's node with a default time limit of 3 minutes and a maximum of 5 (created
    with scontrol for this test, deleted afterwards)."""
    env = dict(os.environ, SLURM_CONF=slurm)
    node = subprocess.run(['sinfo', '-h', '-p', 'debug', '-o', '%N'], capture_output=True, text=True, env=env,
                          check=True).stdout.strip()
    name = f'short{os.getpid()}'
    subprocess.run(['scontrol', 'create', f'PartitionName={name}', f'Nodes={node}', 'DefaultTime=3', 'MaxTime=5',
                    'State=UP'], check=True, env=env)
    yield name
    subprocess.run(['scancel', '--partition', name], env=env)
    deadline = time.time() + 60
    while subprocess.run(['scontrol', 'delete', f'PartitionName={name}'], env=env).returncode and \
            time.time() < deadline:  # "in use" while a cancelled job completes
        time.sleep(0.5)


def _queue(folder: Path) -> str:
    """The jobs of `folder`'s launches in the queue, as squeue answers ('' when none): a squeue that cannot reach
    slurmctld (a busy machine) is asked again, never read as an empty queue."""
    deadline = time.time() + 120
    while True:
        out = subprocess.run(['squeue', '-h', '-r', '-n', f'pkmixer-{folder.name}', '-o', '%i %T'],
                             capture_output=True, text=True)
        if out.returncode == 0:
            return out.stdout.strip()
        assert time.time() < deadline, f'squeue has not answered for 120 s: {out.stderr.strip()}'
        time.sleep(1)


def _job_field(job: str, name: str) -> str:
    out = subprocess.run(['scontrol', 'show', 'job', '-o', job], capture_output=True, text=True, check=True).stdout
    return re.search(rf'\b{name}=(\S+)', out).group(1)


# ------------------------------------------------------------------------------------------------- flags

@pytest.mark.parametrize('argv, message', [
    (['--gpus-per-run', '-1'], '--gpus-per-run must be a non-negative integer, got -1'),
    (['--gpus', '0', '--gpus-per-run', '-1'], '--gpus-per-run must be a non-negative integer, got -1'),
    (['--threads', '0'], '--threads must be a positive integer, got 0'),
    (['--gpus', ''], "--gpus must be distinct device indices separated by commas, e.g. 0,1,2,3; got ''"),
    (['--executor', 'slurm', '--gpus-per-run', '-1'], '--gpus-per-run must be a non-negative integer, got -1'),
    (['--executor', 'slurm', '--partition', ''], "--partition must name a SLURM partition (`sinfo -s` lists them), "
                                                 "got ''"),
    (['--executor', 'slurm', '--partition', 'gpu\nsrun x'], "--partition must name a SLURM partition (`sinfo -s` "
                                                            "lists them), got 'gpu\\nsrun x'"),
    (['--executor', 'slurm', '--cpus-per-run', '0'], '--cpus-per-run must be a positive integer, got 0'),
])
def test_executor_flags_refused_where_given(tmp_path, capsys, argv, message):
    _recipe(tmp_path, 'a', tmp_path)
    rc, _, err = _launch(capsys, tmp_path, *argv)
    assert (rc, err.strip()) == (2, f'pkmixer launch: error: {message}')
    assert not (tmp_path / 'launch').exists()  # refused before the lock: nothing written


def test_gpus_must_be_devices_of_this_machine(tmp_path, capsys):
    """`--gpus` names CUDA devices this machine has (none here: the CPU would have run silently)."""
    import torch
    count = torch.cuda.device_count()
    _recipe(tmp_path, 'a', tmp_path)
    rc, _, err = _launch(capsys, tmp_path, '--gpus', str(count))  # device 0 where there is none
    if count == 0:
        expected = ('--gpus: this machine has no CUDA device (torch.cuda.device_count() == 0); leave it out to run on '
                    'the CPU')
    else:
        has = 'one CUDA device (index 0' if count == 1 else f'{count} CUDA devices (indices 0 to {count - 1}'
        expected = f'--gpus: device {count} is not on this machine, which has {has}; torch.cuda.device_count() == ' \
                   f'{count})'
    assert (rc, err.strip()) == (2, f'pkmixer launch: error: {expected}')


def _executables(folder: Path, *names: str) -> str:
    """A folder of stand-in executables `names` (each exits 0), for a PATH that has them and nothing else."""
    folder.mkdir()
    for name in names:
        (folder / name).write_text('#!/bin/sh\nexit 0\n')
        (folder / name).chmod(0o755)
    return str(folder)


NO_SBATCH_TAIL = ("Run this on a machine where SLURM's client commands are (a cluster's login node; `module load "
                  "slurm` on some), install them (Debian/Ubuntu: `apt-get install slurm-client`, with the cluster's "
                  "slurm.conf and munge key), or run on this machine with ")


def test_slurm_executor_errors_name_the_argument_and_the_command_its_flag(tmp_path, capsys, monkeypatch):
    """The library says `executor='slurm'`; `pkmixer launch` says `--executor slurm` (cli._common.in_flag_terms)."""
    from timm_pkmixer.launch.errors import LaunchError
    _recipe(tmp_path / 'sweep', 'a', tmp_path)
    monkeypatch.setenv('PATH', _executables(tmp_path / 'bin'))  # no sbatch
    with pytest.raises(LaunchError) as e:
        SlurmExecutor().check()
    assert str(e.value) == "executor='slurm': there is no `sbatch` on PATH. " + NO_SBATCH_TAIL + "executor='local'"
    rc, _, err = _launch(capsys, tmp_path / 'sweep', '--executor', 'slurm')
    assert (rc, err.strip()) == (2, 'pkmixer launch: error: --executor slurm: there is no `sbatch` on PATH. '
                                    + NO_SBATCH_TAIL + '--executor local')
    monkeypatch.setenv('PATH', _executables(tmp_path / 'slurm_bin', 'sbatch', 'srun'))
    monkeypatch.setitem(sys.modules, 'submitit', None)  # not installed
    with pytest.raises(LaunchError) as e:
        SlurmExecutor().check()
    assert str(e.value) == ("executor='slurm' needs submitit: pip install submitit (or, in a checkout of "
                            "timm-pkmixer, pip install '.[cluster]')")
    rc, _, err = _launch(capsys, tmp_path / 'sweep', '--executor', 'slurm')
    assert (rc, err.strip()) == (2, "pkmixer launch: error: --executor slurm needs submitit: pip install submitit (or, "
                                    "in a checkout of timm-pkmixer, pip install '.[cluster]')")
    assert not (tmp_path / 'sweep' / 'launch').exists()  # refused before anything is written


# flags a library error of the launch wing may name: another program's, in a sentence that says which program
_OTHER_PROGRAMS_FLAGS = {('slurm.py', '--test-only'),   # sbatch --test-only
                         ('tasks.py', '--out-dir'),     # `pkmixer sweep … --out-dir DIR`, which writes recipes
                         ('records.py', '--config'),    # train.py's --config, refused among a launch's train.py
                         ('records.py', '--data-dir'),  # arguments; train.py's --data-dir, which a launch takes
                         ('tasks.py', '--data-dir')}    # among them (both are train.py's, not the launcher's)


def test_launch_errors_name_arguments_not_flags():
    """A raise under launch/ names the library's argument (`gpus`, `executor='slurm'`), never a command's flag
    (`--gpus`): the command translates (cli._common.in_flag_terms)."""
    import ast
    package = Path(__file__).resolve().parent.parent / 'timm_pkmixer' / 'launch'
    worded_as_flags = []
    for path in sorted(package.glob('*.py')):
        text = path.read_text(encoding='utf-8')
        assigned = [(n.targets[0], n.value) for n in ast.parse(text).body if isinstance(n, ast.Assign)
                    and len(n.targets) == 1] + [(n.target, n.value) for n in ast.parse(text).body
                                               if isinstance(n, ast.AnnAssign) and n.value is not None]
        constants = {t.id: v for t, v in assigned if isinstance(t, ast.Name)}
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.Raise) and node.exc is not None:
                said = ast.get_source_segment(text, node)
                said += ''.join(ast.get_source_segment(text, constants[n.id]) for n in ast.walk(node.exc)
                                if isinstance(n, ast.Name) and n.id in constants)  # a message kept in a constant
                for flag in re.findall(r'(?<![\w-])--[a-z][\w-]*', said):
                    if (path.name, flag) not in _OTHER_PROGRAMS_FLAGS:
                        worded_as_flags.append(f'{path.name}:{node.lineno}: {flag}')
    assert worded_as_flags == []


@pytest.mark.parametrize('record, detail', [
    (dict(state='queued'), 'never started: its launcher (PID {pid} on {host}) has ended'),
    (dict(state='running'), 'PID {pid} on {host} ended before its first epoch, its end unrecorded'),
    (dict(state='interrupted', returncode=-15), 'stopped by signal 15 before its first epoch'),
])
def test_local_run_nothing_runs_is_cancelled_not_pending(tmp_path, capsys, record, detail):
    """A record left queued, running or interrupted by a launcher that has ended, its run never started: cancelled,
    with why, never pending (a state a reader would wait on)."""
    import socket
    _recipe(tmp_path, 'a', tmp_path)
    gone = subprocess.Popen([sys.executable, '-c', 'pass'])
    gone.wait()
    (tmp_path / 'launch' / 'runs').mkdir(parents=True)
    (tmp_path / 'launch' / 'runs' / 'a.json').write_text(json.dumps(dict(
        record, pid=gone.pid, host=socket.gethostname(), executor='local', run_dir=str(tmp_path / 'runs' / 'a'))))
    status = _status(capsys, tmp_path)['a']
    assert (status['state'], status['detail']) == (
        'cancelled', detail.format(pid=gone.pid, host=socket.gethostname()) + '; a relaunch runs it')


@pytest.mark.parametrize('state, detail', [
    ('queued', 'never started: its launcher (PID 1 on {host}, a PID another process has now) has ended'),
    ('running', 'PID 1 on {host} (a PID another process has now) ended before its first epoch, its end unrecorded'),
])
def test_local_run_whose_pid_another_process_has_is_cancelled_saying_so(tmp_path, capsys, state, detail):
    """A record whose PID lives but started at another time (PID 1 here): its process is gone, the run is
    cancelled, and the detail does not say that a living PID ended."""
    import socket
    start = int(Path('/proc/1/stat').read_text().rsplit(')', 1)[1].split()[19])
    _recipe(tmp_path, 'a', tmp_path)
    (tmp_path / 'launch' / 'runs').mkdir(parents=True)
    (tmp_path / 'launch' / 'runs' / 'a.json').write_text(json.dumps(dict(
        state=state, pid=1, pid_start=start + 7, host=socket.gethostname(), executor='local',
        run_dir=str(tmp_path / 'runs' / 'a'))))
    status = _status(capsys, tmp_path)['a']
    assert (status['state'], status['detail']) == (
        'cancelled', detail.format(host=socket.gethostname()) + '; a relaunch runs it')


# ------------------------------------------------------------------------------------------------- --slurm-arg

@pytest.mark.parametrize('item, problem', [
    ('account\ntouch /tmp/pwned\n#=x', "'account\\ntouch /tmp/pwned\\n#' is not the name of an sbatch option "
                                      "(KEY=VALUE with its long name as KEY, e.g. account=myproj or qos=high; KEY "
                                      "alone for a flag, e.g. hold)"),
    ('--qos=high', "'--qos' is not the name of an sbatch option"),
    ('Account=x', "'Account' is not the name of an sbatch option"),
    ('comment=a\nsrun rm -rf ~', "the value holds a control character ('\\n'); an sbatch option is one line"),
    ('comment=a\x00', "the value holds a control character ('\\x00'); an sbatch option is one line"),
    ('array=0-5', "--array is the launcher's own (one array task per run; `array_parallelism` sets how many run at "
                  "once)"),
    ('arr=0-5', "--arr abbreviates --array, which is the launcher's own (one array task per run; `array_parallelism` "
                "sets how many run at once); give an option by its full name"),
    ('cpus_per_task=8', "--cpus-per-task is the launcher's own (give it as `cpus_per_run`)"),
    ('partition=gpu', "--partition is the launcher's own (give it as `partition`)"),
    ('job-name=x', "--job-name is the launcher's own (pkmixer-<folder>, the name squeue shows)"),
    ('output=/tmp/x', "--output is the launcher's own (submitit's log of each task (each run's own log is "
                      "DIR/launch/logs/<run>.log))"),
    ('signal=USR1@60', "--signal is the launcher's own (submitit's signal to requeue a task before its time limit)"),
    ('ntasks=4', "--ntasks is the launcher's own (each run is one task on one node)"),
])
def test_slurm_arg_keys_and_values_checked(tmp_path, capsys, item, problem):
    with pytest.raises(ValueError) as refused:
        parse_slurm_args([item])
    assert str(refused.value).startswith(f'slurm_arg {item!r}: ') and problem in str(refused.value)
    _recipe(tmp_path, 'a', tmp_path)
    rc, _, err = _launch(capsys, tmp_path, '--executor', 'slurm', f'--slurm-arg={item}')
    said = str(refused.value)[len(f'slurm_arg {item!r}: '):]
    for name, flag in [('array_parallelism', '--array-parallelism'), ('cpus_per_run', '--cpus-per-run'),
                       ('partition', '--partition')]:  # the command names its flags where the library its arguments
        said = said.replace(f'`{name}`', flag)
    assert (rc, err.strip()) == (2, f'pkmixer launch: error: --slurm-arg {item!r}: {said}')
    assert not (tmp_path / 'launch').exists()


def test_slurm_args_accepted_and_owned_options_are_what_submitit_writes(tmp_path):
    assert parse_slurm_args(['account=myproj', 'mail_type=END', 'hold', 'gpus=2', 'time-min=30', 'export=ALL,X=1']) \
        == {'account': 'myproj', 'mail-type': 'END', 'hold': True, 'gpus': '2', 'time-min': '30', 'export': 'ALL,X=1'}
    from submitit.slurm.slurm import _make_sbatch_string
    executor = SlurmExecutor(partition='debug', gpus_per_run=1, time=10, slurm_arg=['account=myproj', 'hold'])
    script = _make_sbatch_string(command='true', folder=tmp_path, map_count=2,
                                 **executor._parameters('sweep', executor.time))
    written = {line.split('=')[0][len('#SBATCH --'):] for line in script.splitlines() if line.startswith('#SBATCH')}
    assert written - {'account', 'hold', 'wckey'} <= set(SLURM_OWNED)  # every option the launcher writes is its own
    assert {'#SBATCH --account=myproj', '#SBATCH --hold', '#SBATCH --array=0-1%2'} <= set(script.splitlines())


def test_slurm_times_read_as_minutes():
    assert [minutes(t) for t in ('30', '30:00', '0:30', '1:30:00', '1:00:01', '2-00:00:00', '1-12', '1-12:30',
                                 'infinite', 'n/a', 'UNLIMITED')] == [30, 30, 1, 90, 61, 2880, 2160, 2190, None, None,
                                                                      None]


# ------------------------------------------------------------------------------------------------- the cluster

def test_slurm_refuses_what_the_cluster_can_never_run_before_submitting(sweep, capsys):
    cpus = int(re.search(r'CPUTot=(\d+)', subprocess.run(['scontrol', 'show', 'node'], capture_output=True,
                                                        text=True, check=True).stdout).group(1))
    for argv, said in [
        (['--cpus-per-run', '1000'], 'Requested node configuration is not available'),
        (['--slurm-arg', 'mem=100000000'], 'Requested node configuration is not available'),
        (['--slurm-arg', 'no-such-option=1'], "unrecognized option '--no-such-option=1'"),
        (['--slurm-arg', 'hold=yes'], "option '--hold' doesn't allow an argument"),
        (['--gpus-per-run', '1'], 'Invalid generic resource (gres) specification'),
    ]:
        rc, _, err = _launch(capsys, sweep, '--executor', 'slurm', '--partition', 'debug', *argv, '--no-wait')
        assert rc == 2 and command_messages(err).startswith(
            f'pkmixer launch: error: SLURM refused the job array (nothing was submitted): {said} (sbatch --test-only '
        ), (argv, err)
        assert '--partition=debug' in err and '--output' not in err
        assert _queue(sweep) == ''  # nothing waits in the queue for ever
        assert not (sweep / 'launch' / 'runs').exists() and not (sweep / 'launch' / 'slurm').exists()
        assert not (sweep / 'launch' / 'lock').exists()
    rc, _, err = _launch(capsys, sweep, '--executor', 'slurm', '--cpus-per-run', str(cpus + 1), '--no-wait')
    assert rc == 2 and f'--cpus-per-task={cpus + 1}' in err and 'Requested node configuration' in err


def test_run_cancelled_in_the_queue_is_cancelled_not_pending(sweep, capsys):
    """A run whose SLURM job is cancelled (real `scancel`) before it starts: `status` and the waiting launcher say
    cancelled, with the job, never pending; a relaunch runs it."""
    later = ('--executor', 'slurm', '--partition', 'debug', '--slurm-arg', 'begin=now+1hour')  # queued, not started
    rc, out, _ = _launch(capsys, sweep, *later, '--no-wait')
    assert rc == 0, out
    job = re.search(r'as SLURM job array (\d+)', out).group(1)
    status = _status(capsys, sweep)
    assert (status['a']['state'], status['a']['detail']) == ('pending', f'queued: SLURM job {job}')
    subprocess.run(['scancel', job], check=True)
    until(lambda: not _queue(sweep), f'cancelled job {job} to leave the queue')
    status = _status(capsys, sweep)
    assert (status['a']['state'], status['a']['detail']) == (
        'cancelled', f'SLURM job {job} has left the queue and the run never started (SLURM: CANCELLED); a relaunch '
                     f'runs it')
    assert status['total'] == dict(pending=0, running=0, finished=0, unfinished=0, failed=0, cancelled=1,
                                   stale=0)

    # a launcher waiting on its job says how the run ended
    proc = subprocess.Popen([sys.executable, '-m', 'timm_pkmixer', 'launch', str(sweep), *later, '--train-py', MINI],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        record = sweep / 'launch' / 'runs' / 'a.json'
        until(lambda: json.loads(record.read_text()).get('job') != job, 'the relaunch to record its own job')
        second = json.loads(record.read_text())['job']
        assert second != job and _queue(sweep)
        subprocess.run(['scancel', second], check=True)
        out, err = proc.communicate(timeout=600)
    finally:
        proc.kill()
    assert proc.returncode == 1, err
    assert f'[pkmixer launch] 1/1 a: cancelled (SLURM job {second} has left the queue and the run never started ' \
           f'(SLURM: CANCELLED); a relaunch runs it)' in out.splitlines()
    capsys.readouterr()
    from timm_pkmixer.cli import main as cli_main
    assert cli_main(['status', str(sweep)]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == \
        'total 1: 0 pending, 0 running, 0 finished, 0 unfinished, 0 failed, 1 cancelled, 0 stale'


@pytest.mark.parametrize('record', [dict(state='running'), dict(state='interrupted', returncode=-15)])
def test_run_whose_job_waits_requeued_is_pending_not_cancelled(sweep, capsys, record):
    """A run's record left running (or interrupted) by its process, a PID of this host that has ended, while its SLURM
    job is in the queue again (requeued after a timeout or preemption; here a job that has not begun): the job holds
    the run and resumes it, so it is pending, never cancelled (nor unfinished: a relaunch would not run it)."""
    later = ('--executor', 'slurm', '--partition', 'debug', '--slurm-arg', 'begin=now+1hour')  # queued, not started
    rc, out, _ = _launch(capsys, sweep, *later, '--no-wait')
    assert rc == 0, out
    job = json.loads((sweep / 'launch' / 'runs' / 'a.json').read_text())['job']
    gone = subprocess.Popen([sys.executable, '-c', 'pass'])
    gone.wait()
    path = sweep / 'launch' / 'runs' / 'a.json'
    path.write_text(json.dumps({**json.loads(path.read_text()), **record, 'pid': gone.pid,
                                'host': socket.gethostname()}))
    status = _status(capsys, sweep)
    assert (status['a']['state'], status['a']['detail']) == ('pending', f'queued: SLURM job {job} (requeued)')
    assert _launch(capsys, sweep, *later, '--no-wait')[0] == 2  # the job holds the folder


@contextlib.contextmanager
def _slurmctld_stopped(slurm: str) -> Iterator[Callable[[], None]]:
    """The test cluster's slurmctld stopped (SIGSTOP: a client's connection waits, unanswered, as with a controller
    too busy to answer) until the block ends, or until the block calls the function it is given (SIGCONT)."""
    pid = int((Path(slurm).parent / 'slurmctld.pid').read_text())
    os.kill(pid, signal.SIGSTOP)
    try:
        yield functools.partial(os.kill, pid, signal.SIGCONT)
    finally:
        os.kill(pid, signal.SIGCONT)


def test_status_while_slurmctld_does_not_answer_is_an_error_never_an_ended_job(sweep, slurm, capsys, monkeypatch):
    """A run whose SLURM job waits in the queue while squeue cannot reach slurmctld: `pkmixer status` says SLURM cannot
    tell (exit 2), never that the job has left the queue (the run would read cancelled or unfinished, and a relaunch
    would start it twice); an outage shorter than squeue's retries is bridged."""
    later = ('--executor', 'slurm', '--partition', 'debug', '--slurm-arg', 'begin=now+1hour')  # queued, not started
    rc, out, _ = _launch(capsys, sweep, *later, '--no-wait')
    assert rc == 0, out
    job = json.loads((sweep / 'launch' / 'runs' / 'a.json').read_text())['job']
    own_timeout = slurm_commands.SQUEUE_TIMEOUT_S
    monkeypatch.setattr(slurm_commands, 'SQUEUE_TIMEOUT_S', 1)
    monkeypatch.setattr(slurm_commands, 'SQUEUE_RETRY_S', (0.5,))
    from timm_pkmixer.cli import main as cli_main
    capsys.readouterr()
    with _slurmctld_stopped(slurm):
        rc = cli_main(['status', str(sweep)])
    assert (rc, command_messages(capsys.readouterr().err).strip()) == (
        2, f'pkmixer status: error: `squeue -j {job}` failed 2 times (no answer within 1 s): SLURM cannot say whether '
           f'job {job} is in the queue. Its tasks are SLURM\'s and go on without the launcher; `pkmixer status DIR` '
           f'shows them once slurmctld answers (`scontrol ping`)')
    # the outage ends while squeue waits to ask again (slurmctld resumed then by the test, not by a timer that a busy
    # machine could outrun): the first try goes unanswered, the second has squeue's own timeout and is answered
    waits = []

    def outage_ends(seconds: float) -> None:
        waits.append(seconds)
        answer()
        monkeypatch.setattr(slurm_commands, 'SQUEUE_TIMEOUT_S', own_timeout)
        time.sleep(seconds)
    monkeypatch.setattr(slurm_commands, 'time', SimpleNamespace(sleep=outage_ends))
    with _slurmctld_stopped(slurm) as answer:
        status = _status(capsys, sweep)['a']
    assert waits == [0.5]  # one try unanswered, then answered
    assert (status['state'], status['detail']) == ('pending', f'queued: SLURM job {job}')


def test_time_limit_is_the_partitions_and_checked_against_it(sweep, short_partition, capsys):
    """--time above the partition's maximum is refused (SLURM would keep the job pending for ever; sbatch
    --test-only accepts it); without --time each task asks the limit SLURM gives (the partition's default, else its
    maximum, else 365 days): a number submitit's requeue reads."""
    slurm = ('--executor', 'slurm', '--no-wait')
    rc, _, err = _launch(capsys, sweep, *slurm, '--partition', short_partition, '--time', '10')
    assert (rc, command_messages(err).strip()) == (  # after the progress lines (each recipe checked)
        2, f'pkmixer launch: error: --time: 10 minutes is more than partition {short_partition} allows (5 minutes; '
           f'sinfo), a job that would wait in the queue for ever')
    assert _queue(sweep) == '' and not (sweep / 'launch' / 'runs').exists()
    for argv, limit in [(('--partition', short_partition), '00:03:00'),
                        (('--partition', short_partition, '--time', '4'), '00:04:00'),
                        (('--partition', 'debug'), '365-00:00:00')]:
        rc, out, _ = _launch(capsys, sweep, *slurm, *argv, '--slurm-arg', 'begin=now+1hour')
        assert rc == 0, out
        job = re.search(r'as SLURM job array (\d+)', out).group(1)
        assert _job_field(job, 'TimeLimit') == limit
        subprocess.run(['scancel', job], check=True)
        until(lambda: not _queue(sweep), f'cancelled job {job} to leave the queue')


@pytest.mark.slow  # two starts of a run on the cluster: about a minute idle
def test_task_timed_out_is_requeued_and_resumes(sweep, capsys):
    """SLURM's USR2 before the time limit (sent here with scancel --signal; submitit counts a signal within 10 minutes
    of the limit as the timeout): submitit checkpoints the task (SlurmTask is Checkpointable), requeues it, and the
    requeued task resumes the run from its last.pth.tar. (A preempted task takes the same way; without --time it
    needs the numeric limit test_time_limit_is_the_partitions_and_checked_against_it checks.)"""
    gate = sweep.parent / 'gate'  # opened for the requeued task: until then, the run waits after epoch 0
    _recipe(sweep, 'a', make_images(sweep.parent / 'images'), epochs=3, epoch_gate=str(gate))
    rc, out, _ = _launch(capsys, sweep, '--executor', 'slurm', '--partition', 'debug', '--time', '10', '--no-wait')
    assert rc == 0, out
    job = re.search(r'as SLURM job array (\d+)', out).group(1)
    run_dir = sweep / 'runs' / 'a'
    # epoch 0 saved: its summary row is written first, then last.pth.tar (as train.py does), so a signal between
    # the two would rightly train epoch 0 again
    until(lambda: (run_dir / 'last.pth.tar').is_file() and _summary_epochs(run_dir)[0], 'epoch 0 saved')
    subprocess.run(['scancel', '--signal=USR2', job], check=True)
    until(lambda: _job_field(job, 'JobState') not in ('RUNNING', 'COMPLETING', 'REQUEUED'), f'job {job} requeued')
    assert (_job_field(job, 'JobState'), _job_field(job, 'Reason')) == ('PENDING', 'BeginTime')  # requeued
    status = _status(capsys, sweep)['a']  # its process has ended, its job holds it: neither unfinished nor cancelled
    assert (status['state'], status['detail']) == ('pending', f'queued: SLURM job {job} (requeued)')
    gate.touch()
    # SLURM holds a requeued job 2 minutes; started at once, slurmd refuses a credential made in the second it revoked
    # the last one ("Job credential revoked": the job leaves the queue unrun), so the start waits for the next second
    time.sleep(2)
    subprocess.run(['scontrol', 'update', f'JobId={job}', 'StartTime=now'], check=True)
    until(lambda: not _queue(sweep), f'job {job} to finish')
    status = _status(capsys, sweep)['a']
    assert status['state'] == 'finished', (status, (sweep / 'launch' / 'logs' / 'a.log').read_text()[-3000:])
    assert _summary_epochs(run_dir)[0] == [0, 1, 2]  # no epoch trained twice
    log = (sweep / 'launch' / 'logs' / 'a.log').read_text()
    assert log.count(f'(SLURM job {job}): ') == 2 and f'(SLURM job {job}): resuming from epoch 2' in log
    [submitit_log] = (sweep / 'launch' / 'slurm').glob(f'*/{job}_0_log.out')
    assert 'this job is timed-out' in submitit_log.read_text()


# ------------------------------------------------------------------------------------------------- the task

def test_slurm_task_is_submitits_checkpointable():
    """submitit's own Checkpointable (no checkpoint method of ours): on a timeout or preemption it resubmits the same
    task, which resumes the run from its last.pth.tar when it starts again (tasks.execute)."""
    from submitit.helpers import Checkpointable, DelayedSubmission

    from timm_pkmixer.launch.slurm_task import SlurmTask
    assert issubclass(SlurmTask, Checkpointable) and 'checkpoint' not in vars(SlurmTask)
    task = Task('a', '/d/a.yaml', '/d/runs/a', ('--epochs', '2'), '/d/launch', 'slurm')
    again = SlurmTask().checkpoint(task)
    assert isinstance(again, DelayedSubmission) and isinstance(again.function, SlurmTask) and again.args == (task,)
