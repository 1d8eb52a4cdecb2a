"""`pkmixer launch` / `pkmixer status`: every recipe of a folder run through `pkmixer train`, each in its own
process, by an executor (:mod:`timm_pkmixer.experiments.executors`: this machine, or SLURM through submitit).

A folder of recipes is what `pkmixer sweep --out-dir DIR` writes (or any folder of train.py recipes, ``*.yaml``).
Each recipe is one run; it lands where its ``output`` / ``experiment`` say, by default ``DIR/runs/<recipe name>``,
so that `pkmixer report DIR/runs` reads them. The launcher keeps its own state in ``DIR/launch/``:

* ``lock``: who is launching this folder (PID and host, and the SLURM job when there is one): a second launch of
  the folder is refused while that holder is alive; a dead holder's lock is taken over.
* ``runs/<name>.json``: one record per run: its run folder, and its last state as the launcher saw it (queued,
  running, ended, failed — exit status > 0 — or interrupted — killed by a signal, as by ``scancel``), with the PID,
  host or SLURM job that runs it.
* ``logs/<name>.log``: the run's output, every attempt appended.

Whether a run is finished is read from its run folder as `pkmixer report` reads it (:func:`run_progress`): every
epoch train.py runs has its summary row. A relaunch skips finished runs, resumes unfinished ones from their
``last.pth.tar`` (train.py's ``--resume``; decided when the run starts, so a requeued SLURM task resumes too) and
reruns failed ones only when asked (``retry_failed``).
"""
import json
import os
import socket
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

import yaml

from ..errors import UserInputError
from .run_folder import load_yaml, run_state, yaml_reason

__all__ = ['STATE_DIR', 'LaunchError', 'LaunchLockedError', 'Task', 'RunStatus', 'Progress', 'run_progress',
           'find_recipes', 'default_run_dir', 'plan_tasks', 'read_status', 'execute', 'acquire_lock', 'release_lock',
           'read_lock', 'update_lock', 'pid_alive', 'write_record', 'read_record', 'run_status', 'LaunchResult',
           'launch', 'STATES']

STATE_DIR = 'launch'
STATES = ('pending', 'running', 'finished', 'unfinished', 'failed')
LOG_TAIL = 5


class LaunchError(UserInputError, ValueError):
    """A folder that cannot be launched (no recipes, a file that is not a recipe, an executor that is not there,
    a batch system's refusal); the message names the file or option."""


class LaunchLockedError(LaunchError):
    """The folder is being launched already (the holder is named)."""


# ------------------------------------------------------------------------------------------------- run folders

@dataclass(frozen=True)
class Progress:
    """How far a train.py run folder is: `state` is ``absent`` (no args.yaml), ``finished`` or ``unfinished``;
    `done` epochs with a summary row (the highest epoch + 1), of `epochs` train.py runs."""
    state: str
    done: int = 0
    epochs: int = 0


def run_progress(run_dir: Path) -> Progress:
    """A run folder's progress, finished as `pkmixer report` defines it (every epoch train.py runs is there): read
    by :func:`.run_folder.run_state`, the one reader of run folders; a folder that is started and not finished
    (whatever its fault) is ``unfinished``, to be resumed."""
    state = run_state(Path(run_dir))
    if state.status == 'not started':
        return Progress('absent')
    return Progress('finished' if state.status == 'finished' else 'unfinished', state.epochs_done,
                    state.epochs_scheduled)


def find_recipes(folder: Path) -> List[Path]:
    """The recipes of `folder` (``*.yaml`` / ``*.yml``, not recursive), sorted; each must be a YAML mapping.

    Raises:
        NotADirectoryError / FileNotFoundError: `folder` is not a folder.
        LaunchError: no recipe, or a file that is not a recipe (named).
    """
    folder = Path(folder)
    if not folder.exists():
        raise FileNotFoundError(2, 'no such folder of recipes', str(folder))
    if not folder.is_dir():
        raise NotADirectoryError(20, 'not a folder of recipes (`pkmixer train RECIPE` runs one recipe)', str(folder))
    recipes = sorted(p for pattern in ('*.yaml', '*.yml') for p in folder.glob(pattern) if p.is_file())
    if not recipes:
        raise LaunchError(f'{folder} holds no recipes (*.yaml); write some with `pkmixer sweep … --out-dir {folder}`')
    for path in recipes:
        try:
            cfg = load_yaml(path.read_text(encoding='utf-8'))
        except (yaml.YAMLError, UnicodeDecodeError) as e:
            raise LaunchError(f'{path} is not a recipe: not YAML ({yaml_reason(e)})') from None
        if not isinstance(cfg, dict):
            raise LaunchError(f'{path} is not a recipe: a recipe is a mapping of train.py arguments, this is a '
                              f'{type(cfg).__name__}')
    return recipes


def default_run_dir(recipe: Path, output: Optional[str] = None, experiment: Optional[str] = None) -> Path:
    """Where a recipe's run lands: `output` / `experiment` (default: the recipe's own keys, else
    ``<its folder>/runs`` and the recipe's name), absolute."""
    recipe = Path(recipe)
    if output is None or experiment is None:
        cfg = load_yaml(recipe.read_text(encoding='utf-8')) or {}
        output = output or cfg.get('output') or str(recipe.parent / 'runs')
        experiment = experiment or cfg.get('experiment') or recipe.stem
    return (Path(output) / str(experiment)).absolute()


# ------------------------------------------------------------------------------------------------- records

def _state_dir(folder: Path) -> Path:
    return Path(folder) / STATE_DIR


def _write_json(path: Path, data: Mapping[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f'.{path.name}.{os.getpid()}.tmp')
    tmp.write_text(json.dumps(data, indent=1) + '\n', encoding='utf-8')
    os.replace(tmp, path)


def write_record(state_dir: Path, name: str, **fields: Any) -> None:
    """Update run `name`'s record (``runs/<name>.json``) with `fields` and the time."""
    path = Path(state_dir) / 'runs' / f'{name}.json'
    record = {**read_record(state_dir, name), **fields, 'time': time.time()}
    _write_json(path, record)


def read_record(state_dir: Path, name: str) -> Dict[str, Any]:
    path = Path(state_dir) / 'runs' / f'{name}.json'
    try:
        return json.loads(path.read_text(encoding='utf-8'))
    except (OSError, ValueError):
        return {}


def pid_alive(pid: Any, host: Any) -> bool:
    """Whether process `pid` on `host` is alive (another host's process is taken to be)."""
    if host and host != socket.gethostname():
        return True
    try:
        os.kill(int(pid), 0)
    except (ProcessLookupError, ValueError, TypeError):
        return False
    except PermissionError:
        return True
    return True


def holder_alive(record: Mapping[str, Any]) -> bool:
    """Whether the process or batch job in a lock or run record is alive (its executor says)."""
    from .executors import EXECUTORS
    executor = EXECUTORS.get(record.get('executor', 'local'))
    return executor.holder_alive(record) if executor else pid_alive(record.get('pid'), record.get('host'))


# ------------------------------------------------------------------------------------------------- lock

def read_lock(folder: Path) -> Dict[str, Any]:
    try:
        return json.loads((_state_dir(folder) / 'lock').read_text(encoding='utf-8'))
    except (OSError, ValueError):
        return {}


def _describe_holder(lock: Mapping[str, Any]) -> str:
    job = f'SLURM job {lock["job"]} (`scancel {lock["job"]}` stops it)' if lock.get('job') else ''
    if lock.get('pid') is None:
        return job
    return f'PID {lock.get("pid")} on {lock.get("host")}' + (f', {job}' if job else '')


def acquire_lock(folder: Path, executor: str) -> Path:
    """Take ``DIR/launch/lock`` for this process; a live holder's lock refuses (:class:`LaunchLockedError`), a
    dead holder's is taken over."""
    path = _state_dir(folder) / 'lock'
    path.parent.mkdir(parents=True, exist_ok=True)
    mine = dict(pid=os.getpid(), host=socket.gethostname(), executor=executor, job=None, since=time.time())
    for _ in range(3):
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            held = read_lock(folder)
            if held and holder_alive(held):
                raise LaunchLockedError(f'{folder} is being launched already, by {_describe_holder(held)}; '
                                        f'`pkmixer status {folder}` shows its runs') from None
            try:
                path.unlink()  # a dead holder's (or an unreadable) lock
            except FileNotFoundError:
                pass
            continue
        with os.fdopen(fd, 'w') as f:
            json.dump(mine, f)
        return path
    raise LaunchLockedError(f'{folder}: could not take {path} (another launch keeps taking it)')


def update_lock(folder: Path, **fields: Any) -> None:
    """Add `fields` (the batch job) to this process's lock."""
    lock = read_lock(folder)
    if lock.get('pid') == os.getpid():
        _write_json(_state_dir(folder) / 'lock', {**lock, **fields})


def release_lock(folder: Path) -> None:
    """Remove the lock if this process holds it."""
    lock = read_lock(folder)
    if lock.get('pid') == os.getpid() and lock.get('host') == socket.gethostname():
        (_state_dir(folder) / 'lock').unlink(missing_ok=True)


# ------------------------------------------------------------------------------------------------- tasks

@dataclass(frozen=True)
class Task:
    """One run, as a worker (a local thread or a SLURM array task) executes it: `pkmixer train RECIPE *argv`,
    under torchrun when `nproc` > 1."""
    name: str
    recipe: str
    run_dir: str
    argv: Tuple[str, ...]           # pkmixer train's arguments after the recipe (train.py's, --train-py, --threads)
    state_dir: str
    executor: str
    nproc: int = 1

    def command(self, resume: Optional[str] = None) -> List[str]:
        """The command line of the run; `resume`: a last.pth.tar to resume from."""
        head = [sys.executable, '-m']
        if self.nproc > 1:
            head += ['torch.distributed.run', '--standalone', f'--nproc_per_node={self.nproc}', '-m']
        tail = ['--resume', resume] if resume else []
        return [*head, 'timm_pkmixer', 'train', self.recipe, *self.argv, *tail]


def plan_tasks(folder: Path, train_args: Sequence[str], train_py: Optional[str], executor: str, nproc: int = 1,
               threads: Optional[int] = None) -> List[Task]:
    """One task per recipe of `folder`, each checked as `pkmixer train` checks it before training (train.py's
    parser, the model on the meta device): a recipe it refuses is named and nothing is started.

    `train_args` go to every run; each run gets ``--output`` / ``--experiment`` (its run folder, see
    :func:`default_run_dir`; `train_args` may set them too), ``--train-py`` and, when given, ``--threads``.
    """
    from .train_py import find_train_py, prepare_train
    folder = Path(folder).absolute()
    recipes = find_recipes(folder)
    train_py_path = str(find_train_py(train_py).absolute())
    tasks, seen = [], {}
    for recipe in recipes:
        try:
            plan = prepare_train(str(recipe), list(train_args), train_py_path)
        except UserInputError as e:
            raise LaunchError(f'{recipe} is refused: {e}') from None
        run_dir = default_run_dir(recipe, plan.args.output or None, plan.args.experiment or None)
        if run_dir in seen:
            raise LaunchError(f'{seen[run_dir].name} and {recipe.name} would both run into {run_dir}: give each '
                              f'its own `experiment`')
        seen[run_dir] = recipe
        argv = [*train_args, '--output', str(run_dir.parent), '--experiment', run_dir.name,
                '--train-py', train_py_path, *(['--threads', str(threads)] if threads else [])]
        tasks.append(Task(recipe.stem, str(recipe), str(run_dir), tuple(argv), str(_state_dir(folder)), executor,
                          nproc))
    return tasks


def _tail(path: Path, lines: int = LOG_TAIL) -> List[str]:
    try:
        with open(path, 'rb') as f:
            f.seek(max(0, f.seek(0, 2) - 16384))
            text = f.read().decode('utf-8', 'replace')
    except OSError:
        return []
    return [line for line in text.splitlines() if line.strip()][-lines:]


def _set_pdeathsig() -> None:  # the run ends when the thread that started it does (the launcher killed)
    try:
        import ctypes
        import signal
        ctypes.CDLL('libc.so.6', use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def execute(task: Task, env: Optional[Mapping[str, str]] = None, job: Optional[str] = None,
            on_start: Optional[Callable[[subprocess.Popen], None]] = None) -> int:
    """Run one task to its end in a child process (output appended to ``logs/<name>.log``); returns its exit status
    (negative: killed by that signal). A finished run is not run again; an unfinished one with a ``last.pth.tar``
    resumes from it. The run's record says running, then ended / failed (exit status > 0) / interrupted."""
    state_dir, run_dir = Path(task.state_dir), Path(task.run_dir)
    progress = run_progress(run_dir)
    if progress.state == 'finished':
        write_record(state_dir, task.name, state='ended', returncode=0, run_dir=task.run_dir)
        return 0
    last = run_dir / 'last.pth.tar'
    resume = str(last) if progress.state == 'unfinished' and last.is_file() else None
    command = task.command(resume)
    log_path = state_dir / 'logs' / f'{task.name}.log'
    log_path.parent.mkdir(parents=True, exist_ok=True)
    host = socket.gethostname()
    with open(log_path, 'a', encoding='utf-8') as log:
        log.write(f'=== {time.strftime("%Y-%m-%d %H:%M:%S")} on {host}{f" (SLURM job {job})" if job else ""}: '
                  f'{"resuming from epoch " + str(progress.done) if resume else "starting"}\n'
                  f'=== {" ".join(command)}\n')
        log.flush()
        proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                env=dict(os.environ, **(env or {})), preexec_fn=_set_pdeathsig)
        write_record(state_dir, task.name, state='running', pid=proc.pid, host=host, job=job,
                     executor=task.executor, run_dir=task.run_dir, recipe=task.recipe, returncode=None)
        if on_start:
            on_start(proc)
        returncode = proc.wait()
    state = 'ended' if returncode == 0 else 'failed' if returncode > 0 else 'interrupted'
    write_record(state_dir, task.name, state=state, returncode=returncode)
    return returncode


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
        status.log = _tail(Path(state_dir) / 'logs' / f'{name}.log')
    elif progress.state == 'unfinished':
        status.state = 'unfinished'
    return status


def read_status(folder: Path) -> List[RunStatus]:
    """Every recipe's run in `folder`, in recipe order."""
    return [run_status(recipe, _state_dir(folder)) for recipe in find_recipes(folder)]


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
    (an instance of an :data:`~timm_pkmixer.experiments.executors.EXECUTORS` class), `train_args` applying to
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
            (_state_dir(folder) / 'lock').unlink(missing_ok=True)  # every task has left the queue
        return result
    finally:
        if not keep_lock:
            release_lock(folder)
