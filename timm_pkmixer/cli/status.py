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
    verdict = verdict_lines(folder, statuses)
    if args.json:
        print(json.dumps(dict(runs=[s.as_dict() for s in statuses], total={k: counts[k] for k in STATES},
                              train_args=train_args, verdict=verdict), indent=1))
        return 0
    if train_args is not None:
        print(f'train.py arguments of every run: {shlex.join(train_args) or "(none)"}')
    for status in statuses:
        print(status.line())
    for line in verdict:
        print(line)
    print(f'total {len(statuses)}: ' + ', '.join(f'{counts[k]} {k}' for k in STATES))  # the last line, always
    return 0


def verdict_lines(folder: Path, statuses: list) -> list:
    """What `pkmixer status` says of the declared claims of a folder `pkmixer sweep` wrote (its sweep.json; nothing
    for a folder of hand-written recipes): the verdict lines of the report `pkmixer report DIR` wrote
    (DIR/report/verdict.json) when it is newer than every run's summary.csv, else what judges them and when. Reads
    files only."""
    from ..errors import InvalidArgumentError
    from ..runs.run_folder import SUMMARY_CSV
    from ..state_files import read_json
    from ..sweeps.claims import claims_from_records
    if not (folder / 'sweep.json').is_file():  # hand-written recipes: no sweep declared anything
        return []
    try:
        record = read_json(folder / 'sweep.json', lambda why: InvalidArgumentError(why), {}) or {}
        claims = claims_from_records(record.get('sweeps') or [])
    except InvalidArgumentError as e:
        return [f'verdict: the claims of sweep.json cannot be read ({e})']
    if not claims:
        return ['verdict: no claim declared in sweep.json (`pkmixer sweep … --claim JSON` declares one before the '
                'runs; `pkmixer report DIR --claim JSON` judges one after them)']
    names = ', '.join(c.name for c in claims)
    finished = sum(s.state == 'finished' for s in statuses)
    if finished < len(statuses):
        return [f'verdict: {len(claims)} claim{"s" if len(claims) > 1 else ""} declared ({names}): judged by '
                f'`pkmixer report {folder}` once every run has finished ({finished} of {len(statuses)} have)']
    path = folder / 'report' / 'verdict.json'
    newest = max((p.stat().st_mtime for s in statuses if (p := Path(s.run_dir) / SUMMARY_CSV).is_file()),
                 default=0.0)
    try:
        judged = read_json(path, lambda why: InvalidArgumentError(why), {}) if path.is_file() else None
    except InvalidArgumentError:
        judged = None
    if judged is None or path.stat().st_mtime < newest:
        return [f'verdict: every run has finished: `pkmixer report {folder}` judges the {len(claims)} claim'
                f'{"s" if len(claims) > 1 else ""} declared ({names})']
    return [f'verdict: {c.get("word")} — {c.get("sentence")}' for c in judged.get('claims') or []]


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
