"""`pkmixer report RUN_DIR… [--out-dir D]`: train.py runs into the paper's table and figures."""
import argparse
import sys
from pathlib import Path

from ..errors import InvalidArgumentError, UserInputError
from ._common import add_command

__all__ = ['add_commands']


def default_out_dir(first: str) -> Path:
    """Where the report goes without --out-dir: ``report/`` in the first folder given (beside an epochs.csv given
    first: in its folder)."""
    path = Path(first)
    return (path if path.is_dir() else path.parent) / 'report'


def run(args: argparse.Namespace) -> int:
    from ..reports.report import build_report, write_report
    from ..sweeps.claims import parse_claim
    claims = []
    for text in args.claim or ():
        try:
            claims.append(parse_claim(text))
        except UserInputError as e:
            raise InvalidArgumentError(f'--claim: {e}') from None
    report = build_report(args.runs, args.experiment, claims)
    files, skipped = write_report(report, args.out_dir or default_out_dir(args.runs[0]),
                                  figures=not args.no_figures)
    runs = sum(len(p.runs) for p in report.points)
    resumed = report.resumed()
    said = (f', {len(resumed)} resumed ({sum(a for _, _, a in resumed)} of them averaged; marked in report.md)'
            if resumed else '')
    print(f'{report.experiment}: {runs} runs averaged in {len(report.points)} groups, {len(report.listed)} listed '
          f'(not averaged){said}, {len(report.unreadable)} unreadable folders; wrote '
          f'{", ".join(str(f) for f in files)}')
    for line in report_verdict_lines(files):
        print(line)
    for name, why in report.unreadable:
        print(f'{args.prog}: cannot read {name}: {why}', file=sys.stderr)
    if skipped:
        print(f'{args.prog}: figures not drawn: {skipped}', file=sys.stderr)
    return 0


def report_verdict_lines(files) -> list:
    """The verdict's one-line sentences from the verdict.json just written (a line saying none is declared)."""
    from ..reports.report import VERDICT_JSON
    from ..state_files import read_json
    path = next((f for f in files if Path(f).name == VERDICT_JSON), None)
    record = read_json(path, lambda why: InvalidArgumentError(f'{path}: {why}'), {}) if path else None
    if not record:
        return []
    return ([f'verdict: {c["word"]} — {c["sentence"]}' for c in record.get('claims', [])] or
            ['verdict: no claim declared (report.md says how to declare one)'])


def add_commands(subparsers: argparse._SubParsersAction) -> None:
    from ..sweeps.sweep_tables import EXPERIMENTS
    p = add_command(subparsers, 'report', run,
                    help="train.py runs → report.csv, report.md, epochs.csv and the paper's figures",
                    description='Read timm train.py run folders (args.yaml + summary.csv, named anything, resumed or '
                                'stopped short), group the runs whose arguments agree on everything but the seed, '
                                'and write report.csv, report.md, epochs.csv (every run, every epoch) and the '
                                "experiment's figure. Runs that are not measurements are listed with the reason.")
    p.add_argument('runs', nargs='+', help='run folders, folders that contain them (searched for args.yaml), or an '
                                           'epochs.csv written by an earlier report')
    p.add_argument('--out-dir', default=None, help='where the report goes (default: report/ in the first folder given, '
                                                    'e.g. `pkmixer report DIR` of a launched folder writes DIR/report)')
    p.add_argument('--experiment', choices=EXPERIMENTS, default=None,
                   help="name the experiment (default: the one the runs' sweep named, else from what varies "
                        'between the groups)')
    p.add_argument('--no-figures', action='store_true', help='write the tables only (no matplotlib needed)')
    p.add_argument('--claim', action='append', default=None, metavar='JSON',
                   help="judge a claim of your own beside the ones the runs' sweeps declared (repeatable; said to be "
                        'declared after the runs): the JSON of `pkmixer sweep --claim` (docs/research_tools.md, '
                        '"Claims and verdicts")')
