"""`pkmixer prepare-stl10 DIR`: STL-10 as an ImageFolder for train.py (timm has no ``torch/stl10``).

torchvision downloads and reads STL-10; this writes its labelled ``train`` split to ``DIR/train/<class>/`` and
its ``test`` split to ``DIR/validation/<class>/`` as PNG files, which timm's default (folder) dataset reads
with ``--data-dir DIR``.
"""
from pathlib import Path
from typing import Callable, Dict, Optional, Sequence

from ..errors import UserInputError

__all__ = ['export_image_folder', 'prepare_stl10', 'write_digits_image_folder']


PROGRESS_EVERY = 1000  # images written between two progress lines


def export_image_folder(dataset: Sequence, class_names: Sequence[str], out_dir: Path,
                        progress: Optional[Callable[[str], None]] = None) -> Dict[str, int]:
    """Write every (PIL image, label) of ``dataset`` to ``out_dir/<class name>/<index>.png``; count per class.
    `progress` (optional) receives a line every :data:`PROGRESS_EVERY` images and after the last."""
    counts = {name: 0 for name in class_names}
    for name in class_names:
        (out_dir / name).mkdir(parents=True, exist_ok=True)
    total = len(dataset)
    for i in range(total):
        if progress is not None and i and i % PROGRESS_EVERY == 0:
            progress(f'{out_dir}: {i}/{total} images written')
        image, label = dataset[i]
        if not 0 <= int(label) < len(class_names):
            raise ValueError(f'sample {i} has label {label}, outside the {len(class_names)} classes')
        name = class_names[int(label)]
        image.save(out_dir / name / f'{i:06d}.png')
        counts[name] += 1
    if progress is not None:
        progress(f'{out_dir}: {total}/{total} images written')
    return counts


def prepare_stl10(out_dir: str, download_root: str, download: bool = True,
                  progress: Optional[Callable[[str], None]] = None) -> Dict[str, Dict[str, int]]:
    """Download (torchvision, which shows its own download bar) and export STL-10: ``train`` → ``out_dir/train``,
    ``test`` → ``out_dir/validation``; `progress` as :func:`export_image_folder`'s."""
    from torchvision.datasets import STL10
    out = {}
    for split, folder in (('train', 'train'), ('test', 'validation')):
        try:
            ds = STL10(download_root, split=split, download=download)
        except OSError as e:  # no network (URLError), a refused connection, a full disk
            raise UserInputError(
                f'could not get STL-10 into {download_root} ({type(e).__name__}: {e}). Without network access, '
                f'put stl10_binary.tar.gz (https://ai.stanford.edu/~acoates/stl10/) in that folder first') from e
        out[folder] = export_image_folder(ds, ds.classes, Path(out_dir) / folder, progress)
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
