"""`pkmixer models`: the table of every registered model."""
import argparse

from ..errors import InvalidArgumentError
from ._common import add_command

__all__ = ['add_commands']


def run(args: argparse.Namespace) -> int:
    from ..catalog import list_pkmixer_models, summarize
    rows = [summarize(name).row() for name in list_pkmixer_models() if not args.filter or args.filter in name]
    if not rows:
        raise InvalidArgumentError(f'no registered model matches {args.filter!r}')
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


def add_commands(subparsers: argparse._SubParsersAction) -> None:
    p = add_command(subparsers, 'models', run,
                    help='table of every registered model: params, GMACs, S, C, depth, γ, m, p, permutation')
    p.add_argument('filter', nargs='?', default='', help='only names containing this text')
    p.add_argument('--markdown', action='store_true', help='print a Markdown table')
