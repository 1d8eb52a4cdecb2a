"""`pkmixer sweep`: one train.py recipe per point of one of the paper's experiments, and per seed."""
import argparse
import shlex

from ._common import POSITIVE_INT, POSITIVE_REAL, ParseKwargs, add_command

__all__ = ['add_commands']


def run(args: argparse.Namespace) -> int:
    from ..sweep import write_sweep
    paths = write_sweep(args.recipe, args.out_dir, args.permutation, args.seeds, args.omega, args.experiment,
                        args.model_kwargs, args.gamma, args.dims)
    print(f'# {len(paths)} recipes in {args.out_dir}; run each with (add --data-dir … where the data lives):')
    for p in paths:
        print(f'pkmixer train {shlex.quote(str(p))}')
    return 0


def add_commands(subparsers: argparse._SubParsersAction) -> None:
    from ..sweep import EXPERIMENTS
    p = add_command(subparsers, 'sweep', run,
                    help="write one train.py recipe per point (and seed) of one of the paper's experiments",
                    description="Write one train.py recipe per point and seed of one of the paper's experiments: "
                                'width (Fig. 5, 6), depth (Fig. 7), rp-block (Fig. S.4), gamma (Fig. S.3), '
                                'patch (Fig. S.5).')
    p.add_argument('recipe', help='base recipe: a file or a packaged name, e.g. cifar10/s_mixer_fig7')
    p.add_argument('--experiment', choices=EXPERIMENTS, default='width', help='which experiment (default: width)')
    p.add_argument('--out-dir', required=True, help='folder for the generated recipes')
    p.add_argument('--permutation', nargs='+', choices=('random', 'normal'), default=['random', 'normal'],
                   help='RP and/or normal Mixers (default: both, as in the paper)')
    p.add_argument('--seeds', nargs='+', type=int, default=[0], help='training (and permutation / mask) seeds')
    p.add_argument('--omega', type=POSITIVE_INT, default=None,
                   help='Ω of the width sweep (2^18 = 262144 by default) or of the gamma sweep (2^20)')
    p.add_argument('--gamma', type=POSITIVE_REAL, default=None, help='γ of an MLP-Mixer width sweep (D.2; default 4)')
    p.add_argument('--dims', type=POSITIVE_INT, nargs='+', default=None,
                   help='channels C of an MLP-Mixer width sweep (default D.2\'s 16 32 48 64 83 113 173)')
    p.add_argument('--model-kwargs', nargs='*', default={}, action=ParseKwargs,
                   help='model arguments added to the base recipe, e.g. num_tokens=64 embed_dim=64 num_blocks=4')
