"""What made a run: ``pkmixer_env.json`` in its run folder, written by ``pkmixer train`` when it runs train.py.

The file names the code and the machine arithmetic of the run (no host name, no machine path)::

    {"pkmixer_env": 1, "started": "2025-…Z",
     "pkmixer_version": "0.2.0", "pkmixer_commit": "fa003e8…" | null, "pkmixer_dirty": false | null,
     "torch": "2.…", "timm": "1.0.…", "python": "3.…", "train_py": "train.py", "train_py_sha256": "…",
     "device_type": "cpu" | "cuda" | …, "device": "<CPU model or CUDA device name>", "cpu": "<CPU model>",
     "threads": 1, "processes": 1, "flags": {"cuda_matmul_allow_tf32": …, "NVIDIA_TF32_OVERRIDE": …, …},
     "recorded_from_epoch": 0, "resumed_in": [{…later starts, same keys…}]}

The first start of a run is the file's top level; a ``--resume`` into the folder adds its own record to
``resumed_in``. ``recorded_from_epoch`` > 0: the folder held epochs of a start that recorded nothing.
:func:`environment_key` is what the report counts runs by: the commit, the versions, the device and the threads.
"""
from pathlib import Path
from typing import Any, Dict, Optional, Tuple

from ..state_files import read_json, write_json
from .run_folder import PathLike, RunFileError

__all__ = ['PROVENANCE_JSON', 'ENVIRONMENT_KEYS', 'read_provenance', 'record_provenance', 'environment_key',
           'describe_flags', 'NOT_RECORDED']

PROVENANCE_JSON = 'pkmixer_env.json'
# what the report tells environments apart by, in the order it shows them
ENVIRONMENT_KEYS = ('pkmixer_commit', 'pkmixer_dirty', 'pkmixer_version', 'torch', 'timm', 'python', 'train_py_sha256',
                    'device_type', 'device', 'threads', 'processes', 'flags')
NOT_RECORDED = 'not recorded'
_SHAPE = dict(started=(str,), threads=(int, type(None)), processes=(int, type(None)), flags=(dict,),
              resumed_in=(list,), recorded_from_epoch=(int,))


def read_provenance(folder: PathLike) -> Optional[Dict[str, Any]]:
    """The run folder's ``pkmixer_env.json``, or None when it has none.

    Raises:
        RunFileError: the file is not one (not a regular file, not JSON, not of its shape).
    """
    path = Path(folder) / PROVENANCE_JSON
    return read_json(path, lambda why: RunFileError(f'{path}: not a {PROVENANCE_JSON} of `pkmixer train` ({why})'),
                     _SHAPE)


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
    """The arithmetic flags in a few words: TF32 (on only where train.py allowed it and NVIDIA_TF32_OVERRIDE does
    not forbid it), deterministic algorithms, cuDNN autotuning; '' on a CPU run (none of them apply)."""
    if not isinstance(flags, dict) or not flags.get('cuda'):
        return ''
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
    """What tells the environment of a run apart: one value per :data:`ENVIRONMENT_KEYS` (the flags in words) of its
    first start, and a note ('' when none): resumed in another environment, epochs that a start before the record
    made. A run without a record: ((:data:`NOT_RECORDED`,), '')."""
    if not env:
        return (NOT_RECORDED,), ''
    def values(e: Dict[str, Any]) -> Tuple[Any, ...]:
        return tuple(describe_flags(e.get(k)) if k == 'flags' else e.get(k) for k in ENVIRONMENT_KEYS)
    first = values(env)
    notes = []
    if any(isinstance(r, dict) and values(r) != first for r in env.get('resumed_in') or []):
        notes.append('resumed in another environment')
    if env.get('recorded_from_epoch'):
        notes.append(f'epochs before {env["recorded_from_epoch"]} not recorded')
    return first, '; '.join(notes)
