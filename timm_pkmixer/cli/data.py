"""`pkmixer prepare-stl10 DIR` (STL-10 as an ImageFolder) and `pkmixer prepare-fashion-mnist DIR` (Fashion-MNIST in
the layout timm's ``torch/fashion_mnist`` reads)."""
import argparse
from pathlib import Path

from ._common import add_command, in_flag_terms

__all__ = ['add_commands']

# how train.py reads Fashion-MNIST (the packaged fashion_mnist/ recipes: 1 channel), for the validate.py line
FASHION_MNIST_ARGS = {'dataset': 'torch/fashion_mnist', 'val_split': 'validation'}


def run_stl10(args: argparse.Namespace) -> int:
    from ..data.datasets import prepare_stl10
    counts = prepare_stl10(args.out_dir, args.download_root or str(Path(args.out_dir) / 'raw'))
    for folder, per_class in counts.items():
        print(f'{Path(args.out_dir) / folder}: {sum(per_class.values())} images in {len(per_class)} classes')
    return 0


def run_fashion_mnist(args: argparse.Namespace) -> int:
    from ..data.fashion_mnist import fashion_mnist_raw_dir, prepare_fashion_mnist
    from ..publish.model_card import validate_command
    with in_flag_terms(args, 'source'):  # the library's `source`, within a sentence, is this command's --source
        prepared = prepare_fashion_mnist(args.out_dir, args.source, download=not args.no_download)
    origin = {'debian': "Debian's dataset-fashion-mnist", 'folder': 'the folder',
              'already prepared': 'already prepared, checked and kept:',
              'torchvision download': "torchvision's download from"}[prepared.source]
    print(f'{fashion_mnist_raw_dir(prepared.root)}: Fashion-MNIST, {prepared.counts["train"]} train and '
          f'{prepared.counts["test"]} test images, 10 classes ({origin} {prepared.origin})')
    print(f'train on it with: pkmixer train fashion_mnist/s_mixer_fig7 --data-dir {prepared.root}')
    print(f"validate a model trained on it (pushed to the Hub as ORG/NAME) with timm's validate.py: "
          f"{validate_command('hf-hub:ORG/NAME', 1, FASHION_MNIST_ARGS, prepared.root)}")
    return 0


def add_commands(subparsers: argparse._SubParsersAction) -> None:
    p = add_command(subparsers, 'prepare-stl10', run_stl10,
                    help='download STL-10 and write it as an ImageFolder for train.py',
                    description='Download STL-10 (torchvision) and write it as an ImageFolder for train.py.')
    p.add_argument('out_dir', help='output folder (gets train/ and validation/)')
    p.add_argument('--download-root', default=None, help='where torchvision keeps the archive (default: OUT_DIR/raw)')
    p = add_command(subparsers, 'prepare-fashion-mnist', run_fashion_mnist,
                    help="write Fashion-MNIST where timm's torch/fashion_mnist reads it (Debian's copy, or download)",
                    description="Write Fashion-MNIST into OUT_DIR/FashionMNIST/raw, the layout torchvision's "
                                "FashionMNIST (timm's --dataset torch/fashion_mnist) reads with --data-dir OUT_DIR: "
                                "from Debian's dataset-fashion-mnist when it is installed (/usr/share/datasets/"
                                "fashion-mnist), else from --source, else by torchvision's download. Every file is "
                                'checked (IDX header, size, labels, class counts); a folder already prepared is '
                                'checked and kept.')
    p.add_argument('out_dir', help="the dataset root: train.py's --data-dir")
    p.add_argument('--source', default=None,
                   help='a folder holding the four upstream .gz files (default: Debian\'s, when installed)')
    p.add_argument('--no-download', action='store_true', help="never download (fail if there is no local copy)")
