"""Who owns a run folder and what it was asked to train: the launch marker ``RUN_DIR/pkmixer_launch.json``
(:data:`~timm_pkmixer.runs.launch_marker.LAUNCH_MARKER`, read by
:func:`~timm_pkmixer.runs.launch_marker.read_launch_marker`).

* **One owner.** A run's first start creates the marker atomically (written beside it, hard-linked into place):
  the launched folder's id and the recipe's file name. A launch whose recipe's run folder is another's (another
  recipe, another launched folder, or — without a marker — a run of another model) is refused by name before
  anything trains (:func:`owner_problem`); two launches that both planned it cannot both start it (:func:`claim`).
* **What it was asked to train.** Each start records the digest of the recipe's keys and the launch's train.py
  arguments (:func:`~timm_pkmixer.runs.launch_marker.run_digest`) with both; a finished run whose recipe or
  arguments changed since is stale (:func:`~timm_pkmixer.runs.launch_marker.launch_changes`), and is rerun only
  into a fresh folder, the old one moved aside (:func:`move_aside`)."""
import json
import os
import time
from pathlib import Path
from typing import Any, Dict, Mapping, Optional, Sequence

import yaml

from ..runs.launch_marker import LAUNCH_MARKER, read_launch_marker, run_digest
from ..runs.run_folder import ARGS_YAML, RunFileError, read_args_yaml
from ..state_files import create_json, load_yaml, read_text, write_json
from .errors import RunFolderTakenError, StateFileError, state_file

__all__ = ['owner_problem', 'claim', 'mark_start', 'move_aside']


def _marker(run_dir: Path) -> Dict[str, Any]:
    try:
        return read_launch_marker(run_dir)
    except RunFileError as e:
        raise StateFileError(str(e)) from None


def _owner(marker: Mapping[str, Any], run_dir: Path, folder_id: str) -> str:
    if marker['folder_id'] == folder_id:
        return f'recipe {marker["recipe"]} of this folder'
    where = os.path.normpath(run_dir / marker['folder'])
    return f'recipe {marker["recipe"]} of another launched folder ({where}, id {marker["folder_id"]})'


def owner_problem(recipe: Path, run_dir: Path, folder_id: str, model: Any, model_kwargs: Any) -> str:
    """Why `recipe` (of the folder whose id is `folder_id`, training `model` with `model_kwargs`) may not run into
    `run_dir` ('' when it may): the folder's marker names another owner, or, without a marker, it holds a run of
    another model."""
    marker = _marker(run_dir)
    if marker and (marker['folder_id'], marker['recipe']) != (folder_id, Path(recipe).name):
        return f'its run folder {run_dir} belongs to {_owner(marker, run_dir, folder_id)}'
    if marker or not (run_dir / ARGS_YAML).is_file():
        return ''
    try:
        args = read_args_yaml(run_dir / ARGS_YAML)
    except RunFileError as e:
        return f'its run folder {run_dir} holds a run that cannot be read ({e})'
    theirs = (args.get('model'), dict(args.get('model_kwargs') or {}))
    if theirs != (model, dict(model_kwargs or {})):
        kwargs = ' '.join(f'{k}={v}' for k, v in theirs[1].items())
        return (f'its run folder {run_dir} holds a run of another model ({theirs[0]}{" " + kwargs if kwargs else ""}) '
                f'that no launch of this folder started')
    return ''


def _advice(run_dir: Path) -> str:
    return f"; give the recipe its own `experiment` (or `output`), or move {run_dir} away"


def claim(recipe: Path, run_dir: Path, folder_id: str) -> None:
    """Make `recipe` (of the folder `folder_id`) the owner of `run_dir`, atomically; :class:`RunFolderTakenError`
    when it has another owner (another launch may have claimed it since it was planned)."""
    folder = Path(recipe).parent
    mine = dict(folder=os.path.relpath(folder, run_dir), folder_id=folder_id, recipe=Path(recipe).name,
                digest=None, recipe_args=None, train_args=None, claimed=time.time())
    run_dir.mkdir(parents=True, exist_ok=True)
    if create_json(run_dir / LAUNCH_MARKER, mine):
        return
    marker = _marker(run_dir)
    if (marker['folder_id'], marker['recipe']) != (folder_id, Path(recipe).name):
        raise RunFolderTakenError(f'{Path(recipe).name} is refused: its run folder {run_dir} belongs to '
                                  f'{_owner(marker, run_dir, folder_id)}{_advice(run_dir)}')


def mark_start(recipe: Path, run_dir: Path, train_args: Sequence[str]) -> Optional[str]:
    """Record in `run_dir`'s marker what this start trains: the recipe's keys as they are now, `train_args` and
    their digest (returned; None for a recipe that is no longer a mapping, which the run itself refuses)."""
    text = read_text(recipe, state_file(Path(recipe), 'a recipe', 'give a YAML mapping of train.py arguments')) or ''
    try:
        recipe_args = load_yaml(text)
    except yaml.YAMLError:
        return None  # the run itself names a recipe that is not YAML
    if not isinstance(recipe_args, dict):
        return None
    recipe_args = json.loads(json.dumps(recipe_args, default=str))  # as JSON keeps it (dates as text)
    digest = run_digest(recipe_args, train_args)
    marker = _marker(run_dir)
    write_json(run_dir / LAUNCH_MARKER, {**marker, 'digest': digest, 'recipe_args': recipe_args,
                                         'train_args': list(train_args), 'started': time.time()})
    return digest


def move_aside(run_dir: Path) -> Path:
    """Move a stale run folder to ``<name>.stale-<k>`` beside it (the first k free), keeping every file."""
    k = 1
    while (run_dir.parent / f'{run_dir.name}.stale-{k}').exists():
        k += 1
    aside = run_dir.parent / f'{run_dir.name}.stale-{k}'
    os.rename(run_dir, aside)
    return aside
