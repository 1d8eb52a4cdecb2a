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
           'data_source', 'fetch_data', 'named_dataset_classes', 'OWN_DATA']

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
            return (f'dataset: an image folder, {root} (sub-folders {self.splits[0]}/ and {self.splits[1]}/, one '
                    f'folder per class)' + ('' if self.present else ': no such folder'))
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
    (`pkmixer launch` plans every recipe of a sweep, most on one dataset)."""
    from timm.data import create_dataset
    try:
        create_dataset(name, root=root or None, split=split, download=False)
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
        root = source.root or "''"
        raise DataUnavailableError(f"--data-dir {root}: no such folder (the run's dataset is an image folder: give "
                                   f'the folder holding {source.splits[0]}/ and {source.splits[1]}/)')
    if source.kind not in ('fashion-mnist', 'torchvision') or source.present:
        return
    if not source.download:
        raise DataUnavailableError(source.describe().replace('dataset: ', f'dataset {source.name}: ', 1))
    from timm.data import create_dataset
    try:
        with network_timeout():
            for split in source.splits:
                create_dataset(source.name, root=source.root or None, split=split, download=True)
    except (OSError, RuntimeError) as e:  # no network (URLError), a refused connection, a bad checksum
        reason = ' '.join(str(e).split())
        way = f'pkmixer prepare-fashion-mnist {source.root or "DIR"}, or ' if source.kind == 'fashion-mnist' else ''
        raise DataUnavailableError(f'dataset {source.name}: could not download it into {source.root or "."} '
                                   f'({type(e).__name__}: {reason}). Without a network, {way}{OWN_DATA}') from None



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
