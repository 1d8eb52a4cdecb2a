"""Datasets for train.py: where a run's data come from (:func:`data_source`, what `pkmixer train` prints in its
plan, and :func:`fetch_data`, which gets a download done before train.py starts, failing in one line), and
`pkmixer prepare-stl10 DIR`: STL-10 as an ImageFolder (timm has no ``torch/stl10``).

torchvision downloads and reads STL-10; this writes its labelled ``train`` split to ``DIR/train/<class>/`` and
its ``test`` split to ``DIR/validation/<class>/`` as PNG files, which timm's default (folder) dataset reads
with ``--data-dir DIR``.
"""
import functools
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from ..errors import UserInputError
from .fashion_mnist import FASHION_MNIST_CLASSES, FASHION_MNIST_FILES, fashion_mnist_raw_dir, network_timeout

__all__ = ['export_image_folder', 'prepare_stl10', 'write_digits_image_folder', 'DataSource', 'DataUnavailableError',
           'data_source', 'fetch_data', 'named_dataset_classes', 'OWN_DATA', 'DataNeeds', 'SplitContents', 'DataCheck',
           'check_data', 'split_folder', 'split_names']

_logger = logging.getLogger(__name__)

# how to train a recipe on data one has, said wherever a dataset cannot be had (train.py's own flags)
OWN_DATA = ("train on an image folder you have instead: --dataset '' --data-dir DIR --num-classes N (DIR/train/<class>/"
            "…, DIR/validation/<class>/…)")


class DataUnavailableError(UserInputError, FileNotFoundError):
    """A run's dataset is not there and cannot be had (no such folder, no network for a download); the message says
    how to get it, or how to train on data one has."""


@dataclass(frozen=True)
class DataSource:
    """Where train.py reads a run's data: its ``--dataset`` (`name`), ``--data-dir`` (`root`), whether it would
    download (`download`), the kind (``folder``: an image folder; ``fashion-mnist``: torchvision's layout, as
    `pkmixer prepare-fashion-mnist` writes it; ``torchvision``: another of torchvision's datasets; ``other``: a timm
    reader, e.g. ``hfds/``) and whether it is there (`present`; None when that is not known without train.py)."""
    name: str
    root: str
    kind: str
    download: bool
    present: Optional[bool]
    splits: tuple = ('train', 'validation')

    def describe(self) -> str:
        """One line: what the dataset is, where it comes from, and what happens when it is not there."""
        root = self.root or "'' (no --data-dir given)"
        if self.kind == 'folder':
            folders = (f'sub-folders {self.splits[0]}/ and {self.splits[1]}/' if self.splits[1] else
                       f'sub-folder {self.splits[0]}/, no validation split')
            return (f'dataset: an image folder, {root} ({folders}, one folder per class)'
                    + ('' if self.present else ': no such folder'))
        if self.kind == 'other':
            return f'dataset: {self.name} from {root} (read by timm\'s reader)'
        what = ('Fashion-MNIST (torchvision\'s FashionMNIST), ' + str(Path(self.root) / 'FashionMNIST' / 'raw')
                if self.kind == 'fashion-mnist' else f'{self.name} (torchvision\'s) in {root}')
        if self.present:
            return f'dataset: {what} (there)'
        if self.download:
            return (f'dataset: {what}: not there yet, torchvision downloads it (a network is needed; without one, '
                    f'{OWN_DATA})')
        way = (f'pkmixer prepare-fashion-mnist {root} writes it' if self.kind == 'fashion-mnist'
               else '--dataset-download fetches it')
        return f'dataset: {what}: not there ({way}; or {OWN_DATA})'


def data_source(name: Optional[str], root: Optional[str], download: bool = False,
                splits: Sequence[str] = ('train', 'validation')) -> DataSource:
    """Where train.py's ``create_dataset(name, root, …)`` reads: a torchvision dataset is looked for in `root` as
    torchvision does (without downloading), an image folder by its folder."""
    name, root = name or '', root or ''
    prefix, sep, rest = name.partition('/')
    if not sep or prefix.lower() == 'folder':
        return DataSource(name, root, 'folder', False, bool(root) and os.path.isdir(root), tuple(splits))
    if prefix.lower() != 'torch':
        return DataSource(name, root, 'other', download, None, tuple(splits))
    if rest.lower() == 'fashion_mnist':
        raw = fashion_mnist_raw_dir(Path(root))
        present = all((raw / f).is_file() for f in FASHION_MNIST_FILES)
        return DataSource(name, root, 'fashion-mnist', download, present, tuple(splits))
    return DataSource(name, root, 'torchvision', download, _torchvision_present(name, root, splits[0]), tuple(splits))


def named_dataset_classes(name: str, root: Optional[str] = None, split: str = 'train') -> Tuple[Optional[List[str]],
                                                                                                  str]:
    """(class names in label order, note) of a dataset train.py reads by name (``torch/…``): Fashion-MNIST's ten
    (:data:`~.fashion_mnist.FASHION_MNIST_CLASSES`, whether or not its files are here), else torchvision's own list
    (``classes``) of the dataset in `root`, read without downloading. None with a note saying why where the names
    cannot be had here (the data not on this machine); None and no note for a dataset that is not a torchvision one
    (an image folder's classes are its folders: timm reads those)."""
    prefix, sep, rest = (name or '').partition('/')
    if not sep or prefix.lower() != 'torch':
        return None, ''
    if rest.lower() == 'fashion_mnist':
        return list(FASHION_MNIST_CLASSES), ''
    from timm.data import create_dataset
    try:
        classes = getattr(create_dataset(name, root=root or None, split=split, download=False), 'classes', None)
    except Exception as e:  # noqa: BLE001  (torchvision's "Dataset not found", an unknown name: no names, said why)
        reason = ' '.join(str(e).split()) or type(e).__name__
        return None, f'its class names could not be read from {root or "no --data-dir"} ({reason})'
    if not classes:
        return None, f'torchvision\'s {rest} names no classes'
    return [str(c) for c in classes], ''


@functools.lru_cache(maxsize=16)
def _torchvision_present(name: str, root: str, split: str) -> Optional[bool]:
    """Whether torchvision finds `name` in `root` without downloading (None: it cannot tell); asked once per process
    (`pkmixer launch` plans every recipe of a sweep, most on one dataset; `pkmixer train` then checks what it read)."""
    try:
        _torch_split(name, root, split)
    except RuntimeError:  # torchvision: "Dataset not found or corrupted. You can use download=True …"
        return False
    except Exception:  # noqa: BLE001  (anything else: train.py will report it)
        return None
    return True


def fetch_data(source: DataSource) -> None:
    """Before train.py starts: get a torchvision download done (both splits, as train.py asks for them) or refuse in
    one line; refuse an image folder or a Fashion-MNIST folder that is not there, saying how to get one.

    Raises:
        DataUnavailableError: the data are not there and cannot be had here.
    """
    if source.kind == 'folder' and not source.present:
        raise DataUnavailableError(_no_folder(source))
    if source.kind not in ('fashion-mnist', 'torchvision') or source.present:
        return
    if not source.download:
        raise DataUnavailableError(source.describe().replace('dataset: ', f'dataset {source.name}: ', 1))
    from timm.data import create_dataset
    try:
        with network_timeout():
            for split in source.splits:
                create_dataset(source.name, root=source.root or None, split=split, download=True)
        _torchvision_present.cache_clear()  # asked before the download: there now
        _torch_split.cache_clear()
    except (OSError, RuntimeError) as e:  # no network (URLError), a refused connection, a bad checksum
        reason = ' '.join(str(e).split())
        way = f'pkmixer prepare-fashion-mnist {source.root or "DIR"}, or ' if source.kind == 'fashion-mnist' else ''
        raise DataUnavailableError(f'dataset {source.name}: could not download it into {source.root or "."} '
                                   f'({type(e).__name__}: {reason}). Without a network, {way}{OWN_DATA}') from None


def _no_folder(source: DataSource) -> str:
    root = source.root or "''"
    held = f'{source.splits[0]}/ and {source.splits[1]}/' if source.splits[1] else f'{source.splits[0]}/'
    return f"--data-dir {root}: no such folder (the run's dataset is an image folder: give the folder holding {held})"


# ---------------------------------------------------------------------- what the data hold, against what the run needs

@dataclass(frozen=True)
class DataNeeds:
    """What a run asks of its data, as train.py builds it: the model's input `channels` (train.py's ``in_chans``,
    `channels_from` says where it comes from), its `num_classes` outputs (None: not known), `batch_size` images per
    process and step for `processes` processes, `input_size` (C, H, W) the transforms give, train.py's
    ``--input-img-mode`` (None: its default, RGB for 3 channels, else L) and ``--class-map``."""
    channels: int
    channels_from: str
    num_classes: Optional[int]
    num_classes_from: str
    batch_size: Optional[int]
    processes: int = 1
    input_size: Tuple[int, ...] = ()
    input_img_mode: Optional[str] = None
    class_map: str = ''


@dataclass(frozen=True)
class SplitContents:
    """One split as train.py will read it: its images, its class names in label order (None: not known) and the PIL
    mode and (width, height) of its first image as train.py receives it (None: no image read)."""
    images: int
    classes: Optional[Tuple[str, ...]]
    mode: Optional[str]
    size: Optional[Tuple[int, int]]


@dataclass(frozen=True)
class DataCheck:
    """What :func:`check_data` found: each problem the run would meet (the run cannot be what the user meant), and
    what the data hold, said plainly (lines for the plan)."""
    problems: Tuple[str, ...]
    found: Tuple[str, ...]


def split_names(split: str) -> Tuple[str, ...]:
    """The folder names timm's folder dataset looks for `split` under (its ``_search_split``), in its order: the
    split's own name, then its synonyms (train, training; or val, valid, validation, eval, evaluation)."""
    from .._timm import EVAL_SPLIT_NAMES, TRAIN_SPLIT_NAMES
    name = split.split('[')[0]
    synonyms = TRAIN_SPLIT_NAMES if name in TRAIN_SPLIT_NAMES else EVAL_SPLIT_NAMES if name in EVAL_SPLIT_NAMES else ()
    return tuple(dict.fromkeys((name, *synonyms)))


def split_folder(root: Path, split: str) -> Optional[Path]:
    """The folder timm's folder dataset reads `split` from under `root` (the first of :func:`split_names` there), or
    None where there is none and timm would read `root` itself."""
    return next((root / s for s in split_names(split) if os.path.exists(root / s)), None)


def _plural(n: int, word: str) -> str:
    return f'{n} {word}{"" if n == 1 else "es" if word.endswith("s") else "s"}'


def _bands(mode: str) -> int:
    """The channels of a PIL image mode (L: 1, RGB: 3, RGBA: 4)."""
    from PIL import Image
    return Image.getmodebands(mode)


def _names(classes: Sequence[str], most: int = 5) -> str:
    shown = ', '.join(classes[:most])
    return shown + (f', … ({len(classes)} in all)' if len(classes) > most else '')


@functools.lru_cache(maxsize=8)
def _folder_split(folder: str) -> SplitContents:
    """An image folder's split as timm's folder reader lists it (its own ``find_images_and_targets``: every image
    below `folder`, labelled by the name of the folder holding it), with its first image's mode and size."""
    from PIL import Image
    from timm.data.readers.reader_image_folder import find_images_and_targets
    samples, class_to_idx = find_images_and_targets(folder)
    mode = size = None
    if samples:
        try:
            with Image.open(samples[0][0]) as image:
                mode, size = image.mode, image.size
        except OSError as e:
            raise UserInputError(f'{samples[0][0]}: not an image train.py can read ({e})') from None
    return SplitContents(len(samples), tuple(class_to_idx), mode, size)


@functools.lru_cache(maxsize=8)
def _torch_split(name: str, root: str, split: str) -> SplitContents:
    """A torchvision dataset's split as timm's ``create_dataset`` builds it (no download): its length, classes and
    first image."""
    from timm.data import create_dataset
    ds = create_dataset(name, root=root or None, split=split, download=False)
    image = ds[0][0] if len(ds) else None
    classes = getattr(ds, 'classes', None)
    return SplitContents(len(ds), tuple(map(str, classes)) if classes else None, getattr(image, 'mode', None),
                         getattr(image, 'size', None))


# torchvision's datasets with a training and a test set only (timm: the training set for train/training, the test
# set for any other split), with the PIL mode, class count and side of their images: checked before a download
_TRAIN_OR_TEST = {'cifar10': ('RGB', 10, 32), 'cifar100': ('RGB', 100, 32), 'mnist': ('L', 10, 28),
                  'kmnist': ('L', 10, 28), 'fashion_mnist': ('L', 10, 28), 'qmnist': ('L', 10, 28)}


def _torch_splits(source: DataSource) -> List[str]:
    """The problems of the split names of a torchvision dataset with a training and a test set only."""
    from .._timm import EVAL_SPLIT_NAMES, TRAIN_SPLIT_NAMES
    train, val = source.splits
    problems = []
    if train not in TRAIN_SPLIT_NAMES:
        problems.append(f'the training split {train!r} of {source.name} is its test set (it has a training set and a '
                        f'test set, and timm reads the test set for any split but train or training): the run would '
                        f'train on the test images; give --train-split train')
    if val in TRAIN_SPLIT_NAMES:
        problems.append(f'the validation split {val!r} of {source.name} is its training set: the run would validate '
                        f'on the training images; give --val-split validation (its test set)')
    elif val and val not in EVAL_SPLIT_NAMES and val != 'test':
        problems.append(f'the validation split {val!r} is not a split of {source.name} (timm reads its test set for '
                        f'validation, test, val, valid, eval or evaluation, and for any misspelt name): give '
                        f"--val-split validation, or --val-split '' to validate on nothing")
    return problems


def _channel_problem(where: str, mode: str, size: Optional[Tuple[int, int]], needs: DataNeeds) -> List[str]:
    """A torchvision dataset's images (not converted by timm) against the model's input channels."""
    bands = _bands(mode)
    if bands == needs.channels:
        return []
    shape = f', {size[0]}×{size[1]}' if size else ''
    return [f'{where}: its images have {_plural(bands, "channel")} ({mode}{shape}), and the model takes '
            f'{needs.channels} ({needs.channels_from}): timm does not convert a torchvision dataset\'s images, so '
            f'train.py would stop at its first batch. Give --in-chans {bands} with a {bands}-value --mean and --std, '
            f'or a recipe made for this dataset']


def _class_problem(where: str, classes: Sequence[str], needs: DataNeeds) -> List[str]:
    if needs.num_classes is None or len(classes) == needs.num_classes:
        return []
    return [f'{where}: {_plural(len(classes), "class")} ({_names(list(classes))}), and the model has '
            f'{needs.num_classes} outputs ({needs.num_classes_from}): give --num-classes {len(classes)}']


def _batch_problem(where: str, images: int, needs: DataNeeds) -> List[str]:
    """Fewer training images than one step's batch: train.py's loader drops an incomplete last batch (drop_last)."""
    if not needs.batch_size:
        return []
    per_process = -(-images // needs.processes)  # a distributed sampler pads each process's share to the same size
    if per_process >= needs.batch_size:
        return []
    most = f'{per_process} or fewer' if per_process > 1 else '1'
    processes = f' in each of {needs.processes} processes' if needs.processes > 1 else ''
    return [f'{where}: {_plural(images, "training image")}, fewer than one batch of {needs.batch_size}{processes}: '
            f'train.py drops an incomplete last batch, so the run would make no step. Give -b/--batch-size {most}, '
            f'or more images']


def _size_note(contents: SplitContents, read_as: str, needs: DataNeeds) -> str:
    """The first image's size and mode, the mode train.py reads it as, and the size the transforms give it."""
    shape = f'{contents.size[0]}×{contents.size[1]} ' if contents.size else ''
    converted = f', read as {read_as}' if contents.mode != read_as else ''
    to = f'; resized and cropped to {needs.input_size[2]}×{needs.input_size[1]} by train.py\'s transforms' \
        if len(needs.input_size) == 3 else ''
    return f'images {shape}{contents.mode}{converted} ({_plural(_bands(read_as), "channel")}{to})'


def _check_folder(source: DataSource, needs: DataNeeds) -> DataCheck:
    """An image folder: each split's own folder (not the root, which timm falls back to), images in it, the same class
    names in both splits, as many as the model's outputs, a training batch, and channels train.py can convert to."""
    root = Path(source.root)
    train_split, val_split = source.splits
    problems: List[str] = []
    splits = {}
    for role, split in (('training', train_split), ('validation', val_split)):
        if role == 'validation' and not split:
            continue
        folder = split_folder(root, split)
        if folder is None:
            inside = sorted(p.name + '/' for p in root.iterdir() if p.is_dir())
            held = f'it holds {", ".join(inside)}' if inside else 'it holds no folder'
            way = ("give --val-split the name of the validation folder, or --val-split '' to validate on nothing"
                   if role == 'validation' else 'give --train-split the name of the training folder')
            names = [f'{n}/' for n in split_names(split)]
            looked = names[0] if len(names) == 1 else f'{", ".join(names[:-1])} or {names[-1]}'
            problems.append(f'image folder {root}: no {looked} folder for the {role} split {split!r} '
                            f'({held}): timm would read all of {root} as the {role} images'
                            + (', the training images included' if role == 'validation' else '') + f'; {way}')
            continue
        if role == 'validation' and 'training' in splits and folder == splits['training'][0]:
            problems.append(f'image folder {root}: the validation split {split!r} is the training folder {folder}: the '
                            f'run would validate on its training images; give --val-split the name of the validation '
                            f'folder')
            continue
        try:
            contents = _folder_split(str(folder))
        except UserInputError as e:  # its first image cannot be read
            problems.append(str(e))
            continue
        if not contents.images:
            problems.append(f'image folder {folder}: no {role} images (timm reads .png, .jpg and .jpeg files in '
                            f'<class>/ folders)')
            continue
        splits[role] = (folder, contents)
    read_as = needs.input_img_mode or ('RGB' if needs.channels == 3 else 'L')
    if _bands(read_as) != needs.channels:
        problems.append(f'the model takes {needs.channels} input channels ({needs.channels_from}) and train.py reads '
                        f'the images as {read_as} ({_plural(_bands(read_as), "channel")}): give --input-img-mode a '
                        f'mode of {needs.channels} channels, or --in-chans {_bands(read_as)}')
    found = []
    if 'training' in splits:
        folder, train = splits['training']
        problems += _batch_problem(f'image folder {folder}', train.images, needs)
        if not needs.class_map:
            problems += _class_problem(f'image folder {folder}', train.classes, needs)
        found.append(f'data: image folder {folder}: {_plural(train.images, "training image")} in '
                     f'{_plural(len(train.classes), "class")} ({_names(list(train.classes))}); '
                     + _size_note(train, read_as, needs))
    if 'validation' in splits:
        folder, val = splits['validation']
        found.append(f'data: image folder {folder}: {_plural(val.images, "validation image")}')
        if 'training' in splits and not needs.class_map and set(val.classes) != set(train.classes):
            only_train = sorted(set(train.classes) - set(val.classes))
            only_val = sorted(set(val.classes) - set(train.classes))
            parts = [f'only in {f.name}/: {_names(names)}' for f, names in
                     ((splits['training'][0], only_train), (folder, only_val)) if names]
            problems.append(f'image folder {root}: {splits["training"][0].name}/ and {folder.name}/ name different '
                            f'classes ({"; ".join(parts)}): timm numbers the class folders of each split on its own, '
                            f'so a validation label would name another class')
    if not val_split:
        found.append("data: no validation split (val_split ''): train.py validates nothing, so the run records no "
                     'eval top-1')
    if needs.class_map:
        found.append(f'data: classes from the class map {needs.class_map} (not checked against the folders here)')
    return DataCheck(tuple(problems), tuple(found))


def _check_torchvision(source: DataSource, needs: DataNeeds) -> DataCheck:
    """A torchvision dataset: its splits' names, and once it is there (or, before a download, from what is known of
    it) its images' channels, its classes and a training batch."""
    rest = source.name.partition('/')[2].lower()
    known = _TRAIN_OR_TEST.get(rest)
    problems = _torch_splits(source) if known else []
    if not source.present:
        if not source.download:
            return DataCheck(tuple(problems + [source.describe().replace('dataset: ', f'dataset {source.name}: ', 1)]),
                             ())
        after = 'checked once downloaded, before train.py starts'
        if not known:
            return DataCheck(tuple(problems), (f'data: dataset {source.name}: not there yet, its images and classes '
                                               f'{after}',))
        mode, count, side = known  # what is known of it now, all of it checked again once it is downloaded
        problems += _channel_problem(f'dataset {source.name}', mode, (side, side), needs)
        problems += _class_problem(f'dataset {source.name}', [f'{i}' for i in range(count)], needs)
        return DataCheck(tuple(problems), (f'data: dataset {source.name}: not there yet; known: {side}×{side} {mode} '
                                           f'images ({_plural(_bands(mode), "channel")}), {count} classes; its images '
                                           f'{after}',))
    try:
        train = _torch_split(source.name, source.root, source.splits[0])
        val = _torch_split(source.name, source.root, source.splits[1]) if source.splits[1] else None
    except Exception as e:  # noqa: BLE001  (a file torchvision cannot read, a name it does not know: said, by name)
        reason = ' '.join(str(e).split()) or type(e).__name__
        return DataCheck(tuple(problems + [f'dataset {source.name} in {source.root or "."} cannot be read '
                                           f'({type(e).__name__}: {reason})']), ())
    where = f'dataset {source.name}'
    if train.mode:
        problems += _channel_problem(where, train.mode, train.size, needs)
    if train.classes and not needs.class_map:
        problems += _class_problem(where, train.classes, needs)
    problems += _batch_problem(where, train.images, needs)
    if val is not None and not val.images:
        problems.append(f'{where}: no validation images in split {source.splits[1]!r}')
    shown = (f'{_plural(len(train.classes), "class")} ({_names(list(train.classes))}); ' if train.classes else '')
    found = [f'data: {where}: {_plural(train.images, "training image")}, '
             + (f'{_plural(val.images, "validation image")}, ' if val is not None else '') + shown
             + (_size_note(train, train.mode, needs) if train.mode else 'its images not read here')]
    if val is None:
        found.append("data: no validation split (val_split ''): train.py validates nothing, so the run records no "
                     'eval top-1')
    return DataCheck(tuple(problems), tuple(found))


def check_data(source: DataSource, needs: DataNeeds) -> DataCheck:
    """What the run's data hold against what the run needs, as train.py will read them: every problem that would stop
    train.py or train on something else than meant (no such folder; a split timm would read from elsewhere, the
    training images as the validation ones; no images; different class names in the two splits; classes other than
    the model's outputs; fewer training images than one batch: no step; images whose channels the model does not
    take), each named, and what the data hold, said plainly. A dataset read by another of timm's readers
    (``hfds/``, ``wds/`` …) is not checked here (said so)."""
    if source.kind == 'folder':
        if not source.present:
            return DataCheck((_no_folder(source),), ())
        return _check_folder(source, needs)
    if source.kind in ('fashion-mnist', 'torchvision'):
        return _check_torchvision(source, needs)
    return DataCheck((), (f"data: {source.name} is read by timm's reader: its images and classes are not checked "
                          f'here',))


PROGRESS_EVERY = 1000  # images written between two progress lines


def export_image_folder(dataset: Sequence, class_names: Sequence[str], out_dir: Path) -> Dict[str, int]:
    """Write every (PIL image, label) of ``dataset`` to ``out_dir/<class name>/<index>.png``; count per class.
    Logs a line every :data:`PROGRESS_EVERY` images and after the last."""
    counts = {name: 0 for name in class_names}
    for name in class_names:
        (out_dir / name).mkdir(parents=True, exist_ok=True)
    total = len(dataset)
    for i in range(total):
        if i and i % PROGRESS_EVERY == 0:
            _logger.info(f'{out_dir}: {i}/{total} images written')
        image, label = dataset[i]
        if not 0 <= int(label) < len(class_names):
            raise ValueError(f'sample {i} has label {label}, outside the {len(class_names)} classes')
        name = class_names[int(label)]
        image.save(out_dir / name / f'{i:06d}.png')
        counts[name] += 1
    _logger.info(f'{out_dir}: {total}/{total} images written')
    return counts


def prepare_stl10(out_dir: str, download_root: str, download: bool = True) -> Dict[str, Dict[str, int]]:
    """Download (torchvision, which shows its own download bar) and export STL-10: ``train`` → ``out_dir/train``,
    ``test`` → ``out_dir/validation``; logs :func:`export_image_folder`'s lines."""
    from torchvision.datasets import STL10
    out = {}
    for split, folder in (('train', 'train'), ('test', 'validation')):
        try:
            ds = STL10(download_root, split=split, download=download)
        except OSError as e:  # no network (URLError), a refused connection, a full disk
            raise UserInputError(
                f'could not get STL-10 into {download_root} ({type(e).__name__}: {e}). Without network access, '
                f'put stl10_binary.tar.gz (https://ai.stanford.edu/~acoates/stl10/) in that folder first') from e
        out[folder] = export_image_folder(ds, ds.classes, Path(out_dir) / folder)
    return out


def write_digits_image_folder(root: str, split_seed: int = 0, test_fraction: float = 0.5) -> Dict[str, Dict[str, int]]:
    """scikit-learn's bundled 8×8 handwritten digits (1797 images, 10 classes, no download) as an ImageFolder:
    a stratified split into ``root/train`` and ``root/validation``, 8×8 RGB PNGs (gray in all three channels,
    0..16 scaled to 0..255). Needs scikit-learn (the ``research`` extra)."""
    try:
        from sklearn.datasets import load_digits
        from sklearn.model_selection import train_test_split
    except ImportError as e:
        from ..errors import MissingDependencyError
        raise MissingDependencyError("the digits data set needs scikit-learn: pip install scikit-learn (or "
                                     "'.[research]' in a checkout)") \
            from e
    import numpy as np
    from PIL import Image
    digits = load_digits()
    idx = np.arange(len(digits.target))
    train, test = train_test_split(idx, test_size=test_fraction, random_state=split_seed, stratify=digits.target)
    names = [str(c) for c in range(10)]
    out = {}
    for folder, part in (('train', train), ('validation', test)):
        images = [(Image.fromarray((digits.images[i] * 255 / 16).round().astype(np.uint8)).convert('RGB'),
                   int(digits.target[i])) for i in part]
        out[folder] = export_image_folder(images, names, Path(root) / folder)
    return out
