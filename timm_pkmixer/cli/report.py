"""`pkmixer report RUN_DIR… --out-dir D`: train.py run folders into the paper's table and figures."""
import argparse

from ._common import add_command

__all__ = ['add_commands']


def run(args: argparse.Namespace) -> int:
    from ..report import build_report, write_report
    report = build_report(args.runs)
    files = write_report(report, args.out_dir, figures=not args.no_figures)
    runs = sum(len(p.runs) for p in report.points)
    print(f'{runs} finished runs in {len(report.points)} points, {len(report.unfinished)} unfinished, '
          f'{len(report.conflicts)} disagreements; wrote {", ".join(str(f) for f in files)}')
    return 0


def add_commands(subparsers: argparse._SubParsersAction) -> None:
    p = add_command(subparsers, 'report', run,
                    help="train.py run folders → report.csv, report.md and the paper's figures",
                    description='Read timm train.py run folders (args.yaml + summary.csv), group the runs by point '
                                'across seeds and write report.csv, report.md and one figure per experiment.')
    p.add_argument('runs', nargs='+', help='run folders, or folders that contain them (searched for args.yaml)')
    p.add_argument('--out-dir', required=True, help='where the report goes')
    p.add_argument('--no-figures', action='store_true', help='write the tables only (no matplotlib needed)')
