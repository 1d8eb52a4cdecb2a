"""`pkmixer status DIR`: one line per run of a launched folder (pending, running, finished, unfinished, failed,
cancelled)."""
import argparse
import json
from collections import Counter
from pathlib import Path

from ._common import add_command

__all__ = ['add_commands']


def run(args: argparse.Namespace) -> int:
    from ..launch.launcher import read_status
    from ..launch.tasks import STATES
    statuses = read_status(Path(args.dir))
    counts = Counter(s.state for s in statuses)
    if args.json:
        print(json.dumps(dict(runs=[s.as_dict() for s in statuses], total={k: counts[k] for k in STATES}), indent=1))
        return 0
    for status in statuses:
        print(status.line())
    print(f'total {len(statuses)}: ' + ', '.join(f'{counts[k]} {k}' for k in STATES))
    return 0


def add_commands(subparsers: argparse._SubParsersAction) -> None:
    p = add_command(subparsers, 'status', run, help='where the runs of a launched folder are',
                    description='One line per recipe of DIR: pending, running, finished, unfinished (epoch k of n), '
                                'failed (with the last lines of its log) or cancelled (left the queue, or its '
                                'launcher ended, before it started: nothing runs it), and a total line. Finished is '
                                'what `pkmixer report` counts: every epoch train.py runs has its summary row.')
    p.add_argument('dir', help='a folder of recipes given to `pkmixer launch`')
    p.add_argument('--json', action='store_true', help='one JSON object: every run and the totals')
