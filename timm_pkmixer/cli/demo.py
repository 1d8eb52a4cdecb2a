"""`pkmixer demo`: train an RP S-Mixer and its normal twin on the CPU, on Fashion-MNIST whenever it can be had."""
import argparse

from ..validation import cli_type, positive_int, positive_real
from ._common import MODEL_NAME, POSITIVE_INT, add_command, in_flag_terms

__all__ = ['add_commands']


def run(args: argparse.Namespace) -> int:
    """Progress (the threads, the data, each run and epoch) on stderr as the demo logs it; the table, how long it
    trained, what RP is, what the paper predicts and the reading on stdout, after an empty line that sets them apart
    from the progress on a terminal; then, if runs diverged, an error naming them (exit status 2)."""
    from ..training.demo import check_converged, run_demo, summary_lines
    with in_flag_terms(args, 'data', 'data_dir', 'keep_data', 'train_per_class', 'val_per_class', 'lr'):
        results = run_demo(models=args.model, data=args.data, data_dir=args.data_dir, epochs=args.epochs,
                           batch_size=args.batch_size, lr=args.lr, seed=args.seed, seeds=args.seeds,
                           train_per_class=args.train_per_class, val_per_class=args.val_per_class,
                           keep_data=args.keep_data, cache_dir=args.cache_dir, download=not args.no_download,
                           threads=args.threads)
        print('\n'.join(['', *summary_lines(results)]), flush=True)
        check_converged(results)  # runs that diverged: named, with what to do (exit status 2)
    return 0


def add_commands(subparsers: argparse._SubParsersAction) -> None:
    from ..data.demo_data import CACHE_ENV, FASHION_PER_CLASS, SHAPES_PER_CLASS
    from ..training.demo import DATA_CHOICES, DEFAULT_MODELS
    p = add_command(subparsers, 'demo', run,
                    help='train an RP S-Mixer and its normal twin on Fashion-MNIST (2-3 minutes on the CPU)',
                    description='Train an RP S-Mixer and its normal twin, each with --seeds seeds, on Fashion-MNIST '
                                'when it can be had (prepared under the cache folder from Debian\'s '
                                'dataset-fashion-mnist or torchvision\'s download), else on Synthetic Shapes; the '
                                'first lines say which. The same command and seed print the same numbers.')
    p.add_argument('--model', nargs='+', type=MODEL_NAME, default=list(DEFAULT_MODELS),
                   help='models to train, in turn')
    p.add_argument('--data', choices=DATA_CHOICES, default='auto',
                   help='auto: Fashion-MNIST when it can be had, else Synthetic Shapes (default: auto)')
    p.add_argument('--data-dir', default=None,
                   help='an ImageFolder with train/ and validation/, or a prepared Fashion-MNIST (pkmixer '
                        'prepare-fashion-mnist DIR), instead')
    p.add_argument('--epochs', type=cli_type(positive_int, name='epochs'), default=None,
                   help='epochs per run (default: 4 on Fashion-MNIST, 15 on Synthetic Shapes)')
    p.add_argument('--batch-size', type=cli_type(positive_int, name='batch size'), default=64)
    p.add_argument('--lr', type=cli_type(positive_real, float, 'lr'), default=2e-3)
    p.add_argument('--seed', type=int, default=0, help='the first seed (and the synthetic data\'s)')
    p.add_argument('--seeds', type=POSITIVE_INT, default=2,
                   help='seeds per model: their spread is the run-to-run noise the reading states (default: 2)')
    p.add_argument('--train-per-class', type=POSITIVE_INT, default=None,
                   help=f'training images per class (default: {FASHION_PER_CLASS[0]} of Fashion-MNIST, '
                        f'{SHAPES_PER_CLASS} synthetic)')
    p.add_argument('--val-per-class', type=POSITIVE_INT, default=None,
                   help=f'Fashion-MNIST validation images per class (default: {FASHION_PER_CLASS[1]})')
    p.add_argument('--cache-dir', default=None,
                   help=f'where Fashion-MNIST is prepared (default: ${CACHE_ENV}, else $XDG_CACHE_HOME/timm_pkmixer '
                        f'or ~/.cache/timm_pkmixer)')
    p.add_argument('--no-download', action='store_true', help='never download Fashion-MNIST')
    p.add_argument('--threads', type=POSITIVE_INT, default=None,
                   help='torch threads (default: the idle cores: on a busy machine fewer threads run much faster)')
    p.add_argument('--keep-data', default=None, metavar='DIR',
                   help='write Synthetic Shapes into this new folder, train on them and keep them (an ImageFolder '
                        'for train.py)')
