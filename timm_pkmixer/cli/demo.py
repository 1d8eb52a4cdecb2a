"""`pkmixer demo`: train an RP S-Mixer and its normal twin for about a minute on the CPU."""
import argparse
import functools

from ..validation import cli_type, positive_int, positive_real
from ._common import POSITIVE_INT, add_command

__all__ = ['add_commands']


def run(args: argparse.Namespace) -> int:
    from ..experiments.demo import run_demo
    run_demo(models=args.model, data_dir=args.data_dir, epochs=args.epochs, batch_size=args.batch_size,
             lr=args.lr, seed=args.seed, train_per_class=args.train_per_class, keep_data=args.keep_data,
             threads=args.threads,
             log=functools.partial(print, flush=True))
    return 0


def add_commands(subparsers: argparse._SubParsersAction) -> None:
    from ..experiments.demo import DEFAULT_MODELS
    p = add_command(subparsers, 'demo', run,
                    help='train an RP S-Mixer and its normal twin for about a minute on the CPU')
    p.add_argument('--model', nargs='+', default=list(DEFAULT_MODELS), help='models to train, in turn')
    p.add_argument('--data-dir', default=None, help='ImageFolder with train/ and validation/ (default: synthetic)')
    p.add_argument('--epochs', type=cli_type(positive_int, name='epochs'), default=15)
    p.add_argument('--batch-size', type=cli_type(positive_int, name='batch size'), default=64)
    p.add_argument('--lr', type=cli_type(positive_real, float, 'lr'), default=2e-3)
    p.add_argument('--seed', type=int, default=0)
    p.add_argument('--train-per-class', type=POSITIVE_INT, default=300, help='synthetic images per class (train)')
    p.add_argument('--threads', type=POSITIVE_INT, default=None,
                   help='torch threads (default: the idle cores: on a busy machine fewer threads run much faster)')
    p.add_argument('--keep-data', default=None, metavar='DIR',
                   help='write the synthetic data set into this new folder and keep it (an ImageFolder for train.py)')
