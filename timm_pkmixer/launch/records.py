"""A launched folder's records in ``DIR/launch/``: one per run (``runs/<name>.json``: its last state as the launcher
saw it, the process or job that runs it, its run folder and recipe), the train.py arguments the folder's launches
give every run (``train_args.json``) and the folder's id (``folder.json``). Paths in them are relative to DIR, so
a moved folder keeps every record; a PID is kept with its start time and boot (:mod:`.liveness`)."""
import json
import os
import shlex
import socket
import time
import uuid
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ..state_files import create_json, read_json, write_json
from .errors import StateFileError, TrainArgsChangedError, TrainArgsRefusedError, state_file
from .liveness import identity

__all__ = ['STATE_DIR', 'launch_state_dir', 'record_path', 'write_record', 'read_record', 'folder_id',
           'read_train_args', 'settle_train_args', 'record_train_args', 'train_args_differences',
           'MAX_TRAIN_ARGS_BYTES', 'check_launch_train_args']

STATE_DIR = 'launch'
_N = type(None)
_RECORD_SHAPE = dict(state=(str,), pid=(int, _N), host=(str, _N), job=(str, _N), executor=(str, _N),
                     run_dir=(str,), recipe=(str,), returncode=(int, _N), time=(int, float), pid_start=(int, _N),
                     boot_id=(str, _N), digest=(str, _N), schedule=(dict, _N), reason=(str, _N),
                     resumed=(list, _N))
_PATH_KEYS = ('run_dir', 'recipe')


def launch_state_dir(folder: Path) -> Path:
    """Where `pkmixer launch` keeps a folder's lock, run records and logs (``FOLDER/launch``)."""
    return Path(folder) / STATE_DIR


def _remedy(state_dir: Path) -> str:
    return f'remove it if no launch of {Path(state_dir).parent} is running (the next launch writes it anew)'


def record_path(state_dir: Path, name: str) -> Path:
    return Path(state_dir) / 'runs' / f'{name}.json'


def read_record(state_dir: Path, name: str) -> Dict[str, Any]:
    """Run `name`'s record ({} if there is none), its paths absolute. Raises :class:`StateFileError` for one that
    is not a run record (not a regular file, not JSON, a field of the wrong type)."""
    path = record_path(state_dir, name)
    record = read_json(path, state_file(path, 'a run record of pkmixer launch', _remedy(state_dir)),
                       _RECORD_SHAPE) or {}
    folder = Path(state_dir).parent
    return {**record, **{k: str(folder / record[k]) for k in _PATH_KEYS if k in record}}


def write_record(state_dir: Path, name: str, **fields: Any) -> None:
    """Update run `name`'s record with `fields` and the time: paths are kept relative to the folder, a PID of this
    host with its start time and boot."""
    folder = Path(state_dir).parent.absolute()
    for key in _PATH_KEYS:
        if fields.get(key) is not None:
            fields[key] = os.path.relpath(Path(fields[key]).absolute(), folder)
    if 'pid' in fields and 'pid_start' not in fields:
        mine = fields['pid'] is not None and fields.get('host') in (None, socket.gethostname())
        fields.update(identity(fields['pid']) if mine else dict(pid_start=None, boot_id=None))
    record = {**read_record(state_dir, name), **fields, 'time': time.time()}
    for key in _PATH_KEYS:
        if key in record and os.path.isabs(record[key]):
            record[key] = os.path.relpath(record[key], folder)
    write_json(record_path(state_dir, name), record)


def folder_id(state_dir: Path, create: bool = False) -> Optional[str]:
    """The launched folder's id (``folder.json``; kept when the folder moves): what a run folder's launch marker
    names as its owner. `create`: make one if there is none (None otherwise)."""
    path = Path(state_dir) / 'folder.json'
    shape = dict(id=(str,))
    problem = state_file(path, 'the id of a launched folder', _remedy(state_dir))
    record = read_json(path, problem, shape)
    if record is None and create:
        create_json(path, dict(id=uuid.uuid4().hex, created=time.time()))
        record = read_json(path, problem, shape)
    return record.get('id') if record else None


def read_train_args(state_dir: Path) -> Optional[List[str]]:
    """The train.py arguments recorded by the folder's launches (None: never recorded)."""
    path = Path(state_dir) / 'train_args.json'
    record = read_json(path, state_file(path, "the launch's train.py arguments", _remedy(state_dir)),
                       dict(train_args=(list,)))
    if record is None:
        return None
    args = record.get('train_args')
    if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        raise StateFileError(f"{path} is not the launch's train.py arguments (train_args is not a list of "
                             f"strings): {_remedy(state_dir)}")
    return args


def _is_flag(arg: str) -> bool:
    if not arg.startswith('-') or arg == '-':
        return False
    try:
        float(arg)
        return False  # a negative number is a value
    except ValueError:
        return True


def _options(args: Sequence[str]) -> Dict[str, str]:
    """train.py arguments by option: ``--flag`` (``--flag=v`` too) → its values as typed (repeats joined; values before
    any option under '')."""
    values: Dict[str, List[str]] = {}
    key = ''
    for arg in args:
        if _is_flag(arg):
            key, sep, value = arg.partition('=')
            values.setdefault(key, []).extend([value] if sep else [])
        else:
            values.setdefault(key, []).append(arg)
    return {k: shlex.join(v) for k, v in values.items()}


MAX_TRAIN_ARGS_BYTES = 1 << 16  # the launch's train.py arguments, as JSON: recorded, in every marker and command line


def _is_config(arg: str) -> bool:
    """Whether train.py's config parser (``-c`` / ``--config``, read before the rest, abbreviations allowed) takes
    `arg` as its flag: ``-c``, ``-cFILE``, ``--config``, ``--conf``, ``--config=FILE`` …"""
    flag = arg.split('=', 1)[0]
    return arg.startswith('-c') or (len(flag) > 2 and flag.startswith('--') and '--config'.startswith(flag))


def check_launch_train_args(args: Sequence[str]) -> None:
    """Refuse, before anything is written, train.py arguments a launch cannot give every run, as a
    :class:`TrainArgsRefusedError` naming them: train.py's ``--config`` (any spelling its config parser takes),
    which would replace every run's recipe; values before any option, which train.py takes as its positional data
    folder (`pkmixer launch DIR OTHER_DIR`); more than :data:`MAX_TRAIN_ARGS_BYTES` in all (they are recorded with
    the folder, in every run folder's marker and on every run's command line, and read back by status and launch)."""
    config = [a for a in args if _is_config(a)]
    if config:
        raise TrainArgsRefusedError(f'{config[0]} is train.py\'s --config: a launch runs each recipe as train.py\'s '
                                    f'config (pkmixer train RECIPE), and a --config among the train.py arguments would '
                                    f'replace every recipe; give its keys as train.py arguments, or put them in the '
                                    f'recipes. Nothing was recorded or started')
    loose = _options(args).get('')
    if loose:
        raise TrainArgsRefusedError(f'{loose} would reach train.py as its positional data folder (`data`): pkmixer '
                                    f'launch takes one folder of recipes, and a run\'s data is its recipe\'s data_dir '
                                    f'(or --data-dir among the train.py arguments). Nothing was recorded or started')
    size = len(json.dumps(list(args)))
    if size > MAX_TRAIN_ARGS_BYTES:
        counts: Dict[str, int] = {}
        key = ''
        for arg in args:
            key = arg.split('=', 1)[0] if _is_flag(arg) else key
            counts[key] = counts.get(key, 0) + (not _is_flag(arg) or '=' in arg)
        flag, most = max(counts.items(), key=lambda kv: kv[1])
        raise TrainArgsRefusedError(f'the train.py arguments take {size:,} bytes ({len(args):,} arguments; {flag} '
                                    f'{most:,} values): more than the {MAX_TRAIN_ARGS_BYTES:,} a launch records with '
                                    f'the folder and gives every run on its command line; give fewer. Nothing was '
                                    f'recorded or started')


def train_args_differences(recorded: Sequence[str], given: Sequence[str]) -> List[str]:
    """Each option whose value differs between `recorded` and `given` train.py arguments, said in a phrase
    (their order does not count)."""
    then, now = _options(recorded), _options(given)
    out = []
    for key in sorted(set(then) | set(now)):
        name = key or 'the values before any option'
        if key not in now:
            out.append(f'{name} {then[key]}'.rstrip() + ' was given then, not now')
        elif key not in then:
            out.append(f'{name} {now[key]}'.rstrip() + ' is new')
        elif then[key] != now[key]:
            out.append(f'{name}: {then[key] or "(no value)"} then, {now[key] or "(no value)"} now')
    return out


def settle_train_args(state_dir: Path, given: Sequence[str], change: bool = False) -> Tuple[List[str], bool, bool]:
    """The train.py arguments of this launch, whether they are the recorded ones reused, and whether they are still
    to be recorded (:func:`record_train_args`, once every recipe has accepted them): the first launch (or `change`)
    takes `given`; a relaunch given none reuses the recorded ones, given the same ones (in any order) keeps them;
    given others, :class:`TrainArgsChangedError` names each difference. Writes nothing."""
    path = Path(state_dir) / 'train_args.json'
    recorded = read_train_args(state_dir)
    if recorded is None or change:
        return list(given), False, recorded != list(given)
    if not given:
        return recorded, bool(recorded), False
    differences = train_args_differences(recorded, given)
    if differences:
        raise TrainArgsChangedError(Path(state_dir).parent, path, recorded, list(given), differences)
    return recorded, False, False


def record_train_args(state_dir: Path, args: Optional[Sequence[str]]) -> None:
    """Record `args` as the train.py arguments of the folder's launches (None: remove the record, as before the first
    launch)."""
    path = Path(state_dir) / 'train_args.json'
    if args is None:
        path.unlink(missing_ok=True)
    else:
        write_json(path, dict(train_args=list(args), time=time.time()))
