"""`pkmixer report`: finished timm train.py runs back into the paper's tables and figures.

Each run folder holds what train.py writes: ``args.yaml`` (every argument, among them the model, its
``model_kwargs``, the seed and the run's name ``<point>_seed<N>`` that `pkmixer sweep` gives it) and
``summary.csv`` (one row per epoch). Runs are grouped by point across seeds:

* a run with fewer epochs in ``summary.csv`` than it was set to train (``epochs + cooldown_epochs``) is
  *unfinished*: listed, not averaged;
* runs of one point that disagree on anything but the seed (and the bookkeeping keys in :data:`RUN_ONLY_KEYS`)
  are split into separate rows, each flagged, never averaged together.

``top1_err`` is 100 − the last epoch's ``eval_top1``; ``best_top1_err`` uses the best epoch; sd is the sample
standard deviation over seeds (n − 1). Outputs: ``report.csv``, ``report.md`` and one figure per experiment in
the paper's form (error against C and m for width, against L for depth, per-block bars for rp-block, against
C for gamma, against P for patch) plus the eval-loss curves of normal and RP models (D.7).
"""
import csv
import math
import re
import statistics
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Sequence, Tuple

import yaml

from .errors import InvalidArgumentError, UserInputError

__all__ = ['RUN_ONLY_KEYS', 'SEED_MODEL_ARGS', 'Run', 'Point', 'Report', 'read_run', 'find_runs', 'build_report',
           'write_report', 'COLUMNS']

# args.yaml keys that say where or how a run was executed, not what was trained
RUN_ONLY_KEYS = ('seed', 'experiment', 'output', 'resume', 'no_resume_opt', 'start_epoch', 'log_interval',
                 'recovery_interval', 'checkpoint_hist', 'workers', 'pin_mem', 'device', 'local_rank',
                 'log_wandb', 'wandb_project', 'wandb_tags', 'wandb_resume_id', 'config', 'device_modules',
                 'initial_checkpoint', 'resume_epoch', 'torchcompile', 'worker_seeding', 'dist_bn')
SEED_MODEL_ARGS = ('perm_seed', 'mask_seed')  # model arguments sweeps tie to the training seed
COLUMNS = ('experiment', 'point', 'model', 'num_blocks', 'num_tokens', 'embed_dim', 'width', 'permutation',
           'density', 'omega', 'gamma', 'patch_size', 'runs', 'seeds', 'epochs', 'top1_err_mean', 'top1_err_sd',
           'best_top1_err_mean', 'eval_loss_mean', 'note')
_SEED_SUFFIX = re.compile(r'[-_]seed(\d+)$')
_EXPERIMENT_PREFIX = {'depth_': 'depth', 'rpblock_': 'rp-block', 'gamma_': 'gamma', 'patch_': 'patch'}


def _natural(text: str) -> Tuple:
    """'depth_L4' before 'depth_L12': numbers compared as numbers."""
    return tuple(int(t) if t.isdigit() else t for t in re.split(r'(\d+)', text))


def _experiment(point: str) -> str:
    return next((e for prefix, e in _EXPERIMENT_PREFIX.items() if point.startswith(prefix)), 'width')


def _floats(rows: List[Dict[str, str]], key: str) -> List[float]:
    return [float(r[key]) if r.get(key) not in (None, '') else math.nan for r in rows]


@dataclass
class Run:
    """One train.py run folder."""
    path: Path
    name: str
    point: str
    experiment: str
    seed: int
    model: str
    model_kwargs: Dict[str, Any]
    args: Dict[str, Any]
    planned_epochs: int
    curves: Dict[str, List[float]]          # summary.csv columns (epoch, train_loss, eval_loss, eval_top1, …)

    @property
    def epochs_done(self) -> int:
        return len(self.curves.get('epoch', []))

    @property
    def finished(self) -> bool:
        return self.epochs_done >= self.planned_epochs and 'eval_top1' in self.curves

    @property
    def top1_err(self) -> float:
        return 100. - self.curves['eval_top1'][-1]

    @property
    def best_top1_err(self) -> float:
        return 100. - max(v for v in self.curves['eval_top1'] if not math.isnan(v))

    @property
    def eval_loss(self) -> float:
        return self.curves['eval_loss'][-1]

    def signature(self) -> Tuple:
        """What must agree between the seeds of one point: every argument but the seed and the bookkeeping."""
        args = {k: v for k, v in self.args.items() if k not in RUN_ONLY_KEYS}
        args['model_kwargs'] = {k: v for k, v in (self.model_kwargs or {}).items() if k not in SEED_MODEL_ARGS}
        return tuple(sorted((k, yaml.safe_dump(v, default_flow_style=True).strip()) for k, v in args.items()))


def read_run(path: Path) -> Run:
    """A run folder written by train.py (``args.yaml``; ``summary.csv`` may be missing or short)."""
    path = Path(path)
    args_file = path / 'args.yaml'
    if not args_file.is_file():
        raise FileNotFoundError(2, 'not a train.py run folder (no args.yaml)', str(path))
    try:
        args = yaml.safe_load(args_file.read_text())
    except yaml.YAMLError as e:
        raise InvalidArgumentError(f'{args_file}: not valid YAML ({" ".join(str(e).split())})') from e
    if not isinstance(args, dict) or 'model' not in args:
        raise InvalidArgumentError(f'{args_file}: not a train.py args.yaml (no `model`)')
    name = str(args.get('experiment') or path.name)
    match = _SEED_SUFFIX.search(name)
    point = name[:match.start()] if match else name
    curves: Dict[str, List[float]] = {}
    summary = path / 'summary.csv'
    if summary.is_file():
        with summary.open(newline='') as f:
            rows = list(csv.DictReader(f))
        if rows and 'epoch' not in rows[0]:
            raise InvalidArgumentError(f'{summary}: not a train.py summary.csv (no epoch column)')
        curves = {k: _floats(rows, k) for k in (rows[0] if rows else {})}
    planned = int(args.get('epochs') or 0) + int(args.get('cooldown_epochs') or 0)
    return Run(path=path, name=name, point=point, experiment=_experiment(point), seed=int(args.get('seed') or 0),
               model=str(args['model']), model_kwargs=dict(args.get('model_kwargs') or {}), args=args,
               planned_epochs=planned, curves=curves)


def find_runs(paths: Sequence[str]) -> List[Path]:
    """Run folders: each path that holds an args.yaml, or every folder below it that does."""
    found: List[Path] = []
    for p in map(Path, paths):
        if not p.exists():
            raise FileNotFoundError(2, 'no such run folder', str(p))
        if (p / 'args.yaml').is_file():
            found.append(p)
        else:
            found += sorted(a.parent for a in p.rglob('args.yaml'))
    if not found:
        raise InvalidArgumentError(f'no train.py run folders (with args.yaml) under {", ".join(map(str, paths))}')
    return found


@dataclass
class Point:
    """The runs of one point (one row of the report)."""
    experiment: str
    point: str
    runs: List[Run]
    note: str = ''
    description: Any = None

    def mean(self, values: List[float]) -> float:
        return statistics.fmean(values) if values else math.nan

    def row(self) -> Dict[str, Any]:
        d, r0 = self.description, self.runs[0]
        errs = [r.top1_err for r in self.runs]
        return OrderedDict(
            experiment=self.experiment, point=self.point, model=r0.model, num_blocks=d.depth,
            num_tokens=d.num_tokens if d.num_tokens is not None else '', embed_dim=d.dim if d.dim is not None else '',
            width=d.width, permutation=d.permutation_label or '-', density=round(d.density, 6), omega=d.omega,
            gamma=round(d.gamma, 4), patch_size=r0.model_kwargs.get('patch_size', ''), runs=len(self.runs),
            seeds=' '.join(str(r.seed) for r in sorted(self.runs, key=lambda r: r.seed)),
            epochs=r0.planned_epochs, top1_err_mean=self.mean(errs),
            top1_err_sd=statistics.stdev(errs) if len(errs) > 1 else math.nan,
            best_top1_err_mean=self.mean([r.best_top1_err for r in self.runs]),
            eval_loss_mean=self.mean([r.eval_loss for r in self.runs]), note=self.note)


@dataclass
class Report:
    points: List[Point]
    unfinished: List[Run] = field(default_factory=list)
    conflicts: List[str] = field(default_factory=list)

    def rows(self) -> List[Dict[str, Any]]:
        return [p.row() for p in self.points]


def _describe(run: Run, cache: Dict[Tuple, Any]) -> Any:
    from .catalog import summarize
    kwargs = {k: v for k, v in run.model_kwargs.items() if k not in SEED_MODEL_ARGS}
    key = (run.model, yaml.safe_dump(kwargs, default_flow_style=True))
    if key not in cache:
        try:
            cache[key] = summarize(run.model, **kwargs)
        except UserInputError as e:
            raise InvalidArgumentError(f'{run.path}: the run\'s model cannot be built here ({e})') from e
    return cache[key]


def build_report(paths: Sequence[str]) -> Report:
    """Read the runs under `paths` and group them by point (see the module docstring)."""
    runs = [read_run(p) for p in find_runs(paths)]
    report = Report(points=[])
    cache: Dict[Tuple, Any] = {}
    by_point: OrderedDict[str, List[Run]] = OrderedDict()
    for run in sorted(runs, key=lambda r: (r.experiment, _natural(r.point), r.seed)):
        if not run.finished:
            report.unfinished.append(run)
            continue
        by_point.setdefault(run.point, []).append(run)
    for point, group in by_point.items():
        signatures: OrderedDict[Tuple, List[Run]] = OrderedDict()
        for run in group:
            signatures.setdefault(run.signature(), []).append(run)
        note = ''
        if len(signatures) > 1:
            dicts = [dict(s) for s in signatures]
            detail = ', '.join(sorted({k for d in dicts for k in d if len({e.get(k) for e in dicts}) > 1}))
            note = f'runs disagree on {detail}: not averaged together'
            report.conflicts.append(f'{point}: {len(signatures)} groups of runs disagree on {detail} '
                                    f'({", ".join(str(r.path) for r in group)})')
        for members in signatures.values():
            report.points.append(Point(members[0].experiment, point, members, note=note,
                                       description=_describe(members[0], cache)))
        seeds = [r.seed for r in group]
        if len(set(seeds)) < len(seeds):
            report.conflicts.append(f'{point}: seed repeated among {len(seeds)} runs ({sorted(seeds)})')
    return report


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return '' if math.isnan(value) else f'{value:.4g}' if abs(value) < 1e4 else f'{value:.0f}'
    return str(value)


def write_report(report: Report, out_dir: str, figures: bool = True) -> List[Path]:
    """Write report.csv, report.md and (with matplotlib) the figures into `out_dir`; returns the files."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    rows = report.rows()
    written = [out / 'report.csv', out / 'report.md']
    with open(out / 'report.csv', 'w', newline='') as f:
        writer = csv.DictWriter(f, fieldnames=COLUMNS)
        writer.writeheader()
        for row in rows:
            writer.writerow({k: _fmt(v) for k, v in row.items()})
    md = ['# Report', '',
          f'{sum(len(p.runs) for p in report.points)} finished runs in {len(report.points)} points; '
          f'{len(report.unfinished)} unfinished. top1_err = 100 − the last epoch\'s eval_top1 (%); sd over seeds '
          f'(n − 1).', '']
    shown = ('experiment', 'point', 'num_blocks', 'num_tokens', 'embed_dim', 'width', 'permutation', 'runs',
             'top1_err_mean', 'top1_err_sd', 'best_top1_err_mean', 'eval_loss_mean', 'note')
    md += ['| ' + ' | '.join(shown) + ' |', '|' + '---|' * len(shown)]
    md += ['| ' + ' | '.join(_fmt(r[c]) for c in shown) + ' |' for r in rows]
    if report.unfinished:
        md += ['', '## Unfinished runs (not averaged)', '']
        md += [f'- `{r.path}`: {r.epochs_done} of {r.planned_epochs} epochs' for r in report.unfinished]
    if report.conflicts:
        md += ['', '## Runs that disagree (reported separately)', ''] + [f'- {c}' for c in report.conflicts]
    (out / 'report.md').write_text('\n'.join(md) + '\n', encoding='utf-8')
    if figures and report.points:
        from .research.figures import plot_report
        written += plot_report(report, out)
    return written
