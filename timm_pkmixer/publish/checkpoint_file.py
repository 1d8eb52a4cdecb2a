"""Reading a trained checkpoint and checking it against the model it is meant for (``pkmixer push`` and
``pkmixer expand`` start here; `hub` writes and uploads what they publish).

Checkpoints are read safely: safetensors, or ``torch.load(weights_only=True)``; a run's ``args.yaml`` by
:mod:`timm_pkmixer.runs.run_folder` (safe YAML: a ``!!python`` tag is refused, never executed; aliases
bounded). The checked model is built as it was trained (the run's arguments, then the caller's) and loads the
weights strictly: another architecture, S, C, depth, permutation or mask seed is refused, and so are digests cast to a
float dtype
and non-finite weights.
"""
import argparse
import pickle
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Optional, Tuple

import torch
from timm.models import clean_state_dict

from ..catalog import check_model_kwargs, is_pkmixer_model
from ..errors import ArgumentValueError, CheckpointError, CheckpointMismatchError, InvalidArgumentError
from ..layers.structure import DerivedStructure
from ..runs.run_folder import RunFileError, check_train_args, find_checkpoint, read_args_yaml

__all__ = ['TrainingCheckpoint', 'load_checkpoint_file', 'read_train_args', 'read_checkpoint', 'check_finite',
           'check_digests', 'trained_model_name', 'build_validated_model', 'TrainedModel', 'load_trained_model']


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


def load_checkpoint_file(path: Path) -> Any:
    """The object in a safetensors file or a ``torch.save`` file, read safely (no arbitrary unpickling):
    a file that is not one of them, truncated or corrupt, is refused naming it."""
    if path.suffix == '.safetensors':
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


def read_checkpoint(path: str, use_ema: bool = False) -> TrainingCheckpoint:
    """Read a timm train.py checkpoint (`model_best.pth.tar`, `last.pth.tar`, with or without EMA),
    a plain state dict or a safetensors file.

    Args:
        path: The file.
        use_ema: Take the EMA weights (`state_dict_ema`) of a train.py checkpoint.
    """
    path = Path(path)
    if path.is_dir():
        raise IsADirectoryError(21, 'the checkpoint is a directory, not a file', str(path))
    if not path.is_file():
        raise FileNotFoundError(f'no checkpoint file at {path}')
    obj = load_checkpoint_file(path)
    if not isinstance(obj, dict):
        raise CheckpointError(f'{path}: holds a {type(obj).__name__}, neither a state dict nor a train.py checkpoint')
    is_state_dict = all(isinstance(v, torch.Tensor) for v in obj.values())
    ema_key = next((k for k in ('state_dict_ema', 'model_ema') if obj.get(k) is not None), None)
    if is_state_dict:
        state_dict, train_args, epoch = obj, None, None
    elif 'state_dict' in obj or 'model' in obj:
        state_dict = obj.get('state_dict', obj.get('model'))
        train_args, epoch = obj.get('args'), obj.get('epoch')
    else:
        raise CheckpointError(f'{path}: neither a state dict nor a train.py checkpoint (keys: {sorted(obj)[:8]})')
    if use_ema:
        if ema_key is None:
            raise CheckpointError(f'use_ema: {path} holds no EMA weights (no state_dict_ema)')
        state_dict = obj[ema_key]
    state_dict = clean_state_dict(state_dict)  # drops DDP / torch.compile prefixes
    bad = [k for k, v in state_dict.items() if not isinstance(v, torch.Tensor)]
    if bad:
        raise CheckpointError(f'{path}: state dict entries that are not tensors: {bad[:5]}')
    if isinstance(train_args, argparse.Namespace):
        train_args = vars(train_args)
    if isinstance(train_args, dict):
        try:
            check_train_args(train_args, f'{path} (the arguments it records)')
        except RunFileError as e:
            raise CheckpointError(str(e)) from e
    if train_args is None and (path.parent / 'args.yaml').is_file():
        train_args = read_train_args(path.parent / 'args.yaml')
    return TrainingCheckpoint(path=path, state_dict=state_dict, train_args=dict(train_args or {}),
                              epoch=None if epoch is None else int(epoch), has_ema=ema_key is not None,
                              use_ema=use_ema)


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
    ckpt = _read_damaged(find_checkpoint(path))
    name = trained_model_name(ckpt, model_name, path)
    model, kwargs = build_validated_model(name, ckpt, model_kwargs)
    return TrainedModel(model, name, kwargs, ckpt.train_args)
