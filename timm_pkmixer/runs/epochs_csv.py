"""The report's ``epochs.csv``: every run's per-epoch metrics with its configuration, long form, no machine path.

:func:`write_epochs_csv` writes it beside ``report.csv``; :func:`read_epochs_csv` reads it back into the runs it
came from, so that ``pkmixer report`` rebuilds the same report (and figures) from the file alone. A file that is not
one is a :class:`~timm_pkmixer.runs.run_folder.RunFileError` naming the line and column.
"""
import csv
import errno
import io
import json
import os
from collections import OrderedDict
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ..state_files import read_text, write_text
from .provenance import check_environment, without_paths
from .run_folder import RUN_ONLY_KEYS, PathLike, Run, RunFileError, cache_only_keys, check_train_args, make_run

__all__ = ['write_epochs_csv', 'read_epochs_csv']

_EPOCHS_FIXED = ('run', 'seed', 'model', 'model_kwargs', 'epoch', 'config', 'read_problems')
ENVIRONMENT = 'environment'  # a later column: what made the run (its pkmixer_env.json); files before it lack it
_NOT_METRICS = (*_EPOCHS_FIXED, ENVIRONMENT)


def _dump(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def _portable(args: Dict[str, Any]) -> Dict[str, Any]:
    """args without bookkeeping (a download's cache among it: :func:`.run_folder.cache_only_keys`) and with every
    absolute path cut to its last component (no machine path)."""
    out = {}
    cache = cache_only_keys(args)
    for k, v in args.items():
        if (k in RUN_ONLY_KEYS and k != 'seed') or k in cache:
            continue
        if isinstance(v, str) and os.path.isabs(v):
            v = Path(v).name
        out[k] = v
    return out


def _portable_environment(env: Dict[str, Any]) -> Dict[str, Any]:
    """A run's environment as epochs.csv keeps it: every absolute path in its text cut to its last component
    (:func:`.provenance.without_paths`; `pkmixer train` records none, a file written otherwise may)."""
    return without_paths(env)


def write_epochs_csv(runs: Sequence[Run], path: PathLike) -> None:
    """Every run's per-epoch metrics with its configuration, one row per (run, epoch): ``run, seed, model,
    model_kwargs, epoch, <summary.csv columns>, config, read_problems, environment``. ``config`` (on each run's
    first row only, to keep the file small) is the run's args.yaml as JSON without the bookkeeping keys (a
    torchvision dataset's data_dir, its download's cache, among them) and with absolute paths cut to their last
    component; ``environment`` (first row too) is what made the run, its ``pkmixer_env.json`` as JSON (empty: not
    recorded); a run without a summary row gets one row with an empty epoch. Values are written in full
    (``repr``)."""
    metrics: List[str] = []
    for run in runs:
        for row in run.epochs.values():
            metrics += [k for k in row if k not in metrics]
    f = io.StringIO(newline='')
    writer = csv.writer(f)
    writer.writerow(['run', 'seed', 'model', 'model_kwargs', 'epoch', *metrics, 'config', 'read_problems',
                     ENVIRONMENT])
    for run in runs:
        head = [run.name, run.seed, run.model, _dump(run.model_kwargs)]
        tail = [_dump(_portable(run.args)), ' | '.join(run.read_problems),
                _dump(_portable_environment(run.environment)) if run.environment else '']
        for i, epoch in enumerate(sorted(run.epochs) or [None]):
            row = run.epochs.get(epoch, {}) if epoch is not None else {}
            writer.writerow([*head, '' if epoch is None else epoch,
                             *[repr(row[k]) if k in row else '' for k in metrics],
                             *(tail if i == 0 else [''] * len(tail))])
    write_text(path, f.getvalue())


def _environment(where: str, line: Dict[str, str]) -> Optional[Dict[str, Any]]:
    """The run's environment of its first line (None: not recorded, or a file from before the column), its keys'
    types checked (:func:`.provenance.check_environment`: a commit that is a number is named, not a crash)."""
    text = line.get(ENVIRONMENT) or ''
    if not text:
        return None
    try:
        env = json.loads(text)
    except json.JSONDecodeError as e:
        raise RunFileError(f'{where}: column {ENVIRONMENT} is not JSON ({e.msg} at character {e.pos + 1})') from None

    def problem(why: str) -> RunFileError:
        what = 'a JSON object' if why == 'not a JSON object' else f'an environment `pkmixer train` records ({why})'
        return RunFileError(f'{where}: column {ENVIRONMENT} of run {line["run"]!r} is not {what}')
    return check_environment(env, problem)


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
        if key in _NOT_METRICS or not text:
            continue
        try:
            metrics[key] = float(text)
        except ValueError:
            raise RunFileError(f'{where}: column {key!r} holds {text!r}, not a number') from None
    return args, epoch, metrics


def read_epochs_csv(path: PathLike) -> List[Run]:
    """The runs of an ``epochs.csv`` written by :func:`write_epochs_csv` (in its order), each with its environment
    (None where the file has none: a run that recorded none, or a file written before the column).

    Raises:
        RunFileError: not such a file (columns), a config that is not JSON, a value that is not a number.
    """
    path = Path(path)
    runs: OrderedDict[str, Tuple[Dict, Dict, List[str]]] = OrderedDict()
    environments: Dict[str, Optional[Dict[str, Any]]] = {}
    try:
        text = read_text(path, lambda why: RunFileError(f'{path}: not an epochs.csv of `pkmixer report` ({why})'),
                         limit=None)
        if text is None:
            raise FileNotFoundError(errno.ENOENT, 'No such file or directory', str(path))
        reader = csv.DictReader(io.StringIO(text, newline=''))
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
                environments[line['run']] = _environment(f'{path}, line {reader.line_num}', line)
            if epoch is not None:
                runs[line['run']][1][epoch] = metrics
    except csv.Error as e:
        raise RunFileError(f'{path}: not an epochs.csv of `pkmixer report` ({type(e).__name__})') from None
    out = [make_run(name, args, epochs, problems) for name, (args, epochs, problems) in runs.items()]
    for run in out:
        run.environment = environments[run.name]
    return out

