"""`pkmixer sweep`: one train.py recipe per point of a sweep."""
import argparse
import shlex

from ._common import POSITIVE_INT, add_command

__all__ = ['add_commands']


def run(args: argparse.Namespace) -> int:
    from ..sweep import write_sweep
    paths = write_sweep(args.recipe, args.out_dir, args.permutation, args.seeds, args.omega)
    print(f'# {len(paths)} recipes in {args.out_dir}; run each with (add --data-dir … where the data lives):')
    for p in paths:
        print(f'pkmixer train {shlex.quote(str(p))}')
    return 0


def add_commands(subparsers: argparse._SubParsersAction) -> None:
    p = add_command(subparsers, 'sweep', run, help='write one train.py recipe per point of a width sweep at fixed Ω',
                    description='Write one train.py recipe per point of a width sweep at fixed Ω.')
    p.add_argument('recipe', help='base recipe, e.g. train_recipes/imagenet/rp_mixer_b_w.yaml')
    p.add_argument('--out-dir', required=True, help='folder for the generated recipes')
    p.add_argument('--permutation', nargs='+', choices=('random', 'normal'), default=['random', 'normal'],
                   help='RP and/or normal Mixers (default: both, as in the paper)')
    p.add_argument('--seeds', nargs='+', type=int, default=[0], help='training (and permutation) seeds')
    p.add_argument('--omega', type=POSITIVE_INT, default=None, help='Ω of the S-Mixer sweep (2^18 = 262144 by default)')
