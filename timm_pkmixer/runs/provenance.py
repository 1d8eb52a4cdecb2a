"""What made a run: ``pkmixer_env.json`` in its run folder, written by ``pkmixer train`` when it runs train.py.

The file names the code and the machine arithmetic of the run (no host name, no machine path)::

    {"pkmixer_env": 1, "started": "2025-…Z",
     "pkmixer_version": "0.2.0", "pkmixer_commit": "fa003e8…" | null, "pkmixer_dirty": false | null,
     "torch": "2.…", "timm": "1.0.…", "python": "3.…", "train_py": "train.py", "train_py_sha256": "…",
     "device_type": "cpu" | "cuda" | …, "device": "<CPU model or CUDA device name>", "cpu": "<CPU model>",
     "threads": 1, "processes": 1, "flags": {"cpu_capability": "AVX2", "cuda_matmul_allow_tf32": …, …},
     "recorded_from_epoch": 0, "resumed_in": [{…later starts, same keys…}]}

The first start of a run is the file's top level; a ``--resume`` into the folder adds its own record to
``resumed_in``. ``recorded_from_epoch`` > 0: the folder held epochs of a start that recorded nothing.
:func:`environment_key` is what the report counts runs by: the commit, the versions, the device and the threads.

Every reader of an environment (the file, and the environment column of the report's epochs.csv) checks each known
key's type (:func:`check_environment`: ``pkmixer_dirty`` true, false or null, never ``"no"``; a flag a boolean; a
commit or version a string …) and names the key that is not, so that no word is read into a value it does not have
and no report is lost to a number where a string belongs. :func:`without_paths` keeps machine paths out of what is
written for others (epochs.csv, report.md).
"""
import re
from pathlib import Path
from typing import Any, Callable, Dict, Optional, Tuple

from ..state_files import read_json, write_json
from .run_folder import PathLike, RunFileError

__all__ = ['PROVENANCE_JSON', 'ENVIRONMENT_KEYS', 'read_provenance', 'record_provenance', 'environment_key',
           'describe_flags', 'NOT_RECORDED', 'check_environment', 'without_paths']

PROVENANCE_JSON = 'pkmixer_env.json'
# what the report tells environments apart by, in the order it shows them
ENVIRONMENT_KEYS = ('pkmixer_commit', 'pkmixer_dirty', 'pkmixer_version', 'torch', 'timm', 'python', 'train_py_sha256',
                    'device_type', 'device', 'threads', 'processes', 'flags')
NOT_RECORDED = 'not recorded'
_N = type(None)
_SHAPE = dict(started=(str,), threads=(int, _N), processes=(int, _N), flags=(dict,), resumed_in=(list,),
              recorded_from_epoch=(int,))
# every key collect_environment writes (training/provenance.py), with the types it writes
_START_SHAPE = dict(pkmixer_env=(int,), started=(str,), pkmixer_version=(str, _N), pkmixer_commit=(str, _N),
                    pkmixer_dirty=(bool, _N), torch=(str, _N), timm=(str, _N), python=(str, _N), train_py=(str, _N),
                    train_py_sha256=(str, _N), device_type=(str, _N), device=(str, _N), cpu=(str, _N),
                    threads=(int, _N), processes=(int, _N), flags=(dict,))
_FLAG_SHAPE = dict(cuda=(bool, _N), deterministic_algorithms=(bool, _N), float32_matmul_precision=(str, _N),
                   cpu_capability=(str, _N),
                   cuda_matmul_allow_tf32=(bool, _N), cudnn_allow_tf32=(bool, _N), cudnn_benchmark=(bool, _N),
                   cudnn_deterministic=(bool, _N), NVIDIA_TF32_OVERRIDE=(str, _N))
_TYPE_NAMES = {bool: 'true or false', int: 'an integer', str: 'a string', dict: 'an object', list: 'a list',
               _N: 'null'}


def _shape_fault(data: Dict[str, Any], shape: Dict[str, Tuple[type, ...]], where: str) -> str:
    for key, types in shape.items():
        if key not in data:
            continue
        value = data[key]
        if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
            wanted = ' or '.join(_TYPE_NAMES[t] for t in types)
            return f'{where}{key} is {value!r:.60}, not {wanted}'
    return ''


def check_environment(env: Any, problem: Callable[[str], Exception]) -> Dict[str, Any]:
    """`env` if it is an environment as `pkmixer train` records it: each known key of its top level, of each start
    in ``resumed_in`` and of their ``flags`` of the type :func:`~timm_pkmixer.training.provenance.collect_environment`
    writes; else ``raise problem(why)``, `why` naming the key and its value (``pkmixer_dirty is 'no', not true or
    false or null``). Keys it does not know are kept, unread."""
    if not isinstance(env, dict):
        raise problem('not a JSON object')
    starts = [('', env)]
    resumed = env.get('resumed_in', [])
    if not isinstance(resumed, list) or not all(isinstance(r, dict) for r in resumed):
        raise problem('resumed_in is not a list of objects')
    starts += [(f'resumed_in[{i}].', r) for i, r in enumerate(resumed)]
    for where, start in starts:
        fault = _shape_fault(start, {**_START_SHAPE, **(_SHAPE if not where else {})}, where)
        if not fault and isinstance(start.get('flags'), dict):
            fault = _shape_fault(start['flags'], _FLAG_SHAPE, f'{where}flags.')
        if fault:
            raise problem(fault)
    if isinstance(env.get('recorded_from_epoch'), int) and env['recorded_from_epoch'] < 0:
        raise problem(f'recorded_from_epoch is {env["recorded_from_epoch"]}, not an epoch count')
    return env


# an absolute path in a text: '/x/…', '~/…' or 'C:\…', from the start or after a space, quote, '=', ':', ',' or '('
_ABSOLUTE_PATH = re.compile(r'(?:(?<=^)|(?<=[\s\'"=:,(]))(?:~|[A-Za-z]:)?[/\\][^\s\'",;)]*')


def without_paths(value: Any) -> Any:
    """`value` (text, or JSON-like lists and mappings of it) with every absolute path cut to its last component
    (``/home/me/timm/train.py`` → ``train.py``): what is written for others holds no machine path."""
    if isinstance(value, str):
        return _ABSOLUTE_PATH.sub(lambda m: re.split(r'[/\\]', m.group(0).rstrip('/\\'))[-1], value)
    if isinstance(value, dict):
        return {k: without_paths(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [without_paths(v) for v in value]
    return value


def read_provenance(folder: PathLike) -> Optional[Dict[str, Any]]:
    """The run folder's ``pkmixer_env.json``, or None when it has none.

    Raises:
        RunFileError: the file is not one (not a regular file, not JSON, not of its shape: a known key of another
            type than `pkmixer train` writes is named, :func:`check_environment`).
    """
    path = Path(folder) / PROVENANCE_JSON

    def problem(why: str) -> RunFileError:
        return RunFileError(f'{path}: not a {PROVENANCE_JSON} of `pkmixer train` ({why})')
    env = read_json(path, problem, _SHAPE)
    return None if env is None else check_environment(env, problem)


def record_provenance(folder: PathLike, environment: Dict[str, Any], earlier_epochs: int = 0) -> None:
    """Write `environment` (one start of train.py, told apart by its ``started``) into the folder's file: as the
    file's top level when there is none or it is this start's; else as this start's entry of ``resumed_in``.
    `earlier_epochs`: the summary rows the folder held before this first record (a start that recorded nothing)."""
    folder = Path(folder)
    try:
        existing = read_provenance(folder)
    except RunFileError:
        existing = None  # a broken file is replaced by what is known now
    if existing is None or existing.get('started') == environment.get('started'):
        resumed = existing.get('resumed_in', []) if existing else []
        first = existing.get('recorded_from_epoch', earlier_epochs) if existing else earlier_epochs
        write_json(folder / PROVENANCE_JSON, {**environment, 'recorded_from_epoch': first, 'resumed_in': resumed})
        return
    resumed = [r for r in existing.get('resumed_in', []) if isinstance(r, dict)
               and r.get('started') != environment.get('started')]
    write_json(folder / PROVENANCE_JSON, {**existing, 'resumed_in': resumed + [environment]})


def describe_flags(flags: Any) -> str:
    """The arithmetic flags in a few words: on CUDA, TF32 (on only where train.py allowed it and NVIDIA_TF32_OVERRIDE
    does not forbid it), deterministic algorithms, cuDNN autotuning; on a CPU, the instruction set of torch's kernels
    (``AVX2 kernels``; '' where the run did not record it)."""
    if not isinstance(flags, dict):
        return ''
    if not flags.get('cuda'):
        capability = flags.get('cpu_capability')
        return f'{capability} kernels' if isinstance(capability, str) and capability else ''
    tf32 = bool(flags.get('cuda_matmul_allow_tf32') or flags.get('cudnn_allow_tf32')) and \
        flags.get('NVIDIA_TF32_OVERRIDE') != '0'
    words = [f'TF32 {"on" if tf32 else "off"}']
    if flags.get('NVIDIA_TF32_OVERRIDE') is not None:
        words[0] += f' (NVIDIA_TF32_OVERRIDE={flags["NVIDIA_TF32_OVERRIDE"]})'
    if flags.get('deterministic_algorithms') or flags.get('cudnn_deterministic'):
        words.append('deterministic')
    if flags.get('cudnn_benchmark'):
        words.append('cuDNN autotuning')
    return ', '.join(words)


def environment_key(env: Optional[Dict[str, Any]]) -> Tuple[Tuple[Any, ...], str]:
    """What tells the environment of a run apart: one value per :data:`ENVIRONMENT_KEYS` (the flags in words, no
    machine path) of its first start (an environment :func:`check_environment` accepts), and a note ('' when none):
    resumed in another environment, epochs that a start before the record made. A run without a record:
    ((:data:`NOT_RECORDED`,), '')."""
    if not env:
        return (NOT_RECORDED,), ''
    def values(e: Dict[str, Any]) -> Tuple[Any, ...]:
        return tuple(describe_flags(e.get(k)) if k == 'flags' else without_paths(e.get(k)) for k in ENVIRONMENT_KEYS)
    first = values(env)
    notes = []
    if any(isinstance(r, dict) and values(r) != first for r in env.get('resumed_in') or []):
        notes.append('resumed in another environment')
    if env.get('recorded_from_epoch'):
        notes.append(f'epochs before {env["recorded_from_epoch"]} not recorded')
    return first, '; '.join(notes)
