"""`pkmixer recipes`: the packaged training recipes, by name."""
import argparse

from ..errors import InvalidArgumentError
from ._common import add_command

__all__ = ['add_commands']


def run(args: argparse.Namespace) -> int:
    from ..sweeps.recipes import list_recipes
    rows = [r for r in list_recipes() if not args.filter or args.filter in r.name]
    if not rows:
        raise InvalidArgumentError(f'no packaged recipe matches {args.filter!r}')
    if args.path:
        for r in rows:
            print(r.path)
        return 0
    cols = ('name', 'dataset', 'model', 'paper')
    table = [(r.name, r.dataset, r.model, r.section) for r in rows]
    widths = [max(len(c), *(len(t[i]) for t in table)) for i, c in enumerate(cols)]
    print('  '.join(c.ljust(w) for c, w in zip(cols, widths)).rstrip())
    for t in table:
        print('  '.join(v.ljust(w) for v, w in zip(t, widths)).rstrip())
    return 0


def add_commands(subparsers: argparse._SubParsersAction) -> None:
    p = add_command(subparsers, 'recipes', run, help='list the packaged train.py recipes (name, dataset, model, paper)',
                    description='The packaged recipes for timm\'s train.py; `pkmixer train NAME` and '
                                '`pkmixer sweep NAME` take a name such as imagenet/rp_mixer_b_w, or a file.')
    p.add_argument('filter', nargs='?', default='', help='only names containing this text')
    p.add_argument('--path', action='store_true', help='print the files instead of the table')
