"""`pkmixer status DIR`: one line per run of a launched folder (pending, running, finished, unfinished, failed,
cancelled, stale) and the train.py arguments its launches give every run. Reads files only: imports neither torch
nor timm."""
import argparse
import json
import shlex
from collections import Counter
from pathlib import Path

from ._common import add_command

__all__ = ['add_commands']


def run(args: argparse.Namespace) -> int:
    from ..launch.launcher import read_launch_train_args, read_status
    from ..launch.tasks import STATES
    folder = Path(args.dir)
    statuses = read_status(folder)
    train_args = read_launch_train_args(folder)
    counts = Counter(s.state for s in statuses)
    if args.json:
        print(json.dumps(dict(runs=[s.as_dict() for s in statuses], total={k: counts[k] for k in STATES},
                              train_args=train_args), indent=1))
        return 0
    if train_args is not None:
        print(f'train.py arguments of every run: {shlex.join(train_args) or "(none)"}')
    for status in statuses:
        print(status.line())
    print(f'total {len(statuses)}: ' + ', '.join(f'{counts[k]} {k}' for k in STATES))
    return 0


def add_commands(subparsers: argparse._SubParsersAction) -> None:
    p = add_command(subparsers, 'status', run, help='where the runs of a launched folder are',
                    description='One line per recipe of DIR: pending, running, finished, unfinished (epoch k of n), '
                                'failed (with the last lines of its log), cancelled (left the queue, or its '
                                'launcher ended, before it started: nothing runs it) or stale (finished, but its '
                                "recipe or the launch's train.py arguments changed since: with what changed), the "
                                'train.py arguments the launches give every run, and a total line that counts every '
                                'state, in this order, zeros included (`total 2: 0 pending, 0 running, 2 finished, '
                                '0 unfinished, 0 failed, 0 cancelled, 0 stale`; --json: the same keys). Finished is '
                                'what `pkmixer report` counts: every epoch train.py runs has its summary row.')
    p.add_argument('dir', help='a folder of recipes given to `pkmixer launch`')
    p.add_argument('--json', action='store_true', help='one JSON object: every run, the totals and the train.py '
                                                       'arguments')
