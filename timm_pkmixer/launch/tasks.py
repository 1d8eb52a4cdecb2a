"""One run of `pkmixer launch` as a task: its recipe and run folder, its record and log in the folder's
``launch/`` state, and its process (:func:`execute`, which resumes an unfinished run from its ``last.pth.tar``).
Executors (:mod:`.executors`) run tasks; :mod:`.launch` plans, locks and reports them."""
import ctypes
import dataclasses
import errno
import functools
import json
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
from ..runs.run_folder import (
    ARGS_YAML,
    SUMMARY_CSV,
    RunFileError,
    epoch_words,
    read_args_yaml,
    read_checkpoint_info,
    run_state,
    run_state_with_schedule,
    schedule_record,
)
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
    """How far a train.py run folder is: `state` is ``absent`` (no args.yaml), ``finished``, ``unfinished`` (to be
    resumed) or ``failed`` (what resuming cannot mend: its values are not measurements, `reason` says which);
    `done` epochs with a summary row (the highest epoch + 1), of `epochs` train.py runs; `missing`: the epochs (from
    0) train.py writes a row for that summary.csv lacks."""
    state: str
    done: int = 0
    epochs: int = 0
    reason: str = ''
    missing: Tuple[int, ...] = ()


def _check_regular(run_dir: Path) -> None:
    for name in (ARGS_YAML, SUMMARY_CSV):
        path = run_dir / name
        try:
            mode = os.stat(path).st_mode
        except FileNotFoundError:
            if os.path.islink(path):  # a symlink to nothing: train.py would write through it, wherever it points
                raise StateFileError(f'{path} is a symlink to {os.readlink(path)}, which does not exist: train.py '
                                     f'writes it; move it away') from None
            continue
        except OSError as e:
            raise StateFileError(f'{path} cannot be read ({"a symlink loop" if e.errno == errno.ELOOP else e.strerror})'
                                 f': train.py writes it; move it away') from None
        if not stat.S_ISREG(mode):
            raise StateFileError(f'{path} is not a regular file: train.py writes it; move it away')


def run_progress(run_dir: Path, schedule: Optional[Mapping[str, Any]] = None) -> Progress:
    """A run folder's progress, finished as `pkmixer report` defines it (every epoch train.py runs is there): read
    by :func:`.run_folder.run_state`, the one reader of run folders; a folder that is started and not finished
    whose fault resuming can mend (a fault of its files) is ``unfinished``, to be resumed; one whose values are not
    measurements (a diverged run's NaN, rows past the schedule) is ``failed``: resuming would not mend it, and a
    relaunch would resume it for ever. With the `schedule` recorded when the run started
    (:func:`.run_folder.schedule_record`), and args.yaml asking for the same epochs, neither torch nor timm is
    imported. A special file, a symlink to nothing or a symlink loop in place of args.yaml or summary.csv is a
    :class:`StateFileError`."""
    run_dir = Path(run_dir)
    _check_regular(run_dir)
    state = run_state_with_schedule(run_dir, dict(schedule)) if schedule else None
    state = state or run_state(run_dir)
    if state.status == 'not started':
        return Progress('absent')
    if state.status == 'failed' and not state.resumable:
        return Progress('failed', state.epochs_done, state.epochs_scheduled, state.reason, state.missing)
    return Progress('finished' if state.status == 'finished' else 'unfinished', state.epochs_done,
                    state.epochs_scheduled, missing=state.missing)


def find_recipes(folder: Path) -> List[Path]:
    """The recipes of `folder` (``*.yaml`` / ``*.yml``, not recursive, hidden files left out as the shell's ``*`` does:
    an editor's lock link ``.#a.yaml`` is no recipe), sorted; each must be a YAML mapping.

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
    hidden = [p for p in found if p.name.startswith('.')]  # an editor's lock (emacs: .#a.yaml) or swap file: no recipe
    if hidden:
        _logger.info(f'{folder}: {", ".join(p.name for p in hidden)} left out: hidden, not recipes (an editor\'s lock '
                     f'or swap file; the shell\'s *.yaml leaves them out too)')
    found = [p for p in found if not p.name.startswith('.')]
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
            raise TrainArgsRefusedError(f'{recipe} is refused: {e.refusal}', e.hint) from None
        except UserInputError as e:
            raise LaunchError(f'{recipe} is refused: {e}') from None
        _check_no_positional(recipe, plan.args)
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


def _check_no_positional(recipe: Path, args: Any) -> None:
    """Refuse a positional value the launch's train.py arguments gave train.py (its deprecated positional data
    folder ``data``: `pkmixer launch DIR OTHER_DIR`, or a value after a flag that takes none), which the recipe's own
    ``data`` (if any) does not explain."""
    given = getattr(args, 'data', None)
    if not given:
        return
    own = (load_yaml(read_text(recipe, not_a_recipe(recipe)) or '') or {}).get('data')
    if given != own:
        raise TrainArgsRefusedError(
            f'{recipe} is refused: train.py would take {given!r}, from the launch\'s train.py arguments, as its '
            f'positional data folder (its `data`): pkmixer launch takes one folder of recipes, and a run\'s data '
            f'is its recipe\'s data_dir (or --data-dir among the train.py arguments). Nothing was recorded or '
            f'started')


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


def _header(task: Task, at: Optional[int], resume: Optional[str], job: Optional[str]) -> str:
    where = f'{socket.gethostname()}{f" (SLURM job {job})" if job else ""}'
    return (f'=== {time.strftime("%Y-%m-%d %H:%M:%S")} on {where}: '
            f'{"resuming from epoch " + epoch_words([at]) if resume and at is not None else "starting"}\n'
            f'=== {" ".join(task.command(resume))}\n')


def _same_run(saved: Optional[Dict[str, Any]], args: Dict[str, Any]) -> str:
    """How the train.py arguments saved with a checkpoint show it another run's than the folder's args.yaml ('' when
    they agree, or when no arguments were saved): the seed, the model or its arguments."""
    if not saved:
        return ''
    out = []
    for key in ('seed', 'model', 'model_kwargs'):
        theirs, ours = saved.get(key), args.get(key)
        if key == 'model_kwargs':
            theirs, ours = theirs or {}, ours or {}
        if json.dumps(theirs, sort_keys=True, default=str) != json.dumps(ours, sort_keys=True, default=str):
            out.append(f'{key} {theirs!r}, this run\'s {ours!r}')
    return '; '.join(out)


def _resume_from(task: Task, so_far: Progress) -> Tuple[Optional[UserInputError], Optional[str], Optional[int]]:
    """(why the run may not start, or None; the checkpoint it resumes from, or None for a start from its first epoch;
    the epoch, from 0, it resumes at). A run folder is resumed only where resuming gives the run its args.yaml says:
    refused by name are a run whose values are not measurements (a diverged run resumed stays diverged), a recipe or
    train.py arguments changed since it started (its epochs would mix two of them), summary rows with no last.pth.tar
    (train.py would start over into the same summary.csv), a last.pth.tar that is not a whole checkpoint file, is
    another run's (its seed, model or model arguments) or is of an epoch that leaves the run unfinished for ever (at
    or past the schedule's end, or past epochs summary.csv lacks)."""
    run_dir = Path(task.run_dir)
    last = run_dir / 'last.pth.tar'
    again = f'move {run_dir} away to restart the run from its first epoch'
    if so_far.state == 'failed':
        return LaunchError(f'{run_dir} holds a run whose values are not measurements ({so_far.reason}): resuming '
                           f'would go on from them; {again}'), None, None
    if so_far.state != 'unfinished':
        return None, None, None
    if not os.path.lexists(last):
        if not so_far.done:
            return None, None, None  # no epoch done: a start from the first
        return LaunchError(f'{run_dir} holds summary rows up to epoch {so_far.done} but no last.pth.tar to resume '
                           f'from: train.py would start over into the same summary.csv; {again}, or put back its '
                           f'last.pth.tar'), None, None
    changed = launch_changes(run_dir)
    if changed:
        return LaunchError(f'{run_dir}: its recipe or the train.py arguments of its launch changed since it started '
                           f'({", ".join(changed)}): resuming would train its remaining epochs otherwise than its '
                           f'first; --rerun-stale restarts it in a fresh folder (this one moved aside), or put back '
                           f'what changed'), None, None
    try:
        mode = os.stat(last).st_mode
    except OSError as e:
        why = (f'a symlink to {os.readlink(last)}, which does not exist' if isinstance(e, FileNotFoundError) else
               'a symlink loop' if e.errno == errno.ELOOP else e.strerror)
        return LaunchError(f'{last} cannot be read ({why}), so the run cannot resume from it; {again}'), None, None
    if not stat.S_ISREG(mode):
        return LaunchError(f'{last} is not a regular file, so the run cannot resume from it; {again}'), None, None
    if not zipfile.is_zipfile(last):
        remedy = 'move it away to restart the run from its first epoch' if not so_far.done else again
        return CheckpointError(
            f'{last} is not a whole checkpoint (no zip directory at its end, as torch.save writes: cut short or '
            f'corrupt), so the run cannot resume from it; {remedy}, or put back a whole copy'), None, None
    try:
        info = read_checkpoint_info(last)
        other = _same_run(info.args, read_args_yaml(run_dir / ARGS_YAML))
    except RunFileError as e:
        return LaunchError(f'the run cannot resume: {e}; {again}'), None, None
    if other:
        return LaunchError(f'{last} was saved by another run ({other}): resuming from it would go on with that run; '
                           f'{again}, or put back its own last.pth.tar'), None, None
    at = info.next_epoch
    if at is not None and so_far.epochs and at >= so_far.epochs:
        return LaunchError(f'{last} is of epoch {epoch_words([at - 1])}, the end of the {so_far.epochs} epochs '
                           f'train.py runs or past it: resuming would train nothing and leave the run unfinished '
                           f'(no summary row for epoch {epoch_words(so_far.missing)}); {again}'), None, None
    lost = [e for e in so_far.missing if at is not None and e < at]
    if lost:
        return LaunchError(f'{run_dir}: summary.csv has no row for epoch {epoch_words(lost)}, which {last} (of epoch '
                           f'{epoch_words([at - 1])}) has passed: resuming cannot write them, and the run would stay '
                           f'unfinished; {again}, or put back its summary.csv'), None, None
    return None, str(last), at if at is not None else so_far.done


def _stuck(before: Progress, after: Progress) -> bool:
    """Whether a run that train.py ended with exit status 0 is unfinished without a summary row more than before:
    a relaunch would do the same for ever."""
    if after.state != 'unfinished':
        return False
    return not after.done if before.state == 'absent' else set(before.missing) <= set(after.missing)


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
    problem, resume, at = _resume_from(task, progress)
    if problem is not None:
        return _refuse(task, problem, job)
    header = _header(task, at, resume, job)
    earlier = read_record(state_dir, task.name).get('resumed') or []
    resumed = [*earlier, at] if resume else []  # the epochs (from 0) this run was resumed at
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
    try:
        after = run_progress(run_dir, task.schedule) if returncode == 0 else None
    except UserInputError:
        after = None  # a run folder that cannot be read: status names it
    if after is not None and _stuck(progress, after):  # said, and not started again by every relaunch
        reason = (f'train.py ended (exit status 0) with the run unfinished, no summary row written (epoch '
                  f'{after.done} of {after.epochs}; no row for epoch {epoch_words(after.missing)}): a relaunch would '
                  f'do the same; its log says why')
        with _log(task) as log:
            log.write(f'=== {time.strftime("%Y-%m-%d %H:%M:%S")}: failed: {reason}\n')
        write_record(state_dir, task.name, state='failed', returncode=returncode, reason=reason)
        return returncode
    write_record(state_dir, task.name, state=state, returncode=returncode)
    return returncode
