"""`pkmixer train RECIPE [train.py args…]`: run timm's own train.py with a recipe and this plugin registered."""
import argparse
import hashlib
import os

from ..validation import cli_type, positive_int
from ._common import add_command

__all__ = ['add_commands']


def run(args: argparse.Namespace) -> int:
    from ..errors import InvalidArgumentError
    from ..train_py import (
        TRAIN_PY_ENV,
        find_train_py,
        format_train_args,
        load_train_py,
        prepare_train,
        run_train,
        train_py_arguments,
    )
    if args.list_train_args:
        path = find_train_py(args.train_py)
        digest = hashlib.sha256(path.read_bytes()).hexdigest()[:16]
        print(format_train_args(train_py_arguments(load_train_py(path)), f'train.py sha256 {digest}…'), end='')
        return 0
    if not args.recipe:
        raise InvalidArgumentError(f'a RECIPE is required (e.g. train_recipes/imagenet/rp_mixer_b_w.yaml); '
                                   f'train.py from --train-py or ${TRAIN_PY_ENV}')
    plan = prepare_train(args.recipe, args.train_args, args.train_py, args.global_batch)
    if int(os.environ.get('RANK', '0')) == 0:
        for line in plan.describe():
            print(line, flush=True)
    if not args.dry_run:
        run_train(plan)
    return 0


def add_commands(subparsers: argparse._SubParsersAction) -> None:
    from ..train_py import TRAIN_PY_ENV
    p = add_command(
        subparsers, 'train', run,
        help="run timm's train.py with a recipe (works under torchrun: -m timm_pkmixer train …)",
        description="Run timm's own train.py with a recipe and this plugin registered.",
        epilog='Arguments after the recipe go to train.py unchanged.')
    p.add_argument('recipe', nargs='?', help='a YAML recipe, e.g. train_recipes/imagenet/rp_mixer_b_w.yaml')
    p.add_argument('train_args', nargs=argparse.REMAINDER, help='train.py arguments (override the recipe)')
    p.add_argument('--train-py', default=None, help=f"path of timm's train.py (default: ${TRAIN_PY_ENV})")
    p.add_argument('--global-batch', type=cli_type(positive_int, name='global batch'), default=None,
                   help='set grad_accum_steps so that batch_size × processes × steps equals this')
    p.add_argument('--dry-run', action='store_true', help='print the resolved plan and stop')
    p.add_argument('--list-train-args', action='store_true',
                   help="print train.py's argument names (the data file train_recipes/train_py_args.txt)")
