"""Publish a trained PK-family model on the Hugging Face Hub in timm's format (`pkmixer push`).

The folder a push uploads, and that ``pkmixer push --out-dir`` only writes:

* ``model.safetensors`` and ``config.json`` (``architecture``, ``num_classes``, ``model_args``: the model's
  resolved arguments ``model.model_args`` less the training-only rates and ``num_classes``, which sits at the root
  only; ``pretrained_cfg``; ``label_names`` of an ImageFolder run), written by timm's own ``save_for_hf``, so that
  ``timm.create_model('hf-hub:ORG/NAME', pretrained=True)`` and transformers'
  ``AutoModelForImageClassification.from_pretrained('ORG/NAME')`` rebuild the same function;
* ``README.md``, the model card (timm's ``generate_readme``, see `model_card`);
* ``train_hparams.yaml``, the run's ``args.yaml`` when it sits beside the checkpoint, read as YAML (safely) and
  written again less the paths of the machine that trained it (:func:`without_machine_paths`: train.py's path
  arguments, :data:`MACHINE_PATH_KEYS`, and any other value that is an absolute or home path, published as ``''``:
  where its data and outputs were, nothing a reader can use and nothing to publish), however the YAML spelled them
  (quoted, flow style, folded; its comments are not kept).

The folder is written beside `out_dir` under a temporary name and renamed into place once whole: a push refused
midway (a run file that cannot be published, say) leaves `out_dir` as it was, so the same command runs again.

timm's ``push_to_hf_hub`` is not used as a whole: it cannot add the recipe file, keeps an existing
README and also uploads a pickle; the upload itself is `huggingface_hub`'s ``create_repo`` +
``upload_folder``. Reading and checking the checkpoint is `checkpoint_file`'s job; nothing here changes the
model it is given (the exported ``pretrained_cfg`` goes to a shallow view of it).
"""
import contextlib
import copy
import errno
import json
import os
import re
import shutil
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import torch
import yaml
from timm.models import save_for_hf

from ..errors import InvalidArgumentError
from ..models._common import TRAINING_ONLY_ARGS
from ..state_files import load_yaml, temporary_beside
from .checkpoint_file import TrainingCheckpoint, read_train_args

__all__ = ['HubFolder', 'export_model_args', 'label_names_of_run', 'write_hub_folder', 'upload_to_hub', 'check_repo_id',
           'MACHINE_PATH_KEYS', 'is_machine_path', 'strip_machine_paths', 'without_machine_paths']

# pretrained cfg entries that describe where other weights came from, not the pushed ones
_SOURCE_CFG_KEYS = ('url', 'file', 'state_dict', 'hf_hub_id', 'hf_hub_filename', 'source', 'tag', 'origin_url',
                    'paper_ids', 'paper_name', 'description', 'notes', 'label_names', 'label_descriptions',
                    'label_offset')
_REPO_ID = re.compile(r'^[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*$')


def check_repo_id(repo_id: str) -> str:
    """A Hub repository id ORG/NAME."""
    if not isinstance(repo_id, str) or not _REPO_ID.match(repo_id):
        raise InvalidArgumentError(f'repo_id must be ORG/NAME, got {repo_id!r}')
    return repo_id


def export_model_args(model: torch.nn.Module) -> Dict[str, Any]:
    """`model_args` of config.json: the model's resolved arguments (``model.model_args``: every argument, the
    permutation and mask seeds included) without the training-only rates, so the Hub copy rebuilds the same
    function, and without ``num_classes``: config.json holds it at its root, which timm reads into the pretrained
    cfg and transformers' ``TimmWrapper`` passes as ``num_classes=`` beside ``model_args`` (twice is a
    duplicate keyword there)."""
    return model.model_args.to_json(exclude=TRAINING_ONLY_ARGS + ('num_classes',))


def label_names_of_run(train_args: Dict[str, Any], num_classes: int) -> Tuple[Optional[List[str]], str]:
    """(class names, note) of a train.py run: on a torchvision dataset (``--dataset torch/…``) its class names
    (:func:`~timm_pkmixer.data.datasets.named_dataset_classes`: Fashion-MNIST's ten always, another's when its data
    are on this machine); on an ImageFolder (no ``--dataset`` reader prefix, ``data_dir`` a folder of class
    subfolders) its classes read as timm reads them for training (``create_dataset`` of the train split, its
    ``class_map`` honoured). Index i is class i. None, with a note saying why, where the run's data is another kind,
    its names cannot be read here or their count is not the model's."""
    data_dir, dataset = train_args.get('data_dir'), str(train_args.get('dataset') or '')
    if dataset.lower().startswith('torch/'):
        from ..data.datasets import named_dataset_classes
        names, why = named_dataset_classes(dataset, data_dir, train_args.get('train_split') or 'train')
        if names is None:
            return None, f'label_names not written: {dataset}: {why}' if why else ''
        if len(names) != num_classes:
            return None, f'label_names not written: {dataset} has {len(names)} classes, the model {num_classes} outputs'
        return names, ''
    if not data_dir or '/' in dataset or dataset.lower() not in ('', 'folder'):
        return None, ''
    if not Path(data_dir).is_dir():
        return None, f'label_names not written: the run\'s data_dir {data_dir} is not a folder on this machine'
    from timm.data import create_dataset
    try:
        dataset = create_dataset(dataset, root=data_dir, split=train_args.get('train_split') or 'train',
                                 class_map=train_args.get('class_map') or '')
        class_to_idx = dataset.reader.class_to_idx
    except (AttributeError, OSError, RuntimeError, ValueError) as e:
        return None, f'label_names not written: the classes of {data_dir} could not be read ({e})'
    names = [name for name, _ in sorted(class_to_idx.items(), key=lambda item: item[1])]
    if len(names) != num_classes:
        return None, (f'label_names not written: {data_dir} has {len(names)} classes, the model '
                      f'{num_classes} outputs')
    return names, ''


def _replace_text(path: Path, text: str) -> None:
    """`text` at `path`, replaced whole: written to a new file beside it (with the mode the umask gives new files),
    then renamed over it, so that no reader sees half a file."""
    tmp = path.with_name(f'.{path.name}.{os.getpid()}.tmp')
    try:
        with open(tmp, 'x', encoding='utf-8') as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _save_config(exported: torch.nn.Module, out: Path, label_names: Optional[List[str]]) -> None:
    """model.safetensors and config.json by timm's ``save_for_hf``; `label_names` at the root, timm's place for
    them (timm reads them into the pretrained cfg, transformers into ``config.id2label``). safetensors creates its
    file private (0600): it gets the mode of config.json, which the umask sets like every other file here."""
    model_args = export_model_args(exported)
    save_for_hf(exported, str(out), model_args=model_args, safe_serialization=True,
                model_config={'label_names': label_names} if label_names else None)
    config = json.loads((out / 'config.json').read_text(encoding='utf-8'))
    config.get('model_args', {}).pop('num_classes', None)  # timm adds the model's own; it is at the root
    _replace_text(out / 'config.json', json.dumps(config, indent=2))
    os.chmod(out / 'model.safetensors', stat.S_IMODE((out / 'config.json').stat().st_mode))


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


# train.py's arguments whose value is a path of the machine that trained the run (its FILE, DIR and PATH arguments)
MACHINE_PATH_KEYS = ('config', 'data', 'data_dir', 'class_map', 'initial_checkpoint', 'pretrained_path', 'resume',
                     'output')
_PATH_PREFIXES = ('local-dir:', 'file://', 'file:')  # a path behind a loader's or URL's prefix is still a path
_WINDOWS_PATH = re.compile(r'^[A-Za-z]:[\\/]')


def is_machine_path(value: Any) -> bool:
    """Whether `value` is a string naming a place on a machine: an absolute path (POSIX, Windows or UNC), a home
    path (``~/…``), or one of those behind ``local-dir:`` or ``file:``."""
    if not isinstance(value, str):
        return False
    for prefix in _PATH_PREFIXES:
        value = value[len(prefix):] if value.startswith(prefix) else value
    return value.startswith(('/', '~', '\\\\')) or bool(_WINDOWS_PATH.match(value))


def _blank_paths(value: Any) -> Any:
    """`value` with every string in it that :func:`is_machine_path` (in lists and mappings too) replaced by ''."""
    if isinstance(value, dict):
        return {k: _blank_paths(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_blank_paths(v) for v in value]
    return '' if is_machine_path(value) else value


def strip_machine_paths(args: Dict[str, Any]) -> Dict[str, Any]:
    """train.py's `args` with the value of each of :data:`MACHINE_PATH_KEYS` that is set (not empty, not None)
    replaced by ``''`` and every other machine path in them (:func:`is_machine_path`) too; a new mapping."""
    return {k: '' if k in MACHINE_PATH_KEYS and v not in (None, '') else _blank_paths(v) for k, v in args.items()}


def _dump_args(args: Dict[str, Any]) -> str:
    """train.py's arguments as train.py writes args.yaml (block style), in their order."""
    return yaml.safe_dump(args, default_flow_style=False, sort_keys=False)


def without_machine_paths(args_yaml: str) -> str:
    """train.py's args.yaml text, read as YAML (safely: :func:`~timm_pkmixer.state_files.load_yaml`) and written again
    without its machine paths (:func:`strip_machine_paths`), however the YAML spelled them; an args.yaml that train.py
    wrote keeps every other line as it was."""
    args = load_yaml(args_yaml)
    if not isinstance(args, dict):
        raise InvalidArgumentError(f'args.yaml holds a YAML {type(args).__name__}, not the mapping of arguments '
                                   f'train.py writes')
    return _dump_args(strip_machine_paths(args))


def _make_folders(folder: Path) -> List[Path]:
    """Make `folder` and its missing parents; returns those made, innermost first (to remove them again)."""
    missing = []
    while not folder.exists():
        missing.append(folder)
        folder = folder.parent
    for made in reversed(missing):
        made.mkdir(exist_ok=True)
    return missing


def _check_out_dir(out: Path) -> None:
    if out.exists() and not out.is_dir():
        raise InvalidArgumentError(f'out_dir {out} is a file: choose a new or empty directory')
    if out.exists() and any(out.iterdir()):
        raise InvalidArgumentError(f'out_dir {out} is not empty: choose a new or empty directory')


def _move_into_place(written: Path, out: Path) -> None:
    """The folder `written` renamed to `out`, which is absent or an empty folder (whose mode it takes)."""
    if out.is_dir():
        os.chmod(written, stat.S_IMODE(out.stat().st_mode))
    try:
        os.rename(written, out)  # replaces an empty folder; refuses one that something filled meanwhile
    except OSError as e:
        if e.errno in (errno.ENOTEMPTY, errno.EEXIST, errno.ENOTDIR):
            _check_out_dir(out)
        raise


@dataclass
class HubFolder:
    """What `write_hub_folder` wrote."""
    path: Path
    files: List[str]                                  # file names, sorted
    notes: List[str] = field(default_factory=list)    # what was left out, and why


def write_hub_folder(
        model: torch.nn.Module,
        ckpt: TrainingCheckpoint,
        out_dir: str,
        repo_id: str,
        license: Optional[str] = None,
        datasets: Optional[List[str]] = None,
        expanded_from: Optional[Dict[str, Any]] = None,
) -> HubFolder:
    """Write what a push uploads into the empty or new directory `out_dir`: into a new folder beside it, renamed
    into place once every file is written, so that a refusal on the way (a summary.csv the card cannot use, an
    args.yaml that cannot be read safely) leaves `out_dir` as it was (and no folder this call made).

    Args:
        model: The validated model (`build_validated_model`), not changed: its arguments (``model.model_args``)
            and its pretrained_cfg with the run's data config become config.json.
        ckpt: Its checkpoint (for the run's args, args.yaml and summary.csv).
        out_dir: Target directory.
        repo_id: 'org/name' (for the model card's usage snippet).
        license: Card and config license (default: the architecture's, apache-2.0).
        datasets: Hub dataset ids for the card (default: train.py's --dataset, if it names one).
        expanded_from: For a model made by `expand_resolution` from the checkpoint's: what it was expanded from and
            how (shown in the card). The run's accuracy and hyper-parameters then describe the original, not this
            model, and are left out.
    """
    out = Path(out_dir)
    _check_out_dir(out)
    place = out.resolve() if out.is_symlink() else out  # a link to an empty folder: the folder is replaced
    made = _make_folders(place.parent)
    written = temporary_beside(place)
    written.mkdir()
    try:
        folder = _write_into(written, model, ckpt, repo_id, license, datasets, expanded_from)
        _move_into_place(written, place)
    except BaseException:
        shutil.rmtree(written, ignore_errors=True)
        for folder_made in made:
            with contextlib.suppress(OSError):
                folder_made.rmdir()
        raise
    return HubFolder(out, sorted(p.name for p in out.iterdir()), folder.notes)


def _write_into(
        out: Path,
        model: torch.nn.Module,
        ckpt: TrainingCheckpoint,
        repo_id: str,
        license: Optional[str],
        datasets: Optional[List[str]],
        expanded_from: Optional[Dict[str, Any]],
) -> HubFolder:
    """:func:`write_hub_folder`'s files, written into the new folder `out`."""
    from .model_card import build_model_card, datasets_from_args, read_run_metrics, render_model_card
    license = license or model.pretrained_cfg.get('license') or 'apache-2.0'
    model_args = model.model_args.to_json(exclude=TRAINING_ONLY_ARGS)  # for the card: num_classes included
    train_args = {} if expanded_from else ckpt.train_args
    hparams = None if expanded_from else ckpt.hparams_file
    published_args = None if hparams is None else strip_machine_paths(read_train_args(hparams))  # if it reads safely
    exported = copy.copy(model)  # a view: the same parameters, its own pretrained_cfg
    exported.pretrained_cfg = _export_pretrained_cfg(model, train_args, license)
    label_names, label_note = label_names_of_run(ckpt.train_args, model.num_classes)
    _save_config(exported, out, label_names)
    if published_args is not None:
        (out / 'train_hparams.yaml').write_text(_dump_args(published_args), encoding='utf-8')
    metrics, note = None, ''
    if not expanded_from:
        run_had_ema_eval = ckpt.has_ema and not ckpt.train_args.get('model_ema_force_cpu', False)
        metrics, note = read_run_metrics(ckpt.summary_file, ckpt.epoch, ckpt.use_ema, run_had_ema_eval)
    model_name = exported.pretrained_cfg['architecture']
    card = build_model_card(
        model_name, repo_id, model_args, license=license,
        datasets=datasets if datasets is not None else datasets_from_args(train_args),
        train_args=train_args, has_hparams_file=hparams is not None, metrics=metrics, expanded_from=expanded_from,
        label_names=label_names)
    (out / 'README.md').write_text(render_model_card(card, repo_id), encoding='utf-8')
    return HubFolder(out, sorted(p.name for p in out.iterdir()), [n for n in (note, label_note) if n])


def upload_to_hub(folder: str, repo_id: str, private: bool = False, commit_message: str = 'Add model') -> str:
    """Create `repo_id` if needed and upload the files of `folder` (token: HF_TOKEN or `hf auth login`).
    Returns the repository URL."""
    from huggingface_hub import HfApi

    from .. import __version__
    api = HfApi(library_name='timm-pkmixer', library_version=__version__)
    repo_url = api.create_repo(repo_id, private=private, exist_ok=True)
    api.upload_folder(repo_id=repo_url.repo_id, folder_path=folder, commit_message=commit_message)
    return str(repo_url)
