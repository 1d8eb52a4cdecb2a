"""Reading a trained checkpoint and checking it against the model it is meant for (``pkmixer push``, ``pkmixer
expand`` and ``pkmixer analyze`` start here; `hub` writes and uploads what they publish).

Every file is identified by its first bytes before anything reads it (:func:`identify_checkpoint`): a torch
checkpoint (torch.save's zip archive, or its legacy pickle with torch's magic number) or a safetensors file (an
8-byte header length, then its JSON header), its name agreeing with its content as timm's scripts require (they
choose the reader by the name). Anything else (a folder, a FIFO or device, an empty file, a CSV, YAML, JSON or other
text, a tar, gzip or zip archive torch did not write, a plain pickle, an unknown binary) is refused naming what it
is and what was expected, and is never unpickled. Checkpoints are then read safely: safetensors, or
``torch.load(weights_only=True)``; a run's ``args.yaml`` by :mod:`timm_pkmixer.runs.run_folder` (safe YAML: a
``!!python`` tag is refused, never executed; aliases bounded). What the checkpoint holds is checked by name (its
weights a mapping of names to tensors, its epoch an integer, its arguments train.py's; EMA weights taken only when
asked for, as timm's loaders take them). The checked model is built as it was trained (the run's arguments, then
the caller's) and loads the weights strictly: another architecture, S, C, depth, permutation or mask seed is
refused, and so are digests cast to a float dtype and non-finite weights.
"""
import argparse
import csv
import json
import numbers
import os
import pickle
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Optional, Tuple

import torch
import yaml
from timm.models import clean_state_dict

from ..catalog import check_model_kwargs, is_pkmixer_model
from ..errors import ArgumentValueError, CheckpointError, CheckpointMismatchError, InvalidArgumentError
from ..layers.structure import DerivedStructure
from ..runs.run_folder import CHECKPOINTS, RunFileError, check_train_args, find_checkpoint, read_args_yaml
from ..state_files import load_yaml, open_regular

__all__ = ['TrainingCheckpoint', 'EXPECTED', 'identify_checkpoint', 'load_checkpoint_file', 'read_train_args',
           'read_checkpoint', 'check_finite', 'check_digests', 'trained_model_name', 'build_validated_model',
           'TrainedModel', 'load_trained_model']

# what push, expand and analyze read, said when a file is none of it
EXPECTED = ("expected train.py's checkpoint (last.pth.tar or model_best.pth.tar: a torch zip archive), a state dict "
            "saved by torch.save, or a .safetensors file")
TORCH, SAFETENSORS = 'torch', 'safetensors'  # the two formats read (identify_checkpoint)
# torch.save's legacy (non-zip) format begins with its magic number pickled at protocol 2
_TORCH_LEGACY_MAGIC = b'\x80\x02\x8a\nl\xfc\x9cF\xf9 j\xa8P\x19'
_ZIP_MAGICS = (b'PK\x03\x04', b'PK\x05\x06')  # a zip's first entry, or an empty zip's end record
_SNIFF_BYTES = 1 << 16
# other formats by their first bytes: (offset, magic, what the file is)
_OTHER_MAGICS = ((0, b'\x1f\x8b', 'a gzip archive'), (0, b'\x93NUMPY', 'a NumPy .npy array'),
                 (0, b'\x89HDF\r\n\x1a\n', 'an HDF5 file'), (0, b'\x89PNG\r\n\x1a\n', 'a PNG image'),
                 (0, b'\xff\xd8\xff', 'a JPEG image'),
                 (257, b'ustar', "a tar archive (train.py's .pth.tar is a torch zip archive, not a tar, whatever its "
                                 "name)"))
_READERS = "timm's scripts choose the reader by the name (.safetensors: safetensors, any other: torch.load)"


def _text_kind(text: str, complete: bool) -> str:
    """What a text file is: JSON, YAML (a mapping), CSV (rows of one field count ≥ 2) or other text, asked in that
    order. `complete`: the whole file (else its first lines, the last of them whole)."""
    if not text.strip():
        return 'a text file of blank lines'
    if complete:
        try:
            if isinstance(json.loads(text), (dict, list)):
                return 'a JSON text file'
        except ValueError:
            pass
    try:
        if isinstance(load_yaml(text), dict):
            return 'a YAML text file'
    except (yaml.YAMLError, RecursionError):
        pass
    lines = [line for line in text.splitlines() if line.strip()][:50]
    widths = {len(row) for row in csv.reader(lines)}
    if len(widths) == 1 and widths.pop() >= 2:
        return 'a CSV text file'
    return 'a text file'


def _as_text(head: bytes, complete: bool) -> Optional[str]:
    """`head` as UTF-8 text without NUL bytes (a character cut at the end of an incomplete read forgiven), else None."""
    if b'\x00' in head:
        return None
    if not complete:
        head = head[:head.rfind(b'\n') + 1] or head
    try:
        return head.decode('utf-8')
    except UnicodeDecodeError as e:
        if complete or e.start < len(head) - 3:
            return None
        return head[:e.start].decode('utf-8')


def _zip_kind(f: Any) -> Optional[str]:
    """None for torch.save's zip archive (an ``…/data.pkl`` entry) or a zip whose directory cannot be read (a
    truncated checkpoint: torch.load says how); else what the zip is."""
    try:
        names = zipfile.ZipFile(f).namelist()
    except (zipfile.BadZipFile, OSError, ValueError):
        return None
    if any(n == 'data.pkl' or n.endswith('/data.pkl') for n in names):
        return None
    if not names:
        return 'an empty zip archive'
    if all(n.endswith('.npy') for n in names):
        return 'a NumPy .npz archive'
    return f'a zip archive that torch.save did not write (no data.pkl among its {len(names)} entries)'


def _content_kind(path: Path) -> str:
    """:data:`TORCH`, :data:`SAFETENSORS`, or what else the regular file `path` is, from its first bytes."""
    fd = open_regular(path, os.O_RDONLY, lambda why: CheckpointError(
        f'{path} is {why}: {EXPECTED}' if why.startswith('a ') else f'{path}: cannot be read ({why})'))
    if fd is None:
        raise FileNotFoundError(f'no checkpoint file at {path}')
    with os.fdopen(fd, 'rb') as f:
        size = os.fstat(fd).st_size
        head = f.read(_SNIFF_BYTES)
        if not head:
            return 'an empty file (0 bytes)'
        if head.startswith(_ZIP_MAGICS):
            return _zip_kind(f) or TORCH
    if head.startswith(_TORCH_LEGACY_MAGIC):
        return TORCH
    if len(head) > 8 and head[8:9] == b'{' and int.from_bytes(head[:8], 'little') >= 2:
        return SAFETENSORS
    if head[:1] == b'\x80' and head[1:2] in (b'\x02', b'\x03', b'\x04', b'\x05'):
        return 'a Python pickle that torch.save did not write (torch.load reads only its own formats)'
    for offset, magic, what in _OTHER_MAGICS:
        if head[offset:offset + len(magic)] == magic:
            return what
    text = _as_text(head, complete=len(head) >= size)
    if text is not None:
        return _text_kind(text, complete=len(head) >= size)
    return f'an unrecognised binary file (its first bytes: {head[:8].hex(" ")})'


def _beside(path: Path) -> str:
    """'; train.py's checkpoint of this run is RUN/last.pth.tar' when one is beside `path` (which is not it)."""
    for name in CHECKPOINTS:
        other = path.parent / name
        if other.name != path.name and other.is_file():
            return f"; train.py's checkpoint beside it is {other}"
    return ''


def identify_checkpoint(path: Path) -> str:
    """The format of the checkpoint file `path`, from its first bytes (nothing is unpickled): :data:`TORCH`
    (torch.save's zip archive or legacy file) or :data:`SAFETENSORS`, its name agreeing as timm's scripts read it.

    Raises:
        FileNotFoundError: no file at `path`.
        CheckpointError: `path` is a folder, a FIFO, socket or device, an empty file, text (CSV, YAML, JSON, …),
            another archive or binary, or a checkpoint whose name says another format; the message says what it is
            and what was expected.
    """
    path = Path(path)
    if path.is_dir():
        inside = next((path / name for name in CHECKPOINTS if (path / name).is_file()), None)
        hint = f"; it holds train.py's {inside.name}: give {inside}" if inside else ''
        raise CheckpointError(f'the checkpoint is a directory, not a file: {path}; {EXPECTED}{hint}')
    kind = _content_kind(path)
    named_safetensors = path.suffix == '.safetensors'
    if kind == SAFETENSORS and not named_safetensors:
        raise CheckpointError(f'{path} is a safetensors file, not the torch checkpoint its name says: {_READERS}, '
                              f'so they would fail on it; rename it to {path.name.split(".")[0]}.safetensors')
    if kind == TORCH and named_safetensors:
        raise CheckpointError(f'{path} is a torch checkpoint (torch.save\'s format), not the safetensors file its '
                              f'name says: {_READERS}, so they would fail on it; rename it to {path.stem}.pth')
    if kind not in (TORCH, SAFETENSORS):
        raise CheckpointError(f'{path} is {kind}, not a checkpoint: {EXPECTED}{_beside(path)}')
    return kind


@dataclass
class TrainingCheckpoint:
    """Weights and what the run recorded about them."""
    path: Path
    state_dict: Dict[str, torch.Tensor]
    train_args: Dict[str, Any]      # train.py arguments (checkpoint 'args', else args.yaml beside it); {} if none
    epoch: Optional[int]            # epoch of the weights (train.py checkpoints)
    has_ema: bool                   # the run kept EMA weights
    use_ema: bool                   # `state_dict` holds the EMA weights

    @property
    def hparams_file(self) -> Optional[Path]:
        path = self.path.parent / 'args.yaml'
        return path if path.is_file() else None

    @property
    def summary_file(self) -> Path:
        return self.path.parent / 'summary.csv'


def _corrupt(path: Path, error: BaseException) -> CheckpointError:
    first_line = (str(error).strip().splitlines() or [''])[0]
    return CheckpointError(f'{path}: cannot be read as a checkpoint, it is truncated or corrupt '
                           f'({type(error).__name__}: {first_line})')


def load_checkpoint_file(path: Path, kind: Optional[str] = None) -> Any:
    """The object in a safetensors file or a ``torch.save`` file, read safely (no arbitrary unpickling) once
    :func:`identify_checkpoint` has said which it is (`kind`, if the caller has asked it already): anything else is
    refused naming what it is, a truncated or corrupt checkpoint naming the file."""
    path = Path(path)
    if (kind or identify_checkpoint(path)) == SAFETENSORS:
        from safetensors import SafetensorError
        from safetensors.torch import load_file
        try:
            return load_file(str(path), device='cpu')
        except (SafetensorError, OSError, ValueError) as e:
            raise _corrupt(path, e) from e
    try:
        # train.py checkpoints hold their arguments as an argparse.Namespace
        if hasattr(torch.serialization, 'safe_globals'):
            with torch.serialization.safe_globals([argparse.Namespace]):
                return torch.load(str(path), map_location='cpu', weights_only=True)
        torch.serialization.add_safe_globals([argparse.Namespace])  # torch 2.4
        return torch.load(str(path), map_location='cpu', weights_only=True)
    except pickle.UnpicklingError as e:
        if 'global' not in str(e).lower():  # not an object we refuse to build: a damaged or foreign file
            detail = next((line for line in str(e).splitlines() if 'Unsupported' in line or 'truncated' in line),
                          str(e).strip().splitlines()[0])
            raise _corrupt(path, pickle.UnpicklingError(detail.strip())) from e
        raise CheckpointError(f'{path}: refusing to unpickle it; only safetensors files and checkpoints that '
                              f'torch.load(weights_only=True) reads are accepted ({str(e).splitlines()[0]})') from e
    except (RuntimeError, EOFError, ValueError, zipfile.BadZipFile) as e:
        raise _corrupt(path, e) from e
    except OSError as e:  # a truncated zip: [Errno 22] Invalid argument
        if isinstance(e, (FileNotFoundError, PermissionError, IsADirectoryError)):
            raise
        raise _corrupt(path, e) from e


def read_train_args(path: Path) -> Dict[str, Any]:
    """A train.py ``args.yaml`` as a dict, read by :func:`~timm_pkmixer.runs.run_folder.read_args_yaml`
    (safe YAML, aliases bounded): a file that is not YAML, holds a tag safe_load does not build (``!!python/...``:
    refused, never executed), is not a mapping or has a ``model_kwargs`` that is not a mapping is refused naming it."""
    try:
        return read_args_yaml(path)
    except RunFileError as e:
        raise CheckpointError(f'{e}; move it away to use the checkpoint without the run\'s arguments') from e


_WEIGHTS_KEYS = ('state_dict', 'model')       # where timm's load_state_dict looks for the weights, in order
_EMA_KEYS = ('state_dict_ema', 'model_ema')    # and for EMA weights, when asked for them


def _no_ema(path: Path) -> CheckpointError:
    return CheckpointError(f'use_ema: {path} holds no EMA weights (no state_dict_ema)')


def _weights_key(obj: Dict[Any, Any], path: Path, use_ema: bool) -> Optional[str]:
    """The key of the weights `obj` holds (None: `obj` is a plain state dict), chosen as timm's ``load_state_dict``
    chooses it: the EMA weights only when asked for (`use_ema`), else ``state_dict``, else ``model``. A checkpoint
    that holds EMA weights alone, or whose weights are None, is refused by name."""
    ema_key = next((k for k in _EMA_KEYS if obj.get(k) is not None), None)
    if all(isinstance(v, torch.Tensor) for v in obj.values()):
        if use_ema:
            raise _no_ema(path)
        return None
    if use_ema:
        if ema_key is None:
            raise _no_ema(path)
        return ema_key
    key = next((k for k in _WEIGHTS_KEYS if obj.get(k) is not None), None)
    if key is not None:
        return key
    if ema_key is not None:
        raise CheckpointError(f"{path}: holds EMA weights alone ({ema_key}; no state_dict), and timm's loaders take "
                              f"EMA weights only when asked for them (`use_ema`)")
    present = [k for k in _WEIGHTS_KEYS if k in obj]
    if present:
        raise CheckpointError(f'{path}: its {present[0]} is None: the checkpoint holds no weights')
    shown = sorted(map(str, obj))[:8]
    raise CheckpointError(f'{path}: neither a state dict nor a train.py checkpoint (keys: {shown})')


def _state_dict(weights: Any, path: Path, key: str) -> Dict[str, torch.Tensor]:
    """`weights` (the checkpoint's `key`) as a state dict without DDP / torch.compile prefixes: a mapping of
    parameter names to tensors, or refused naming what it is."""
    if not isinstance(weights, dict):
        raise CheckpointError(f'{path}: its {key} is a {type(weights).__name__}, not a state dict (parameter names '
                              f'mapped to tensors)')
    names = [k for k in weights if not isinstance(k, str)]
    if names:
        raise CheckpointError(f'{path}: its {key} has keys that are not parameter names: {names[:5]}')
    state_dict = clean_state_dict(weights)
    bad = [k for k, v in state_dict.items() if not isinstance(v, torch.Tensor)]
    if bad:
        raise CheckpointError(f'{path}: state dict entries that are not tensors: {bad[:5]}')
    return state_dict


def _epoch(value: Any, path: Path) -> Optional[int]:
    """The epoch a train.py checkpoint records (None: none recorded), an integer ≥ 0, or refused naming it."""
    if value is None:
        return None
    whole = (isinstance(value, numbers.Real) and not isinstance(value, bool) and value == value
             and abs(value) != float('inf') and value == int(value) and value >= 0)
    if not whole:
        raise CheckpointError(f'{path}: its epoch is {value!r}, not an epoch number (train.py records the epoch it '
                              f'saved as an integer ≥ 0)')
    return int(value)


def _train_args(value: Any, path: Path) -> Optional[Dict[str, Any]]:
    """The train.py arguments a checkpoint records (``args``: an argparse.Namespace, or a mapping), checked."""
    if value is None:
        return None
    if isinstance(value, argparse.Namespace):
        value = vars(value)
    if not isinstance(value, dict):
        raise CheckpointError(f"{path}: its args is a {type(value).__name__}, not train.py's arguments (an "
                              f"argparse.Namespace)")
    try:
        return check_train_args(value, f'{path} (the arguments it records)')
    except RunFileError as e:
        raise CheckpointError(str(e)) from e


def read_checkpoint(path: str, use_ema: bool = False) -> TrainingCheckpoint:
    """Read a timm train.py checkpoint (`model_best.pth.tar`, `last.pth.tar`, with or without EMA),
    a plain state dict or a safetensors file, identified first (:func:`identify_checkpoint`).

    Args:
        path: The file.
        use_ema: Take the EMA weights (`state_dict_ema`) of a train.py checkpoint.
    """
    path = Path(path)
    obj = load_checkpoint_file(path, identify_checkpoint(path))
    if not isinstance(obj, dict):
        raise CheckpointError(f'{path}: holds a {type(obj).__name__}, neither a state dict nor a train.py checkpoint')
    key = _weights_key(obj, path, use_ema)
    state_dict = _state_dict(obj if key is None else obj[key], path, key or 'state dict')
    train_args = None if key is None else _train_args(obj.get('args'), path)
    epoch = None if key is None else _epoch(obj.get('epoch'), path)
    if train_args is None and (path.parent / 'args.yaml').is_file():
        train_args = read_train_args(path.parent / 'args.yaml')
    return TrainingCheckpoint(path=path, state_dict=state_dict, train_args=dict(train_args or {}), epoch=epoch,
                              has_ema=any(obj.get(k) is not None for k in _EMA_KEYS), use_ema=use_ema)


def _model_kwargs(model_name: str, ckpt: TrainingCheckpoint, overrides: Dict[str, Any]) -> Dict[str, Any]:
    """Arguments to rebuild the trained model: the run's (num_classes, in_chans, gp, --model-kwargs), then
    `overrides`; num_classes from the classifier's shape when the run does not say."""
    args, kwargs = ckpt.train_args, {}
    arch = args.get('model')
    if arch and arch != model_name and ':' not in arch and '/' not in arch:
        raise InvalidArgumentError(f'{ckpt.path} was trained as {arch!r} (the run\'s model), not {model_name!r}')
    in_chans = args.get('in_chans') or (args.get('input_size') or [None])[0]
    for key, value in (('num_classes', args.get('num_classes')), ('in_chans', in_chans),
                       ('global_pool', args.get('gp'))):
        if value is not None:
            kwargs[key] = value
    kwargs.update(args.get('model_kwargs') or {})
    kwargs.update(overrides)
    if 'num_classes' not in kwargs:
        head = ckpt.state_dict.get('head.weight')
        kwargs['num_classes'] = 0 if head is None else int(head.shape[0])
    return kwargs


def _digest_keys(model: torch.nn.Module) -> Dict[str, str]:
    """The state-dict key of every structure digest of `model`, with what it fingerprints ('permutation', 'mask')."""
    return {f'{name}.{m.digest_name}': m.what for name, m in model.named_modules() if isinstance(m, DerivedStructure)}


def check_digests(model: torch.nn.Module, state_dict: Dict[str, torch.Tensor], source: str) -> None:
    """Refuse digests cast to a floating-point dtype: they are int64 fingerprints of the model's fixed permutations
    or masks, not weights, and a cast (to fp16: 64-bit values overflow) destroys them."""
    cast = [(k, what) for k, what in _digest_keys(model).items()
            if isinstance(state_dict.get(k), torch.Tensor) and state_dict[k].is_floating_point()]
    if cast:
        key, what = cast[0]
        raise CheckpointError(
            f'{source}: {len(cast)} {what} digests were cast to {state_dict[key].dtype} (first: {key}). A digest is '
            f'an int64 fingerprint of the fixed {what}s, not a weight: the cast destroyed it. Save the state dict '
            f'again casting only the floating-point weights (model.half() and model.to(torch.bfloat16) leave the '
            f'digests int64)')


def check_finite(state_dict: Dict[str, torch.Tensor], source: str) -> None:
    """Refuse weights with NaN or infinite values (a diverged run), naming how many tensors and the first."""
    bad = [k for k, v in state_dict.items() if v.is_floating_point() and not bool(torch.isfinite(v).all())]
    if bad:
        raise CheckpointError(f'{source}: {len(bad)} tensors hold NaN or infinite values (first: {bad[0]}); '
                              f'refusing to publish them (did the run diverge?)')


def trained_model_name(ckpt: TrainingCheckpoint, model_name: Optional[str] = None, source: Any = None) -> str:
    """The architecture to rebuild `ckpt` as: `model_name` when given (`build_validated_model` refuses one the run
    did not train), else the run's ``model`` (the checkpoint's own record of train.py's arguments, else the
    ``args.yaml`` beside it). `source`: what the caller was given, named in the error (default: the checkpoint).

    Raises:
        ArgumentValueError: (``model``) none given and the run records none, or records a model that is not a
            registered name (``hf-hub:…``, ``local-dir:…``: a fine-tuned copy), which cannot be rebuilt by name.
    """
    if model_name:
        return model_name
    recorded, source = ckpt.train_args.get('model'), source or ckpt.path
    if not recorded:
        raise ArgumentValueError('model', f'must be given: {source} does not record its model (no train.py '
                                          f'arguments in it and no args.yaml beside it)')
    if not isinstance(recorded, str) or ':' in recorded or '/' in recorded:
        raise ArgumentValueError('model', f'must be given: {source} was trained as {recorded!r}, not a '
                                          f'registered architecture')
    return recorded


def build_validated_model(
        model_name: str,
        ckpt: TrainingCheckpoint,
        model_kwargs: Optional[Dict[str, Any]] = None,
) -> Tuple[torch.nn.Module, Dict[str, Any]]:
    """Build `model_name` as it was trained and load the checkpoint strictly, refusing weights of another
    architecture, S, C, depth, permutation seed (RP) or mask seed (SW-MLP), digests cast to a float dtype and
    non-finite weights.

    Args:
        model_name: A registered timm-pkmixer architecture.
        ckpt: The weights (`read_checkpoint`).
        model_kwargs: Overrides of the run's model arguments.

    Returns:
        The model in eval mode (its resolved arguments: ``model.model_args``), and the keyword arguments it was
        built with.
    """
    import timm
    if not is_pkmixer_model(model_name):
        raise InvalidArgumentError(f'{model_name!r} is not a timm-pkmixer architecture (see `pkmixer models`)')
    kwargs = _model_kwargs(model_name, ckpt, dict(model_kwargs or {}))
    check_model_kwargs(model_name, kwargs)
    model = timm.create_model(model_name, **kwargs)
    check_digests(model, ckpt.state_dict, str(ckpt.path))
    check_finite(ckpt.state_dict, str(ckpt.path))
    try:
        model.load_state_dict(ckpt.state_dict, strict=True)
    except CheckpointMismatchError as e:
        hint = f'(built with {kwargs}; give the model arguments it was trained with)'
        raise type(e)(f'the weights in {ckpt.path} do not fit {model_name} {hint}: {e}') from e
    return model.eval(), kwargs


@dataclass
class TrainedModel:
    """A trained model rebuilt from its run: `model` in eval mode, built as `name` with `kwargs`, and the run's
    train.py arguments (`train_args`: {} where the checkpoint records none)."""
    model: torch.nn.Module
    name: str
    kwargs: Dict[str, Any]
    train_args: Dict[str, Any]


def _read_damaged(path: Path) -> TrainingCheckpoint:
    """:func:`read_checkpoint`, with an OSError of a damaged file (a truncated zip: ``[Errno 22] Invalid argument``)
    said as a CheckpointError naming the file; missing files and permissions keep their own errors."""
    try:
        return read_checkpoint(str(path))
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError, PermissionError):
        raise
    except OSError as e:
        raise CheckpointError(f'{path}: cannot be read as a checkpoint, it is truncated or corrupt (OSError: '
                              f'{e.strerror or e})') from e


def load_trained_model(
        path: Any,
        model_name: Optional[str] = None,
        model_kwargs: Optional[Dict[str, Any]] = None,
) -> TrainedModel:
    """The model a train.py run folder (its checkpoint: :func:`~timm_pkmixer.runs.run_folder.find_checkpoint`)
    or a checkpoint file holds, built as it was trained and loaded strictly (:func:`build_validated_model`).

    Args:
        path: A run folder or a checkpoint file.
        model_name: The architecture (default: the run's ``model``).
        model_kwargs: Overrides of the run's model arguments.

    Raises:
        ArgumentValueError: (``model``) none given and the checkpoint records none.
        CheckpointError: the checkpoint cannot be read or does not fit the model.
    """
    given = Path(path)
    # a folder is a run's (its checkpoint found); anything else there, a FIFO included, is identified as a file
    ckpt = _read_damaged(given if given.exists() and not given.is_dir() else find_checkpoint(given))
    name = trained_model_name(ckpt, model_name, path)
    model, kwargs = build_validated_model(name, ckpt, model_kwargs)
    return TrainedModel(model, name, kwargs, ckpt.train_args)
