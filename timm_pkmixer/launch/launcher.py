"""`pkmixer launch` / `pkmixer status`: every recipe of a folder run through `pkmixer train`, each in its own
process, by an executor (:mod:`timm_pkmixer.launch.executors`: this machine, or SLURM through submitit).

A folder of recipes is what `pkmixer sweep --out-dir DIR` writes (or any folder of train.py recipes, ``*.yaml``).
Each recipe is one run; it lands where its ``output`` / ``experiment`` say, by default ``DIR/runs/<recipe name>``,
so that `pkmixer report DIR/runs` reads them. The launcher keeps its own state in ``DIR/launch/``:

* ``lock``: who is launching this folder (:mod:`.lock`).
* ``runs/<name>.json``: one record per run: its run folder, and its last state as the launcher saw it (queued,
  running, ended, failed — exit status > 0 — or interrupted — killed by a signal, as by ``scancel``), with the PID,
  host or SLURM job that runs it.
* ``logs/<name>.log``: the run's output, every attempt appended.

Whether a run is finished is read from its run folder as `pkmixer report` reads it (:func:`run_progress`): every
epoch train.py runs has its summary row. A relaunch skips finished runs, resumes unfinished ones from their
``last.pth.tar`` (train.py's ``--resume``; decided when the run starts, so a requeued SLURM task resumes too) and
reruns failed ones only when asked (``retry_failed``).
"""

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from .executors import holder_alive, stopped_reason
from .lock import acquire_lock, read_lock, release_lock, update_lock
from .tasks import (
    LaunchError,
    Task,
    default_run_dir,
    find_recipes,
    launch_state_dir,
    log_tail,
    plan_tasks,
    read_record,
    run_progress,
)

__all__ = ['RunStatus', 'run_status', 'read_status', 'LaunchResult', 'launch']


# ------------------------------------------------------------------------------------------------- status

@dataclass
class RunStatus:
    """A run as `pkmixer status` shows it: `state` one of :data:`STATES`."""
    name: str
    state: str
    run_dir: str
    done: int = 0
    epochs: int = 0
    detail: str = ''
    log: List[str] = field(default_factory=list)   # a failed run's last log lines

    def line(self) -> str:
        state = f'unfinished (epoch {self.done} of {self.epochs})' if self.state == 'unfinished' else self.state
        text = f'{self.name}: {state}{f" ({self.detail})" if self.detail else ""}'
        return '\n'.join([text] + [f'    | {line}' for line in self.log])

    def as_dict(self) -> Dict[str, Any]:
        return asdict(self)


def run_status(recipe: Path, state_dir: Path, run_dir: Optional[str] = None) -> RunStatus:
    """One run's state from its record, its holder (alive or not) and its run folder (default: the record's,
    else the recipe's)."""
    name = Path(recipe).stem
    record = read_record(state_dir, name)
    run_dir = Path(run_dir or record.get('run_dir') or default_run_dir(recipe))
    progress = run_progress(run_dir)
    status = RunStatus(name, 'pending', str(run_dir), progress.done, progress.epochs)
    where = f'SLURM job {record["job"]}' if record.get('job') else f'PID {record.get("pid")} on {record.get("host")}'
    if progress.state == 'finished':
        status.state = 'finished'
    elif record.get('state') in ('queued', 'running') and holder_alive(record):
        status.state = 'running' if record['state'] == 'running' else 'pending'
        status.detail = where if record['state'] == 'running' else f'queued: {where}'
    elif record.get('state') == 'failed':
        status.state, status.detail = 'failed', f'exit status {record.get("returncode")}'
        status.log = log_tail(Path(state_dir) / 'logs' / f'{name}.log')
    elif record.get('state') in ('queued', 'running', 'interrupted') and progress.state == 'absent':
        status.state, status.detail = 'cancelled', stopped_reason(record)  # nothing runs it: never say pending
    elif progress.state == 'unfinished':
        status.state = 'unfinished'
    return status


def read_status(folder: Path) -> List[RunStatus]:
    """Every recipe's run in `folder`, in recipe order."""
    return [run_status(recipe, launch_state_dir(folder)) for recipe in find_recipes(folder)]


# ------------------------------------------------------------------------------------------------- launch

@dataclass
class LaunchResult:
    """What a launch did: the runs it `started`, those it `skipped` (finished; failed without retry_failed; still
    running or queued by an earlier launch whose job or process lives), the batch `job` (SLURM's id) and, when it
    waited, how each started run `ended`."""
    started: List[Task]
    skipped: Dict[str, List[str]]
    job: Optional[str] = None
    ended: List[RunStatus] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """Every started run finished (when waited for)."""
        return all(s.state == 'finished' for s in self.ended)


def _todo(tasks: Sequence[Task], retry_failed: bool) -> Tuple[List[Task], Dict[str, List[str]]]:
    todo: List[Task] = []
    skipped: Dict[str, List[str]] = {'finished': [], 'failed': [], 'running': []}
    for task in tasks:
        status = run_status(Path(task.recipe), Path(task.state_dir), task.run_dir)
        if status.state == 'running' or status.detail.startswith('queued'):  # still held by an earlier launch's job
            skipped['running'].append(task.name)
        elif status.state == 'finished' or (status.state == 'failed' and not retry_failed):
            skipped[status.state].append(task.name)
        else:
            todo.append(task)
    return todo, skipped


def launch(folder: Path, executor: Any, train_args: Sequence[str] = (), train_py: Optional[str] = None,
           retry_failed: bool = False, wait: bool = True,
           on_end: Optional[Callable[[RunStatus, int, int], None]] = None) -> LaunchResult:
    """Run every recipe of `folder` that is not finished (nor failed, unless `retry_failed`) with `executor`
    (an instance of an :data:`~timm_pkmixer.launch.executors.EXECUTORS` class), `train_args` applying to
    every run; with `wait`, return when all have ended, calling ``on_end(status, k, n)`` as the k-th of n ends.

    Raises :class:`LaunchLockedError` when the folder is being launched, :class:`LaunchError` for a folder, recipe
    or executor option that cannot be used (nothing is started then).
    """
    folder = Path(folder).absolute()
    executor.check()
    find_recipes(folder)  # before the lock: nothing is written into a folder that is not one of recipes
    if not wait and not executor.detached:
        raise LaunchError(f'the runs of --executor {executor.name} end with their launcher: wait for them, or run '
                          f'the launcher in the background')
    acquire_lock(folder, executor.name)
    keep_lock = False
    try:
        plan = executor.plan()
        tasks = plan_tasks(folder, train_args, train_py, executor.name, plan['nproc'], plan['threads'])
        todo, skipped = _todo(tasks, retry_failed)
        result = LaunchResult(todo, skipped)
        if not todo:
            return result
        batch = executor.start(todo)
        result.job = batch.job
        if batch.job:  # from here the batch job holds the folder, whatever becomes of this process
            update_lock(folder, job=batch.job, pid=None)
            keep_lock = True
        if not wait:
            return result

        def ended(task: Task, returncode: Optional[int]) -> None:
            status = run_status(Path(task.recipe), Path(task.state_dir), task.run_dir)
            if returncode is None and not status.detail:
                status.detail = 'ended unseen (cancelled?)'
            result.ended.append(status)
            if on_end:
                on_end(status, len(result.ended), len(todo))
        try:
            batch.wait(ended)
        except BaseException:
            batch.stop()
            raise
        if batch.job and read_lock(folder).get('job') == batch.job:
            (launch_state_dir(folder) / 'lock').unlink(missing_ok=True)  # every task has left the queue
        return result
    finally:
        if not keep_lock:
            release_lock(folder)
