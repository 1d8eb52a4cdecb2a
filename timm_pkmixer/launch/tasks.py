"""One run of `pkmixer launch` as a task: its recipe and run folder, its record and log in the folder's
``launch/`` state, and its process (:func:`execute`, which resumes an unfinished run from its ``last.pth.tar``).
Executors (:mod:`.executors`) run tasks; :mod:`.launch` plans, locks and reports them."""
import json
import os
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

import yaml

from ..errors import UserInputError
from ..experiments.run_folder import load_yaml, run_state, yaml_reason

__all__ = ['STATE_DIR', 'STATES', 'LOG_TAIL', 'LaunchError', 'LaunchLockedError', 'Progress', 'run_progress',
           'find_recipes', 'default_run_dir', 'launch_state_dir', 'write_json', 'write_record', 'read_record',
           'log_tail', 'pid_alive', 'Task', 'plan_tasks', 'execute']

STATE_DIR = 'launch'
STATES = ('pending', 'running', 'finished', 'unfinished', 'failed', 'cancelled')
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

def launch_state_dir(folder: Path) -> Path:
    """Where `pkmixer launch` keeps a folder's lock, run records and logs (``FOLDER/launch``)."""
    return Path(folder) / STATE_DIR


def write_json(path: Path, data: Mapping[str, Any]) -> None:
    """`data` as JSON at `path`, replaced whole (written beside it, then renamed: a reader never sees half)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f'.{path.name}.{os.getpid()}.tmp')
    tmp.write_text(json.dumps(data, indent=1) + '\n', encoding='utf-8')
    os.replace(tmp, path)


def write_record(state_dir: Path, name: str, **fields: Any) -> None:
    """Update run `name`'s record (``runs/<name>.json``) with `fields` and the time."""
    path = Path(state_dir) / 'runs' / f'{name}.json'
    record = {**read_record(state_dir, name), **fields, 'time': time.time()}
    write_json(path, record)


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
    from ..experiments.train_py import find_train_py, prepare_train
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
        tasks.append(Task(recipe.stem, str(recipe), str(run_dir), tuple(argv), str(launch_state_dir(folder)), executor,
                          nproc))
    return tasks


def log_tail(path: Path, lines: int = LOG_TAIL) -> List[str]:
    """The last `lines` non-blank lines of a log (its last 16 KiB read); none if it cannot be read."""
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
