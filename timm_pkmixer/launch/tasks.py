"""One run of `pkmixer launch` as a task: its recipe and run folder, its record and log in the folder's
``launch/`` state, and its process (:func:`execute`, which resumes an unfinished run from its ``last.pth.tar``).
Executors (:mod:`.executors`) run tasks; :mod:`.launch` plans, locks and reports them."""
import ctypes
import dataclasses
import functools
import logging
import os
import signal
import socket
import stat
import subprocess
import sys
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

import yaml

from ..errors import CheckpointError, UserInputError
from ..runs.launch_marker import launch_changes
from ..runs.run_folder import ARGS_YAML, SUMMARY_CSV, run_state, run_state_with_schedule, schedule_record
from ..state_files import load_yaml, open_log, read_tail, read_text, yaml_reason
from .errors import LaunchError, RunFolderTakenError, StateFileError, TrainArgsRefusedError, state_file
from .ownership import claim, mark_start, owner_problem
from .records import folder_id, launch_state_dir, read_record, read_train_args, write_record

__all__ = ['STATES', 'LOG_TAIL', 'Progress', 'run_progress', 'find_recipes', 'default_run_dir', 'planned_run_dir',
           'log_tail', 'Task',
           'plan_tasks', 'execute']

_logger = logging.getLogger(__name__)

STATES = ('pending', 'running', 'finished', 'unfinished', 'failed', 'cancelled', 'stale')
LOG_TAIL = 5


# ------------------------------------------------------------------------------------------------- run folders

@dataclass(frozen=True)
class Progress:
    """How far a train.py run folder is: `state` is ``absent`` (no args.yaml), ``finished`` or ``unfinished``;
    `done` epochs with a summary row (the highest epoch + 1), of `epochs` train.py runs."""
    state: str
    done: int = 0
    epochs: int = 0


def _check_regular(run_dir: Path) -> None:
    for name in (ARGS_YAML, SUMMARY_CSV):
        try:
            mode = os.stat(run_dir / name).st_mode
        except OSError:
            continue
        if not stat.S_ISREG(mode):
            raise StateFileError(f'{run_dir / name} is not a regular file: train.py writes it; move it away')


def run_progress(run_dir: Path, schedule: Optional[Mapping[str, Any]] = None) -> Progress:
    """A run folder's progress, finished as `pkmixer report` defines it (every epoch train.py runs is there): read
    by :func:`.run_folder.run_state`, the one reader of run folders; a folder that is started and not finished
    (whatever its fault) is ``unfinished``, to be resumed. With the `schedule` recorded when the run started
    (:func:`.run_folder.schedule_record`), and args.yaml asking for the same epochs, neither torch nor timm is
    imported. A special file in place of args.yaml or summary.csv is a :class:`StateFileError`."""
    run_dir = Path(run_dir)
    _check_regular(run_dir)
    state = run_state_with_schedule(run_dir, dict(schedule)) if schedule else None
    state = state or run_state(run_dir)
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
    found = sorted(p for pattern in ('*.yaml', '*.yml') for p in folder.glob(pattern))
    for path in found:
        if path.is_file():
            continue
        if path.is_symlink():
            try:
                path.resolve(strict=True)
                why = 'a symlink to something that is not a file'
            except RuntimeError:
                why = 'a symlink loop'
            except OSError:
                why = f'a symlink to {os.readlink(path)}, which does not exist'
        else:
            why = 'a folder' if path.is_dir() else 'not a regular file'
        raise LaunchError(f'{path} is not a recipe: {why}; remove it or point it at a recipe')
    recipes = found
    if not recipes:
        raise LaunchError(f'{folder} holds no recipes (*.yaml); write some with `pkmixer sweep … --out-dir {folder}`')
    stems: Dict[str, Path] = {}
    for path in recipes:
        if path.stem in stems:
            raise LaunchError(f'{stems[path.stem].name} and {path.name} are both recipe {path.stem} (one run, one '
                              f'record and one log per name): rename or remove one')
        stems[path.stem] = path
    for path in recipes:
        try:
            cfg = load_yaml(read_text(path, not_a_recipe(path)) or '')
        except yaml.YAMLError as e:
            raise LaunchError(f'{path} is not a recipe: not YAML ({yaml_reason(e)})') from None
        if not isinstance(cfg, dict):
            raise LaunchError(f'{path} is not a recipe: a recipe is a mapping of train.py arguments, this is a '
                              f'{type(cfg).__name__}')
    return recipes


def not_a_recipe(path: Path) -> Callable[[str], LaunchError]:
    """What is wrong with the recipe file `path` (for the state files' readers), as a :class:`LaunchError`."""
    return lambda why: LaunchError(f'{path} is not a recipe: {why}')


def default_run_dir(recipe: Path, output: Optional[str] = None, experiment: Optional[str] = None) -> Path:
    """Where a recipe's run lands: `output` / `experiment` (default: the recipe's own keys, else
    ``<its folder>/runs`` and the recipe's name), absolute."""
    recipe = Path(recipe)
    if output is None or experiment is None:
        cfg = load_yaml(read_text(recipe, not_a_recipe(recipe)) or '') or {}
        output = output or cfg.get('output') or str(recipe.parent / 'runs')
        experiment = experiment or cfg.get('experiment') or recipe.stem
    return (Path(output) / str(experiment)).absolute()


def planned_run_dir(recipe: Path, train_args: Sequence[str] = ()) -> Path:
    """Where a recipe's run lands with the launch's `train_args` (their ``--output`` / ``--experiment``, the last
    given, override the recipe's; see :func:`default_run_dir`)."""
    given: Dict[str, str] = {}
    args = list(train_args)
    for i, arg in enumerate(args):
        key, sep, value = arg.partition('=')
        if key in ('--output', '--experiment'):
            if sep:
                given[key] = value
            elif i + 1 < len(args):
                given[key] = args[i + 1]
    return default_run_dir(recipe, given.get('--output') or None, given.get('--experiment') or None)


def log_tail(path: Path, lines: int = LOG_TAIL) -> List[str]:
    """The last `lines` non-blank lines of a log (its last 16 KiB read); none if there is no log. A special file
    in its place is a :class:`StateFileError`."""
    text = read_tail(path, state_file(Path(path), 'a run log', 'remove it if no launch is running'), 16384) or ''
    return [line for line in text.splitlines() if line.strip()][-lines:]


# ------------------------------------------------------------------------------------------------- tasks

@dataclass(frozen=True)
class Task:
    """One run, as a worker (a local thread or a SLURM array task) executes it: `pkmixer train RECIPE *argv`,
    under torchrun when `nproc` > 1. `schedule`: train.py's epoch count for it (recorded with the run, so that
    `pkmixer status` needs no torch)."""
    name: str
    recipe: str
    run_dir: str
    argv: Tuple[str, ...]           # pkmixer train's arguments after the recipe (train.py's, --train-py, --threads)
    state_dir: str
    executor: str
    nproc: int = 1
    schedule: Optional[Dict[str, Any]] = dataclasses.field(default=None, compare=False)

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
    parser, the model on the meta device) and checked to own its run folder (:func:`.ownership.owner_problem`): a
    recipe refused is named and nothing is started. Logs a line per recipe checked.

    `train_args` go to every run; each run gets ``--output`` / ``--experiment`` (its run folder, see
    :func:`default_run_dir`; `train_args` may set them too), ``--train-py`` and, when given, ``--threads``.
    """
    from ..training.train_py import TrainArgumentError, find_train_py, prepare_train
    folder = Path(folder).absolute()
    recipes = find_recipes(folder)
    train_py_path = str(find_train_py(train_py).absolute())
    owner = folder_id(launch_state_dir(folder), create=True)
    tasks, seen = [], {}
    sources: Dict[Any, List[Path]] = {}
    for i, recipe in enumerate(recipes):
        _logger.info(f'[pkmixer launch] checking recipe {i + 1}/{len(recipes)} ({recipe.name})')
        try:
            plan = prepare_train(str(recipe), list(train_args), train_py_path)
        except TrainArgumentError as e:
            raise TrainArgsRefusedError(f'{recipe} is refused: {e}') from None
        except UserInputError as e:
            raise LaunchError(f'{recipe} is refused: {e}') from None
        run_dir = default_run_dir(recipe, plan.args.output or None, plan.args.experiment or None)
        if run_dir in seen:
            raise LaunchError(f'{seen[run_dir].name} and {recipe.name} would both run into {run_dir}: give each '
                              f'its own `experiment`')
        seen[run_dir] = recipe
        if plan.data is not None:
            sources.setdefault(plan.data, []).append(recipe)
        problem = owner_problem(recipe, run_dir, owner, plan.args.model, getattr(plan.args, 'model_kwargs', None))
        if problem:
            raise RunFolderTakenError(f'{recipe} is refused: {problem}; give it its own `experiment` (or `output`), '
                                      f'or move that run folder away')
        argv = [*train_args, '--output', str(run_dir.parent), '--experiment', run_dir.name,
                '--train-py', train_py_path, *(['--threads', str(threads)] if threads else [])]
        tasks.append(Task(recipe.stem, str(recipe), str(run_dir), tuple(argv), str(launch_state_dir(folder)), executor,
                          nproc, _schedule(vars(plan.args))))
    for source, users in sources.items():
        check_data(source, users)
    return tasks


def check_data(source: Any, recipes: Sequence[Path]) -> None:
    """The data `recipes` read (a :class:`~timm_pkmixer.data.datasets.DataSource`), checked once before any run
    starts: a download done, or a folder that is not there (or holds no class folders) refused with its path and
    what was expected, as a :class:`LaunchError` naming the recipes."""
    from ..data.datasets import DataUnavailableError, fetch_data
    who = recipes[0].name if len(recipes) == 1 else f'{len(recipes)} recipes ({recipes[0].name}, …)'
    try:
        fetch_data(source)
    except DataUnavailableError as e:
        raise LaunchError(f'the data of {who} cannot be read, so no run is started: {e}') from None
    if source.kind != 'folder':
        return
    root = Path(source.root)
    for split in source.splits:
        where = next((root / s for s in _split_names(split) if (root / s).is_dir()), root)
        if not any(p.is_dir() for p in where.iterdir()):
            raise LaunchError(f'the data of {who} cannot be read, so no run is started: its data folder {root}: '
                              f'{where} holds no class folders (an image folder dataset is DIR/{source.splits[0]}/'
                              f'<class>/… and DIR/{source.splits[1]}/<class>/…)')


def _split_names(split: str) -> Tuple[str, ...]:
    """The folder names timm's folder dataset looks for a split under (its ``_search_split``), in its order."""
    from .._timm import EVAL_SPLIT_NAMES, TRAIN_SPLIT_NAMES
    name = split.split('[')[0]
    synonyms = TRAIN_SPLIT_NAMES if name in TRAIN_SPLIT_NAMES else EVAL_SPLIT_NAMES if name in EVAL_SPLIT_NAMES else ()
    return tuple(dict.fromkeys((name, *synonyms)))


def _schedule(args: Dict[str, Any]) -> Optional[Dict[str, Any]]:
    """train.py's epoch count for `args`, kept with the run (None when it cannot be counted: status counts then)."""
    try:
        return schedule_record(args)
    except (ValueError, TypeError, AssertionError, KeyError):
        return None


# ------------------------------------------------------------------------------------------------- a task's run

@functools.lru_cache(maxsize=1)
def _preexec() -> Optional[Callable[[], Any]]:
    """What a run's child calls before exec: prctl(PR_SET_PDEATHSIG, SIGTERM), so that the run ends when the thread
    that started it does (the launcher killed). Resolved here, in the launcher, so that the child (forked from a
    threaded process) imports and looks up nothing; None where there is no prctl."""
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    prctl.argtypes = [ctypes.c_int, ctypes.c_ulong]
    prctl.restype = ctypes.c_int
    return functools.partial(prctl, 1, int(signal.SIGTERM))  # PR_SET_PDEATHSIG


def _refuse(task: Task, error: UserInputError, job: Optional[str]) -> int:
    """A run not started (its folder another launch's, its last.pth.tar not a whole checkpoint): said in its log and
    record (failed, exit status 2)."""
    state_dir = Path(task.state_dir)
    with _log(task) as log:
        log.write(f'=== {time.strftime("%Y-%m-%d %H:%M:%S")}: not started: {error}\n')
    write_record(state_dir, task.name, state='failed', returncode=2, reason=str(error), pid=None, host=None, job=job,
                 executor=task.executor, run_dir=task.run_dir, recipe=task.recipe)
    return 2


def _log(task: Task) -> IO[str]:
    path = Path(task.state_dir) / 'logs' / f'{task.name}.log'
    return open_log(path, state_file(path, 'a run log', f'remove it if no launch of {Path(task.state_dir).parent} '
                                                         f'is running'))


def _header(task: Task, so_far: Progress, resume: Optional[str], job: Optional[str]) -> str:
    where = f'{socket.gethostname()}{f" (SLURM job {job})" if job else ""}'
    changed = launch_changes(Path(task.run_dir)) if resume else []
    note = (f'=== its recipe changed since it started ({", ".join(changed)}): resuming with the recipe as it is '
            f'now\n') if changed else ''
    return (f'=== {time.strftime("%Y-%m-%d %H:%M:%S")} on {where}: '
            f'{"resuming from epoch " + str(so_far.done) if resume else "starting"}\n{note}'
            f'=== {" ".join(task.command(resume))}\n')


def execute(task: Task, env: Optional[Mapping[str, str]] = None, job: Optional[str] = None,
            on_start: Optional[Callable[[subprocess.Popen], None]] = None) -> int:
    """Run one task to its end in a child process (output appended to ``logs/<name>.log``); returns its exit status
    (negative: killed by that signal). The run first claims its run folder (:func:`.ownership.claim`: another
    owner makes it fail with exit status 2, said in its log). A finished run is not run again; an unfinished one with
    a ``last.pth.tar`` resumes from it (one that is not a whole zip file, as torch.save writes, fails the run the
    same way, never handed to train.py). Each start records what it trains (:func:`.ownership.mark_start`). The
    run's record says running, then ended / failed (exit status > 0) / interrupted."""
    state_dir, run_dir = Path(task.state_dir), Path(task.run_dir)
    try:
        claim(Path(task.recipe), run_dir, folder_id(state_dir, create=True) or '')
    except RunFolderTakenError as e:
        return _refuse(task, e, job)
    progress = run_progress(run_dir, task.schedule)
    if progress.state == 'finished':
        write_record(state_dir, task.name, state='ended', returncode=0, run_dir=task.run_dir)
        return 0
    last = run_dir / 'last.pth.tar'
    resume = str(last) if progress.state == 'unfinished' and last.is_file() else None
    if resume and not zipfile.is_zipfile(last):
        return _refuse(task, CheckpointError(
            f'{last} is not a whole checkpoint (no zip directory at its end, as torch.save writes: cut short or '
            f'corrupt), so the run cannot resume from it; move it away to restart the run from its first epoch, or '
            f'put back a whole copy'), job)
    header = _header(task, progress, resume, job)
    earlier = read_record(state_dir, task.name).get('resumed') or []
    resumed = [*earlier, progress.done] if resume else []  # the epochs this run was resumed at
    digest = mark_start(Path(task.recipe), run_dir, read_train_args(state_dir) or [])
    with _log(task) as log:
        log.write(header)
        log.flush()
        proc = subprocess.Popen(task.command(resume), stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, env=dict(os.environ, **(env or {})), preexec_fn=_preexec())
        write_record(state_dir, task.name, state='running', pid=proc.pid, host=socket.gethostname(), job=job,
                     executor=task.executor, run_dir=task.run_dir, recipe=task.recipe, returncode=None, reason=None,
                     digest=digest, schedule=task.schedule, resumed=resumed)
        if on_start:
            on_start(proc)
        returncode = proc.wait()
    state = 'ended' if returncode == 0 else 'failed' if returncode > 0 else 'interrupted'
    write_record(state_dir, task.name, state=state, returncode=returncode)
    return returncode
