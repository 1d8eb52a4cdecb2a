"""The files of a timm train.py run, each read one way for every command (report, plot run, push, analyze, status).

A run folder is what train.py writes into ``--output/--experiment``: ``args.yaml`` (every argument) and
``summary.csv`` (a row per validated epoch, by ``timm.utils.update_summary``). This module reads them as train.py
writes them:

* **YAML** (args.yaml, recipes): :func:`load_yaml`, ``yaml.safe_load`` (no Python tags) whose aliases may not
  expand a document beyond :data:`YAML_MAX_NODES` nodes or refer to a node that contains them (an alias bomb of a
  few lines otherwise expands without end wherever the arguments are compared or printed).
* **summary.csv** (:func:`read_summary`): the header comes again after ``--resume`` into the same folder and an
  epoch may be written more than once (resumed from an earlier checkpoint): the last row written for an epoch wins.
  A row with a wrong field count, an empty cell, a value that is not a number or a non-integer epoch is a fault,
  named by line and column, and not used.
* **a run** (:func:`read_run`, :class:`Run`): its arguments, its epochs, the epochs train.py schedules
  (:func:`scheduled_epochs`: timm's ``create_scheduler_v2``, as train.py counts them) and what keeps it from being a
  measurement (:func:`row_problem`: a top-1 outside [0, 100] or a non-finite value; a seed outside train.py's range);
  :func:`run_state`: finished, unfinished (epoch k of n), failed or not started.
* this package's own files about runs: ``epochs.csv`` (:func:`write_epochs_csv`, :func:`read_epochs_csv`: every
  run's epochs with its configuration, no machine path), a sweep's ``sweep.json`` (:func:`read_sweep_record`) and
  the launch marker `pkmixer launch` writes into a run folder (:data:`LAUNCH_MARKER`, :func:`read_launch_marker`:
  its owner and what it was asked to train; :func:`launch_changes`: what changed since, which makes a run stale).
* train.py's epoch count kept with a launched run (:func:`schedule_record`), so that its state can be read without
  torch (:func:`run_state_with_schedule`).

Every refusal is a :class:`RunFileError` naming the file (and the line and column where there is one).
"""
import csv
import hashlib
import json
import math
import os
import stat
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import yaml

from ..errors import InvalidArgumentError

__all__ = ['ARGS_YAML', 'SUMMARY_CSV', 'RUN_ONLY_KEYS', 'SEED_MODEL_ARGS', 'SEED_RANGE', 'YAML_MAX_NODES',
           'RUN_STATUSES', 'RunFileError', 'YAMLAliasError', 'load_yaml', 'yaml_reason', 'read_args_yaml',
           'check_train_args', 'Summary', 'read_summary', 'row_problem', 'scheduled_epochs', 'Run', 'make_run',
           'read_run', 'find_runs', 'RunState', 'run_state', 'epoch_ranges', 'write_epochs_csv', 'read_epochs_csv',
           'read_sweep_record', 'LAUNCH_MARKER', 'LAUNCH_TRAIN_ARGS', 'SCHEDULE_KEYS', 'run_digest',
           'read_launch_marker', 'launch_changes', 'schedule_record', 'run_state_with_schedule']

ARGS_YAML, SUMMARY_CSV = 'args.yaml', 'summary.csv'
# args.yaml keys that say where or how a run was executed or logged, not what was trained
RUN_ONLY_KEYS = ('seed', 'experiment', 'output', 'resume', 'no_resume_opt', 'start_epoch', 'log_interval',
                 'recovery_interval', 'checkpoint_hist', 'workers', 'pin_mem', 'device', 'local_rank',
                 'log_wandb', 'wandb_project', 'wandb_tags', 'wandb_resume_id', 'config', 'device_modules',
                 'initial_checkpoint', 'resume_epoch', 'torchcompile', 'worker_seeding', 'dist_bn', 'rank',
                 'world_size', 'distributed', 'save_images', 'eval_metric')
SEED_MODEL_ARGS = ('perm_seed', 'mask_seed')  # model arguments sweeps tie to the training seed
SEED_RANGE = (0, 2 ** 32 - 1)  # timm.utils.random_seed: np.random.seed(seed + rank) takes 0 … 2^32 − 1
YAML_MAX_NODES = 10_000  # a document's nodes with its aliases expanded (or twice its own nodes, if more)
RUN_STATUSES = ('not started', 'unfinished', 'finished', 'failed')
# train.py's parser defaults for the keys its scheduler count reads (a made-up args.yaml may lack them)
_SCHED_DEFAULTS = dict(sched='cosine', epochs=300, decay_epochs=90, decay_milestones=[90, 180, 270],
                       warmup_epochs=5, cooldown_epochs=0, patience_epochs=10, decay_rate=0.1, min_lr=0.,
                       warmup_lr=1e-5, warmup_prefix=False, lr_noise=None, lr_cycle_mul=1., lr_cycle_decay=0.5,
                       lr_cycle_limit=1, lr_k_decay=1., sched_on_updates=False, val_interval=1, eval_metric='top1')
_TOP1_KEYS = ('eval_top1', 'eval_top5')

PathLike = Union[str, 'os.PathLike[str]']


class RunFileError(InvalidArgumentError):
    """A run's file (args.yaml, summary.csv, epochs.csv, sweep.json, a recipe) that cannot be used; the message names
    the file, and the line and column where there is one."""


# ------------------------------------------------------------------------------------------------- YAML

class YAMLAliasError(yaml.composer.ComposerError):
    """A YAML alias that expands the document beyond :data:`YAML_MAX_NODES` nodes, or refers to its own anchor."""


class _BoundedSafeLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` counting each node's size with its aliases expanded, while composing."""

    def compose_document(self) -> Any:
        self._expanded: Dict[int, int] = {}   # id(node) → its node count, aliases expanded
        return super().compose_document()

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            node = super().compose_node(parent, index)
            if id(node) not in self._expanded:  # its anchor is still being composed: the alias is inside it
                raise YAMLAliasError(None, None, f'the alias *{event.anchor} refers to a node that contains it',
                                     event.start_mark)
            return node
        node = super().compose_node(parent, index)
        if isinstance(node, yaml.MappingNode):
            children = [n for pair in node.value for n in pair]
        else:
            children = node.value if isinstance(node, yaml.SequenceNode) else []
        size = 1 + sum(self._expanded[id(c)] for c in children)
        if size > max(YAML_MAX_NODES, 2 * len(self._expanded)):
            raise YAMLAliasError(None, None, f'its aliases expand it to more than {YAML_MAX_NODES:,} nodes',
                                 node.start_mark)
        self._expanded[id(node)] = size
        return node


def load_yaml(text: str) -> Any:
    """``yaml.safe_load(text)`` (no Python tags), refusing aliases that expand the document beyond
    :data:`YAML_MAX_NODES` nodes or that refer to their own anchor (:class:`YAMLAliasError`). Raises
    ``yaml.YAMLError``; :func:`yaml_reason` says it in one line."""
    return yaml.load(text, Loader=_BoundedSafeLoader)  # noqa: S506 (a SafeLoader)


def yaml_reason(error: BaseException) -> str:
    """A YAML error in one line: ``ParserError: expected ',' or ']' … at line 2, column 1``."""
    if isinstance(error, yaml.MarkedYAMLError) and error.problem:
        mark = error.problem_mark
        where = f' at line {mark.line + 1}, column {mark.column + 1}' if mark is not None else ''
        context = f'{error.context}: ' if error.context else ''
        return f'{type(error).__name__}: {context}{error.problem}{where}'
    return f'{type(error).__name__}: {" ".join(str(error).split())}'


def check_train_args(args: Dict[str, Any], source: str) -> Dict[str, Any]:
    """`args` (train.py's arguments, read from `source`) if its ``model_kwargs`` is a mapping (or none), as train.py's
    ``--model-kwargs k=v …`` makes it; else a :class:`RunFileError` naming `source`."""
    kwargs = args.get('model_kwargs')
    if kwargs is not None and not isinstance(kwargs, dict):
        raise RunFileError(f'{source}: model_kwargs is a {type(kwargs).__name__} ({str(kwargs)[:60]!r}), not the '
                           f'mapping of model arguments train.py writes (--model-kwargs key=value …)')
    return args


def read_args_yaml(path: PathLike) -> Dict[str, Any]:
    """A train.py ``args.yaml`` as a dict ({} for an empty file), read by :func:`load_yaml`.

    Raises:
        RunFileError: not readable, not YAML, a tag safe_load does not build (``!!python/…``: refused, never
            executed), an alias bomb, not a mapping, or a ``model_kwargs`` that is not a mapping.
    """
    path = Path(path)
    try:
        args = load_yaml(path.read_text(encoding='utf-8'))
    except (yaml.YAMLError, UnicodeDecodeError) as e:
        raise RunFileError(f'{path}: not a train.py args.yaml that can be read safely ({yaml_reason(e)})') from e
    except OSError as e:
        raise RunFileError(f'{path}: cannot be read ({e.strerror or e})') from e
    if args is None:
        return {}
    if not isinstance(args, dict):
        raise RunFileError(f'{path}: holds a YAML {type(args).__name__}, not the mapping of arguments train.py '
                           f'writes')
    return check_train_args(args, str(path))


# ------------------------------------------------------------------------------------------------- summary.csv

@dataclass(frozen=True)
class Summary:
    """A train.py ``summary.csv``: epoch → the row written last for it (without ``epoch``), and the file's faults."""
    path: Path
    epochs: Dict[int, Dict[str, float]]
    lines: Dict[int, int]            # epoch → the line its row is on
    columns: Tuple[str, ...]         # every column of every header, in first-seen order (``epoch`` first)
    faults: Tuple[str, ...] = ()     # 'line 3: …', one per row not used

    def curves(self) -> Dict[str, List[float]]:
        """Every column (``epoch`` included) over the epochs present in epoch order; NaN where a row lacks it."""
        order = sorted(self.epochs)
        out = {'epoch': [float(e) for e in order]}
        out.update({k: [self.epochs[e].get(k, math.nan) for e in order] for k in self.columns if k != 'epoch'})
        return out


def _not_a_summary(path: Path, why: str) -> RunFileError:
    return RunFileError(f'{path} is not a timm train.py summary.csv{why}')


def _parse_row(header: List[str], cells: List[str], lineno: int) -> Tuple[Optional[Dict[str, float]], str]:
    """(the row, '') or (None, the fault)."""
    if len(cells) != len(header):
        return None, f'line {lineno}: {len(cells)} values for {len(header)} columns'
    row: Dict[str, float] = {}
    for key, text in zip(header, cells):
        if not text.strip():
            return None, f'line {lineno}: column {key!r} is empty'
        try:
            row[key] = float(text)
        except ValueError:
            return None, f'line {lineno}: column {key!r} holds {text!r}, not a number'
    if not row['epoch'].is_integer() or row['epoch'] < 0:
        return None, f'line {lineno}: epoch {row["epoch"]:g} is not an epoch number'
    return row, ''


def read_summary(path: PathLike) -> Summary:
    """Read a train.py ``summary.csv`` (see the module docstring).

    Raises:
        RunFileError: not a text CSV file, or its first line is not train.py's header (``epoch``, ``train_loss`` …).
    """
    path = Path(path)
    epochs: Dict[int, Dict[str, float]] = {}
    lines: Dict[int, int] = {}
    columns: List[str] = []
    faults: List[str] = []
    header: Optional[List[str]] = None
    try:
        with open(path, newline='', encoding='utf-8') as f:
            for lineno, cells in enumerate(csv.reader(f), 1):
                if not cells:
                    continue
                if cells[0] == 'epoch' and (header is not None or 'train_loss' in cells):
                    header = cells  # the first, or written again by a resumed train.py
                    columns += [c for c in cells if c not in columns]
                    continue
                if header is None:
                    raise _not_a_summary(path, f' (needs epoch and train_loss columns; line {lineno} is '
                                               f'{",".join(cells)[:60]!r})')
                row, fault = _parse_row(header, cells, lineno)
                if row is None:
                    faults.append(fault)
                    continue
                epoch = int(row.pop('epoch'))
                epochs[epoch], lines[epoch] = row, lineno
    except UnicodeDecodeError:
        raise _not_a_summary(path, ': not a text file') from None
    except csv.Error as e:
        raise _not_a_summary(path, f': not a CSV file ({e})') from None
    return Summary(path, epochs, lines, tuple(columns), tuple(faults))


def row_problem(epoch: int, row: Dict[str, float]) -> str:
    """Why a summary row is not a measurement ('' if it is one): a non-finite value, a top-1 or top-5 outside
    [0, 100]."""
    bad = [k for k, v in row.items() if not math.isfinite(v)]
    if bad:
        return f'non-finite {", ".join(bad)} at epoch {epoch}'
    out = [f'{k} = {row[k]:g}' for k in _TOP1_KEYS if k in row and not 0. <= row[k] <= 100.]
    return f'{", ".join(out)} at epoch {epoch} is outside [0, 100]' if out else ''


# ------------------------------------------------------------------------------------------------- one run

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


@dataclass
class Run:
    """One train.py run: its arguments, its per-epoch metrics and what keeps it from being a measurement."""
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
        return 100. - max(r['eval_top1'] for r in self.epochs.values() if 'eval_top1' in r)

    @property
    def eval_loss(self) -> float:
        return self.epochs[self.last_epoch].get('eval_loss', math.nan)

    def identity(self) -> Dict[str, Any]:
        """What the run trained: every argument but the seed, the bookkeeping (:data:`RUN_ONLY_KEYS`) and the
        seed-tied model arguments (:data:`SEED_MODEL_ARGS`)."""
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
        elif self.finished and 'eval_top1' not in self.epochs[self.last_epoch]:
            self.problems.append(f'summary.csv has no eval_top1 at the last epoch ({self.last_epoch})')
        problem = next(filter(None, (row_problem(e, self.epochs[e]) for e in sorted(self.epochs))), '')
        if problem:
            self.problems.append(problem)


def make_run(name: str, args: Dict[str, Any], epochs: Dict[int, Dict[str, float]], read_problems: List[str]) -> Run:
    """A checked :class:`Run` of these arguments and epochs (train.py's epoch count failing is one of its problems)."""
    try:
        scheduled, required = scheduled_epochs(args)
    except (ValueError, TypeError, AssertionError, KeyError) as e:
        scheduled, required = 0, ()
        read_problems = read_problems + [f'train.py\'s epoch count fails for these arguments ({e})']
    run = Run(name=name, args=args, epochs=epochs, scheduled=scheduled, required=required,
              read_problems=read_problems)
    run.check()
    return run


def read_run(path: PathLike, name: Optional[str] = None) -> Run:
    """A run folder written by train.py (``args.yaml``; ``summary.csv`` may be missing, short or resumed). The
    summary's faults are the run's problems, named ``summary.csv, line N: …``.

    Raises:
        RunFileError: ``args.yaml`` cannot be read (:func:`read_args_yaml`) or has no ``model``.
    """
    path = Path(path)
    args = read_args_yaml(path / ARGS_YAML)
    if 'model' not in args:
        raise RunFileError(f'{path / ARGS_YAML}: not a train.py args.yaml (no `model`)')
    epochs: Dict[int, Dict[str, float]] = {}
    problems: List[str] = []
    if (path / SUMMARY_CSV).is_file():
        try:
            summary = read_summary(path / SUMMARY_CSV)
            epochs, problems = summary.epochs, [f'{SUMMARY_CSV}, {f}' for f in summary.faults]
        except RunFileError as e:
            problems = [str(e).replace(f'{path}{os.sep}', '')]
        except OSError as e:
            problems = [f'{SUMMARY_CSV} cannot be read ({e.strerror or e})']
    return make_run(name or path.name, args, epochs, problems)


def find_runs(paths: Sequence[PathLike]) -> List[Tuple[Path, str]]:
    """(run folder, name) for each path that holds an args.yaml, or every folder below it that does; the name is the
    folder relative to the path given (its own name for a run folder given directly)."""
    found: List[Tuple[Path, str]] = []
    for p in map(Path, paths):
        if not p.exists():
            raise FileNotFoundError(2, 'no such run folder', str(p))
        if (p / ARGS_YAML).is_file():
            found.append((p, p.name))
        else:
            found += [(a.parent, a.parent.relative_to(p).as_posix()) for a in sorted(p.rglob(ARGS_YAML))]
    return found


@dataclass(frozen=True)
class RunState:
    """Where a run folder stands. `status`: one of :data:`RUN_STATUSES`; `epochs_done`: the epochs train.py has
    finished as far as summary.csv says (its last epoch + 1); `epochs_scheduled`: the epochs train.py runs
    (0: unknown); `reason`: why it failed or what is missing ('' when finished or not started)."""
    folder: Path
    status: str
    epochs_done: int = 0
    epochs_scheduled: int = 0
    reason: str = ''

    def __str__(self) -> str:
        if self.status == 'finished':
            return f'finished ({self.epochs_done} of {self.epochs_scheduled} epochs)'
        if self.status == 'unfinished':
            return f'unfinished: epoch {self.epochs_done} of {self.epochs_scheduled} ({self.reason})'
        return f'{self.status}: {self.reason}' if self.reason else self.status


def run_state(folder: PathLike) -> RunState:
    """Whether the train.py run in `folder` is finished (every epoch train.py schedules has its summary row),
    unfinished (epoch k of n), failed (args.yaml unreadable, a summary.csv fault, a non-finite or impossible value,
    a bad seed: :attr:`Run.problems`) or not started (no args.yaml yet). Never raises for the folder's content."""
    folder = Path(folder)
    if not (folder / ARGS_YAML).is_file():
        return RunState(folder, 'not started', reason=f'no {ARGS_YAML} in {folder}')
    try:
        run = read_run(folder)
    except RunFileError as e:
        return RunState(folder, 'failed', reason=str(e))
    done = max(run.epochs) + 1 if run.epochs else 0
    if run.problems:
        return RunState(folder, 'failed', done, run.scheduled, '; '.join(run.problems))
    if run.finished:
        return RunState(folder, 'finished', done, run.scheduled)
    from_to = epoch_ranges(run.missing)
    return RunState(folder, 'unfinished', done, run.scheduled, f'no summary row for epoch {from_to}')


def epoch_ranges(epochs: Sequence[int]) -> str:
    """[3, 4, 5, 9] → '3–5, 9'."""
    out, start = [], None
    for i, e in enumerate(epochs):
        if start is None:
            start = e
        if i + 1 == len(epochs) or epochs[i + 1] != e + 1:
            out.append(f'{start}' if start == e else f'{start}–{e}')
            start = None
    return ', '.join(out)


# ------------------------------------------------------------------------------------------------- epochs.csv

_EPOCHS_FIXED = ('run', 'seed', 'model', 'model_kwargs', 'epoch', 'config', 'read_problems')


def _dump(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


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


def write_epochs_csv(runs: Sequence[Run], path: PathLike) -> None:
    """Every run's per-epoch metrics with its configuration, one row per (run, epoch): ``run, seed, model,
    model_kwargs, epoch, <summary.csv columns>, config, read_problems``. ``config`` (on each run's first row only,
    to keep the file small) is the run's args.yaml as JSON without the bookkeeping keys and with absolute paths cut
    to their last component; a run without a summary row gets one row with an empty epoch. Values are written in
    full (``repr``)."""
    metrics: List[str] = []
    for run in runs:
        for row in run.epochs.values():
            metrics += [k for k in row if k not in metrics]
    with open(path, 'w', newline='') as f:
        writer = csv.writer(f)
        writer.writerow(['run', 'seed', 'model', 'model_kwargs', 'epoch', *metrics, 'config', 'read_problems'])
        for run in runs:
            head = [run.name, run.seed, run.model, _dump(run.model_kwargs)]
            tail = [_dump(_portable(run.args)), ' | '.join(run.read_problems)]
            for i, epoch in enumerate(sorted(run.epochs) or [None]):
                row = run.epochs.get(epoch, {}) if epoch is not None else {}
                writer.writerow([*head, '' if epoch is None else epoch,
                                 *[repr(row[k]) if k in row else '' for k in metrics], *(tail if i == 0 else ['', ''])])


def _epochs_line(path: Path, lineno: int, line: Dict[str, str], first: bool) -> Tuple[Optional[Dict], Optional[int],
                                                                                       Dict[str, float]]:
    """(the run's arguments if `first`, the epoch or None, the metrics) of one epochs.csv line."""
    where = f'{path}, line {lineno}'
    args = None
    if first:
        try:
            args = json.loads(line['config'] or 'null')
        except json.JSONDecodeError as e:
            raise RunFileError(f'{where}: column config is not JSON ({e.msg} at character {e.pos + 1})') from None
        if not isinstance(args, dict) or 'model' not in args:
            raise RunFileError(f'{where}: column config of run {line["run"]!r} is not a train.py configuration '
                               f'(a JSON object with a model)')
        check_train_args(args, where)
    try:
        epoch = None if not line['epoch'] else int(line['epoch'])
    except ValueError:
        raise RunFileError(f'{where}: column \'epoch\' holds {line["epoch"]!r}, not an epoch number') from None
    metrics: Dict[str, float] = {}
    for key, text in line.items():
        if key in _EPOCHS_FIXED or not text:
            continue
        try:
            metrics[key] = float(text)
        except ValueError:
            raise RunFileError(f'{where}: column {key!r} holds {text!r}, not a number') from None
    return args, epoch, metrics


def read_epochs_csv(path: PathLike) -> List[Run]:
    """The runs of an ``epochs.csv`` written by :func:`write_epochs_csv` (in its order).

    Raises:
        RunFileError: not such a file (columns), a config that is not JSON, a value that is not a number.
    """
    path = Path(path)
    runs: OrderedDict[str, Tuple[Dict, Dict, List[str]]] = OrderedDict()
    try:
        with open(path, newline='', encoding='utf-8') as f:
            reader = csv.DictReader(f)
            if reader.fieldnames is None or not set(_EPOCHS_FIXED) <= set(reader.fieldnames):
                raise RunFileError(f'{path}: not an epochs.csv of `pkmixer report` (columns '
                                   f'{", ".join(_EPOCHS_FIXED)})')
            for line in reader:
                if None in line:
                    raise RunFileError(f'{path}, line {reader.line_num}: more values than columns')
                first = line['run'] not in runs
                args, epoch, metrics = _epochs_line(path, reader.line_num, line, first)
                if first:
                    runs[line['run']] = (args, {}, [p for p in (line['read_problems'] or '').split(' | ') if p])
                if epoch is not None:
                    runs[line['run']][1][epoch] = metrics
    except (UnicodeDecodeError, csv.Error) as e:
        raise RunFileError(f'{path}: not an epochs.csv of `pkmixer report` ({type(e).__name__})') from None
    return [make_run(name, args, epochs, problems) for name, (args, epochs, problems) in runs.items()]


# ------------------------------------------------------------------------------------------------- sweep.json

def read_sweep_record(path: PathLike) -> Dict[str, Any]:
    """A sweep's ``sweep.json`` (``{"sweeps": [...]}``, as ``pkmixer sweep`` writes it).

    Raises:
        RunFileError: not JSON, or not an object whose ``sweeps`` is a list.
    """
    path = Path(path)
    try:
        record = json.loads(path.read_text(encoding='utf-8'))
    except json.JSONDecodeError as e:
        raise RunFileError(f'{path}: not JSON ({e.msg} at line {e.lineno}, column {e.colno}); '
                           f'`pkmixer sweep` writes it, move it away to start a new record') from None
    except UnicodeDecodeError:
        raise RunFileError(f'{path}: not JSON (not a text file)') from None
    if not isinstance(record, dict) or not isinstance(record.get('sweeps', []), list):
        raise RunFileError(f'{path}: not a sweep record (a JSON object with a list of sweeps)')
    return record


# ------------------------------------------------------------------------------------------------- launch marker

LAUNCH_MARKER = 'pkmixer_launch.json'  # in a run folder: which launched recipe owns it and what it asked to train
LAUNCH_TRAIN_ARGS = ('launch', 'train_args.json')  # in a launched folder: the train.py arguments of its launches
# the train.py arguments that its epoch count reads (timm's scheduler_kwargs and the loop's start)
SCHEDULE_KEYS = (*_SCHED_DEFAULTS, 'start_epoch', 'lr_noise_pct', 'lr_noise_std', 'seed', 'lr_decay_fn',
                 'lr_stable_timescale')


def _regular_text(path: Path) -> Optional[str]:
    """The text of `path` if it is a regular file (None if there is none); anything else (a FIFO, a device) is a
    :class:`RunFileError`, never opened for a blocking read."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except FileNotFoundError:
        return None
    except OSError as e:
        raise RunFileError(f'{path}: cannot be read ({e.strerror or e})') from None
    with os.fdopen(fd, 'rb') as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise RunFileError(f'{path}: not a regular file')
        data = f.read(1 << 20)
    try:
        return data.decode('utf-8')
    except UnicodeDecodeError:
        raise RunFileError(f'{path}: not a text file') from None


def run_digest(recipe_args: Dict[str, Any], train_args: Sequence[str]) -> str:
    """What determines a launched run's result, as one digest: its recipe's keys and values (comments and layout
    do not count) and the train.py arguments the launch gave every run (sha256 of their canonical JSON)."""
    text = json.dumps(dict(recipe=recipe_args, train_args=list(train_args)), sort_keys=True, default=str,
                      separators=(',', ':'))
    return hashlib.sha256(text.encode('utf-8')).hexdigest()


def read_launch_marker(run_dir: PathLike) -> Dict[str, Any]:
    """A run folder's :data:`LAUNCH_MARKER` ({} when there is none): ``folder`` (the launched folder, relative to
    the run folder), ``folder_id``, ``recipe`` (its file name there), and from the run's start ``digest``
    (:func:`run_digest`), ``recipe_args`` and ``train_args``. Raises :class:`RunFileError` for one that cannot be
    used."""
    path = Path(run_dir) / LAUNCH_MARKER
    text = _regular_text(path)
    if text is None:
        return {}
    try:
        marker = json.loads(text)
    except ValueError:
        marker = None
    shape = dict(folder=str, folder_id=str, recipe=str, digest=(str, type(None)), recipe_args=(dict, type(None)),
                 train_args=(list, type(None)))
    if not isinstance(marker, dict) or any(not isinstance(marker.get(k), t) for k, t in shape.items()):
        raise RunFileError(f'{path}: not the launch marker `pkmixer launch` writes (a JSON object with '
                           f'{", ".join(shape)}); remove it if no launch is running this run')
    return marker


def _changed_keys(then: Dict[str, Any], now: Dict[str, Any]) -> List[str]:
    keys = []
    for k in sorted(set(then) | set(now)):
        a, b = then.get(k), now.get(k)
        if isinstance(a, dict) and isinstance(b, dict):
            keys += [f'{k}.{sub}' for sub in _changed_keys(a, b)]
        elif _dump(a) != _dump(b) or (k in then) != (k in now):
            keys.append(k)
    return keys


def launch_changes(run_dir: PathLike) -> List[str]:
    """What changed since a launched run started: the recipe's keys whose values changed (``model_kwargs.x`` inside
    a mapping) and ``train.py arguments`` when the launch's arguments did; [] when nothing did, or when it cannot be
    told (no marker, a marker from before the run's start, the recipe or its folder gone, moved apart)."""
    run_dir = Path(run_dir)
    marker = read_launch_marker(run_dir)
    if not marker or marker.get('digest') is None:
        return []
    folder = run_dir / marker['folder']
    try:
        recipe_args = load_yaml(_regular_text(folder / marker['recipe']) or '')
        saved = json.loads(_regular_text(folder.joinpath(*LAUNCH_TRAIN_ARGS)) or 'null')
    except (RunFileError, yaml.YAMLError, ValueError):
        return []
    if not isinstance(recipe_args, dict):
        return []
    train_args = saved.get('train_args') if isinstance(saved, dict) else None
    train_args = train_args if isinstance(train_args, list) else marker.get('train_args') or []
    if run_digest(recipe_args, train_args) == marker['digest']:
        return []
    changed = _changed_keys(marker.get('recipe_args') or {}, recipe_args)
    return changed + (['train.py arguments'] if train_args != (marker.get('train_args') or []) else [])


# ------------------------------------------------------------------------------------------------- schedules

def schedule_record(args: Dict[str, Any]) -> Dict[str, Any]:
    """train.py's epoch count for `args` (:func:`scheduled_epochs`: imports torch and timm) with the arguments it
    was computed from (:data:`SCHEDULE_KEYS`), as JSON, for :func:`run_state_with_schedule`."""
    epochs, required = scheduled_epochs(args)
    return dict(args=json.loads(_dump({k: args.get(k) for k in SCHEDULE_KEYS})), epochs=epochs,
                required=list(required))


def run_state_with_schedule(folder: PathLike, schedule: Dict[str, Any]) -> Optional[RunState]:
    """:func:`run_state` without importing torch or timm: train.py's epoch count taken from `schedule`
    (:func:`schedule_record`). None when the folder's args.yaml has other scheduler arguments than `schedule` was
    computed for, or cannot be read: ask :func:`run_state` then."""
    folder = Path(folder)
    if not (folder / ARGS_YAML).is_file():
        return RunState(folder, 'not started', reason=f'no {ARGS_YAML} in {folder}')
    epochs_scheduled, required = schedule.get('epochs'), schedule.get('required')
    if not isinstance(epochs_scheduled, int) or not isinstance(required, list) or \
            not all(isinstance(e, int) for e in required):
        return None  # not what schedule_record writes
    try:
        args = read_args_yaml(folder / ARGS_YAML)
    except RunFileError:
        return None
    if 'model' not in args or json.loads(_dump({k: args.get(k) for k in SCHEDULE_KEYS})) != schedule.get('args'):
        return None
    epochs: Dict[int, Dict[str, float]] = {}
    problems: List[str] = []
    if (folder / SUMMARY_CSV).is_file():
        try:
            summary = read_summary(folder / SUMMARY_CSV)
            epochs, problems = summary.epochs, [f'{SUMMARY_CSV}, {f}' for f in summary.faults]
        except (RunFileError, OSError) as e:
            problems = [str(e)]
    run = Run(folder.name, args, epochs, epochs_scheduled, tuple(required), read_problems=problems)
    run.check()
    done = max(epochs) + 1 if epochs else 0
    if run.problems:
        return RunState(folder, 'failed', done, run.scheduled, '; '.join(run.problems))
    if run.finished:
        return RunState(folder, 'finished', done, run.scheduled)
    return RunState(folder, 'unfinished', done, run.scheduled, f'no summary row for epoch {epoch_ranges(run.missing)}')
