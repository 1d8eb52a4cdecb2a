"""`pkmixer report RUN_DIR… [--out-dir D]`: train.py runs into the paper's table and figures."""
import argparse
import sys
from pathlib import Path

from ._common import add_command

__all__ = ['add_commands']


def default_out_dir(first: str) -> Path:
    """Where the report goes without --out-dir: ``report/`` in the first folder given (beside an epochs.csv given
    first: in its folder)."""
    path = Path(first)
    return (path if path.is_dir() else path.parent) / 'report'


def run(args: argparse.Namespace) -> int:
    from ..reports.report import build_report, write_report
    report = build_report(args.runs, args.experiment)
    files, skipped = write_report(report, args.out_dir or default_out_dir(args.runs[0]),
                                  figures=not args.no_figures)
    runs = sum(len(p.runs) for p in report.points)
    resumed = report.resumed()
    said = (f', {len(resumed)} resumed ({sum(a for _, _, a in resumed)} of them averaged; marked in report.md)'
            if resumed else '')
    print(f'{report.experiment}: {runs} runs averaged in {len(report.points)} groups, {len(report.listed)} listed '
          f'(not averaged){said}, {len(report.unreadable)} unreadable folders; wrote '
          f'{", ".join(str(f) for f in files)}')
    for name, why in report.unreadable:
        print(f'{args.prog}: cannot read {name}: {why}', file=sys.stderr)
    if skipped:
        print(f'{args.prog}: figures not drawn: {skipped}', file=sys.stderr)
    return 0


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
