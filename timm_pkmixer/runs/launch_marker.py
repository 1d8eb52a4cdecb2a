"""The launch marker `pkmixer launch` writes into a run folder, :data:`LAUNCH_MARKER`: which launched recipe owns
the folder and what it asked to train (a digest of the recipe's keys and the train.py arguments,
:func:`run_digest`). :func:`launch_changes` compares it with the recipe now: what changed makes a finished run
stale. Read by `pkmixer launch` / `status` and by `pkmixer report` (which lists a stale run apart, and names the
experiment the sweep that wrote a run's recipe named: :func:`~timm_pkmixer.sweeps.sweep_write.swept_experiment`),
so it lives below both."""
import hashlib
import json
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

import yaml

from ..state_files import load_yaml, read_text
from .run_folder import PathLike, RunFileError

__all__ = ['LAUNCH_MARKER', 'LAUNCH_TRAIN_ARGS', 'regular_text', 'run_digest', 'read_launch_marker', 'launch_changes']

LAUNCH_MARKER = 'pkmixer_launch.json'  # in a run folder: which launched recipe owns it and what it asked to train
LAUNCH_TRAIN_ARGS = ('launch', 'train_args.json')  # in a launched folder: the train.py arguments of its launches


def regular_text(path: Path) -> Optional[str]:
    """The text of `path` if it is a regular file (None if there is none); anything else (a FIFO, a device, a symlink
    loop, not text) is a :class:`RunFileError`, never opened for a blocking read."""
    return read_text(path, lambda why: RunFileError(f'{path}: {why}'))


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
    text = regular_text(path)
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


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def _changed_keys(then: Dict[str, Any], now: Dict[str, Any]) -> List[str]:
    keys = []
    for k in sorted(set(then) | set(now)):
        a, b = then.get(k), now.get(k)
        if isinstance(a, dict) and isinstance(b, dict):
            keys += [f'{k}.{sub}' for sub in _changed_keys(a, b)]
        elif _canonical(a) != _canonical(b) or (k in then) != (k in now):
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
        recipe_args = load_yaml(regular_text(folder / marker['recipe']) or '')
        saved = json.loads(regular_text(folder.joinpath(*LAUNCH_TRAIN_ARGS)) or 'null')
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
