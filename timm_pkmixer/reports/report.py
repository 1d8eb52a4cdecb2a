"""`pkmixer report`: timm train.py runs back into the paper's tables and figures.

A run is what train.py writes into its output folder: ``args.yaml`` (every argument: the model, its
``model_kwargs``, the seed, the schedule …) and ``summary.csv`` (one row per epoch, written by
``timm.utils.update_summary``). The report reads them with :mod:`timm_pkmixer.runs.run_folder`, the one reader of
train.py's files (also behind ``pkmixer plot run``, ``push`` and ``analyze``):

* **identity**: a run *is* its resolved configuration. Runs whose ``args.yaml`` agree on everything but the seed and
  the bookkeeping keys (:data:`~timm_pkmixer.runs.run_folder.RUN_ONLY_KEYS`: name, output folder, resume,
  logging …; and the seed-tied model arguments ``perm_seed`` / ``mask_seed``) form one group, whatever their names;
  names are only shown to people.
  Equal numbers are equal (``gamma: 4`` and ``gamma: 4.0`` are one configuration).
* **the experiment** is given, or the one every run's sweep named (``pkmixer sweep`` → ``pkmixer launch``:
  :func:`~timm_pkmixer.sweeps.sweep_write.swept_experiment`), or named by what varies between the groups' models
  (:func:`infer_experiment`).
  Groups whose models are the same point of the figure but whose configurations differ elsewhere (another ``lr``,
  another ``data_dir`` …) are *listed*, run by run, and never averaged.
* **epochs**: a ``summary.csv`` may hold the header again after ``--resume`` into the same folder, and an epoch more
  than once: the last row written for an epoch wins. A run is finished when every epoch train.py would run
  (``create_scheduler_v2``'s count: epochs, cycles, cooldown and a warm-up prefix; only the epochs it validates, by
  ``val_interval``) is present.
* **measurements only**: a run with a top-1 outside [0, 100], a non-finite value, a seed that is not an integer in
  train.py's range or repeats another run's of its group, a ragged or non-numeric ``summary.csv``, or no eval
  column is listed with the reason (never empty) and averaged nowhere. A folder whose ``args.yaml`` cannot be read
  is named.

* **current runs only**: a run that `pkmixer launch` ran from a recipe (or with train.py arguments) that has changed
  since (its launch marker, :func:`~.launch_marker.launch_changes`) is *stale*: listed with what changed, and left out
  of every group and of ``epochs.csv``.

``top1_err`` is 100 − ``eval_top1`` at the last scheduled epoch; ``best_top1_err`` uses the best epoch; sd is the
sample standard deviation over seeds (n − 1). :func:`write_report` writes ``report.md`` (rounded for reading; first
its Verdict section: the claims the runs' sweeps declared before the runs, judged by :mod:`~.verdicts`),
``verdict.json`` (the same verdicts in full), ``report.csv`` (every number in full) and ``epochs.csv`` (every run's
per-epoch metrics with its configuration, long form, no machine path), from which :func:`build_report` rebuilds
the same report; figures need matplotlib.
"""
import csv
import io
import json
import logging
import math
import os
import re
import statistics
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Sequence, Tuple

from ..errors import InvalidArgumentError, MissingDependencyError, UserInputError
from ..markdown import markdown_table
from ..permutation_kinds import PERMUTATION_KINDS
from ..runs.epochs_csv import read_epochs_csv, write_epochs_csv
from ..runs.launch_marker import launch_changes
from ..runs.provenance import ENVIRONMENT_KEYS, NOT_RECORDED, PROVENANCE_JSON, environment_key, read_provenance
from ..runs.run_folder import (
    SEED_MODEL_ARGS,
    Run,
    RunFileError,
    distinct_names,
    epoch_words,
    find_runs,
    read_run,
    search_runs,
)
from ..state_files import write_json, write_text
from ..sweeps.claims import Claim
from ..sweeps.sweep_tables import EXPERIMENTS
from ..sweeps.sweep_write import declared_claims, launched_folder, swept_experiment

__all__ = ['COLUMNS', 'Point', 'Listed', 'Report', 'LISTED_KINDS', 'infer_experiment', 'build_report', 'write_report',
           'FIGURES_HINT', 'canonical_json', 'VERDICT_JSON']

_logger = logging.getLogger(__name__)

COLUMNS = ('experiment', 'point', 'model', 'num_blocks', 'num_tokens', 'embed_dim', 'width', 'permutation',
           'density', 'omega', 'gamma', 'patch_size', 'runs', 'seeds', 'epochs', 'top1_err_mean', 'top1_err_sd',
           'best_top1_err_mean', 'eval_loss_mean', 'note')
VERDICT_JSON = 'verdict.json'  # the declared claims judged (reports/verdicts.py), beside report.md
FIGURES_HINT = ("pkmixer report draws figures with matplotlib: pip install matplotlib (or, in a checkout of "
                "timm-pkmixer, pip install '.[plot]')")
_SEED_SUFFIX = re.compile(r'[-_]?seed-?\d+$')


def _natural(text: str) -> Tuple:
    """'depth_L4' before 'depth_L12': numbers compared as numbers."""
    return tuple((0, int(t), '') if t.isdigit() else (1, 0, t) for t in re.split(r'(\d+)', text))


def _canonical(value: Any) -> Any:
    """`value` with equal numbers written alike (``4.0`` → ``4``; a bool stays a bool), mappings sorted."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {str(k): _canonical(v) for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))}
    if isinstance(value, (list, tuple)):
        return [_canonical(v) for v in value]
    return value


def canonical_json(value: Any) -> str:
    """The canonical text of `value`: equal configurations, equal text (``gamma: 4`` and ``gamma: 4.0`` alike)."""
    return json.dumps(_canonical(value), sort_keys=True, default=str)


# ------------------------------------------------------------------------------------------------- the report

@dataclass
class Point:
    """One group of runs that are averaged (one row of the report)."""
    experiment: str
    point: str
    runs: List[Run]
    description: Any
    note: str = ''
    model: str = ''  # the model built, named for people (`built_label`: the registered name and, if reshaped, S, C, L)

    def row(self) -> Dict[str, Any]:
        d, r0 = self.description, self.runs[0]
        errs = [r.top1_err for r in self.runs]
        return OrderedDict(
            experiment=self.experiment, point=self.point, model=self.model or r0.model, num_blocks=d.depth,
            num_tokens=d.num_tokens if d.num_tokens is not None else '', embed_dim=d.dim if d.dim is not None else '',
            width=d.width, permutation=d.permutation_label or '-', density=d.density, omega=d.omega,
            gamma=d.gamma, patch_size=r0.model_kwargs.get('patch_size', ''), runs=len(self.runs),
            seeds=' '.join(str(r.seed) for r in sorted(self.runs, key=lambda r: r.seed)),
            epochs=r0.scheduled, top1_err_mean=statistics.fmean(errs),
            top1_err_sd=statistics.stdev(errs) if len(errs) > 1 else math.nan,
            best_top1_err_mean=statistics.fmean([r.best_top1_err for r in self.runs]),
            eval_loss_mean=statistics.fmean([r.eval_loss for r in self.runs]), note=self.note)


@dataclass(frozen=True)
class Listed:
    """A run that is shown but averaged nowhere, and why (`kind`: one of :data:`LISTED_KINDS`; `reason`: never
    empty)."""
    name: str
    kind: str
    reason: str
    top1_err: Optional[float] = None    # at its last scheduled epoch, when the run has one and it is a measurement
    differs_on: Tuple[str, ...] = ()    # 'differs elsewhere': the arguments its group differs on

    def __post_init__(self) -> None:
        if self.kind not in LISTED_KINDS or not self.reason.strip():
            raise ValueError(f'a listed run needs a kind of {LISTED_KINDS} and a reason, got {self.kind!r}, '
                             f'{self.reason!r}')


LISTED_KINDS = ('no model', 'not a measurement', 'seed repeated', 'unfinished', 'differs elsewhere', 'stale')
# how a figure's note counts the runs of a kind it leaves out ('2 unfinished')
_OMITTED_AS = {'no model': 'model not built here', 'not a measurement': 'not a measurement',
               'seed repeated': 'seed repeated', 'unfinished': 'unfinished', 'stale': 'stale'}


@dataclass
class Report:
    experiment: str
    points: List[Point]
    varies: List[str] = field(default_factory=list)      # what varies between the groups' models
    listed: List[Listed] = field(default_factory=list)   # runs not averaged, with the reason
    unreadable: List[Tuple[str, str]] = field(default_factory=list)   # (folder, why)
    warnings: List[str] = field(default_factory=list)
    runs: List[Run] = field(default_factory=list)        # every run read (for epochs.csv)
    claims: List[Claim] = field(default_factory=list)    # what the runs' sweeps declared, then any given here
    claims_declared: List[str] = field(default_factory=list)  # where: 'sweep.json of fm_fig6 (before the runs)'

    def rows(self) -> List[Dict[str, Any]]:
        return [p.row() for p in self.points]

    def resumed(self) -> List[Tuple[str, Tuple[int, ...], bool]]:
        """(name, the epochs it was resumed at, whether it is averaged) of each run train.py resumed (its
        summary.csv's header written again): averaged like the others, but not bit for bit the uninterrupted run
        (docs/training.md, "What a resume reproduces")."""
        averaged = {id(r) for p in self.points for r in p.runs}
        return [(r.name, r.resumed_at, id(r) in averaged) for r in self.runs if r.resumed_at]

    @property
    def unfinished(self) -> List[Listed]:
        return [x for x in self.listed if x.kind == 'unfinished']

    def environments(self) -> List[Tuple[Tuple[Any, ...], str, int]]:
        """(environment, note, number of runs) over every run read (averaged or listed), in the order first met:
        the environment is :func:`~timm_pkmixer.runs.provenance.environment_key`'s, ``(NOT_RECORDED,)`` for runs
        without a ``pkmixer_env.json``."""
        counts: OrderedDict[Tuple[Tuple[Any, ...], str], int] = OrderedDict()
        for run in self.runs:
            key = environment_key(run.environment)
            counts[key] = counts.get(key, 0) + 1
        return [(env, note, n) for (env, note), n in counts.items()]

    def made_by(self) -> str:
        """What made the runs, in one sentence (docs/findings.md's rows): the runs not recorded counted first, then what
        every recorded run shares ('torch 2.14.1, timm 1.0.31, cpu (AMD EPYC), 1 thread'), then each commit of
        timm-pkmixer with what else sets its runs apart and their number ('4c347db (6 runs), 3d3e99d with uncommitted
        changes (2 runs)')."""
        recorded, unrecorded = [], 0
        for env, note, n in self.environments():
            if env == (NOT_RECORDED,):
                unrecorded += n
                continue
            e = dict(zip(ENVIRONMENT_KEYS, env))
            device = e['device_type'] if e['device'] in (None, e['device_type']) else \
                f'{e["device_type"]} ({e["device"]})'
            words = {'torch': f'torch {e["torch"]}', 'timm': f'timm {e["timm"]}', 'device': device,
                     'threads': f'{e["threads"]} thread{"" if e["threads"] == 1 else "s"}', 'flags': e['flags'] or ''}
            recorded.append((e, words, note, n))
        clauses = [f'{unrecorded} run{"" if unrecorded == 1 else "s"} {NOT_RECORDED}'] if unrecorded else []
        if recorded:
            shared = {k: v for k, v in recorded[0][1].items() if v and all(r[1][k] == v for r in recorded)}
            clauses.append(', '.join(shared.values()))
            commits = []
            for e, words, note, n in recorded:
                own = [v for k, v in words.items() if v and k not in shared] + ([note] if note else [])
                commits.append((e['pkmixer_commit'] or 'not a git checkout')[:7] +
                               (' with uncommitted changes' if e['pkmixer_dirty'] else '') +
                               f' ({", ".join(own + [f"{n} run" + ("" if n == 1 else "s")])})')
            clauses.append('timm-pkmixer ' + ', '.join(commits))
        return '; '.join(clauses)

    def omitted(self) -> str:
        """What every figure of the report leaves out, as a note for it ('' when nothing): the runs listed in
        report.md, counted by why ('not shown: 3 runs listed in report.md (3 differ on epochs)'), and the folders
        it could not read."""
        kinds: OrderedDict[str, List[Listed]] = OrderedDict()
        for x in self.listed:
            kinds.setdefault(x.kind, []).append(x)
        parts = []
        for kind, xs in kinds.items():
            if kind == 'differs elsewhere':
                keys = ', '.join(sorted({k for x in xs for k in x.differs_on}))
                parts.append(f'{len(xs)} differ{"s" if len(xs) == 1 else ""} on {keys}')
            else:
                parts.append(f'{len(xs)} {_OMITTED_AS[kind]}')
        said = [f'{len(self.listed)} run{"s" if len(self.listed) != 1 else ""} listed in report.md '
                f'({"; ".join(parts)})'] if self.listed else []
        if self.unreadable:
            n = len(self.unreadable)
            said.append(f'{n} unreadable folder{"s" if n != 1 else ""} named in report.md')
        return f'not shown: {"; ".join(said)}' if said else ''


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
    if any(p not in PERMUTATION_KINDS and p.count('R') == 1 for p in values('permutation')):
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
    """The arguments two configurations differ on, model arguments as ``model_kwargs.K``; a key only one of them
    has is one of them (``lr (in one only)``): two configurations that differ always name something."""
    def keys(x: Dict[str, Any], y: Dict[str, Any], prefix: str) -> List[str]:
        return [f'{prefix}{k}' + ('' if (k in x) == (k in y) else ' (in one only)') for k in sorted(set(x) | set(y))
                if (k in x) != (k in y) or canonical_json(x[k]) != canonical_json(y[k])]
    rest = [{k: v for k, v in d.items() if k != 'model_kwargs'} for d in (a, b)]
    return keys(*rest, '') + keys(a.get('model_kwargs') or {}, b.get('model_kwargs') or {}, 'model_kwargs.')


def _describe(model: str, model_kwargs: Dict[str, Any], cache: Dict[str, Any]) -> Any:
    """The summary of `model` built with `model_kwargs` (seeds aside), or the error why it cannot be built here."""
    from ..catalog import summarize
    kwargs = {k: v for k, v in model_kwargs.items() if k not in SEED_MODEL_ARGS}
    key = canonical_json([model, kwargs])
    if key not in cache:
        try:
            cache[key] = summarize(model, **kwargs)
        except (UserInputError, RuntimeError, TypeError) as e:
            cache[key] = InvalidArgumentError(f'its model cannot be built here ({" ".join(str(e).split())})')
    return cache[key]


class _Rule(NamedTuple):
    """When a run of a group whose model can be built is listed instead of averaged."""
    kind: str
    applies: Callable[[Run, List[Run]], bool]        # (the run, its group)
    reason: Callable[[Run, List[Run]], str]
    top1_err: Callable[[Run], Optional[float]]       # the error shown beside the reason


def _same_seed(run: Run, group: List[Run]) -> List[Run]:
    return [r for r in group if r is not run and r.seed == run.seed and not r.problems]


# the first rule that applies lists the run; a run no rule applies to is averaged
_LISTING_RULES = (
    _Rule('not a measurement', lambda run, group: bool(run.problems), lambda run, group: '; '.join(run.problems),
          lambda run: None),
    _Rule('seed repeated', lambda run, group: bool(_same_seed(run, group)),
          lambda run, group: f'seed {run.seed} repeated (also {", ".join(r.name for r in _same_seed(run, group))})',
          lambda run: run.top1_err if run.finished else None),
    _Rule('unfinished', lambda run, group: not run.finished,
          lambda run, group: f'unfinished: {len(run.required) - len(run.missing)} of {len(run.required)} epochs '
                             f'(missing {epoch_words(run.missing)})',
          lambda run: None),
)


@dataclass
class _Building:
    """What the steps of :func:`build_report` share; each step reads and fills some of it."""
    paths: Sequence[str]
    experiment: Optional[str]
    report: Report
    groups: List[List[Run]] = field(default_factory=list)       # runs equal in every argument but the seed
    usable: List[Tuple[List[Run], Any, Dict[str, Any]]] = field(default_factory=list)  # (averaged, model, features)
    models: Dict[str, Any] = field(default_factory=dict)        # summarize() by (model, model_kwargs)


def _read_runs(b: _Building) -> None:
    """Every run under the paths (run folders, folders of them, epochs.csv files), each named apart from every other
    (its folder relative to the path given, or its name in an epochs.csv, made longer by the folders above where two
    would be alike: :func:`~timm_pkmixer.runs.run_folder.distinct_names`); symlinked folders followed, each folder
    read once (what was not read twice is a warning); folders that cannot be read."""
    folder_paths = [p for p in b.paths if not (Path(p).is_file() and str(p).endswith('.csv'))]
    found, notes = search_runs(folder_paths)
    b.report.warnings += [f'{note} (a path given, or a symlink, reaches a folder read already)'
                          if ' again: read once' in note else note for note in notes]
    sources: List[Tuple[str, Any]] = []   # in path order: ('csv', runs) or ('folder', FoundRun)
    done = set()
    for p in b.paths:
        if Path(p).is_file() and str(p).endswith('.csv'):
            _logger.info(f'reading {p}')
            sources += [('csv', (Path(os.path.abspath(p)).parent, run)) for run in read_epochs_csv(Path(p))]
        elif str(Path(p)) not in done:
            done.add(str(Path(p)))
            sources += [('folder', f) for f in found if f.given == str(Path(p))]
    names = distinct_names([(x[0], x[1].name) if kind == 'csv' else (x.base, x.name) for kind, x in sources])
    folders = sum(kind == 'folder' for kind, _ in sources)
    k = 0
    for (kind, x), name in zip(sources, names):
        if kind == 'csv':
            x[1].name = name
            b.report.runs.append(x[1])
            continue
        k += 1
        folder = x.folder
        _logger.info(f'{x.given}: reading run {k}/{folders} ({name})')
        try:
            run, changed = read_run(folder, name), launch_changes(folder)
            run.swept = swept_experiment(folder)
        except RunFileError as e:
            b.report.unreadable.append((name, str(e).replace(f'{folder}{os.sep}', '')))  # the name says where
            continue
        try:
            run.environment = read_provenance(folder)
        except RunFileError as e:  # the run is read; what made it is counted as not recorded
            b.report.warnings.append(f'`{name}`: {str(e).replace(f"{folder}{os.sep}", "")}: its environment is '
                                     f'counted as {NOT_RECORDED}')
        if run.restarts:
            b.report.warnings.append(f'`{name}`: train.py started over into its folder (summary.csv\'s header again, '
                                     f'then epoch 1): only the rows of its last start are read, those of the earlier '
                                     f'start{"s" if run.restarts > 1 else ""} dropped')
        if changed:  # `pkmixer launch` ran it from a recipe that has changed since: apart, in no table
            b.report.listed.append(Listed(name, 'stale', f'stale: its recipe or the train.py arguments of its '
                                                         f'launch changed since it ran ({", ".join(changed)}): '
                                                         f'not averaged',
                                          run.top1_err if run.finished and not run.problems else None))
            continue
        b.report.runs.append(run)
    if not b.report.runs and not b.report.unreadable and not b.report.listed:  # every run stale: listed, said
        raise InvalidArgumentError(f'no train.py run folders (with args.yaml) under {", ".join(map(str, b.paths))}')


def _group_by_configuration(b: _Building) -> None:
    groups: OrderedDict[str, List[Run]] = OrderedDict()
    for run in sorted(b.report.runs, key=lambda r: _natural(r.name)):
        groups.setdefault(canonical_json(run.identity()), []).append(run)
    b.groups = list(groups.values())


def _list_runs_not_averaged(b: _Building) -> None:
    """Per group: every run if its model cannot be built here, else the runs a :data:`_LISTING_RULES` rule lists."""
    for i, members in enumerate(b.groups):
        _logger.info(f'group {i + 1}/{len(b.groups)}: describing {members[0].model} (built on the meta device)')
        description = _describe(members[0].model, members[0].model_kwargs, b.models)
        if isinstance(description, Exception):
            b.report.listed += [Listed(r.name, 'no model', str(description)) for r in members]
            continue
        averaged = []
        for run in members:
            rule = next((rule for rule in _LISTING_RULES if rule.applies(run, members)), None)
            if rule is None:
                averaged.append(run)
            else:
                b.report.listed.append(Listed(run.name, rule.kind, rule.reason(run, members), rule.top1_err(run)))
        if averaged:
            b.usable.append((averaged, description, _features(description, members[0].model_kwargs)))


def _list_groups_that_differ_elsewhere(b: _Building) -> None:
    """Groups that are one point of the figure but differ elsewhere: listed run by run, never averaged."""
    by_point: OrderedDict[str, List[int]] = OrderedDict()
    for i, (members, _, feats) in enumerate(b.usable):
        by_point.setdefault(canonical_json([feats, members[0].model]), []).append(i)
    conflicting = set()
    for indices in (ix for ix in by_point.values() if len(ix) > 1):
        for i in indices:
            identity = b.usable[i][0][0].identity()
            diff = sorted({k for j in indices if j != i for k in _differs(identity, b.usable[j][0][0].identity())})
            conflicting.add(i)
            b.report.listed += [Listed(r.name, 'differs elsewhere', f'same model as another group but differs on '
                                                                    f'{", ".join(diff)}: not averaged', r.top1_err,
                                       tuple(diff))
                                for r in b.usable[i][0]]
    b.usable = [u for i, u in enumerate(b.usable) if i not in conflicting]


def _name_the_experiment(b: _Building) -> None:
    """The experiment (given; else the one every run's sweep named; else by what varies) and the warnings about
    what else varies."""
    inferred, varies = infer_experiment([f for _, _, f in b.usable]) if b.usable else ('single', [])
    swept = {r.swept for members, _, _ in b.usable for r in members}
    named = b.experiment or (next(iter(swept)) if len(swept) == 1 and None not in swept else None)
    b.report.experiment, b.report.varies = named or inferred, varies
    if named is None and len(swept - {None}) > 1:
        b.report.warnings.append(f'the runs come from sweeps of {len(swept - {None})} experiments '
                                 f'({", ".join(sorted(swept - {None}))}): named {inferred} by what varies; name it '
                                 f'with experiment=')
    elif '+' in inferred and named is None:
        b.report.warnings.append(f'{", ".join(varies)} vary between the groups, which is more than one experiment '
                                 f'({inferred}); name it with experiment=')
    training = sorted({k for (x, _, _) in b.usable for (y, _, _) in b.usable
                       for k in _differs(x[0].identity(), y[0].identity())
                       if k != 'model' and not k.startswith('model_kwargs.')})
    if training:
        b.report.warnings.append(f'the groups also differ in {", ".join(training)}: one figure across them mixes '
                                 f'training settings')


def _average_the_groups(b: _Building) -> None:
    """One point per usable group, its model named as built (a registered name reshaped by model_kwargs says so)."""
    from ..description import built_label
    points = []
    for members, description, feats in b.usable:
        name = members[0].model
        registered = _describe(name, {}, b.models)  # the registered model's own shape
        model = name if isinstance(registered, Exception) else built_label(name, description, registered)
        points.append(Point(b.report.experiment, _label(members, feats), members, description, model=model))
    b.report.points = sorted(points, key=lambda p: _natural(p.point))


# build_report is these steps, in order
def _collect_claims(b: _Building) -> None:
    """The claims declared in the sweep.json of the folders the runs were launched from (or beside an epochs.csv
    given), each once; a sweep.json that cannot be read, or a claim of one name declared differently by two
    folders, is refused."""
    folders: List[Path] = []
    for p in b.paths:
        if Path(p).is_file():
            folders.append(Path(p).resolve().parent)
            continue
        for folder, _ in find_runs([p]):
            launched = launched_folder(folder)
            if launched is not None:
                folders.append(launched)
    found: OrderedDict[str, Claim] = OrderedDict()
    for folder in dict.fromkeys(folders):
        claims = declared_claims(folder)  # a sweep.json that cannot be read is refused, naming it: its claims
        # are what the sweep was run to judge
        for claim in claims:
            if claim.name in found and found[claim.name] != claim:
                raise InvalidArgumentError(f'claim {claim.name!r} is declared differently in two sweep folders '
                                           f'({folder.name} and another): report them apart')
            found[claim.name] = claim
        if claims:
            b.report.claims_declared.append(f'`sweep.json` of `{folder.name}/` (written by `pkmixer sweep`, before '
                                            f'the runs)')
    b.report.claims = list(found.values())


_STEPS: Tuple[Callable[[_Building], None], ...] = (
    _read_runs, _group_by_configuration, _list_runs_not_averaged, _list_groups_that_differ_elsewhere,
    _name_the_experiment, _average_the_groups, _collect_claims)


def build_report(paths: Sequence[str], experiment: Optional[str] = None, claims: Sequence[Claim] = ()) -> Report:
    """Read the runs under `paths` (run folders, folders holding them, or ``epochs.csv`` files of an earlier
    report) and group them by configuration (see the module docstring; the steps: :data:`_STEPS`). Logs a line per
    run folder read and per group described.

    Args:
        paths: Where the runs are.
        experiment: One of :data:`EXPERIMENTS` to name the experiment; None: the runs' sweep's, else inferred
            (:func:`infer_experiment`).
        claims: Claims declared here, after the runs, beside those of the runs' sweeps (their ``sweep.json``, or
            the one beside an ``epochs.csv`` given); :func:`write_report` judges them all.

    Raises:
        InvalidArgumentError: `experiment` is unknown, no run (folder with args.yaml) is found, or a claim's name
            is declared twice.
        RunFileError: an epochs.csv that cannot be read (a folder that cannot be read is listed, not raised).
    """
    if experiment is not None and experiment not in EXPERIMENTS:
        raise InvalidArgumentError(f'experiment must be one of {", ".join(EXPERIMENTS)}, got {experiment!r}')
    building = _Building(paths, experiment, Report(experiment=experiment or '', points=[]))
    for step in _STEPS:
        step(building)
    report = building.report
    taken = {c.name for c in report.claims}
    clash = [c.name for c in claims if c.name in taken]
    if clash:
        raise InvalidArgumentError(f'claims: {", ".join(map(repr, clash))} already declared by the runs\' sweep: give '
                                   f'yours another name')
    if claims:
        report.claims += list(claims)
        report.claims_declared.append(f'{len(claims)} given to the report (declared after the runs)')
    return report


# ------------------------------------------------------------------------------------------------- writing

def _csv_value(value: Any) -> str:
    """report.csv, for machines: a float in full (its repr), NaN as an empty cell."""
    if isinstance(value, float):
        return '' if math.isnan(value) else repr(value)
    return str(value)


def _fmt(value: Any) -> str:
    """report.md, for people: 4 significant digits."""
    if isinstance(value, float):
        return '' if math.isnan(value) else f'{value:.4g}' if abs(value) < 1e4 else f'{value:.0f}'
    return str(value)


_ENV_HEADERS = ('runs', 'commit', 'timm-pkmixer', 'torch', 'timm', 'Python', 'train.py sha256', 'device', 'threads',
                'processes', 'arithmetic', 'note')


def _environments_md(report: Report) -> List[str]:
    """report.md's section on what made the runs: one row per distinct environment with its number of runs."""
    rows = []
    for env, note, n in report.environments():
        if env == (NOT_RECORDED,):
            rows.append([str(n), NOT_RECORDED] + [''] * (len(_ENV_HEADERS) - 3) + [note])
            continue
        e = dict(zip(ENVIRONMENT_KEYS, env))
        commit = (e['pkmixer_commit'] or 'not a git checkout')[:12] + (' (changed)' if e['pkmixer_dirty'] else '')
        device = f'{e["device_type"]}: {e["device"]}' if e['device_type'] != e['device'] else str(e['device'])
        rows.append([str(n), commit, str(e['pkmixer_version']), str(e['torch']), str(e['timm']), str(e['python']),
                     str(e['train_py_sha256'] or '')[:12], device, str(e['threads']), str(e['processes']),
                     e['flags'] or '-', note])
    return ['', '## Environments', '',
            f'What made the runs (every run read, averaged or listed), from each run folder\'s {PROVENANCE_JSON} '
            f'(written by `pkmixer train`) or the environment column of epochs.csv; "changed": the checkout had '
            f'uncommitted changes.', '', markdown_table(_ENV_HEADERS, rows)]


def write_report(report: Report, out_dir: str, figures: bool = True) -> Tuple[List[Path], Optional[str]]:
    """Write report.md (its Verdict section first: the declared claims judged, :mod:`.verdicts`), report.csv,
    epochs.csv, verdict.json and (with matplotlib) the figures into `out_dir`; logs a line per experiment whose
    figures are drawn.

    Returns:
        (the files written, None or why the figures were not drawn). The tables need nothing beyond the base install.
    """
    try:
        from .verdicts import judge_points, scipy_version, verdict_markdown, verdict_record
    except ImportError as e:  # scipy is a dependency: an install without it is told what to install, not traced
        raise MissingDependencyError(f'pkmixer report judges the declared claims with scipy, a dependency of '
                                     f"timm-pkmixer, which this install lacks ({e}): pip install 'scipy>=1.11'"
                                     ) from None
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    rows = report.rows()
    written = [out / 'report.csv', out / 'report.md', out / 'epochs.csv', out / VERDICT_JSON]
    verdicts = judge_points(report.claims, report.points)
    table = io.StringIO(newline='')
    writer = csv.DictWriter(table, fieldnames=COLUMNS)
    writer.writeheader()
    for row in rows:
        writer.writerow({k: _csv_value(v) for k, v in row.items()})
    write_text(out / 'report.csv', table.getvalue())
    averaged = sum(len(p.runs) for p in report.points)
    md = [f'# Report: {report.experiment}', ''] + verdict_markdown(verdicts, report.claims_declared) + [
          '', '## Runs', '',
          f'{averaged} runs averaged in {len(report.points)} groups (runs equal in every argument but the seed and '
          f'bookkeeping); {len(report.listed)} runs listed, not averaged; {len(report.unreadable)} unreadable '
          f'folders. What varies between the groups: {", ".join(report.varies) or "nothing"}. '
          f'top1_err = 100 − eval_top1 at the last scheduled epoch (%); sd over seeds (n − 1).', '']
    shown = ('point', 'model', 'num_blocks', 'num_tokens', 'embed_dim', 'width', 'permutation', 'runs',
             'top1_err_mean', 'top1_err_sd', 'best_top1_err_mean', 'eval_loss_mean')
    md += [markdown_table(shown, ([_fmt(r[c]) for c in shown] for r in rows))]
    if report.listed:
        md += ['', '## Runs listed, not averaged', '',
               'These runs are in no table and no figure: every figure says, under its panels, how many it leaves '
               'out and why, and points here.', '']
        md += [f'- `{x.name}`: {x.reason}' + (f' (top1_err {x.top1_err:.4g})' if x.top1_err is not None else '')
               for x in report.listed]
    resumed = report.resumed()
    if resumed:
        md += ['', '## Resumed runs', '',
               "Runs train.py resumed from a checkpoint (summary.csv's header written again). They are averaged like "
               "the others when their group is: a resume continues the weights, the optimizer and the schedule, but "
               "not the random draws of the uninterrupted run (the data order, augmentation, dropout), so its epochs "
               "after the resume are another sample of the same training, not the same numbers "
               '(docs/training.md, "What a resume reproduces").', '']
        md += [f'- `{name}`: resumed at epoch {", ".join(str(e + 1) for e in at)}; '  # epochs as people count
               f'{"averaged" if averaged else "not averaged (listed above)"}' for name, at, averaged in resumed]
    if report.unreadable:
        md += ['', '## Folders that cannot be read', '', 'In no table and no figure (each figure counts them).', '']
        md += [f'- `{n}`: {why}' for n, why in report.unreadable]
    md += _environments_md(report) + ['', f'The verdicts above were judged with scipy {scipy_version()} '
                                          f'({VERDICT_JSON}).']
    if report.warnings:
        md += ['', '## Warnings', ''] + [f'- {w}' for w in report.warnings]
    write_text(out / 'report.md', '\n'.join(md) + '\n')
    write_epochs_csv(report.runs, out / 'epochs.csv')
    write_json(out / VERDICT_JSON, verdict_record(verdicts, report.claims_declared,
                                                  [r.name for p in report.points for r in p.runs]),
               ensure_ascii=False)
    skipped = None
    if figures and report.points:
        try:
            from .figures import plot_report
            written += plot_report(report, out)
        except ImportError:
            skipped = f'{FIGURES_HINT}; report.csv and report.md are written, the figures are not'
    return written, skipped
