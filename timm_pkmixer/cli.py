"""The `pkmixer` command (also `python -m timm_pkmixer`)."""
import argparse
import sys
from typing import List, Optional

__all__ = ['main']


def _cmd_models(args: argparse.Namespace) -> int:
    from .catalog import list_pkmixer_models, summarize
    rows = [summarize(name).row() for name in list_pkmixer_models() if not args.filter or args.filter in name]
    if not rows:
        print(f'no registered model matches {args.filter!r}', file=sys.stderr)
        return 1
    cols = list(rows[0])
    if args.markdown:
        print('| ' + ' | '.join(cols) + ' |')
        print('|' + '|'.join('---' for _ in cols) + '|')
        for r in rows:
            print('| ' + ' | '.join(f'`{r[c]}`' if c == 'model' else r[c] for c in cols) + ' |')
    else:
        widths = {c: max(len(c), *(len(r[c]) for r in rows)) for c in cols}
        print('  '.join(c.ljust(widths[c]) for c in cols))
        for r in rows:
            print('  '.join(r[c].ljust(widths[c]) for c in cols))
    return 0


def _cmd_demo(args: argparse.Namespace) -> int:
    from .demo import run_demo
    run_demo(models=args.model, data_dir=args.data_dir, epochs=args.epochs, batch_size=args.batch_size,
             lr=args.lr, seed=args.seed, train_per_class=args.train_per_class)
    return 0


def build_parser() -> argparse.ArgumentParser:
    from .datasets import add_prepare_stl10_command
    from .demo import DEFAULT_MODELS
    from .hub import add_push_command
    from .launch import add_train_command
    from .research import add_research_commands
    from .sweep import add_sweep_command
    parser = argparse.ArgumentParser(prog='pkmixer', description=__doc__.splitlines()[0] + ' PK-family Mixers for timm.')
    sub = parser.add_subparsers(dest='command', required=True)

    p = sub.add_parser('models', help='table of every registered model: params, GMACs, S, C, depth, γ, m, p')
    p.add_argument('filter', nargs='?', default='', help='only names containing this text')
    p.add_argument('--markdown', action='store_true', help='print a Markdown table')
    p.set_defaults(func=_cmd_models)

    p = sub.add_parser('demo', help='train an RP S-Mixer and its normal twin for about a minute on the CPU')
    p.add_argument('--model', nargs='+', default=list(DEFAULT_MODELS), help='models to train, in turn')
    p.add_argument('--data-dir', default=None, help='ImageFolder with train/ and validation/ (default: synthetic)')
    p.add_argument('--epochs', type=int, default=15)
    p.add_argument('--batch-size', type=int, default=64)
    p.add_argument('--lr', type=float, default=2e-3)
    p.add_argument('--seed', type=int, default=0)
    p.add_argument('--train-per-class', type=int, default=300, help='synthetic images per class (train)')
    p.set_defaults(func=_cmd_demo)

    add_train_command(sub)
    add_sweep_command(sub)
    add_prepare_stl10_command(sub)
    add_push_command(sub)
    add_research_commands(sub)
    return parser


def main(argv: Optional[List[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    return args.func(args)


if __name__ == '__main__':
    sys.exit(main())
