"""`pkmixer launch DIR [--executor local|slurm] [executor options] [train.py args…]`: every recipe of a folder run
through `pkmixer train`, on this machine or as one SLURM job array; a relaunch skips finished runs, resumes
unfinished ones and reuses the first launch's train.py arguments."""
import argparse
import contextlib
import dataclasses
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, Iterator, List

from ..validation import closest_flags
from ._common import add_command, in_flag_terms, progress

__all__ = ['add_commands']

TRAIN_PY_ENV = 'TIMM_TRAIN_PY'
_BACKGROUND_ENV = 'PKMIXER_LAUNCH_BACKGROUND'  # set in the background launcher `--no-wait` starts (local)


def _flag(name: str) -> str:
    return '--' + name.replace('_', '-')


def _executor_options() -> Dict[str, Dict[str, Any]]:
    """{field name: {executors that take it, its argparse keywords}} over every executor's fields."""
    from ..launch.executors import EXECUTORS
    options: Dict[str, Dict[str, Any]] = {}
    for name, cls in EXECUTORS.items():
        for f in dataclasses.fields(cls):
            if 'help' not in f.metadata:
                continue
            entry = options.setdefault(f.name, dict(executors=[], kwargs=dict(help=f.metadata['help'])))
            entry['executors'].append(name)
            for key in ('type', 'nargs', 'action'):
                if key in f.metadata:
                    entry['kwargs'][key] = f.metadata[key]
    return options


def _make_executor(args: argparse.Namespace) -> Any:
    from ..errors import InvalidArgumentError
    from ..launch.executors import EXECUTORS
    cls = EXECUTORS[args.executor]
    taken = {f.name for f in dataclasses.fields(cls)}
    given = {name: getattr(args, name) for name in _executor_options() if hasattr(args, name)}
    wrong = [name for name in given if name not in taken]
    if wrong:
        owners = _executor_options()[wrong[0]]['executors']
        raise InvalidArgumentError(f'{_flag(wrong[0])} is an option of --executor {" / ".join(owners)}, not of '
                                   f'--executor {args.executor}')
    return cls(**given)


def _say(line: str) -> None:
    """A result line on stdout; once its reader has gone (``| head -1``) stdout is pointed at /dev/null and nothing
    more is said there: the runs go on, the launcher still ends them. (Progress is logged: :mod:`._stderr`.)"""
    try:
        print(line, flush=True)
    except (BrokenPipeError, ValueError):
        with contextlib.suppress(OSError, ValueError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


def _print_end(status: Any, k: int, n: int) -> None:
    _say(f'[pkmixer launch] {k}/{n} {status.line()}')


def _argv(args: argparse.Namespace, rest: List[str]) -> List[str]:
    """This launch's command line again (for the background launcher), without --no-wait."""
    argv = ['launch', args.dir, '--executor', args.executor]
    for name in _executor_options():
        if hasattr(args, name):
            value = getattr(args, name)
            argv += [_flag(name), *map(str, value)] if isinstance(value, list) else [_flag(name), str(value)]
    argv += ['--train-py', args.train_py] if args.train_py else []
    argv += ['--retry-failed'] if args.retry_failed else []
    argv += ['--new-train-args'] if args.new_train_args else []
    argv += ['--rerun-stale'] if args.rerun_stale else []
    return argv + (['--', *rest] if rest else [])


def _background(args: argparse.Namespace, argv: List[str]) -> int:
    """`--no-wait` for an executor whose runs end with their launcher: the launch goes on in a background
    process (its output in DIR/launch/launcher.log); return once it holds the folder's lock and has checked every
    recipe (the lock says ``planned``), or with its refusal (its exit status and last line) if it ends first."""
    from ..errors import UserInputError
    from ..launch.errors import state_file
    from ..launch.lock import read_lock
    from ..launch.records import STATE_DIR
    from ..state_files import open_log, read_tail
    log_path = Path(args.dir) / STATE_DIR / 'launcher.log'
    problem = state_file(log_path, "the background launcher's log", 'remove it if no launch of the folder is running')
    fresh = dict(folder=not log_path.parent.exists(), log=not os.path.lexists(log_path))  # put back if refused
    with open_log(log_path, problem) as log:
        start = log.tell()
        proc = subprocess.Popen([sys.executable, '-m', 'timm_pkmixer', *argv], stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True,
                                env=dict(os.environ, **{_BACKGROUND_ENV: '1'}))

    def planned() -> bool:
        try:
            lock = read_lock(Path(args.dir))
        except UserInputError:
            return False
        return lock.get('pid') == proc.pid and bool(lock.get('planned'))
    while proc.poll() is None and not planned():
        time.sleep(0.2)
    if proc.poll() is not None:
        lines = (read_tail(log_path, problem, max(0, log_path.stat().st_size - start)) or '').strip().splitlines()
        if proc.returncode:
            print(lines[-1] if lines else f'{args.prog}: the background launch failed (exit status '
                                          f'{proc.returncode}; log {log_path})', file=sys.stderr)
            if proc.returncode == 2:  # refused (a bug's traceback stays in the log): the folder as it was
                with contextlib.suppress(OSError):
                    if fresh['log']:
                        log_path.unlink()
                    if fresh['folder']:
                        log_path.parent.rmdir()
            return proc.returncode
        for line in [line for line in lines if line.startswith('[pkmixer launch] ') and ' checking ' not in line]:
            print(line)  # it ended at once: nothing to launch
        return 0
    print(f'[pkmixer launch] launching in the background (PID {proc.pid}, log {log_path}); '
          f'`pkmixer status {args.dir}` follows it')
    return 0


def _raise_interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def _skipped(result: Any) -> str:
    skipped = ', '.join(f'{len(v)} {k}' for k, v in result.skipped.items() if v)
    hints = [hint for key, hint in (('stale', '--rerun-stale reruns the stale (their recipe or train.py arguments '
                                              'changed since they ran) into a fresh folder'),
                                    ('failed', '--retry-failed reruns the failed')) if result.skipped.get(key)]
    return f' (skipped: {skipped}{"; " + "; ".join(hints) if hints else ""})' if skipped else ''


def probable_launcher_flags(rest: List[str], launcher_flags: List[str]) -> List[str]:
    """The flags among train.py's arguments `rest` that look like a misspelt flag of `pkmixer launch` (a prefix of
    one, or close to one), each said with the flag it probably is."""
    out = []
    long_flags = [f for f in launcher_flags if f.startswith('--') and f not in ('--help',)]
    for arg in rest:
        flag = arg.split('=', 1)[0]
        if not flag.startswith('--') or flag in long_flags or flag == '--':
            continue
        prefixed = [f for f in long_flags if f.startswith(flag)]
        close = prefixed or [*closest_flags([flag], long_flags, cutoff=0.8).values()]
        if close:
            out.append(f'{flag} (probably {close[0]}, a flag of pkmixer launch)')
    return out


@contextlib.contextmanager
def _in_launch_terms(args: argparse.Namespace, rest: List[str]) -> Iterator[None]:
    """The launch's refusals said in the command's terms: its options as flags (``--train-py``, ``--executor``,
    ``--new-train-args``), and a train.py refusal of an argument that looks like a misspelt launcher flag with
    that flag."""
    from ..errors import InvalidArgumentError
    from ..launch.errors import TrainArgsChangedError, TrainArgsRefusedError
    from ..training.train_py import TrainPyError, missing_train_py_message
    try:
        with in_flag_terms(args, 'executor', *_executor_options()):
            yield
    except TrainPyError as e:
        raise InvalidArgumentError(f'{e.reason}\n{missing_train_py_message("pass --train-py PATH/train.py")}') from None
    except TrainArgsChangedError as e:
        raise InvalidArgumentError(e.explain('--new-train-args')) from None
    except TrainArgsRefusedError as e:
        probable = probable_launcher_flags(rest, args.launcher_flags)
        if not probable:
            raise
        # train.py's own guess (e.hint) gives way to the launcher's
        raise TrainArgsRefusedError(f'{e.refusal}. Every argument pkmixer launch does not know goes to train.py: '
                                    f'{"; ".join(probable)}? Nothing was recorded or started') from None


def _launch(args: argparse.Namespace, executor: Any, rest: List[str]) -> Any:
    from ..launch.launcher import launch
    with _in_launch_terms(args, rest):
        return launch(Path(args.dir), executor, rest, args.train_py, args.retry_failed,
                      not args.no_wait or not executor.detached, _print_end, new_train_args=args.new_train_args,
                      rerun_stale=args.rerun_stale)


def run(args: argparse.Namespace) -> int:
    executor = _make_executor(args)
    rest = [a for a in args.rest if a != '--']
    if args.no_wait and not executor.detached and not os.environ.get(_BACKGROUND_ENV):
        from ..launch.launcher import check_without_torch
        from ..launch.tasks import find_recipes
        with _in_launch_terms(args, rest):  # what is refused at once is refused here, before a process is started
            executor.check()
            find_recipes(Path(args.dir))
            check_without_torch(Path(args.dir).absolute(), rest, args.train_py, args.new_train_args)
        return _background(args, _argv(args, rest))
    if threading_main():
        signal.signal(signal.SIGTERM, _raise_interrupt)  # a killed launcher stops its runs as Ctrl-C does
    try:
        result = _launch(args, executor, rest)
    except KeyboardInterrupt:
        progress(f'[pkmixer launch] interrupted: the runs on this machine are stopped (a batch job keeps running); a '
                 f'relaunch resumes the unfinished runs (`pkmixer status {args.dir}`)')
        return 130
    skipped = _skipped(result)
    if not result.started:
        _say(f'[pkmixer launch] nothing to launch in {args.dir}{skipped}')
        return 0
    where = f' as SLURM job array {result.job}' if result.job else ''
    if args.no_wait and executor.detached:
        _say(f'[pkmixer launch] submitted {len(result.started)} runs{where}{skipped}; '
             f'`pkmixer status {args.dir}` follows them')
        return 0
    done = sum(s.state == 'finished' for s in result.ended)
    _say(f'[pkmixer launch] {done} of {len(result.started)} runs finished{where}{skipped}; '
         f'`pkmixer report {shlex.quote(args.dir)}` reads them (into {shlex.quote(args.dir)}/report)')
    return 0 if result.ok else 1


def threading_main() -> bool:
    import threading
    return threading.current_thread() is threading.main_thread()


def add_commands(subparsers: argparse._SubParsersAction) -> None:
    from ..launch.executors import EXECUTORS
    p = add_command(
        subparsers, 'launch', run, allow_abbrev=False,
        usage='%(prog)s DIR [--executor local|slurm] [options] [train.py arguments …]',
        help='run every recipe of a folder (a sweep) through pkmixer train: on this machine or on SLURM',
        description='Run every recipe of DIR (what `pkmixer sweep --out-dir DIR` writes) through `pkmixer train`, '
                    'each in its own process: on this machine (--workers, --gpus) or as one SLURM job array '
                    '(submitit). Runs land in DIR/runs/<recipe name> unless a recipe says otherwise. A relaunch '
                    'skips finished runs, resumes unfinished ones from their last.pth.tar, reruns failed ones '
                    'with --retry-failed and stale ones (their recipe changed since they ran) with --rerun-stale, '
                    'and gives every run the train.py arguments of the first launch (recorded in '
                    'DIR/launch/train_args.json) unless --new-train-args. Progress (each recipe checked, each '
                    "run's start and end with its log) goes to stderr, results to stdout.",
        epilog='Every other argument goes to train.py for every run (after `--` too, e.g. `-- --workers 4` for '
               "train.py's own --workers).")
    p.set_defaults(rest=[])
    p.add_argument('dir', help='a folder of recipes, e.g. what `pkmixer sweep --out-dir DIR` wrote')
    p.add_argument('--executor', choices=list(EXECUTORS), default='local', help='where the runs go (default local)')
    p.add_argument('--train-py', default=None, help=f"path of timm's train.py (default: ${TRAIN_PY_ENV})")
    p.add_argument('--retry-failed', action='store_true', help='rerun the runs that failed (resuming when they can)')
    p.add_argument('--new-train-args', action='store_true',
                   help='change on purpose the train.py arguments recorded by the first launch of DIR (a relaunch '
                        'without train.py arguments reuses them; with other ones it is refused without this flag)')
    p.add_argument('--rerun-stale', action='store_true',
                   help='rerun the stale runs (their recipe or train.py arguments changed since they started) into '
                        'a fresh folder; the old one is moved aside to <run folder>.stale-<k>')
    p.add_argument('--no-wait', action='store_true', help='return once the runs are started')
    for name, entry in _executor_options().items():
        p.add_argument(_flag(name), dest=name, default=argparse.SUPPRESS,
                       **{**entry['kwargs'], 'help': f'[{"/".join(entry["executors"])}] {entry["kwargs"]["help"]}'})
    p.set_defaults(launcher_flags=sorted(p._option_string_actions))
