"""The files of a timm train.py run, each read one way for every command (report, plot run, push, analyze, status).

A run folder is what train.py writes into ``--output/--experiment``: ``args.yaml`` (every argument) and
``summary.csv`` (a row per validated epoch, by ``timm.utils.update_summary``). This module reads them as train.py
writes them:

* **args.yaml** (:func:`read_args_yaml`): read by :func:`~timm_pkmixer.state_files.load_yaml` (safe,
  aliases bounded); ``model_kwargs`` must be a mapping (:func:`check_train_args`).
* **summary.csv** (:func:`read_summary`): the header comes again after ``--resume`` into the same folder and an
  epoch may be written more than once (resumed from an earlier checkpoint): a start of train.py writes over every
  row of the epochs it runs, so the first row after a repeated header at epoch k drops the earlier rows of epochs
  k and later (an abandoned start's); at epoch 0 it is a restart, not a resume (:attr:`Summary.restarts`).
  A row with a wrong field count, an empty cell, a value that is not a number or a non-integer epoch is a fault,
  named by line and column, and not used.
* **a run** (:func:`read_run`, :class:`Run`): its arguments, its epochs, the epochs train.py schedules
  (:func:`scheduled_epochs`: timm's ``create_scheduler_v2``, as train.py counts them) and what keeps it from being a
  measurement (:func:`row_problem`: a top-1 outside [0, 100] or a non-finite value; a seed outside train.py's range);
  :func:`run_state`: finished, unfinished (epoch k of n), failed or not started.
* **the run folders under a path** (:func:`search_runs`): symlinked folders followed, each folder read once, named
  apart (:func:`distinct_names`); **a checkpoint's epoch and arguments** (:func:`read_checkpoint_info`), read
  without running its code.

Epochs are numbered as train.py numbers them (from 0: summary.csv's ``epoch``) in the data, and as people count them
(from 1: :func:`epoch_words`) in every sentence: "epoch 1" is the first epoch, summary.csv's epoch 0.

The package's own files about runs are written and read where they are made: the report's ``epochs.csv`` in
:mod:`~timm_pkmixer.runs.epochs_csv`, a sweep's ``sweep.json`` by the sweep writer.
* train.py's epoch count kept with a launched run (:func:`schedule_record`), so that its state can be read
  without torch (:func:`run_state_with_schedule`).

Every refusal is a :class:`RunFileError` naming the file (and the line and column where there is one).
"""
import csv
import errno
import hashlib
import io
import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import yaml

from ..errors import InvalidArgumentError
from ..state_files import load_yaml, read_text, yaml_reason

__all__ = ['ARGS_YAML', 'SUMMARY_CSV', 'CHECKPOINTS', 'RUN_ONLY_KEYS', 'SEED_MODEL_ARGS', 'SEED_RANGE', 'RUN_STATUSES',
           'cache_only_keys',
           'PathLike', 'RunFileError', 'read_args_yaml', 'check_train_args', 'Summary', 'read_summary', 'row_problem',
           'scheduled_epochs', 'Run', 'make_run', 'read_run', 'find_runs', 'find_checkpoint', 'RunState', 'run_state',
           'epoch_ranges', 'epoch_words', 'LastEpoch', 'last_epoch', 'SCHEDULE_KEYS', 'schedule_record',
           'run_state_with_schedule', 'search_runs', 'distinct_names', 'CheckpointInfo', 'read_checkpoint_info']

ARGS_YAML, SUMMARY_CSV = 'args.yaml', 'summary.csv'
CHECKPOINTS = ('last.pth.tar', 'model_best.pth.tar')  # train.py's checkpoints of a run, the one taken first
# args.yaml keys that say where or how a run was executed or logged, not what was trained
RUN_ONLY_KEYS = ('seed', 'experiment', 'output', 'resume', 'no_resume_opt', 'start_epoch', 'log_interval',
                 'recovery_interval', 'checkpoint_hist', 'workers', 'pin_mem', 'device', 'local_rank',
                 'log_wandb', 'wandb_project', 'wandb_tags', 'wandb_resume_id', 'config', 'device_modules',
                 'initial_checkpoint', 'resume_epoch', 'torchcompile', 'worker_seeding', 'dist_bn', 'rank',
                 'world_size', 'distributed', 'save_images', 'eval_metric')
SEED_MODEL_ARGS = ('perm_seed', 'mask_seed')  # model arguments sweeps tie to the training seed
# timm dataset prefixes whose data_dir is only where a download is cached (torchvision's root, the HF datasets'
# cache_dir): the name is the data; an ImageFolder's (or a tfds/ or wds/) data_dir is the data itself
_DOWNLOAD_PREFIXES = ('torch', 'hfds', 'hfids')


def cache_only_keys(args: Dict[str, Any]) -> Tuple[str, ...]:
    """The keys of train.py's `args` that only say where a download is cached, not what was trained: ``data_dir``
    of a dataset named by a download prefix (``torch/cifar10``; the prefix case-insensitive, as timm reads it)."""
    prefix, sep, _ = str(args.get('dataset') or '').partition('/')
    return ('data_dir',) if sep and prefix.lower() in _DOWNLOAD_PREFIXES else ()
SEED_RANGE = (0, 2 ** 32 - 1)  # timm.utils.random_seed: np.random.seed(seed + rank) takes 0 … 2^32 − 1
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


# ------------------------------------------------------------------------------------------------- args.yaml

def _link_why(path: Path) -> str:
    """Why `path`, which opening did not find, cannot be read: a symlink to nothing (its target named), or no file."""
    if os.path.islink(path):
        return f'a symlink to {os.readlink(path)}, which does not exist'
    return 'No such file or directory'


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
        text = read_text(path, lambda why: RunFileError(f'{path}: cannot be read ({why})'), limit=None)
        if text is None:
            raise RunFileError(f'{path}: cannot be read ({_link_why(path)})')
        args = load_yaml(text)
    except yaml.YAMLError as e:
        raise RunFileError(f'{path}: not a train.py args.yaml that can be read safely ({yaml_reason(e)})') from e
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
    resumed_at: Tuple[int, ...] = ()  # the epoch of the first row after each repeated header (a --resume)
    restarts: int = 0                # repeated headers whose first row is epoch 0: train.py started over, no resume

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
    resumed_at: List[int] = []
    restarts = 0
    resumed = False
    try:
        text = read_text(path, lambda why: _not_a_summary(path, f': {why}'), limit=None)
        if text is None:
            raise FileNotFoundError(errno.ENOENT, 'No such file or directory', str(path))
        for lineno, cells in enumerate(csv.reader(io.StringIO(text, newline='')), 1):
            if not cells:
                continue
            if cells[0] == 'epoch' and (header is not None or 'train_loss' in cells):
                resumed = header is not None
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
            if resumed:  # a new start of train.py runs every epoch from this one: the rows of an earlier start go
                for e in [e for e in epochs if e >= epoch]:
                    del epochs[e], lines[e]
                resumed_at = [e for e in resumed_at if e < epoch] + ([epoch] if epoch else [])
                restarts += epoch == 0
                resumed = False
            epochs[epoch], lines[epoch] = row, lineno
    except csv.Error as e:
        raise _not_a_summary(path, f': not a CSV file ({e})') from None
    return Summary(path, epochs, lines, tuple(columns), tuple(faults), tuple(resumed_at), restarts)


def row_problem(epoch: int, row: Dict[str, float]) -> str:
    """Why a summary row is not a measurement ('' if it is one): a non-finite value (NaN, ±inf, or a number past a
    float's range, such as 1e400), a top-1 or top-5 outside [0, 100]. `epoch`: summary.csv's (from 0)."""
    bad = [k for k, v in row.items() if not math.isfinite(v)]
    if bad:
        return f'non-finite {", ".join(f"{k} ({row[k]})" for k in bad)} at epoch {epoch_words([epoch])}'
    out = [f'{k} = {row[k]:g}' for k in _TOP1_KEYS if k in row and not 0. <= row[k] <= 100.]
    return f'{", ".join(out)} at epoch {epoch_words([epoch])} is outside [0, 100]' if out else ''


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
    swept: Optional[str] = None             # the experiment its sweep named (`pkmixer sweep`), if launched from one
    environment: Optional[Dict[str, Any]] = None  # what made it (its pkmixer_env.json: runs/provenance.py), if recorded
    resumed_at: Tuple[int, ...] = ()        # the epochs it was resumed at (train.py's --resume; summary.csv says)
    restarts: int = 0                       # times train.py started over into its folder (summary.csv says)
    value_problems: List[str] = field(default_factory=list)  # of problems, those of its values: resuming cannot mend

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
        """What the run trained: every argument but the seed, the bookkeeping (:data:`RUN_ONLY_KEYS`, and a
        download's cache: :func:`cache_only_keys`) and the seed-tied model arguments (:data:`SEED_MODEL_ARGS`)."""
        skip = set(RUN_ONLY_KEYS) | set(cache_only_keys(self.args))
        args = {k: v for k, v in self.args.items() if k not in skip}
        args['model_kwargs'] = {k: v for k, v in self.model_kwargs.items() if k not in SEED_MODEL_ARGS}
        return args

    @property
    def past_schedule(self) -> List[int]:
        """The epochs summary.csv has a row for that train.py does not run with these arguments (another schedule
        wrote them)."""
        return sorted(e for e in self.epochs if self.scheduled and e >= self.scheduled)

    def check(self) -> None:
        """Fill :attr:`problems`: faults of the file, the seed and the values, rows past the schedule (not the
        completeness); and :attr:`value_problems`, those of the values and rows past the schedule."""
        self.problems = list(self.read_problems)
        seed = self.seed
        if isinstance(seed, bool) or not isinstance(seed, int):
            self.problems.append(f'seed {seed!r} is not an integer')
        elif not SEED_RANGE[0] <= seed <= SEED_RANGE[1]:
            self.problems.append(f'seed {seed} is outside train.py\'s range {SEED_RANGE[0]} … {SEED_RANGE[1]}')
        if self.epochs and not any('eval_top1' in r for r in self.epochs.values()):
            self.problems.append('summary.csv has no eval_top1 (the run was not validated)')
        elif self.finished and 'eval_top1' not in self.epochs[self.last_epoch]:
            self.problems.append(f'summary.csv has no eval_top1 at the last epoch ({epoch_words([self.last_epoch])})')
        problem = next(filter(None, (row_problem(e, self.epochs[e]) for e in sorted(self.epochs))), '')
        self.value_problems = [problem] if problem else []  # a diverged run resumed stays diverged
        if self.past_schedule:
            self.value_problems.append(f'summary.csv has rows past the {self.scheduled} epochs train.py runs with '
                                       f'these arguments (epoch {epoch_words(self.past_schedule)}): another schedule '
                                       f'wrote them')
        self.problems += self.value_problems


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
    resumed_at: Tuple[int, ...] = ()
    restarts = 0
    if os.path.lexists(path / SUMMARY_CSV):
        try:
            summary = read_summary(path / SUMMARY_CSV)
            epochs, problems = summary.epochs, [f'{SUMMARY_CSV}, {f}' for f in summary.faults]
            resumed_at, restarts = summary.resumed_at, summary.restarts
        except RunFileError as e:
            problems = [str(e).replace(f'{path}{os.sep}', '')]
        except FileNotFoundError:
            problems = [f'{SUMMARY_CSV} is {_link_why(path / SUMMARY_CSV)}']
        except OSError as e:
            problems = [f'{SUMMARY_CSV} cannot be read ({e.strerror or e})']
    run = make_run(name or path.name, args, epochs, problems)
    run.resumed_at, run.restarts = resumed_at, restarts
    return run


@dataclass(frozen=True)
class LastEpoch:
    """A run folder's last summary row as `pkmixer status` and `pkmixer launch` show it: its `epoch` (summary.csv's,
    from 0), the metric train.py optimises (``--eval-metric``, default ``top1``: `metric` and its `value`),
    ``eval_loss`` and ``train_loss`` (None when the row lacks them; NaN or ±inf as written), the epochs it was
    resumed at and whether train.py started over into its folder."""
    epoch: int
    metric: str
    value: Optional[float]
    eval_loss: Optional[float]
    train_loss: Optional[float]
    resumed_at: Tuple[int, ...] = ()
    restarted: bool = False

    def describe(self) -> str:
        """``epoch 2: top1 86.16, eval_loss 0.4120, train_loss 0.3557`` (the epoch as people count it: the second);
        a value that is not a number is said as it is (``eval_loss nan``, ``top1 inf``), never left out."""
        values = [(self.metric, self.value), ('eval_loss', self.eval_loss), ('train_loss', self.train_loss)]
        shown = ', '.join(f'{k} {v:.4f}' if 'loss' in k else f'{k} {v:.2f}' for k, v in dict(values).items()
                          if v is not None)
        epoch = epoch_words([self.epoch])
        return f'epoch {epoch}: {shown}' if shown else f'epoch {epoch}'


def last_epoch(folder: PathLike) -> Optional[LastEpoch]:
    """The last epoch's result of the run in `folder` (None when it has no summary row or its files cannot be read:
    the run's state says why). Reads args.yaml and summary.csv only (no torch)."""
    folder = Path(folder)
    try:
        args = read_args_yaml(folder / ARGS_YAML) if (folder / ARGS_YAML).is_file() else {}
        summary = read_summary(folder / SUMMARY_CSV)
    except (RunFileError, OSError):
        return None
    if not summary.epochs:
        return None
    epoch = max(summary.epochs)
    row = summary.epochs[epoch]
    metric = str(args.get('eval_metric') or 'top1')
    return LastEpoch(epoch, metric, row.get(f'eval_{metric}'), row.get('eval_loss'), row.get('train_loss'),
                     summary.resumed_at, summary.restarts > 0)


@dataclass(frozen=True)
class FoundRun:
    """A run folder found under a path given: `folder` as reached (through any symlink), `base` (the folder whose
    components name it apart from another of the same name: the path given, or its parent for a run folder given
    itself) and `name` (relative to the path given; its own name for a run folder given itself)."""
    folder: Path
    base: Path
    name: str
    given: str = ''   # the path it was found at or under, as given


def search_runs(paths: Sequence[PathLike]) -> Tuple[List[FoundRun], List[str]]:
    """Every run folder (a folder with an entry named args.yaml, whatever it is: a run whose args.yaml cannot be
    read is still found, to be named) at or under `paths`, each once, in path order, and notes on what was not
    read: symlinked folders are followed, but a second path to a folder already read (two paths given that
    overlap, a symlink to a run folder found another way, a symlink loop) is read once and said; a folder that
    cannot be listed is said.

    Raises:
        FileNotFoundError: a path that does not exist.
    """
    found: List[FoundRun] = []
    notes: List[str] = []
    seen: Dict[str, str] = {}   # real path → how it was first reached (for people)
    for p in map(Path, paths):
        if not p.exists():
            raise FileNotFoundError(2, 'no such run folder', str(p))
        base = Path(os.path.abspath(p))
        if os.path.lexists(p / ARGS_YAML):
            real = os.path.realpath(p)
            if real in seen:
                notes.append(f'{p} is {seen[real]} again: read once')
            else:
                seen[real] = str(p)
                found.append(FoundRun(p, base.parent, p.name, str(p)))
            continue
        here: List[FoundRun] = []

        def unlisted(error: OSError, root: Path = p) -> None:
            notes.append(f'{Path(error.filename or root)} cannot be listed ({error.strerror or error}): its runs are '
                         f'not read')
        for dirpath, dirnames, _ in os.walk(p, onerror=unlisted, followlinks=True):
            dirnames.sort()
            real = os.path.realpath(dirpath)
            above = Path(os.path.realpath(os.path.dirname(dirpath)))
            if os.path.islink(dirpath) and (Path(real) == above or Path(real) in above.parents):
                notes.append(f'{dirpath} is a symlink to a folder above it (a loop): not followed')
                dirnames[:] = []
                continue
            if real in seen:
                notes.append(f'{dirpath} is {seen[real]} again: read once')
                dirnames[:] = []
                continue
            seen[real] = dirpath
            if os.path.lexists(os.path.join(dirpath, ARGS_YAML)) and Path(dirpath) != p:
                here.append(FoundRun(Path(dirpath), base, Path(dirpath).relative_to(p).as_posix(), str(p)))
        found += sorted(here, key=lambda f: Path(f.name).parts)
    return found, notes


def distinct_names(entries: Sequence[Tuple[Path, str]]) -> List[str]:
    """A name per (base, name), each unique: a name that several share is prefixed with its base's folders, nearest
    first, one more at a time, until it is unique (``x/run`` and ``y/run`` given: ``x/run``, ``y/run``; two
    ``runs/a`` under ``p/runs`` and ``q/runs``: ``p/runs/a``, ``q/runs/a``); names that are already unique stay."""
    names = [name for _, name in entries]
    depth = [0] * len(entries)
    while True:
        counts: Dict[str, int] = {}
        for name in names:
            counts[name] = counts.get(name, 0) + 1
        grow = [i for i, name in enumerate(names) if counts[name] > 1
                and depth[i] < len([c for c in entries[i][0].parts if c != entries[i][0].anchor])]
        if not grow:
            return names
        for i in grow:
            depth[i] += 1
            base, name = entries[i]
            parts = [c for c in base.parts if c != base.anchor]
            names[i] = '/'.join([*parts[len(parts) - depth[i]:], name])


def find_runs(paths: Sequence[PathLike]) -> List[Tuple[Path, str]]:
    """(run folder, name) for each path that holds an args.yaml, or every folder below it that does, symlinked
    folders followed, each folder once (:func:`search_runs`); the name is the folder relative to the path given
    (its own name for a run folder given directly), made longer where two would be alike (:func:`distinct_names`)."""
    found, _ = search_runs(paths)
    names = distinct_names([(f.base, f.name) for f in found])
    return [(f.folder, name) for f, name in zip(found, names)]


def find_checkpoint(path: PathLike) -> Path:
    """The checkpoint of a train.py run folder (the first of :data:`CHECKPOINTS` it holds), or `path` itself if it
    is a file.

    Raises:
        FileNotFoundError: `path` does not exist, or is a folder that holds none of :data:`CHECKPOINTS`.
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(2, 'no run folder or checkpoint', str(path))
    if path.is_file():
        return path
    for name in CHECKPOINTS:
        if (path / name).is_file():
            return path / name
    raise FileNotFoundError(2, f'a train.py run folder holds {" or ".join(CHECKPOINTS)}; none in', str(path))


@dataclass(frozen=True)
class CheckpointInfo:
    """What a train.py checkpoint says of itself: the `epoch` it was saved after (from 0), the epoch train.py resumes
    at (`next_epoch`: timm's ``resume_checkpoint``, one past a checkpoint of version 2 or later, as train.py's
    CheckpointSaver writes them) and the train.py arguments saved with it (`args`; None when none were)."""
    epoch: Optional[int]
    next_epoch: Optional[int]
    args: Optional[Dict[str, Any]]


def read_checkpoint_info(path: PathLike) -> CheckpointInfo:
    """A train.py checkpoint's :class:`CheckpointInfo`, read as ``torch.load(weights_only=True)`` reads it (no code
    run; train.py's arguments, an ``argparse.Namespace``, allowed; the tensors mapped, not read).

    Raises:
        RunFileError: not a regular file, or not a checkpoint that can be read so (named, with torch's reason).
    """
    import argparse
    import pickle
    import stat

    import torch
    path = Path(path)
    try:
        mode = os.stat(path).st_mode
    except OSError as e:
        why = _link_why(path) if isinstance(e, FileNotFoundError) else e.strerror
        raise RunFileError(f'{path}: cannot be read ({why})') from None
    if not stat.S_ISREG(mode):
        raise RunFileError(f'{path}: not a regular file')
    try:
        with torch.serialization.safe_globals([argparse.Namespace]):
            checkpoint = torch.load(str(path), map_location='cpu', weights_only=True, mmap=True)
    except (pickle.UnpicklingError, RuntimeError, ValueError, OSError, EOFError, AttributeError, TypeError) as e:
        why = str(e).strip().splitlines()[0][:200] if str(e).strip() else type(e).__name__
        raise RunFileError(f'{path}: not a train.py checkpoint that can be read safely ({why})') from None
    if not isinstance(checkpoint, dict):
        raise RunFileError(f'{path}: holds a {type(checkpoint).__name__}, not the mapping train.py saves')
    epoch, version = checkpoint.get('epoch'), checkpoint.get('version')
    if isinstance(epoch, bool) or not isinstance(epoch, int) or epoch < 0:
        epoch = None
    following = None if epoch is None else epoch + 1 if isinstance(version, int) and version > 1 else epoch
    args = checkpoint.get('args')
    args = vars(args) if isinstance(args, argparse.Namespace) else args if isinstance(args, dict) else None
    return CheckpointInfo(epoch, following, args)


@dataclass(frozen=True)
class RunState:
    """Where a run folder stands. `status`: one of :data:`RUN_STATUSES`; `epochs_done`: the epochs train.py has
    finished as far as summary.csv says (its last epoch + 1); `epochs_scheduled`: the epochs train.py runs
    (0: unknown); `reason`: why it failed or what is missing ('' when finished or not started); `missing`: the
    epochs (from 0) train.py writes a row for that summary.csv lacks; `resumable`: whether resuming the run can
    mend what failed (a file's faults, an args.yaml train.py writes again) or not (its values: a diverged run, rows
    past the schedule, a seed train.py refuses)."""
    folder: Path
    status: str
    epochs_done: int = 0
    epochs_scheduled: int = 0
    reason: str = ''
    missing: Tuple[int, ...] = ()
    resumable: bool = True

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
    if not os.path.lexists(folder / ARGS_YAML):
        return RunState(folder, 'not started', reason=f'no {ARGS_YAML} in {folder}')
    try:
        run = read_run(folder)
    except RunFileError as e:
        return RunState(folder, 'failed', reason=str(e))
    return _state_of(folder, run)


def _state_of(folder: Path, run: Run) -> RunState:
    done = max(run.epochs) + 1 if run.epochs else 0
    missing = tuple(run.missing)
    if run.problems:
        return RunState(folder, 'failed', done, run.scheduled, '; '.join(run.problems), missing,
                        resumable=not run.value_problems)
    if run.finished:
        return RunState(folder, 'finished', done, run.scheduled)
    return RunState(folder, 'unfinished', done, run.scheduled, f'no summary row for epoch {epoch_words(missing)}',
                    missing)


def epoch_ranges(epochs: Sequence[int]) -> str:
    """[3, 4, 5, 9] → '3–5, 9' (the numbers as given: :func:`epoch_words` says summary.csv's epochs to people)."""
    out, start = [], None
    for i, e in enumerate(epochs):
        if start is None:
            start = e
        if i + 1 == len(epochs) or epochs[i + 1] != e + 1:
            out.append(f'{start}' if start == e else f'{start}–{e}')
            start = None
    return ', '.join(out)


def epoch_words(epochs: Sequence[int]) -> str:
    """summary.csv's epochs (from 0) as people count them (from 1), as ranges: [0, 1, 2, 5] → '1–3, 6'."""
    return epoch_ranges([e + 1 for e in epochs])


# the train.py arguments that its epoch count reads (timm's scheduler_kwargs and the loop's start)
SCHEDULE_KEYS = (*_SCHED_DEFAULTS, 'start_epoch', 'lr_noise_pct', 'lr_noise_std', 'seed', 'lr_decay_fn',
                 'lr_stable_timescale')


def _canonical(value: Any) -> Any:
    return json.loads(json.dumps(value, sort_keys=True, default=str))


# ------------------------------------------------------------------------------------------------- schedules

def _schedule_digest(record: Dict[str, Any]) -> str:
    text = json.dumps([record.get('args'), record.get('epochs'), record.get('required')], sort_keys=True)
    return hashlib.sha256(text.encode('utf-8')).hexdigest()


def schedule_record(args: Dict[str, Any]) -> Dict[str, Any]:
    """train.py's epoch count for `args` (:func:`scheduled_epochs`: imports torch and timm) with the arguments it
    was computed from (:data:`SCHEDULE_KEYS`) and the digest of the three, as JSON, for
    :func:`run_state_with_schedule`."""
    epochs, required = scheduled_epochs(args)
    record = dict(args=_canonical({k: args.get(k) for k in SCHEDULE_KEYS}), epochs=epochs, required=list(required))
    return {**record, 'digest': _schedule_digest(record)}


def run_state_with_schedule(folder: PathLike, schedule: Dict[str, Any]) -> Optional[RunState]:
    """:func:`run_state` without importing torch or timm: train.py's epoch count taken from `schedule`
    (:func:`schedule_record`). None when `schedule` is not one :func:`schedule_record` wrote (its digest does not
    match: edited, or from before the digest), the folder's args.yaml has other scheduler arguments than it was
    computed for, or cannot be read: ask :func:`run_state` then."""
    folder = Path(folder)
    if not os.path.lexists(folder / ARGS_YAML):
        return RunState(folder, 'not started', reason=f'no {ARGS_YAML} in {folder}')
    epochs_scheduled, required = schedule.get('epochs'), schedule.get('required')
    if not isinstance(epochs_scheduled, int) or not isinstance(required, list) or \
            not all(isinstance(e, int) for e in required) or schedule.get('digest') != _schedule_digest(schedule):
        return None  # not what schedule_record writes
    try:
        args = read_args_yaml(folder / ARGS_YAML)
    except RunFileError:
        return None
    if 'model' not in args or _canonical({k: args.get(k) for k in SCHEDULE_KEYS}) != schedule.get('args'):
        return None
    epochs: Dict[int, Dict[str, float]] = {}
    problems: List[str] = []
    if os.path.lexists(folder / SUMMARY_CSV):
        try:
            summary = read_summary(folder / SUMMARY_CSV)
            epochs, problems = summary.epochs, [f'{SUMMARY_CSV}, {f}' for f in summary.faults]
        except FileNotFoundError:
            problems = [f'{SUMMARY_CSV} is {_link_why(folder / SUMMARY_CSV)}']
        except (RunFileError, OSError) as e:
            problems = [str(e)]
    run = Run(folder.name, args, epochs, epochs_scheduled, tuple(required), read_problems=problems)
    run.check()
    return _state_of(folder, run)
