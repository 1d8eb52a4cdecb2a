"""`pkmixer prepare-stl10 DIR`: STL-10 as an ImageFolder for train.py (timm has no ``torch/stl10``)."""
import argparse
from pathlib import Path

from ._common import add_command, progress

__all__ = ['add_commands']


def run(args: argparse.Namespace) -> int:
    from ..experiments.datasets import prepare_stl10
    counts = prepare_stl10(args.out_dir, args.download_root or str(Path(args.out_dir) / 'raw'), progress=progress)
    for folder, per_class in counts.items():
        print(f'{Path(args.out_dir) / folder}: {sum(per_class.values())} images in {len(per_class)} classes')
    return 0


def add_commands(subparsers: argparse._SubParsersAction) -> None:
    p = add_command(subparsers, 'prepare-stl10', run,
                    help='download STL-10 and write it as an ImageFolder for train.py',
                    description='Download STL-10 (torchvision) and write it as an ImageFolder for train.py.')
    p.add_argument('out_dir', help='output folder (gets train/ and validation/)')
    p.add_argument('--download-root', default=None, help='where torchvision keeps the archive (default: OUT_DIR/raw)')
