"""`pkmixer prepare-stl10 DIR`: STL-10 as an ImageFolder for train.py (timm has no ``torch/stl10``).

torchvision downloads and reads STL-10; this writes its labelled ``train`` split to ``DIR/train/<class>/`` and
its ``test`` split to ``DIR/validation/<class>/`` as PNG files, which timm's default (folder) dataset reads
with ``--data-dir DIR``.
"""
from pathlib import Path
from typing import Dict, Sequence

__all__ = ['export_image_folder', 'prepare_stl10']


def export_image_folder(dataset: Sequence, class_names: Sequence[str], out_dir: Path) -> Dict[str, int]:
    """Write every (PIL image, label) of ``dataset`` to ``out_dir/<class name>/<index>.png``; count per class."""
    counts = {name: 0 for name in class_names}
    for name in class_names:
        (out_dir / name).mkdir(parents=True, exist_ok=True)
    for i in range(len(dataset)):
        image, label = dataset[i]
        if not 0 <= int(label) < len(class_names):
            raise ValueError(f'sample {i} has label {label}, outside the {len(class_names)} classes')
        name = class_names[int(label)]
        image.save(out_dir / name / f'{i:06d}.png')
        counts[name] += 1
    return counts


def prepare_stl10(out_dir: str, download_root: str, download: bool = True) -> Dict[str, Dict[str, int]]:
    """Download (torchvision) and export STL-10: ``train`` → ``out_dir/train``, ``test`` → ``out_dir/validation``."""
    from torchvision.datasets import STL10
    out = {}
    for split, folder in (('train', 'train'), ('test', 'validation')):
        ds = STL10(download_root, split=split, download=download)
        out[folder] = export_image_folder(ds, ds.classes, Path(out_dir) / folder)
    return out
