"""`pkmixer report`: timm train.py runs back into the paper's tables and figures.

A run is what train.py writes into its output folder: ``args.yaml`` (every argument: the model, its
``model_kwargs``, the seed, the schedule …) and ``summary.csv`` (one row per epoch, written by
``timm.utils.update_summary``). The report reads them as train.py writes them:

* **identity**: a run *is* its resolved configuration. Runs whose ``args.yaml`` agree on everything but the seed and
  the bookkeeping keys (:data:`RUN_ONLY_KEYS`: name, output folder, resume, logging …; and the seed-tied model
  arguments ``perm_seed`` / ``mask_seed``) form one group, whatever their names; names are only shown to people.
* **the experiment** is named by what varies between the groups' models (see :func:`infer_experiment`), or given.
  Groups whose models are the same point of the figure but whose configurations differ elsewhere (another ``lr``,
  another ``data_dir`` …) are *listed*, run by run, and never averaged.
* **epochs**: a ``summary.csv`` may hold the header again after ``--resume`` into the same folder, and an epoch more
  than once: the last row written for an epoch wins. A run is finished when every epoch train.py would run
  (``create_scheduler_v2``'s count: epochs, cycles, cooldown and a warm-up prefix; only the epochs it validates, by
  ``val_interval``) is present.
* **measurements only**: a run with a top-1 outside [0, 100], a non-finite value, a seed that is not an integer in
  train.py's range or repeats another run's of its group, a ragged or non-numeric ``summary.csv``, or no eval
  column is listed with the reason and averaged nowhere. A folder whose ``args.yaml`` cannot be read is named.

``top1_err`` is 100 − ``eval_top1`` at the last scheduled epoch; ``best_top1_err`` uses the best epoch; sd is the
sample standard deviation over seeds (n − 1). :func:`write_report` writes ``report.csv``, ``report.md`` and
``epochs.csv`` (every run's per-epoch metrics with its configuration, long form, no machine path), from which
:func:`build_report` rebuilds the same report; figures need the ``plot`` extra.
"""
import csv
import json
import math
import os
import re
import statistics
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

import yaml

from ..errors import InvalidArgumentError, UserInputError

__all__ = ['RUN_ONLY_KEYS', 'SEED_MODEL_ARGS', 'EXPERIMENTS', 'COLUMNS', 'SEED_RANGE', 'Run', 'Point', 'Listed',
           'Report', 'LISTED_KINDS', 'read_run', 'read_summary', 'scheduled_epochs', 'find_runs', 'read_epochs_csv',
           'infer_experiment', 'build_report', 'write_report', 'write_epochs_csv', 'FIGURES_HINT']

# args.yaml keys that say where or how a run was executed or logged, not what was trained
RUN_ONLY_KEYS = ('seed', 'experiment', 'output', 'resume', 'no_resume_opt', 'start_epoch', 'log_interval',
                 'recovery_interval', 'checkpoint_hist', 'workers', 'pin_mem', 'device', 'local_rank',
                 'log_wandb', 'wandb_project', 'wandb_tags', 'wandb_resume_id', 'config', 'device_modules',
                 'initial_checkpoint', 'resume_epoch', 'torchcompile', 'worker_seeding', 'dist_bn', 'rank',
                 'world_size', 'distributed', 'save_images', 'eval_metric')
SEED_MODEL_ARGS = ('perm_seed', 'mask_seed')  # model arguments sweeps tie to the training seed
EXPERIMENTS = ('width', 'depth', 'rp-block', 'gamma', 'patch')
SEED_RANGE = (0, 2 ** 32 - 1)  # timm.utils.random_seed: np.random.seed(seed + rank) takes 0 … 2^32 − 1
COLUMNS = ('experiment', 'point', 'model', 'num_blocks', 'num_tokens', 'embed_dim', 'width', 'permutation',
           'density', 'omega', 'gamma', 'patch_size', 'runs', 'seeds', 'epochs', 'top1_err_mean', 'top1_err_sd',
           'best_top1_err_mean', 'eval_loss_mean', 'note')
FIGURES_HINT = "pkmixer report draws figures with matplotlib: pip install 'timm-pkmixer[plot]'"
# train.py's parser defaults for the keys its scheduler count reads (a made-up args.yaml may lack them)
_SCHED_DEFAULTS = dict(sched='cosine', epochs=300, decay_epochs=90, decay_milestones=[90, 180, 270],
                       warmup_epochs=5, cooldown_epochs=0, patience_epochs=10, decay_rate=0.1, min_lr=0.,
                       warmup_lr=1e-5, warmup_prefix=False, lr_noise=None, lr_cycle_mul=1., lr_cycle_decay=0.5,
                       lr_cycle_limit=1, lr_k_decay=1., sched_on_updates=False, val_interval=1, eval_metric='top1')
_SEED_SUFFIX = re.compile(r'[-_]?seed-?\d+$')
_TOP1_KEYS = ('eval_top1', 'eval_top5')


def _natural(text: str) -> Tuple:
    """'depth_L4' before 'depth_L12': numbers compared as numbers."""
    return tuple((0, int(t), '') if t.isdigit() else (1, 0, t) for t in re.split(r'(\d+)', text))


def _dump(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


# ------------------------------------------------------------------------------------------------- one run

@dataclass
class Run:
    """One train.py run: its arguments, its per-epoch metrics and what keeps it from being averaged."""
    name: str                               # for people: the folder (relative to the path it was found under)
    args: Dict[str, Any]                    # args.yaml
    epochs: Dict[int, Dict[str, float]]     # epoch → summary.csv row (the last written for that epoch)
    scheduled: int                          # epochs train.py runs (0 when the count failed: see problems)
    required: Tuple[int, ...]               # the epochs train.py writes a summary row for
    problems: List[str] = field(default_factory=list)   # why it is not a measurement
    read_problems: List[str] = field(default_factory=list)  # the summary.csv's own faults (kept in epochs.csv)

    @property
    def model(self) -> str:
        return str(self.args.get('model'))

    @property
    def model_kwargs(self) -> Dict[str, Any]:
        return dict(self.args.get('model_kwargs') or {})

    @property
    def seed(self) -> Any:
        return self.args.get('seed')

    @property
    def missing(self) -> List[int]:
        return [e for e in self.required if e not in self.epochs]

    @property
    def finished(self) -> bool:
        return bool(self.required) and not self.missing

    @property
    def last_epoch(self) -> int:
        return self.required[-1]

    @property
    def curves(self) -> Dict[str, List[float]]:
        """summary.csv columns over the epochs present, in epoch order."""
        keys: List[str] = []
        for row in self.epochs.values():
            keys += [k for k in row if k not in keys]
        order = sorted(self.epochs)
        return {k: [self.epochs[e].get(k, math.nan) for e in order] for k in keys}

    @property
    def top1_err(self) -> float:
        return 100. - self.epochs[self.last_epoch]['eval_top1']

    @property
    def best_top1_err(self) -> float:
        return 100. - max(r['eval_top1'] for r in self.epochs.values())

    @property
    def eval_loss(self) -> float:
        return self.epochs[self.last_epoch].get('eval_loss', math.nan)

    def identity(self) -> Dict[str, Any]:
        """What the run trained: every argument but the seed and the bookkeeping (see the module docstring)."""
        args = {k: v for k, v in self.args.items() if k not in RUN_ONLY_KEYS}
        args['model_kwargs'] = {k: v for k, v in self.model_kwargs.items() if k not in SEED_MODEL_ARGS}
        return args

    def check(self) -> None:
        """Fill :attr:`problems`: faults of the file, the seed and the values (not the completeness)."""
        self.problems = list(self.read_problems)
        seed = self.seed
        if isinstance(seed, bool) or not isinstance(seed, int):
            self.problems.append(f'seed {seed!r} is not an integer')
        elif not SEED_RANGE[0] <= seed <= SEED_RANGE[1]:
            self.problems.append(f'seed {seed} is outside train.py\'s range {SEED_RANGE[0]} … {SEED_RANGE[1]}')
        if self.epochs and not any('eval_top1' in r for r in self.epochs.values()):
            self.problems.append('summary.csv has no eval_top1 (the run was not validated)')
        for epoch in sorted(self.epochs):
            row = self.epochs[epoch]
            bad = [k for k, v in row.items() if not math.isfinite(v)]
            if bad:
                self.problems.append(f'non-finite {", ".join(bad)} at epoch {epoch}')
                break
            out = [f'{k} = {row[k]:g}' for k in _TOP1_KEYS if k in row and not 0. <= row[k] <= 100.]
            if out:
                self.problems.append(f'{", ".join(out)} at epoch {epoch} is outside [0, 100]')
                break


def scheduled_epochs(args: Dict[str, Any]) -> Tuple[int, Tuple[int, ...]]:
    """(epochs train.py runs, the epochs it writes a summary row for), computed as train.py does.

    train.py's loop is ``for epoch in range(start_epoch, num_epochs)`` with ``num_epochs`` from timm's
    ``create_scheduler_v2`` (epochs, lr cycles, cooldown, and the warm-up when ``warmup_prefix``); it validates and
    writes summary.csv when ``(epoch + 1) % val_interval == 0`` and at the last epoch.
    """
    import argparse

    import torch
    from timm.scheduler import create_scheduler_v2
    from timm.scheduler.scheduler_factory import scheduler_kwargs
    cfg = argparse.Namespace(**{**_SCHED_DEFAULTS, **{k: v for k, v in args.items() if v is not None or
                                                      k not in _SCHED_DEFAULTS}})
    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.1)
    kwargs = scheduler_kwargs(cfg, decreasing_metric='loss' in str(cfg.eval_metric))
    _, num_epochs = create_scheduler_v2(optimizer, **kwargs, updates_per_epoch=1)
    start = int(args.get('start_epoch') or 0)
    interval = max(1, int(cfg.val_interval or 1))
    required = tuple(e for e in range(start, num_epochs) if (e + 1) % interval == 0 or e + 1 == num_epochs)
    return int(num_epochs), required


def read_summary(path: Path) -> Tuple[Dict[int, Dict[str, float]], List[str]]:
    """A train.py summary.csv: (epoch → row, the last written for each epoch; the file's faults).

    A header line (first cell ``epoch``) may recur (``--resume`` into the same folder writes it again); rows after
    it are read with it. A row whose field count differs from its header's, a value that is not a number or a
    non-integer epoch is a fault: it is named and the row is not used.
    """
    epochs: Dict[int, Dict[str, float]] = {}
    problems: List[str] = []
    header: Optional[List[str]] = None
    with open(path, newline='') as f:
        for lineno, cells in enumerate(csv.reader(f), 1):
            if not cells:
                continue
            if cells[0] == 'epoch':
                header = cells
                continue
            if header is None:
                problems.append(f'summary.csv line {lineno} comes before any header')
                break
            if len(cells) != len(header):
                problems.append(f'summary.csv is ragged: line {lineno} has {len(cells)} fields, '
                                f'its header {len(header)}')
                continue
            row: Dict[str, float] = {}
            for key, text in zip(header, cells):
                try:
                    row[key] = float(text)
                except ValueError:
                    problems.append(f'summary.csv line {lineno}: {key} = {text!r} is not a number')
                    break
            else:
                if not row['epoch'].is_integer():
                    problems.append(f'summary.csv line {lineno}: epoch {row["epoch"]:g} is not an integer')
                    continue
                epoch = int(row.pop('epoch'))
                epochs[epoch] = row
    return epochs, problems


def _make_run(name: str, args: Dict[str, Any], epochs: Dict[int, Dict[str, float]],
              read_problems: List[str]) -> 'Run':
    try:
        scheduled, required = scheduled_epochs(args)
    except (ValueError, TypeError, AssertionError, KeyError) as e:
        scheduled, required = 0, ()
        read_problems = read_problems + [f'train.py\'s epoch count fails for these arguments ({e})']
    run = Run(name=name, args=args, epochs=epochs, scheduled=scheduled, required=required,
              read_problems=read_problems)
    run.check()
    return run


def read_run(path: Path, name: Optional[str] = None) -> Run:
    """A run folder written by train.py (``args.yaml``; ``summary.csv`` may be missing, short or resumed).

    Raises:
        InvalidArgumentError: ``args.yaml`` is not YAML, not a mapping or has no ``model``.
    """
    path = Path(path)
    args_file = path / 'args.yaml'
    try:
        args = yaml.safe_load(args_file.read_text(encoding='utf-8'))
    except (yaml.YAMLError, OSError, UnicodeDecodeError) as e:
        raise InvalidArgumentError(f'{args_file} cannot be read ({" ".join(str(e).split())})') from e
    if not isinstance(args, dict) or 'model' not in args:
        raise InvalidArgumentError(f'{args_file} is not a train.py args.yaml (no `model`)')
    epochs: Dict[int, Dict[str, float]] = {}
    problems: List[str] = []
    if (path / 'summary.csv').is_file():
        try:
            epochs, problems = read_summary(path / 'summary.csv')
        except (OSError, UnicodeDecodeError, csv.Error) as e:
            problems = [f'summary.csv cannot be read ({e})']
    return _make_run(name or path.name, args, epochs, problems)


def find_runs(paths: Sequence[str]) -> List[Tuple[Path, str]]:
    """(run folder, name) for each path that holds an args.yaml, or every folder below it that does; the name is the
    folder relative to the path given (its own name for a run folder given directly)."""
    found: List[Tuple[Path, str]] = []
    for p in map(Path, paths):
        if not p.exists():
            raise FileNotFoundError(2, 'no such run folder', str(p))
        if (p / 'args.yaml').is_file():
            found.append((p, p.name))
        else:
            found += [(a.parent, a.parent.relative_to(p).as_posix()) for a in sorted(p.rglob('args.yaml'))]
    return found


# ------------------------------------------------------------------------------------------------- long form

def _portable(args: Dict[str, Any]) -> Dict[str, Any]:
    """args without bookkeeping and with every absolute path cut to its last component (no machine path)."""
    out = {}
    for k, v in args.items():
        if k in RUN_ONLY_KEYS and k != 'seed':
            continue
        if isinstance(v, str) and os.path.isabs(v):
            v = Path(v).name
        out[k] = v
    return out


def write_epochs_csv(runs: Sequence[Run], path: Path) -> None:
    """Every run's per-epoch metrics with its configuration, one row per (run, epoch): ``run, seed, model,
    model_kwargs, epoch, <summary.csv columns>, config, read_problems``. ``config`` (on each run's first row only,
    to keep the file small) is the run's args.yaml as JSON without the bookkeeping keys and with absolute paths cut
    to their last component; a run without a summary row gets one row with an empty epoch."""
    metrics: List[str] = []
    for run in runs:
        for row in run.epochs.values():
            metrics += [k for k in row if k not in metrics]
    with open(path, 'w', newline='') as f:
        writer = csv.writer(f)
        writer.writerow(['run', 'seed', 'model', 'model_kwargs', 'epoch', *metrics, 'config', 'read_problems'])
        for run in runs:
            config = _dump(_portable(run.args))
            head = [run.name, run.seed, run.model, _dump(run.model_kwargs)]
            tail = [config, ' | '.join(run.read_problems)]
            for i, epoch in enumerate(sorted(run.epochs) or [None]):
                row = run.epochs.get(epoch, {}) if epoch is not None else {}
                writer.writerow([*head, '' if epoch is None else epoch,
                                 *[repr(row[k]) if k in row else '' for k in metrics], *(tail if i == 0 else ['', ''])])


def read_epochs_csv(path: Path) -> List[Run]:
    """The runs of an ``epochs.csv`` written by :func:`write_epochs_csv` (in its order)."""
    runs: OrderedDict[str, Tuple[Dict, Dict, List[str]]] = OrderedDict()
    with open(path, newline='') as f:
        reader = csv.DictReader(f)
        fixed = ('run', 'seed', 'model', 'model_kwargs', 'epoch', 'config', 'read_problems')
        if reader.fieldnames is None or not set(fixed) <= set(reader.fieldnames):
            raise InvalidArgumentError(f'{path}: not an epochs.csv of `pkmixer report` (columns {", ".join(fixed)})')
        for line in reader:
            if line['run'] not in runs:
                if not line['config']:
                    raise InvalidArgumentError(f'{path}: run {line["run"]!r} has no config on its first row')
                args = json.loads(line['config'])
                problems = [p for p in line['read_problems'].split(' | ') if p]
                runs[line['run']] = (args, {}, problems)
            if line['epoch'] != '':
                runs[line['run']][1][int(line['epoch'])] = {
                    k: float(v) for k, v in line.items() if k not in fixed and v not in ('', None)}
    return [_make_run(name, args, epochs, problems) for name, (args, epochs, problems) in runs.items()]


# ------------------------------------------------------------------------------------------------- the report

@dataclass
class Point:
    """One group of runs that are averaged (one row of the report)."""
    experiment: str
    point: str
    runs: List[Run]
    description: Any
    note: str = ''

    def row(self) -> Dict[str, Any]:
        d, r0 = self.description, self.runs[0]
        errs = [r.top1_err for r in self.runs]
        return OrderedDict(
            experiment=self.experiment, point=self.point, model=r0.model, num_blocks=d.depth,
            num_tokens=d.num_tokens if d.num_tokens is not None else '', embed_dim=d.dim if d.dim is not None else '',
            width=d.width, permutation=d.permutation_label or '-', density=round(d.density, 6), omega=d.omega,
            gamma=round(d.gamma, 4), patch_size=r0.model_kwargs.get('patch_size', ''), runs=len(self.runs),
            seeds=' '.join(str(r.seed) for r in sorted(self.runs, key=lambda r: r.seed)),
            epochs=r0.scheduled, top1_err_mean=statistics.fmean(errs),
            top1_err_sd=statistics.stdev(errs) if len(errs) > 1 else math.nan,
            best_top1_err_mean=statistics.fmean([r.best_top1_err for r in self.runs]),
            eval_loss_mean=statistics.fmean([r.eval_loss for r in self.runs]), note=self.note)


@dataclass(frozen=True)
class Listed:
    """A run that is shown but averaged nowhere, and why (`kind`: one of :data:`LISTED_KINDS`)."""
    name: str
    kind: str
    reason: str
    top1_err: Optional[float] = None    # at its last scheduled epoch, when the run has one and it is a measurement


LISTED_KINDS = ('no model', 'not a measurement', 'seed repeated', 'unfinished', 'differs elsewhere')


@dataclass
class Report:
    experiment: str
    points: List[Point]
    varies: List[str] = field(default_factory=list)      # what varies between the groups' models
    listed: List[Listed] = field(default_factory=list)   # runs not averaged, with the reason
    unreadable: List[Tuple[str, str]] = field(default_factory=list)   # (folder, why)
    warnings: List[str] = field(default_factory=list)
    runs: List[Run] = field(default_factory=list)        # every run read (for epochs.csv)

    def rows(self) -> List[Dict[str, Any]]:
        return [p.row() for p in self.points]

    @property
    def unfinished(self) -> List[Listed]:
        return [x for x in self.listed if x.kind == 'unfinished']


_FEATURES = ('family', 'depth', 'num_tokens', 'dim', 'width', 'permutation', 'density', 'omega', 'gamma', 'patch',
             'hidden')


def _features(description: Any, model_kwargs: Dict[str, Any]) -> Dict[str, Any]:
    d = description
    family = d.family.replace('Mixed RP ', '').replace('RP ', '')  # normal vs RP is the comparison, not a feature
    return dict(family=family, depth=d.depth, num_tokens=d.num_tokens, dim=d.dim, width=d.width,
                permutation=d.permutation_label, density=round(d.density, 6), omega=round(d.omega, 3),
                gamma=round(d.gamma, 6), patch=model_kwargs.get('patch_size'), hidden=d.hidden)


def infer_experiment(features: Sequence[Dict[str, Any]]) -> Tuple[str, List[str]]:
    """The experiment named by what varies between groups of runs (one feature dict per group), and what varies.

    * a per-block permutation pattern with exactly one random block → ``rp-block``;
    * L → ``depth``;
    * γ at a fixed width m → ``gamma``;
    * S, C or the density p at a fixed Ω (within 5 %) → ``width`` (the SW-MLP arm included);
    * otherwise the patch size P → ``patch``.

    normal against RP, alike in every block, is the comparison every figure draws, not an experiment: groups that
    differ in nothing else give ``comparison``, a single group ``single``. Several matches are joined by ``+``.
    """
    def values(key: str) -> set:
        return {f[key] for f in features}
    varies = [k for k in _FEATURES if len(values(k)) > 1]
    found = []
    if any(p not in ('normal', 'random') and p.count('R') == 1 for p in values('permutation')):
        found.append('rp-block')
    if 'depth' in varies:
        found.append('depth')
    omegas = [o for o in values('omega') if o]
    fixed_omega = bool(omegas) and max(omegas) / min(omegas) <= 1.05
    if 'gamma' in varies and 'width' not in varies:
        found.append('gamma')
    elif {'num_tokens', 'dim', 'density', 'width'} & set(varies) and fixed_omega:
        found.append('width')
    elif 'patch' in varies:
        found.append('patch')
    if not found:
        return ('comparison' if 'permutation' in varies else 'single'), varies
    return '+'.join(found), varies


def _label(runs: Sequence[Run], feats: Dict[str, Any]) -> str:
    """For people: the runs' common name without the seed suffix, else the point's coordinates."""
    stems = {_SEED_SUFFIX.sub('', Path(r.name).name) for r in runs}
    if len(stems) == 1 and next(iter(stems)):
        return stems.pop()
    parts = [f'L{feats["depth"]}']
    if feats['dim'] is not None:
        parts.append(f'S{feats["num_tokens"]}C{feats["dim"]}')
    if feats['hidden'] is not None:
        parts.append(f'p{feats["density"]:g}')
    if feats['patch'] is not None:
        parts.append(f'P{feats["patch"]}')
    return '_'.join(parts + [feats['permutation']])


def _differs(a: Dict[str, Any], b: Dict[str, Any]) -> List[str]:
    keys = sorted(set(a) | set(b))
    out = [k for k in keys if k != 'model_kwargs' and _dump(a.get(k)) != _dump(b.get(k))]
    ma, mb = a.get('model_kwargs') or {}, b.get('model_kwargs') or {}
    out += [f'model_kwargs.{k}' for k in sorted(set(ma) | set(mb)) if _dump(ma.get(k)) != _dump(mb.get(k))]
    return out


def _describe(run: Run, cache: Dict[str, Any]) -> Any:
    from ..catalog import summarize
    kwargs = {k: v for k, v in run.model_kwargs.items() if k not in SEED_MODEL_ARGS}
    key = _dump([run.model, kwargs])
    if key not in cache:
        try:
            cache[key] = summarize(run.model, **kwargs)
        except (UserInputError, RuntimeError, TypeError) as e:
            cache[key] = InvalidArgumentError(f'its model cannot be built here ({" ".join(str(e).split())})')
    return cache[key]


def build_report(paths: Sequence[str], experiment: Optional[str] = None) -> Report:
    """Read the runs under `paths` (run folders, folders holding them, or ``epochs.csv`` files of an earlier
    report) and group them by configuration (see the module docstring).

    Args:
        paths: Where the runs are.
        experiment: One of :data:`EXPERIMENTS` to name the experiment; None infers it (:func:`infer_experiment`).

    Raises:
        InvalidArgumentError: `experiment` is unknown, or no run (folder with args.yaml) is found.
    """
    if experiment is not None and experiment not in EXPERIMENTS:
        raise InvalidArgumentError(f'experiment must be one of {", ".join(EXPERIMENTS)}, got {experiment!r}')
    runs: List[Run] = []
    unreadable: List[Tuple[str, str]] = []
    for p in paths:
        if Path(p).is_file() and str(p).endswith('.csv'):
            runs += read_epochs_csv(Path(p))
            continue
        for folder, name in find_runs([p]):
            try:
                runs.append(read_run(folder, name))
            except InvalidArgumentError as e:
                unreadable.append((name, str(e).replace(f'{folder}{os.sep}', '')))  # the name says where
    if not runs and not unreadable:
        raise InvalidArgumentError(f'no train.py run folders (with args.yaml) under {", ".join(map(str, paths))}')
    report = Report(experiment=experiment or '', points=[], unreadable=unreadable, runs=runs)
    cache: Dict[str, Any] = {}
    groups: OrderedDict[str, List[Run]] = OrderedDict()
    for run in sorted(runs, key=lambda r: (_natural(r.name))):
        groups.setdefault(_dump(run.identity()), []).append(run)
    usable: List[Tuple[List[Run], Any, Dict[str, Any]]] = []
    for members in groups.values():
        description = _describe(members[0], cache)
        if isinstance(description, Exception):
            report.listed += [Listed(r.name, 'no model', str(description)) for r in members]
            continue
        seeds = [r.seed for r in members if not r.problems]
        averaged = []
        for run in members:
            if run.problems:
                report.listed.append(Listed(run.name, 'not a measurement', '; '.join(run.problems)))
            elif seeds.count(run.seed) > 1:
                others = [r.name for r in members if r is not run and r.seed == run.seed and not r.problems]
                report.listed.append(Listed(run.name, 'seed repeated',
                                            f'seed {run.seed} repeated (also {", ".join(others)})',
                                            run.top1_err if run.finished else None))
            elif not run.finished:
                done = len([e for e in run.required if e in run.epochs])
                report.listed.append(Listed(run.name, 'unfinished', f'unfinished: {done} of {len(run.required)} '
                                                                    f'epochs (missing {_ranges(run.missing)})'))
            else:
                averaged.append(run)
        if averaged:
            usable.append((averaged, description, _features(description, members[0].model_kwargs)))
    # groups that are one point of the figure but differ elsewhere: listed run by run, never averaged
    by_point: OrderedDict[str, List[int]] = OrderedDict()
    for i, (_, _, feats) in enumerate(usable):
        by_point.setdefault(_dump([feats, usable[i][0][0].model]), []).append(i)
    conflicting = set()
    for indices in by_point.values():
        if len(indices) < 2:
            continue
        for i in indices:
            diff = sorted({k for j in indices if j != i for k in _differs(usable[i][0][0].identity(),
                                                                           usable[j][0][0].identity())})
            conflicting.add(i)
            report.listed += [Listed(r.name, 'differs elsewhere', f'same model as another group but differs on '
                                                                  f'{", ".join(diff)}: not averaged', r.top1_err)
                              for r in usable[i][0]]
    kept = [u for i, u in enumerate(usable) if i not in conflicting]
    inferred, varies = infer_experiment([f for _, _, f in kept]) if kept else ('single', [])
    report.experiment, report.varies = experiment or inferred, varies
    if '+' in inferred and experiment is None:
        report.warnings.append(f'{", ".join(varies)} vary between the groups, which is more than one experiment '
                               f'({inferred}); name it with experiment=')
    training = sorted({k for (a, _, _) in kept for (b, _, _) in kept for k in _differs(a[0].identity(),
                                                                                       b[0].identity())
                       if k != 'model' and not k.startswith('model_kwargs.')})
    if training:
        report.warnings.append(f'the groups also differ in {", ".join(training)}: one figure across them mixes '
                               f'training settings')
    for members, description, feats in kept:
        report.points.append(Point(report.experiment, _label(members, feats), members, description))
    report.points.sort(key=lambda p: _natural(p.point))
    return report


def _ranges(epochs: Sequence[int]) -> str:
    """[3, 4, 5, 9] → '3–5, 9'."""
    out, start = [], None
    for i, e in enumerate(epochs):
        if start is None:
            start = e
        if i + 1 == len(epochs) or epochs[i + 1] != e + 1:
            out.append(f'{start}' if start == e else f'{start}–{e}')
            start = None
    return ', '.join(out)


# ------------------------------------------------------------------------------------------------- writing

def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return '' if math.isnan(value) else f'{value:.4g}' if abs(value) < 1e4 else f'{value:.0f}'
    return str(value)


def write_report(report: Report, out_dir: str, figures: bool = True) -> Tuple[List[Path], Optional[str]]:
    """Write report.csv, report.md, epochs.csv and (with matplotlib) the figures into `out_dir`.

    Returns:
        (the files written, None or why the figures were not drawn). The tables need nothing beyond the base install.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    rows = report.rows()
    written = [out / 'report.csv', out / 'report.md', out / 'epochs.csv']
    with open(out / 'report.csv', 'w', newline='') as f:
        writer = csv.DictWriter(f, fieldnames=COLUMNS)
        writer.writeheader()
        for row in rows:
            writer.writerow({k: _fmt(v) for k, v in row.items()})
    averaged = sum(len(p.runs) for p in report.points)
    md = [f'# Report: {report.experiment}', '',
          f'{averaged} runs averaged in {len(report.points)} groups (runs equal in every argument but the seed and '
          f'bookkeeping); {len(report.listed)} runs listed, not averaged; {len(report.unreadable)} unreadable '
          f'folders. What varies between the groups: {", ".join(report.varies) or "nothing"}. '
          f'top1_err = 100 − eval_top1 at the last scheduled epoch (%); sd over seeds (n − 1).', '']
    shown = ('point', 'model', 'num_blocks', 'num_tokens', 'embed_dim', 'width', 'permutation', 'runs',
             'top1_err_mean', 'top1_err_sd', 'best_top1_err_mean', 'eval_loss_mean')
    md += ['| ' + ' | '.join(shown) + ' |', '|' + '---|' * len(shown)]
    md += ['| ' + ' | '.join(_fmt(r[c]) for c in shown) + ' |' for r in rows]
    if report.listed:
        md += ['', '## Runs listed, not averaged', '']
        md += [f'- `{x.name}`: {x.reason}' + (f' (top1_err {x.top1_err:.4g})' if x.top1_err is not None else '')
               for x in report.listed]
    if report.unreadable:
        md += ['', '## Folders that cannot be read', ''] + [f'- `{n}`: {why}' for n, why in report.unreadable]
    if report.warnings:
        md += ['', '## Warnings', ''] + [f'- {w}' for w in report.warnings]
    (out / 'report.md').write_text('\n'.join(md) + '\n', encoding='utf-8')
    write_epochs_csv(report.runs, out / 'epochs.csv')
    skipped = None
    if figures and report.points:
        try:
            from .figures import plot_report
            written += plot_report(report, out)
        except ImportError:
            skipped = f'{FIGURES_HINT}; report.csv and report.md are written, the figures are not'
    return written, skipped
