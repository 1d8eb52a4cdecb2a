"""Where `pkmixer launch` runs its tasks: :data:`EXECUTORS`, picked by name (``--executor``).

An executor is a dataclass whose fields are its options (the command line makes ``--field-name`` flags of them,
from each field's ``metadata``: ``help``, ``type``), with

* ``start(tasks) -> Batch``: start every task (:class:`~timm_pkmixer.launch.tasks.Task`; each is run by
  :func:`~timm_pkmixer.launch.tasks.execute`), and
* ``holder_alive(record) -> bool``: whether the process or job named in a lock or run record is alive;

and a :class:`Batch` with ``wait(on_end)`` (call ``on_end(task, exit status)`` as each task ends; ``None`` when
it ended unseen, e.g. cancelled in the queue) and ``job`` (the batch system's id, or None). ``detached`` says
whether the tasks outlive the launcher (a batch system's do). Adding an executor is one class and one entry in
:data:`EXECUTORS`.

* ``local``: this machine, `workers` runs at once; with `gpus`, each run on its own devices
  (``CUDA_VISIBLE_DEVICES``; `runs_per_gpu` runs share one); on a CPU each run gets its share of the idle cores as
  threads (:func:`~timm_pkmixer.experiments.threads.choose_threads`).
* ``slurm``: one SLURM job array per launch through submitit, one array task per run; a run with several GPUs
  runs under torchrun in its task.
"""
import contextlib
import dataclasses
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

from ..validation import positive_int
from .tasks import LaunchError, Task, execute, pid_alive, write_record

__all__ = ['EXECUTORS', 'holder_alive', 'Batch', 'LocalExecutor', 'SlurmExecutor', 'SlurmTask', 'parse_gpus',
           'parse_slurm_args', 'NO_SBATCH']

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


def parse_slurm_args(items: Sequence[str]) -> Dict[str, str]:
    """``KEY=VALUE`` items (sbatch's long options without ``--``) → {KEY: VALUE}."""
    out = {}
    for item in items or ():
        key, sep, value = str(item).partition('=')
        if not sep or not key.strip() or key.startswith('-'):
            raise LaunchError(f'slurm_arg must be KEY=VALUE with an sbatch option as KEY (e.g. account=myproj, '
                              f'qos=high), got {item!r}')
        out[key.strip()] = value
    return out


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
        if not self.gpus:
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

    def plan(self) -> Dict[str, Any]:
        """What `plan_tasks` needs: the processes per run and the CPU threads of each."""
        from ..experiments.threads import choose_threads
        slots = self._slots()
        threads, why = choose_threads(self.threads, processes=len(slots) * max(1, self.gpus_per_run))
        return dict(nproc=max(1, self.gpus_per_run), threads=threads, threads_why=why, slots=len(slots))

    def check(self) -> None:
        self._slots()

    def start(self, tasks: Sequence[Task]) -> Batch:
        for task in tasks:  # pending while this launcher lives
            write_record(Path(task.state_dir), task.name, state='queued', pid=os.getpid(), host=socket.gethostname(),
                         job=None, executor=self.name, run_dir=task.run_dir, recipe=task.recipe, returncode=None)
        return _LocalBatch(tasks, self._slots())

    @staticmethod
    def holder_alive(record: Mapping[str, Any]) -> bool:
        return pid_alive(record.get('pid'), record.get('host'))


# ------------------------------------------------------------------------------------------------- slurm

class SlurmTask:
    """What one SLURM array task calls: :func:`execute` of its task. Checkpointable (submitit's protocol: a
    ``checkpoint`` method): when SLURM times the task out or preempts it, submitit requeues it, and the requeued task
    resumes from ``last.pth.tar``."""

    def checkpoint(self, task: Task) -> Any:
        from submitit.helpers import DelayedSubmission
        return DelayedSubmission(self, task)

    def __call__(self, task: Task) -> int:
        job = os.environ.get('SLURM_ARRAY_JOB_ID', os.environ.get('SLURM_JOB_ID', ''))
        index = os.environ.get('SLURM_ARRAY_TASK_ID')
        cpus = os.environ.get('SLURM_CPUS_PER_TASK')
        if cpus and cpus.isdigit() and '--threads' not in task.argv:
            threads = max(1, int(cpus) // max(1, task.nproc))
            task = dataclasses.replace(task, argv=(*task.argv, '--threads', str(threads)))
        return execute(task, job=f'{job}_{index}' if index is not None else job)


def _squeue(job: str) -> Dict[str, str]:
    """{array task id ``JOB_i``: SLURM state} of `job`'s tasks still in the queue ({} once it has left it)."""
    try:
        out = subprocess.run(['squeue', '-h', '-r', '-j', str(job), '-o', '%i %T'], capture_output=True, text=True,
                             timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return {}
    if out.returncode:
        return {}  # "Invalid job id": it has left the queue
    return dict(line.split(None, 1) for line in out.stdout.splitlines() if line.strip())


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
        if shutil.which('sbatch') is None or shutil.which('srun') is None:
            raise LaunchError(NO_SBATCH)
        try:
            import submitit  # noqa: F401
        except ImportError:
            raise LaunchError("--executor slurm needs submitit: pip install submitit (or, in a checkout of "
                              "timm-pkmixer, pip install '.[cluster]')") from None
        for name in ('cpus_per_run', 'array_parallelism'):
            positive_int(name, getattr(self, name))
        if self.time is not None:
            positive_int('time', self.time)
        parse_slurm_args(self.slurm_arg)

    def plan(self) -> Dict[str, Any]:
        return dict(nproc=max(1, self.gpus_per_run), threads=None, threads_why='', slots=self.array_parallelism)

    def _parameters(self, folder_name: str) -> Dict[str, Any]:
        params: Dict[str, Any] = dict(job_name=f'pkmixer-{folder_name}', cpus_per_task=self.cpus_per_run,
                                      array_parallelism=self.array_parallelism, stderr_to_stdout=True, time=self.time)
        if self.partition:
            params['partition'] = self.partition
        if self.gpus_per_run:
            params['gpus_per_node'] = self.gpus_per_run
        extra = parse_slurm_args(self.slurm_arg)
        if extra:
            params['additional_parameters'] = extra
        return params

    def start(self, tasks: Sequence[Task]) -> Batch:
        import submitit
        from submitit.core.utils import FailedJobError, FailedSubmissionError
        state_dir = Path(tasks[0].state_dir)
        folder = state_dir / 'slurm' / time.strftime('%Y%m%d-%H%M%S')
        executor = submitit.SlurmExecutor(folder=folder)
        executor.update_parameters(**self._parameters(state_dir.parent.name))
        try:
            with contextlib.redirect_stderr(io.StringIO()):  # submitit prints sbatch's refusal: it is raised here
                jobs = executor.map_array(SlurmTask(), list(tasks))
        except (FailedJobError, FailedSubmissionError) as e:
            shutil.rmtree(folder, ignore_errors=True)  # nothing was submitted: leave nothing behind
            lines = [line.strip() for line in str(e).splitlines() if line.strip()]
            said = '; '.join(line.replace('sbatch: error: ', '') for line in lines) or type(e).__name__
            raise LaunchError(f'SLURM refused the job array (nothing was submitted): {said}') from None
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


EXECUTORS: Dict[str, Any] = {e.name: e for e in (LocalExecutor, SlurmExecutor)}


def holder_alive(record: Mapping[str, Any]) -> bool:
    """Whether the process or batch job in a lock or run record is alive (its executor says)."""
    executor = EXECUTORS.get(record.get('executor', 'local'))
    return executor.holder_alive(record) if executor else pid_alive(record.get('pid'), record.get('host'))
