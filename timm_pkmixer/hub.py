"""Publish a trained PK-family model on the Hugging Face Hub in timm's format (`pkmixer push`).

The folder a push uploads, and `--out-dir` writes instead:

* ``model.safetensors`` and ``config.json`` (``architecture``, ``num_classes``, ``model_args``,
  ``pretrained_cfg``), written by timm's own ``save_for_hf``, so that
  ``timm.create_model('hf-hub:ORG/NAME', pretrained=True)`` rebuilds the same function;
* ``README.md``, the model card (timm's ``generate_readme``, see `model_card`);
* ``train_hparams.yaml``, the run's ``args.yaml`` when it sits beside the checkpoint.

timm's ``push_to_hf_hub`` is not used as a whole: it cannot add the recipe file, keeps an existing
README and also uploads a pickle; the upload itself is `huggingface_hub`'s ``create_repo`` +
``upload_folder``. Checkpoints are read safely: safetensors, or ``torch.load(weights_only=True)``.
"""
import argparse
import json
import pickle
import re
import shutil
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import torch
import yaml
from timm.models import clean_state_dict
from timm.models._hub import save_for_hf

from .catalog import check_model_kwargs, is_pkmixer_model
from .errors import CheckpointError, InvalidArgumentError

__all__ = ['TrainingCheckpoint', 'HubFolder', 'load_checkpoint_file', 'read_checkpoint', 'build_validated_model',
           'check_finite', 'export_model_args', 'write_hub_folder', 'upload_to_hub', 'check_repo_id']

# train.py / factory arguments that do not change the function of a trained model
_TRAINING_ONLY_ARGS = ('drop_rate', 'proj_drop_rate', 'drop_path_rate', 'drop_block_rate', 'pretrained_cfg',
                       'pretrained_cfg_overlay', 'checkpoint_path', 'cache_dir', 'device', 'dtype')
# pretrained cfg entries that describe where other weights came from, not the pushed ones
_SOURCE_CFG_KEYS = ('url', 'file', 'state_dict', 'hf_hub_id', 'hf_hub_filename', 'source', 'tag', 'origin_url',
                    'paper_ids', 'paper_name', 'description', 'notes', 'label_names', 'label_descriptions',
                    'label_offset')
_REPO_ID = re.compile(r'^[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*$')


def check_repo_id(repo_id: str) -> str:
    """A Hub repository id ORG/NAME."""
    if not _REPO_ID.match(repo_id):
        raise InvalidArgumentError(f'--repo-id must be ORG/NAME, got {repo_id!r}')
    return repo_id


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
            raise CheckpointError(f'--use-ema: {path} holds no EMA weights (no state_dict_ema)')
        state_dict = obj[ema_key]
    state_dict = clean_state_dict(state_dict)  # drops DDP / torch.compile prefixes
    bad = [k for k, v in state_dict.items() if not isinstance(v, torch.Tensor)]
    if bad:
        raise CheckpointError(f'{path}: state dict entries that are not tensors: {bad[:5]}')
    if isinstance(train_args, argparse.Namespace):
        train_args = vars(train_args)
    if train_args is None and (path.parent / 'args.yaml').is_file():
        train_args = yaml.safe_load((path.parent / 'args.yaml').read_text())
    return TrainingCheckpoint(path=path, state_dict=state_dict, train_args=dict(train_args or {}),
                              epoch=None if epoch is None else int(epoch), has_ema=ema_key is not None,
                              use_ema=use_ema)


def _model_kwargs(model_name: str, ckpt: TrainingCheckpoint, overrides: Dict[str, Any]) -> Dict[str, Any]:
    """Arguments to rebuild the trained model: the run's (num_classes, in_chans, gp, --model-kwargs), then
    `overrides`; num_classes from the classifier's shape when the run does not say."""
    args, kwargs = ckpt.train_args, {}
    arch = args.get('model')
    if arch and arch != model_name and ':' not in arch and '/' not in arch:
        raise InvalidArgumentError(f'{ckpt.path} was trained as {arch!r} (train.py --model), not {model_name!r}')
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


def check_finite(state_dict: Dict[str, torch.Tensor], source: str) -> None:
    """Refuse weights with NaN or infinite values (a diverged run), naming how many tensors and the first."""
    bad = [k for k, v in state_dict.items() if v.is_floating_point() and not bool(torch.isfinite(v).all())]
    if bad:
        raise CheckpointError(f'{source}: {len(bad)} tensors hold NaN or infinite values (first: {bad[0]}); '
                              f'refusing to publish them (did the run diverge?)')


def build_validated_model(
        model_name: str,
        ckpt: TrainingCheckpoint,
        model_kwargs: Optional[Dict[str, Any]] = None,
) -> Tuple[torch.nn.Module, Dict[str, Any]]:
    """Build `model_name` as it was trained and load the checkpoint strictly, refusing weights of another
    architecture, S, C, depth, permutation seed (RP) or mask seed (SW-MLP), and non-finite weights.

    Args:
        model_name: A registered timm-pkmixer architecture.
        ckpt: The weights (`read_checkpoint`).
        model_kwargs: Overrides of the run's model arguments (`--model-kwargs`).

    Returns:
        The model in eval mode, and the arguments it was built with.
    """
    import timm
    if not is_pkmixer_model(model_name):
        raise InvalidArgumentError(f'{model_name!r} is not a timm-pkmixer architecture (see `pkmixer models`)')
    kwargs = _model_kwargs(model_name, ckpt, dict(model_kwargs or {}))
    check_model_kwargs(model_name, kwargs)
    model = timm.create_model(model_name, **kwargs)
    check_finite(ckpt.state_dict, str(ckpt.path))
    try:
        model.load_state_dict(ckpt.state_dict, strict=True)
    except CheckpointError as e:
        hint = f'(built with {kwargs}; pass the --model-kwargs it was trained with)'
        raise type(e)(f'the weights in {ckpt.path} do not fit {model_name} {hint}: {e}') from e
    return model.eval(), kwargs


def export_model_args(model: torch.nn.Module, build_kwargs: Dict[str, Any]) -> Dict[str, Any]:
    """`model_args` of config.json: every argument the model was built with, and its permutation (RP) or
    mask (SW-MLP) seed, so the Hub copy rebuilds the same function. Training-only arguments are left out."""
    args = {k: v for k, v in build_kwargs.items() if k not in _TRAINING_ONLY_ARGS}
    args.update(model.describe().seeds)
    for key, value in args.items():
        try:
            json.dumps(value)
        except TypeError as e:
            raise InvalidArgumentError(f'model argument {key}={value!r} cannot be written to config.json') from e
    return args


def _export_pretrained_cfg(model: torch.nn.Module, train_args: Dict[str, Any], license: str) -> Dict[str, Any]:
    """The registry cfg without its weight source, with the run's data config (mean, std, crop, size)."""
    from timm.data import resolve_data_config

    from .model_card import PAPER_ARXIV, PAPER_TITLE
    cfg = {k: v for k, v in model.pretrained_cfg.items() if k not in _SOURCE_CFG_KEYS}
    data = resolve_data_config(args=dict(train_args), model=model)
    cfg.update({k: data[k] for k in ('input_size', 'interpolation', 'mean', 'std', 'crop_pct', 'crop_mode')
                if k in data})
    cfg.update(num_classes=model.num_classes, license=license, paper_ids=f'arXiv:{PAPER_ARXIV}',
               paper_name=PAPER_TITLE)
    return cfg


@dataclass
class HubFolder:
    """What `write_hub_folder` wrote."""
    path: Path
    files: List[str]                                  # file names, sorted
    notes: List[str] = field(default_factory=list)    # what was left out, and why


def write_hub_folder(
        model: torch.nn.Module,
        build_kwargs: Dict[str, Any],
        ckpt: TrainingCheckpoint,
        out_dir: str,
        repo_id: str,
        license: Optional[str] = None,
        datasets: Optional[List[str]] = None,
        expanded_from: Optional[Dict[str, Any]] = None,
) -> HubFolder:
    """Write what a push uploads into the empty or new directory `out_dir`.

    Args:
        model: The validated model (`build_validated_model`); its pretrained_cfg becomes the exported one.
        build_kwargs: The arguments it was built with.
        ckpt: Its checkpoint (for the run's args, args.yaml and summary.csv).
        out_dir: Target directory.
        repo_id: 'org/name' (for the model card's usage snippet).
        license: Card and config license (default: the architecture's, apache-2.0).
        datasets: Hub dataset ids for the card (default: train.py's --dataset, if it names one).
        expanded_from: For a model made by `expand_resolution` from the checkpoint's: what it was expanded from and
            how (shown in the card). The run's accuracy and hyper-parameters then describe the original, not this
            model, and are left out.
    """
    from .model_card import build_model_card, datasets_from_args, read_run_metrics, render_model_card
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise InvalidArgumentError(f'--out-dir {out} is a file: choose a new or empty directory')
    if out.exists() and any(out.iterdir()):
        raise InvalidArgumentError(f'--out-dir {out} is not empty: choose a new or empty directory')
    out.mkdir(parents=True, exist_ok=True)
    license = license or model.pretrained_cfg.get('license') or 'apache-2.0'
    model_args = export_model_args(model, build_kwargs)
    train_args = {} if expanded_from else ckpt.train_args
    model.pretrained_cfg = _export_pretrained_cfg(model, train_args, license)
    save_for_hf(model, str(out), model_args=model_args, safe_serialization=True)

    hparams = None if expanded_from else ckpt.hparams_file
    if hparams is not None:
        shutil.copyfile(hparams, out / 'train_hparams.yaml')
    metrics, note = None, ''
    if not expanded_from:
        run_had_ema_eval = ckpt.has_ema and not ckpt.train_args.get('model_ema_force_cpu', False)
        metrics, note = read_run_metrics(ckpt.summary_file, ckpt.epoch, ckpt.use_ema, run_had_ema_eval)
    model_name = model.pretrained_cfg['architecture']
    card = build_model_card(
        model_name, repo_id, model_args, license=license,
        datasets=datasets if datasets is not None else datasets_from_args(train_args),
        train_args=train_args, has_hparams_file=hparams is not None, metrics=metrics, expanded_from=expanded_from)
    (out / 'README.md').write_text(render_model_card(card, repo_id), encoding='utf-8')
    return HubFolder(out, sorted(p.name for p in out.iterdir()), [note] if note else [])


def upload_to_hub(folder: str, repo_id: str, private: bool = False, commit_message: str = 'Add model') -> str:
    """Create `repo_id` if needed and upload the files of `folder` (token: HF_TOKEN or `hf auth login`).
    Returns the repository URL."""
    from huggingface_hub import HfApi

    from . import __version__
    api = HfApi(library_name='timm-pkmixer', library_version=__version__)
    repo_url = api.create_repo(repo_id, private=private, exist_ok=True)
    api.upload_folder(repo_id=repo_url.repo_id, folder_path=folder, commit_message=commit_message)
    return str(repo_url)
