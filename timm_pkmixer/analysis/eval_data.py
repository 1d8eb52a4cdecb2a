"""The evaluation images an analysis computes on (CKA, Fig. 2): a run's evaluation transform, its split checked
against the folder, and the same random mini-batches of the same examples for every model.

Everything is read from a run's train.py arguments (a mapping, as :func:`~timm_pkmixer.runs.run_folder.
read_args_yaml` or a checkpoint gives them); the caller's values win. Errors name the argument (``split``,
``data_dir``), for the command line to say as its flag.
"""
from pathlib import Path
from typing import Any, Dict, Mapping, Optional

import torch
from timm.data import create_dataset, create_transform, resolve_data_config

from .._timm import EVAL_SPLIT_NAMES, TRAIN_SPLIT_NAMES
from ..errors import ArgumentValueError, InvalidArgumentError
from .compare import MIN_BATCH, random_batches

__all__ = ['FOLDER_DATASETS', 'eval_data_config', 'check_split', 'eval_loader']

# timm's names of an image folder (a dataset read from data_dir's sub-folders)
FOLDER_DATASETS = ('', 'folder', 'image_folder', 'torch/folder', 'torch/image_folder')


def eval_data_config(train_args: Mapping[str, Any], model: torch.nn.Module) -> Dict[str, Any]:
    """Evaluation transform settings: the run's (as train.py resolves them), else the model's own input size."""
    args = dict(train_args)
    if not args.get('input_size') and not args.get('img_size') and hasattr(model, 'img_size'):
        args['input_size'] = (model.in_chans, *model.img_size)
    return resolve_data_config(args, model=model)


def check_split(data_dir: Path, dataset: str, split: str) -> None:
    """An image folder must hold the split's sub-folder (or one of timm's synonyms for it): timm falls back to the
    whole folder, i.e. to other images, when it finds none. Named datasets and tar files are not checked.

    Raises:
        ArgumentValueError: (``split``) the folder has no such sub-folder; the message lists those it has.
    """
    if dataset not in FOLDER_DATASETS or not data_dir.is_dir():
        return  # named datasets (torch/…, hfds/…) know their splits; a tar file is read as it is
    base = split.split('[')[0]
    synonyms = EVAL_SPLIT_NAMES if base in EVAL_SPLIT_NAMES else TRAIN_SPLIT_NAMES if base in TRAIN_SPLIT_NAMES else ()
    names = [base] + [s for s in synonyms if s != base]
    if not any((data_dir / n).is_dir() for n in names):
        present = sorted(p.name for p in data_dir.iterdir() if p.is_dir())[:8]
        raise ArgumentValueError(
            'split', f'{split!r}: {data_dir} has no sub-folder {" or ".join(names)} (it has: '
                     f'{", ".join(present) or "no sub-folders"}); timm would read the whole folder, other images, '
                     f'instead')


def eval_loader(
        train_args: Mapping[str, Any],
        config: Mapping[str, Any],
        batch_size: int,
        batch_seed: int = 0,
        num_samples: Optional[int] = None,
        data_dir: Optional[str] = None,
        dataset: Optional[str] = None,
        split: Optional[str] = None,
) -> torch.utils.data.DataLoader:
    """Random mini-batches (:func:`~timm_pkmixer.analysis.compare.random_batches`, seeded by `batch_seed`) of the
    evaluation split, transformed by `config` (:func:`eval_data_config`): the same batches of the same examples for
    every model given the same arguments.

    Args:
        train_args: The run's train.py arguments: ``data_dir``, ``dataset`` and ``val_split`` where not given.
        config: The evaluation transform's settings.
        batch_size: Images per mini-batch.
        batch_seed: Seed of the random mini-batches.
        num_samples: Use a random subset of this many examples (None: all).
        data_dir: The data folder (default: the run's).
        dataset: timm's dataset name (default: the run's; '' is an image folder).
        split: The split to read (default: the run's ``val_split``, else 'validation').

    Raises:
        ArgumentValueError: no `data_dir` given or recorded; a `split` the image folder lacks.
        FileNotFoundError: `data_dir` does not exist.
        InvalidArgumentError: fewer than :data:`~timm_pkmixer.analysis.compare.MIN_BATCH` (4) examples.
    """
    data_dir = data_dir or train_args.get('data_dir')
    if not data_dir:
        raise ArgumentValueError('data_dir', 'must be given: the run does not record its data_dir')
    if not Path(data_dir).exists():
        raise FileNotFoundError(2, 'no data folder', str(data_dir))
    split = split or train_args.get('val_split') or 'validation'
    name = dataset if dataset is not None else train_args.get('dataset') or ''
    check_split(Path(data_dir), name, split)
    images = create_dataset(name, root=data_dir, split=split, is_training=False)
    images.transform = create_transform(**config, is_training=False)
    count = len(images) if num_samples is None else min(num_samples, len(images))
    if count < MIN_BATCH:
        raise InvalidArgumentError(f'{data_dir} split {split!r} holds {count} examples; CKA needs at least '
                                   f'{MIN_BATCH}')
    batches = random_batches(len(images), batch_size, batch_seed, num_samples)
    return torch.utils.data.DataLoader(images, batch_sampler=batches, num_workers=0)
