"""Where `pkmixer launch` runs its tasks: :data:`EXECUTORS`, picked by name (``--executor``).

An executor is a dataclass whose fields are its options (the command line makes ``--field-name`` flags of them,
from each field's ``metadata``: ``help``, ``type``), with

* ``start(tasks) -> Batch``: start every task (:class:`~timm_pkmixer.launch.tasks.Task`; each is run by
  :func:`~timm_pkmixer.launch.tasks.execute`), and
* ``holder_alive(record) -> bool``: whether the process or job named in a lock or run record is alive;
* ``stopped_reason(record) -> str`` (optional): why a run whose record never reached its end (queued, running,
  interrupted) and whose holder is gone is not running, in the executor's words (:func:`stopped_reason`);

and a :class:`Batch` with ``wait(on_end)`` (call ``on_end(task, exit status)`` as each task ends; ``None`` when
no exit status was recorded, e.g. a SLURM task cancelled in the queue) and ``job`` (the batch system's id, or
None). ``detached`` says whether the tasks outlive the launcher (a batch system's do). Adding an executor is one
class and one entry in :data:`EXECUTORS`.

* ``local``: this machine, `workers` runs at once; with `gpus`, each run on its own devices
  (``CUDA_VISIBLE_DEVICES``; `runs_per_gpu` runs share one); on a CPU each run gets its share of the idle cores as
  threads (:func:`~timm_pkmixer.training.threads.choose_threads`).
* ``slurm``: one SLURM job array per launch through submitit, one array task per run; a run with several GPUs
  runs under torchrun in its task. Its ``--slurm-arg`` options are checked (:func:`.slurm.parse_slurm_args`), and
  the whole request is put to ``sbatch --test-only`` before anything is submitted: what the cluster can never run
  is refused in SLURM's words. SLURM's commands are asked through :mod:`.slurm`.
"""
import contextlib
import io
import os
import queue
import shutil
import socket
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, ClassVar, Dict, List, Mapping, Optional, Sequence, Set

from ..validation import non_negative_int, positive_int
from .errors import LaunchError
from .liveness import pid_alive
from .records import read_record, write_record
from .slurm import (
    NO_TIME_LIMIT_MIN,
    is_option_value,
    job_state,
    parse_slurm_args,
    partition_limits,
    sbatch_test_only,
    sbatch_words,
    squeue,
)
from .tasks import Task, execute

__all__ = ['EXECUTORS', 'holder_alive', 'stopped_reason', 'Batch', 'LocalExecutor', 'SlurmExecutor', 'parse_gpus',
           'NO_SBATCH']

OnEnd = Callable[[Task, Optional[int]], None]
NO_SBATCH = ("executor='slurm': there is no `sbatch` on PATH. Run this on a machine where SLURM's client commands "
             "are (a cluster's login node; `module load slurm` on some), install them (Debian/Ubuntu: "
             "`apt-get install slurm-client`, with the cluster's slurm.conf and munge key), or run on this machine "
             "with executor='local'")


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

    def _slot_count(self) -> int:
        """How many runs at once (checked, never materialised: `workers` or `runs_per_gpu` may be huge)."""
        if self.gpus is None:
            if self.gpus_per_run > 0 or self.runs_per_gpu != 1:
                raise LaunchError('gpus_per_run and runs_per_gpu place runs on devices: give the devices with gpus')
            return positive_int('workers', 1 if self.workers is None else self.workers)
        devices = parse_gpus(self.gpus)
        per_run = max(1, self.gpus_per_run)
        positive_int('runs_per_gpu', self.runs_per_gpu)
        if len(devices) % per_run:
            raise LaunchError(f'gpus: {len(devices)} devices cannot be split into runs of gpus_per_run={per_run}')
        count = len(devices) // per_run * self.runs_per_gpu
        return count if self.workers is None else min(count, positive_int('workers', self.workers))

    def _slots(self, limit: Optional[int] = None) -> List[Dict[str, str]]:
        """The first `limit` (default: all) places a run can take: {} on the CPU, else its CUDA devices."""
        n = self._slot_count() if limit is None else min(limit, self._slot_count())
        if self.gpus is None:
            return [{} for _ in range(n)]
        devices, per_run = parse_gpus(self.gpus), max(1, self.gpus_per_run)
        groups = [devices[i:i + per_run] for i in range(0, len(devices), per_run)]
        return [dict(CUDA_VISIBLE_DEVICES=','.join(groups[k // self.runs_per_gpu])) for k in range(n)]

    def _check_devices(self) -> None:
        """Every device of `gpus` is one of this machine's CUDA devices (torch imported only here)."""
        import torch
        count = torch.cuda.device_count()
        if count == 0:
            raise LaunchError('gpus: this machine has no CUDA device (torch.cuda.device_count() == 0); leave it out '
                              'to run on the CPU')
        missing = [d for d in parse_gpus(self.gpus) if int(d) >= count]
        if missing:
            has = 'one CUDA device (index 0' if count == 1 else f'{count} CUDA devices (indices 0 to {count - 1}'
            raise LaunchError(f'gpus: device {", ".join(missing)} is not on this machine, which has {has}; '
                              f'torch.cuda.device_count() == {count})')

    def plan(self) -> Dict[str, Any]:
        """What `plan_tasks` needs: the processes per run and the CPU threads of each."""
        from ..training.threads import choose_threads
        slots = self._slot_count()
        threads, why = choose_threads(self.threads, processes=slots * max(1, self.gpus_per_run))
        return dict(nproc=max(1, self.gpus_per_run), threads=threads, threads_why=why, slots=slots)

    def check(self) -> None:
        """Every option's value, then the devices of `gpus` (raises :class:`LaunchError` naming the option)."""
        non_negative_int('gpus_per_run', self.gpus_per_run)
        if self.threads is not None:
            positive_int('threads', self.threads)
        self._slot_count()
        if self.gpus is not None:
            self._check_devices()

    def start(self, tasks: Sequence[Task]) -> Batch:
        for task in tasks:  # pending while this launcher lives
            write_record(Path(task.state_dir), task.name, state='queued', pid=os.getpid(), host=socket.gethostname(),
                         job=None, executor=self.name, run_dir=task.run_dir, recipe=task.recipe, returncode=None)
        return _LocalBatch(tasks, self._slots(limit=len(tasks)))  # no more places than runs

    @staticmethod
    def holder_alive(record: Mapping[str, Any]) -> bool:
        return pid_alive(record.get('pid'), record.get('host'))

    @staticmethod
    def stopped_reason(record: Mapping[str, Any]) -> str:
        """Why a run that never reached its first epoch is not running, from its record (its holder is gone; a PID
        of this host that lives is another process's now: :func:`.liveness.same_process`)."""
        pid, host, state = record.get('pid'), record.get('host'), record.get('state')
        reused = host in (None, socket.gethostname()) and pid_alive(pid, host)
        where = f'PID {pid} on {host}'
        if state == 'queued':
            return f'never started: its launcher ({where}{", a PID another process has now" if reused else ""}) ' \
                   f'has ended'
        if state == 'interrupted':
            return f'stopped by {_signal(record)} before its first epoch'
        return f'{where}{" (a PID another process has now)" if reused else ""} ended before its first epoch, its end ' \
               f'unrecorded'


# ------------------------------------------------------------------------------------------------- slurm

class _SlurmBatch(Batch):
    def __init__(self, job: str, tasks: Sequence[Task], job_ids: Sequence[str], poll_s: float):
        self.job, self.tasks, self.job_ids, self.poll_s = job, list(tasks), list(job_ids), poll_s

    def wait(self, on_end: OnEnd) -> None:
        left = dict(zip(self.job_ids, self.tasks))
        while left:
            queued = squeue(self.job)
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
        if self.partition is not None and not is_option_value(self.partition):
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
            raise LaunchError("executor='slurm' needs submitit: pip install submitit (or, in a checkout of "
                              "timm-pkmixer, pip install '.[cluster]')") from None

    def plan(self) -> Dict[str, Any]:
        return dict(nproc=max(1, self.gpus_per_run), threads=None, threads_why='', slots=self.array_parallelism)

    def _time_limit(self) -> Optional[int]:
        """Each task's time limit, minutes: `time`, checked against the partition's limit (sinfo), else the limit
        SLURM would give (the partition's default, else its maximum; 365 days where it has none). Always a number
        where sinfo answers: submitit's requeue of a preempted or timed-out task reads it."""
        limits = partition_limits(self.partition)
        if limits is None:
            return self.time
        name, default, maximum = limits
        if self.time is not None and maximum is not None and self.time > maximum:
            raise LaunchError(f'time: {self.time} minutes is more than partition {name} allows ({maximum} minutes; '
                              f'sinfo), a job that would wait in the queue for ever')
        return self.time or default or maximum or NO_TIME_LIMIT_MIN

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
        """Put the batch script submitit will submit for `count` tasks (its map_array's) to ``sbatch --test-only``
        (:func:`.slurm.sbatch_test_only`): what the cluster can never run is refused before anything is submitted."""
        from submitit.slurm.slurm import _make_sbatch_string
        script = _make_sbatch_string(command='true', folder=executor.folder, map_count=count if count > 1 else None,
                                     **executor.parameters)
        sbatch_test_only(script)

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
                              f'{sbatch_words(str(e)) or type(e).__name__}') from None
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
        return job in squeue(job) if '_' in job else bool(squeue(job))

    @staticmethod
    def stopped_reason(record: Mapping[str, Any]) -> str:
        """Why a run that never reached its first epoch is not running: its job has left the queue (with SLURM's
        state of it, while slurmctld remembers it)."""
        job = str(record.get('job') or '')
        if not job:
            return LocalExecutor.stopped_reason(record)
        said = job_state(job)
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
