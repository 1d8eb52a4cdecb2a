"""Publish a trained PK-family model on the Hugging Face Hub in timm's format (`pkmixer push`).

The folder a push uploads, and that ``pkmixer push --out-dir`` only writes:

* ``model.safetensors`` and ``config.json`` (``architecture``, ``num_classes``, ``model_args``: the model's
  resolved arguments ``model.model_args`` less the training-only rates and ``num_classes``, which sits at the root
  only; ``pretrained_cfg``; ``label_names`` of an ImageFolder run), written by timm's own ``save_for_hf``, so that
  ``timm.create_model('hf-hub:ORG/NAME', pretrained=True)`` and transformers'
  ``AutoModelForImageClassification.from_pretrained('ORG/NAME')`` rebuild the same function;
* ``README.md``, the model card (timm's ``generate_readme``, see `model_card`);
* ``train_hparams.yaml``, the run's ``args.yaml`` when it sits beside the checkpoint, less the paths of the machine
  that trained it (:data:`MACHINE_PATH_KEYS`, published as ``''``: where its data and outputs were, nothing a reader
  can use and nothing to publish).

timm's ``push_to_hf_hub`` is not used as a whole: it cannot add the recipe file, keeps an existing
README and also uploads a pickle; the upload itself is `huggingface_hub`'s ``create_repo`` +
``upload_folder``. Reading and checking the checkpoint is `checkpoint_file`'s job; nothing here changes the
model it is given (the exported ``pretrained_cfg`` goes to a shallow view of it).
"""
import copy
import json
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import torch
from timm.models import save_for_hf

from ..errors import InvalidArgumentError
from ..models._common import TRAINING_ONLY_ARGS
from .checkpoint_file import TrainingCheckpoint, read_train_args

__all__ = ['HubFolder', 'export_model_args', 'label_names_of_run', 'write_hub_folder', 'upload_to_hub', 'check_repo_id',
           'MACHINE_PATH_KEYS', 'without_machine_paths']

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


# args.yaml keys whose value is a path of the machine that trained the run
MACHINE_PATH_KEYS = ('data_dir', 'output', 'resume', 'initial_checkpoint')
_MACHINE_PATH = re.compile(rf"^({'|'.join(MACHINE_PATH_KEYS)}):(?! ''$)(?! null$).*\n(?:[ ].*\n)*", re.M)


def without_machine_paths(args_yaml: str) -> str:
    """train.py's args.yaml with the value of each of :data:`MACHINE_PATH_KEYS` replaced by ``''`` (a value
    continued on indented lines included); every other line as it was."""
    return _MACHINE_PATH.sub(lambda m: f"{m.group(1)}: ''\n", args_yaml)


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
    """Write what a push uploads into the empty or new directory `out_dir`.

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
    from .model_card import build_model_card, datasets_from_args, read_run_metrics, render_model_card
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise InvalidArgumentError(f'out_dir {out} is a file: choose a new or empty directory')
    if out.exists() and any(out.iterdir()):
        raise InvalidArgumentError(f'out_dir {out} is not empty: choose a new or empty directory')
    license = license or model.pretrained_cfg.get('license') or 'apache-2.0'
    model_args = model.model_args.to_json(exclude=TRAINING_ONLY_ARGS)  # for the card: num_classes included
    train_args = {} if expanded_from else ckpt.train_args
    hparams = None if expanded_from else ckpt.hparams_file
    if hparams is not None:
        read_train_args(hparams)  # published only if it reads safely
    exported = copy.copy(model)  # a view: the same parameters, its own pretrained_cfg
    exported.pretrained_cfg = _export_pretrained_cfg(model, train_args, license)
    label_names, label_note = label_names_of_run(ckpt.train_args, model.num_classes)
    out.mkdir(parents=True, exist_ok=True)
    _save_config(exported, out, label_names)
    if hparams is not None:
        text = Path(hparams).read_text(encoding='utf-8')
        (out / 'train_hparams.yaml').write_text(without_machine_paths(text), encoding='utf-8')
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
