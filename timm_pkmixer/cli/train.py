"""`pkmixer train RECIPE [train.py args…]`: run timm's own train.py with a recipe and this plugin registered."""
import argparse
import hashlib
import os
import traceback

from ..errors import InvalidArgumentError
from ..validation import cli_type, positive_int
from ._common import add_command

__all__ = ['add_commands']


_FLAGS = ('--dry-run', '--list-train-args')
_VALUED = {'--train-py': 'train_py', '--global-batch': 'global_batch'}


def _own_options_after_the_recipe(args: argparse.Namespace) -> None:
    """Move this command's options found among the train.py arguments (after the recipe) into `args`."""
    rest, items = [], iter(args.train_args)
    for item in items:
        flag, sep, value = item.partition('=')
        if item in _FLAGS:
            setattr(args, item[2:].replace('-', '_'), True)
        elif flag in _VALUED:
            if not sep:
                value = next(items, None)
                if value is None:
                    raise InvalidArgumentError(f'argument {flag}: expected one argument')
            dest = _VALUED[flag]
            setattr(args, dest, args.parse_value[dest](value) if dest in args.parse_value else value)
        else:
            rest.append(item)
    args.train_args = rest


def run(args: argparse.Namespace) -> int:
    _own_options_after_the_recipe(args)
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
        try:
            run_train(plan)
        except Exception:  # train.py's own failure, whatever its type: its traceback, as train.py prints it
            traceback.print_exc()
            return 1
    return 0


def _raising(convert, flag: str):
    """An argparse type converter whose errors are raised as user errors naming `flag`."""
    def parse(text: str):
        try:
            return convert(text)
        except argparse.ArgumentTypeError as e:
            raise InvalidArgumentError(f'argument {flag}: {e}') from None
    return parse


def add_commands(subparsers: argparse._SubParsersAction) -> None:
    from ..train_py import TRAIN_PY_ENV
    p = add_command(
        subparsers, 'train', run,
        help="run timm's train.py with a recipe (works under torchrun: -m timm_pkmixer train …)",
        description="Run timm's own train.py with a recipe and this plugin registered.",
        epilog="This command's own options may come before or after the recipe; every other argument after the "
               'recipe goes to train.py unchanged.')
    p.add_argument('recipe', nargs='?', help='a YAML recipe, e.g. train_recipes/imagenet/rp_mixer_b_w.yaml')
    p.add_argument('train_args', nargs=argparse.REMAINDER, help='train.py arguments (override the recipe)')
    p.add_argument('--train-py', default=None, help=f"path of timm's train.py (default: ${TRAIN_PY_ENV})")
    global_batch = cli_type(positive_int, name='global batch')
    p.set_defaults(parse_value={'global_batch': _raising(global_batch, '--global-batch')})
    p.add_argument('--global-batch', type=global_batch, default=None,
                   help='set grad_accum_steps so that batch_size × processes × steps equals this')
    p.add_argument('--dry-run', action='store_true', help='print the resolved plan and stop')
    p.add_argument('--list-train-args', action='store_true',
                   help="print train.py's argument names (the data file train_recipes/train_py_args.txt)")
