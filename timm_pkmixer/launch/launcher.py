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

import contextlib
import logging
import math
import os
import re
import shlex
import sys
import threading
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Set, Tuple

import yaml

from ..errors import UserInputError
from ..runs.launch_marker import launch_changes
from ..runs.run_folder import RunFileError, epoch_words, last_epoch
from ..state_files import load_yaml, read_text, write_text
from .errors import LaunchError, RunFolderTakenError, StateFileError, TrainArgsRefusedError, state_file
from .executors import stopped_reason
from .liveness import same_process
from .lock import acquire_lock, drop_mutex, holder_alive, read_lock, release_lock, update_lock
from .ownership import move_aside, owner_problem
from .records import (
    check_launch_train_args,
    folder_id,
    launch_state_dir,
    read_record,
    read_train_args,
    record_train_args,
    settle_train_args,
)
from .tasks import Task, check_data, find_recipes, log_tail, not_a_recipe, plan_tasks, planned_run_dir, run_progress

__all__ = ['RunStatus', 'run_status', 'read_status', 'read_launch_train_args', 'LaunchResult', 'check_without_torch',
           'launch']

_logger = logging.getLogger(__name__)


# ------------------------------------------------------------------------------------------------- status

@dataclass
class RunStatus:
    """A run as `pkmixer status` shows it: `state` one of :data:`STATES`; `changed`: what changed in its recipe
    (keys) or the launch's train.py arguments since it started (a finished one is then ``stale``)."""
    name: str
    state: str
    run_dir: str
    done: int = 0
    epochs: int = 0
    detail: str = ''
    log: List[str] = field(default_factory=list)   # a failed run's last log lines
    changed: List[str] = field(default_factory=list)
    resumed_at: List[int] = field(default_factory=list)  # the epochs (from 0) it was resumed at (train.py's --resume)
    last: Dict[str, Any] = field(default_factory=dict)   # its last summary row (:class:`.run_folder.LastEpoch`)
    result: str = ''   # that row in words: 'epoch 2: top1 86.16, eval_loss 0.4120, train_loss 0.3557'
    at: str = ''       # a running run: where train.py's log says it is ('epoch 2, step 50/390')
    restarted: bool = False  # train.py started over into its folder (summary.csv's rows of an earlier start dropped)

    def line(self) -> str:
        """The run in one line (then a failed run's last log lines), its epochs counted as people count them: the
        state, ``unfinished (epoch k of n)`` (k epochs done), then what its files say: ``resumed at epoch k`` (the
        first epoch trained after a resume), where a running run is, its last summary row."""
        state = f'unfinished (epoch {self.done} of {self.epochs})' if self.state == 'unfinished' else self.state
        text = f'{self.name}: {state}{f" ({self.detail})" if self.detail else ""}'
        resumed = f'resumed at epoch {", ".join(str(e + 1) for e in self.resumed_at)}' if self.resumed_at else ''
        restarted = 'restarted from its first epoch into its folder (the rows of the earlier start dropped)' \
            if self.restarted else ''
        notes = [n for n in (restarted, resumed, f'at {self.at}' if self.at else '', self.result) if n]
        text += f' — {"; ".join(notes)}' if notes else ''
        return '\n'.join([text] + [f'    | {line}' for line in self.log])

    def as_dict(self) -> Dict[str, Any]:
        return asdict(self)


def _changes(run_dir: Path) -> List[str]:
    try:
        return launch_changes(run_dir)
    except RunFileError as e:
        raise StateFileError(str(e)) from None


def _may_be_held(record: Dict[str, Any]) -> bool:
    """Whether a record's run may still be held by the process or job it names: queued or running, or interrupted
    in a batch job (which SLURM may requeue; a local run interrupted has ended for good)."""
    return record.get('state') in ('queued', 'running') or (record.get('state') == 'interrupted' and
                                                            bool(record.get('job')))


def _held(record: Dict[str, Any], where: str) -> Tuple[str, str]:
    """(state, detail) of a run whose holder lives: running while the process its record names does; queued behind
    its launcher or job; or queued again, its process gone while its job is in the queue (SLURM requeued it)."""
    if record['state'] == 'running' and same_process(record):
        return 'running', where
    return 'pending', f'queued: {where}' + ('' if record['state'] == 'queued' else ' (requeued)')


def run_status(recipe: Path, state_dir: Path, run_dir: Optional[str] = None,
               schedule: Optional[Dict[str, Any]] = None) -> RunStatus:
    """One run's state from its record, its holder (alive or not), its run folder (default: the record's, else the
    recipe's) and its launch marker, decided in this order: a finished run folder is ``finished``, or ``stale`` when
    its recipe or train.py arguments changed since it started, whatever the record says; a record queued or running
    (or interrupted in a batch job) whose holder, process or job, lives is ``running`` or ``pending``; a failed
    record is ``failed``; a record queued, running or interrupted whose holder is gone, its run folder without an
    epoch, is ``cancelled`` (nothing runs it); a started run folder is ``unfinished``; else ``pending`` (never
    started). `schedule`: train.py's epoch count computed now (a launch's), else the one recorded with the run.
    A run folder whose values are not measurements (a diverged run) is ``failed``, whatever its record says."""
    name = Path(recipe).stem
    record = read_record(state_dir, name)
    run_dir = Path(run_dir or record.get('run_dir') or planned_run_dir(recipe, read_train_args(state_dir) or []))
    progress = run_progress(run_dir, schedule or record.get('schedule'))
    status = RunStatus(name, 'pending', str(run_dir), progress.done, progress.epochs)
    status.changed = _changes(run_dir)  # reads its marker: one that cannot be used is named before any start
    where = f'SLURM job {record["job"]}' if record.get('job') else f'PID {record.get("pid")} on {record.get("host")}'
    last = last_epoch(run_dir) if progress.state != 'absent' else None
    if last is not None:
        status.last, status.result = _json_numbers(asdict(last)), last.describe()
        status.restarted = last.restarted
    resumed = set(last.resumed_at if last else ()) | set(record.get('resumed') or [] if progress.state != 'absent'
                                                          else [])
    status.resumed_at = sorted(e for e in resumed if isinstance(e, int) and not isinstance(e, bool) and e > 0
                               and e <= progress.done)
    if progress.state == 'finished':
        status.state = 'stale' if status.changed else 'finished'
        if status.changed:
            status.detail = f'changed since it ran: {", ".join(status.changed)}'
    elif _may_be_held(record) and holder_alive(record):
        status.state, status.detail = _held(record, where)
        if status.state == 'running':
            status.at = _train_step(Path(state_dir) / 'logs' / f'{name}.log')
    elif record.get('state') == 'failed':
        status.state, status.detail = 'failed', record.get('reason') or f'exit status {record.get("returncode")}'
        status.log = log_tail(Path(state_dir) / 'logs' / f'{name}.log')
    elif progress.state == 'failed':  # its values are not measurements: a relaunch does not resume it
        status.state, status.detail = 'failed', progress.reason
    elif record.get('state') in ('queued', 'running', 'interrupted') and progress.state == 'absent':
        status.state, status.detail = 'cancelled', stopped_reason(record)  # nothing runs it: never say pending
    elif progress.state == 'unfinished':
        status.state = 'unfinished'
        if status.changed:
            status.detail = (f'changed since it started: {", ".join(status.changed)}; a relaunch does not resume it '
                             f'(its epochs would mix two recipes): --rerun-stale restarts it in a fresh folder')
    return status


def _json_numbers(values: Dict[str, Any]) -> Dict[str, Any]:
    """`values` with each number JSON can hold as it is and NaN / ±inf as their text ('nan', 'inf', '-inf'), so
    that `pkmixer status --json` stays JSON."""
    return {k: v if not isinstance(v, float) or math.isfinite(v) else str(v) for k, v in values.items()}


_TRAIN_LINE = re.compile(r'Train: (\d+) \[\s*(\d+)/(\d+)')  # train.py's log line of a training step


def _train_step(log_path: Path) -> str:
    """Where a running run is, from the last training line train.py logged (``Train: 1 [  50/390 ( 13%)] …``):
    'epoch 2, step 50/390' (as people count epochs; '' before its first)."""
    try:
        lines = log_tail(log_path, lines=sys.maxsize)  # the log's last 16 KiB, as the failure's tail reads it
    except StateFileError:
        return ''
    matches = _TRAIN_LINE.findall('\n'.join(lines))
    if not matches:
        return ''
    epoch, step, steps = matches[-1]
    return f'epoch {int(epoch) + 1}, step {step}/{steps}'  # train.py's log counts epochs from 0


def _check_owner(recipe: Path, status: RunStatus, state_dir: Path) -> None:
    """A run folder that holds a run, refused as `pkmixer launch` refuses it when it is not this recipe's (another
    owner in its marker, or no marker and another model's run): status never calls another's run this one's."""
    train_args = read_train_args(state_dir) or []
    if status.state == 'pending' and not Path(status.run_dir, 'args.yaml').is_file() or \
            '--model-kwargs' in train_args:
        return
    try:
        cfg = load_yaml(read_text(recipe, not_a_recipe(recipe)) or '') or {}
    except yaml.YAMLError:
        return  # find_recipes names it
    model = next((train_args[i + 1] for i in range(len(train_args) - 2, -1, -1) if train_args[i] == '--model'),
                 cfg.get('model'))
    problem = owner_problem(recipe, Path(status.run_dir), folder_id(state_dir) or '', model, cfg.get('model_kwargs'))
    if problem:
        raise RunFolderTakenError(f'{recipe} is refused: {problem}; give it its own `experiment` (or `output`), or '
                                  f'move that run folder away')


def read_status(folder: Path) -> List[RunStatus]:
    """Every recipe's run in `folder`, in recipe order. A run folder that is another's (as `pkmixer launch` refuses
    it) is a :class:`RunFolderTakenError`."""
    state_dir = launch_state_dir(folder)
    statuses = []
    for recipe in find_recipes(folder):
        statuses.append(run_status(recipe, state_dir))
        _check_owner(recipe, statuses[-1], state_dir)
    return statuses


def read_launch_train_args(folder: Path) -> Optional[List[str]]:
    """The train.py arguments the folder's launches give every run (None: never launched since they are
    recorded)."""
    return read_train_args(launch_state_dir(folder))


# ------------------------------------------------------------------------------------------------- launch

@dataclass
class LaunchResult:
    """What a launch did: the runs it `started`, those it `skipped` (finished; stale — finished, and its recipe or
    the train.py arguments changed since — without rerun_stale; failed without retry_failed, unless it failed before
    its first epoch and its recipe or the train.py arguments changed since; still running or queued by an earlier
    launch whose job or process lives), the stale run folders it `moved` aside to rerun, the `train_args` every run
    got (`reused`: the recorded ones, none being given; `args_not_recorded`: new ones with which no run reached its
    first epoch, so the folder's record kept the earlier ones), the batch `job` (SLURM's id) and, when it waited, how
    each started run `ended`."""
    started: List[Task]
    skipped: Dict[str, List[str]]
    job: Optional[str] = None
    ended: List[RunStatus] = field(default_factory=list)
    moved: List[Tuple[str, Path]] = field(default_factory=list)
    train_args: List[str] = field(default_factory=list)
    reused: bool = False
    args_not_recorded: bool = False  # no run reached an epoch with train_args: the folder's record was kept

    @property
    def ok(self) -> bool:
        """Every started run finished (when waited for)."""
        return all(s.state == 'finished' for s in self.ended)


def _todo(tasks: Sequence[Task], retry_failed: bool, rerun_stale: bool) -> Tuple[List[Task], Dict[str, List[str]],
                                                                               List[Task]]:
    """(the tasks to start, the skipped by why, those of them whose stale run folder is moved aside first)."""
    todo: List[Task] = []
    fresh: List[Task] = []
    skipped: Dict[str, List[str]] = {'finished': [], 'stale': [], 'failed': [], 'running': []}
    for task in tasks:
        status = run_status(Path(task.recipe), Path(task.state_dir), task.run_dir, task.schedule)
        if status.state == 'running' or status.detail.startswith('queued'):  # still held by an earlier launch's job
            skipped['running'].append(task.name)
        elif status.changed and rerun_stale and status.state in ('stale', 'unfinished', 'failed'):
            todo.append(task)
            fresh.append(task)
        elif status.changed and status.state == 'unfinished':
            skipped['stale'].append(task.name)  # resumed, its epochs would mix two recipes: --rerun-stale
        elif status.state == 'failed' and status.changed and not status.done:
            todo.append(task)  # it failed before its first epoch with another recipe or other arguments: retried
        elif status.state in ('finished', 'stale') or (status.state == 'failed' and not retry_failed):
            skipped[status.state].append(task.name)
        else:
            todo.append(task)
    return todo, skipped, fresh


class _StartWatcher:
    """Logs each run's start with its log (its record turns ``running``), read from the records every `poll_s`:
    the same for every executor, a local worker or a SLURM array task."""

    def __init__(self, tasks: Sequence[Task], poll_s: float = 0.5):
        self.tasks, self.poll_s = list(tasks), poll_s
        self.seen: Set[str] = set()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._watch, name='pkmixer-launch-starts', daemon=True)
        self.thread.start()

    def _watch(self) -> None:
        while not self.stop.wait(self.poll_s):
            for task in [t for t in self.tasks if t.name not in self.seen]:
                try:
                    record = read_record(Path(task.state_dir), task.name)
                except LaunchError:
                    continue
                if record.get('state') == 'running':
                    self.seen.add(task.name)
                    where = (f'SLURM job {record["job"]}' if record.get('job') else f'PID {record.get("pid")}')
                    resumed = record.get('resumed') or []
                    what = (f'resuming {task.name} from epoch {epoch_words(resumed[-1:])}' if resumed
                            else f'started {task.name}')
                    _logger.info(f'[pkmixer launch] {what} ({where}; log {_log_path(task)})')

    def close(self) -> None:
        self.stop.set()
        self.thread.join()


def _no_exit_status(record: Dict[str, Any]) -> str:
    """What is known of a run whose task ended with no exit status recorded (a SLURM task cancelled in the queue or
    killed with its node writes none): its SLURM job, if any, and whether it had started (its record says)."""
    holder = f'SLURM job {record["job"]}' if record.get('job') else 'its task'
    when = ' before the run started' if record.get('state') == 'queued' else ''
    return f'{holder} ended{when} with no exit status recorded'


def _log_path(task: Task) -> Path:
    return Path(task.state_dir) / 'logs' / f'{task.name}.log'


def _start_and_wait(folder: Path, executor: Any, todo: List[Task], result: LaunchResult, wait: bool,
                    on_end: Optional[Callable[[RunStatus, int, int], None]]) -> bool:
    """Start `todo` and, with `wait`, wait for every run; returns whether the lock stays (a batch job holds it)."""
    batch = executor.start(todo)
    result.job = batch.job
    if batch.job:  # from here the batch job holds the folder, whatever becomes of this process
        update_lock(folder, job=batch.job, pid=None)
    if not wait:
        return bool(batch.job)
    watcher = _StartWatcher(todo)

    def ended(task: Task, returncode: Optional[int]) -> None:
        status = run_status(Path(task.recipe), Path(task.state_dir), task.run_dir)
        if returncode is None and not status.detail:
            status.detail = _no_exit_status(read_record(Path(task.state_dir), task.name))
        result.ended.append(status)
        _logger.info(f'[pkmixer launch] ended {task.name}: {status.line().splitlines()[0].split(": ", 1)[1]} '
                     f'(log {_log_path(task)})')
        if on_end:
            on_end(status, len(result.ended), len(todo))
    try:
        batch.wait(ended)
    except BaseException:
        batch.stop()
        raise
    finally:
        watcher.close()
    if batch.job and read_lock(folder).get('job') == batch.job:
        (launch_state_dir(folder) / 'lock').unlink(missing_ok=True)  # every task has left the queue
    return bool(batch.job)


def check_without_torch(folder: Path, train_args: Sequence[str] = (), train_py: Optional[str] = None,
                        new_train_args: bool = False) -> None:
    """What :func:`launch` refuses of train.py, its arguments, the recipes' models and data before it imports train.py
    (so torch and timm), at once; it writes nothing. train.py is found (else a
    :class:`~timm_pkmixer.training.train_py.TrainPyError`); the train.py arguments the launch would give (recorded
    ones that differ: :class:`TrainArgsChangedError`) are parsed with each recipe by train.py's parsers rebuilt from
    its source (:func:`~timm_pkmixer.training.train_py_parsers.check_train_args`), refused as
    :func:`.tasks.plan_tasks` refuses them; a recipe's model named as one of this package's but not registered is
    refused with the closest names (:func:`~timm_pkmixer.validation.unknown_model`), and data that are not there
    (and not to be downloaded) as :func:`.tasks.check_data` refuses them. The rest (the model built, the data read,
    the run folders) is checked once train.py is imported."""
    from ..training.train_py import TrainArgumentError, find_train_py
    from ..training.train_py_parsers import check_train_args
    from ..validation import unknown_model
    path = str(find_train_py(train_py).absolute())
    args, _, _ = settle_train_args(launch_state_dir(folder), list(train_args), new_train_args)
    sources: Dict[Any, List[Path]] = {}
    for recipe in find_recipes(folder):
        try:
            checked = check_train_args(str(recipe), args, path)
        except TrainArgumentError as e:
            raise TrainArgsRefusedError(f'{recipe} is refused: {e.refusal}', e.hint) from None
        except UserInputError as e:
            raise LaunchError(f'{recipe} is refused: {e}') from None
        if checked is None:
            return  # train.py's parsers are not read from its source: importing it checks them
        model = getattr(checked.args, 'model', None)
        problem = unknown_model(model) if isinstance(model, str) else None
        if problem:
            raise LaunchError(f'{recipe} is refused: {problem}')
        if checked.data is not None:
            sources.setdefault(checked.data, []).append(recipe)
    for source, users in sources.items():
        if source.present is False and not (source.download and source.kind != 'folder'):
            check_data(source, users)  # not there and not to be downloaded: refused as under the lock


def _state_before(folder: Path) -> Dict[str, Any]:
    """What a launch refused under its lock may have written in ``DIR/launch``, as it was before: whether the
    folder, its lock's mutex and the folder's id were there, and the recorded train.py arguments (their text)."""
    state_dir = launch_state_dir(folder)
    path = state_dir / 'train_args.json'
    return dict(folder=state_dir.is_dir(), mutex=os.path.lexists(state_dir / 'lock.mutex'),
                id=os.path.lexists(state_dir / 'folder.json'),
                train_args=read_text(path, state_file(path, "the launch's train.py arguments", 'remove it')))


def _put_back(folder: Path, before: Dict[str, Any]) -> None:
    """Under the lock: the recorded train.py arguments and the folder's id as they were before a refused launch."""
    state_dir = launch_state_dir(folder)
    path = state_dir / 'train_args.json'
    with contextlib.suppress(OSError, UserInputError):  # the refusal is what is said
        if before['train_args'] is None:
            path.unlink(missing_ok=True)
        elif read_text(path, state_file(path, "the launch's train.py arguments", '')) != before['train_args']:
            write_text(path, before['train_args'])
        if not before['id']:
            (state_dir / 'folder.json').unlink(missing_ok=True)


def _put_back_mutex(folder: Path, before: Dict[str, Any]) -> None:
    """Once the lock is let go: the lock's mutex and ``DIR/launch`` removed when a refused launch made them."""
    with contextlib.suppress(OSError, UserInputError):
        if not before['mutex']:
            drop_mutex(folder)
        if not before['folder']:
            launch_state_dir(folder).rmdir()  # only when empty: another launch may have begun meanwhile


def launch(folder: Path, executor: Any, train_args: Sequence[str] = (), train_py: Optional[str] = None,
           retry_failed: bool = False, wait: bool = True,
           on_end: Optional[Callable[[RunStatus, int, int], None]] = None, new_train_args: bool = False,
           rerun_stale: bool = False) -> LaunchResult:
    """Run every recipe of `folder` that is not finished (nor failed, unless `retry_failed`; nor stale, unless
    `rerun_stale`: its run folder is then moved aside to ``<name>.stale-<k>`` and the run starts afresh) with
    `executor` (an instance of an :data:`~timm_pkmixer.launch.executors.EXECUTORS` class), `train_args` applying
    to every run; with `wait`, return when all have ended, calling ``on_end(status, k, n)`` as the k-th of n ends.

    The first launch records `train_args` (``DIR/launch/train_args.json``); a relaunch given none reuses them, given
    others is refused (:class:`TrainArgsChangedError`, each difference named) unless `new_train_args`. Logs a line
    per recipe checked and per run started and ended (with its log).

    Raises :class:`LaunchLockedError` when the folder is being launched, :class:`LaunchError` for a folder, recipe,
    run folder, record or executor option that cannot be used (nothing is started then).
    """
    folder = Path(folder).absolute()
    executor.check()
    find_recipes(folder)  # before the lock: nothing is written into a folder that is not one of recipes
    check_launch_train_args(train_args)  # a --config, a positional, too many: refused before anything is written
    if not wait and not executor.detached:
        raise LaunchError(f'the runs of executor {executor.name} end with their launcher: wait for them, or run '
                          f'the launcher in the background')
    before = _state_before(folder)
    acquire_lock(folder, executor.name)
    keep_lock = started = refused = False
    try:
        check_without_torch(folder, train_args, train_py, new_train_args)  # at once: train.py is not imported
        state_dir = launch_state_dir(folder)
        args, reused, to_record = settle_train_args(state_dir, list(train_args), new_train_args)
        if reused:
            _logger.info(f'[pkmixer launch] every run gets the train.py arguments of the earlier launches: '
                         f'{shlex.join(args)}')
        plan = executor.plan()
        tasks = plan_tasks(folder, args, train_py, executor.name, plan['nproc'], plan['threads'])
        previous = read_train_args(state_dir)
        if to_record:  # every recipe accepted them (train.py's parser, the data): only now are they the folder's
            record_train_args(state_dir, args)
        todo, skipped, fresh = _todo(tasks, retry_failed, rerun_stale)
        result = LaunchResult(todo, skipped, train_args=args, reused=reused)
        if not todo:
            return result
        for task in todo:  # a FIFO or device in place of a run's log is named before anything starts
            log_tail(_log_path(task), 1)
        update_lock(folder, planned=True)  # every recipe checked: what `--no-wait` waits for before it returns
        started = True
        for task in fresh:
            result.moved.append((task.name, move_aside(Path(task.run_dir))))
            _logger.info(f'[pkmixer launch] {task.name} is stale: its run folder moved aside to {result.moved[-1][1]}')
        keep_lock = _start_and_wait(folder, executor, todo, result, wait, on_end)
        if to_record and result.ended and all(s.state in ('failed', 'cancelled') and not s.done
                                              for s in result.ended):
            record_train_args(state_dir, previous)  # no run got to an epoch with them: not accepted
            result.args_not_recorded = True
            _logger.info(f'[pkmixer launch] no run reached its first epoch with the train.py arguments '
                         f'{shlex.join(args) or "(none)"}: they are not recorded, the folder keeps '
                         f'{"no recorded arguments" if previous is None else shlex.join(previous) or "(none)"}')
        return result
    except BaseException:
        refused = not started
        if refused:  # the folder as it was: nothing recorded
            _put_back(folder, before)
        raise
    finally:
        if not keep_lock:
            release_lock(folder)
        if refused:
            _put_back_mutex(folder, before)
