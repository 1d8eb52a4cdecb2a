"""Writing a sweep: :func:`write_sweep` writes one train.py recipe per point and seed of a planned sweep into a
folder, and beside them ``sweep.json`` (:data:`SWEEP_RECORD`: the figure, every setting with its value and source,
every point with its coordinates and files; one entry per sweep written into the folder, read back by
:func:`read_sweep_record` and replaced whole) and ``SWEEP.md`` (:data:`SWEEP_EXPLAINED`: the explanation of each).
Nothing already in the folder is overwritten.
"""
import errno
import json
from dataclasses import asdict
from pathlib import Path
from typing import Any, Dict, List, Optional

import yaml

from ..errors import InvalidArgumentError
from ..runs.launch_marker import read_launch_marker
from ..runs.run_folder import PathLike, RunFileError
from ..state_files import read_text, write_json, write_text
from .claims import Claim, claims_from_records
from .recipes import comment_line, load_recipe, resolve_recipe
from .sweep_plan import SweepPlan, plan_sweep
from .sweep_render import explain

__all__ = ['SWEEP_RECORD', 'SWEEP_EXPLAINED', 'WANDB_PROJECT_MAXLEN', 'WANDB_PROJECT_FORBIDDEN', 'read_sweep_record',
           'check_wandb_project', 'write_sweep', 'recipe_experiments', 'swept_experiment', 'declared_claims',
           'launched_folder']

SWEEP_RECORD, SWEEP_EXPLAINED = 'sweep.json', 'SWEEP.md'  # not *.yaml: `for r in DIR/*.yaml` trains recipes only
# W&B's own rule for a project name (wandb 0.31: wandb.sdk.artifacts._validators.validate_project_name, NAME_MAXLEN and
# INVALID_URL_CHARS; wandb.init's Settings.validate_project refuses the same characters but the line breaks):
# not empty, at most 128 characters, none of / \ # ? % : or a line break (tests compare it with wandb's, when installed)
WANDB_PROJECT_MAXLEN = 128
WANDB_PROJECT_FORBIDDEN = '/\\#?%:\r\n'


def read_sweep_record(path: PathLike) -> Dict[str, Any]:
    """A sweep's ``sweep.json`` (``{"sweeps": [...]}``, as ``pkmixer sweep`` writes it).

    Raises:
        RunFileError: not JSON, or not an object whose ``sweeps`` is a list.
    """
    path = Path(path)
    try:
        text = read_text(path, lambda why: RunFileError(f'{path}: not JSON ({why})'), limit=None)
        if text is None:
            raise FileNotFoundError(errno.ENOENT, 'No such file or directory', str(path))
        record = json.loads(text)
    except json.JSONDecodeError as e:
        raise RunFileError(f'{path}: not JSON ({e.msg} at line {e.lineno}, column {e.colno}); '
                           f'`pkmixer sweep` writes it, move it away to start a new record') from None
    if not isinstance(record, dict) or not isinstance(record.get('sweeps', []), list):
        raise RunFileError(f'{path}: not a sweep record (a JSON object with a list of sweeps)')
    return record


def _record(plan: SweepPlan, files: Dict[str, List[str]]) -> Dict[str, Any]:
    return dict(
        recipe=plan.recipe, experiment=plan.experiment, figure=plan.figure.key if plan.figure else None,
        figure_source=plan.figure_source, seeds=plan.seeds, readings=plan.readings,
        settings=[dict(setting=s.name, value=s.value, source=s.source) for s in plan.settings],
        differs_from_paper=plan.differs, claims=[c.as_dict() for c in plan.claims],
        points=[dict({k: v for k, v in asdict(p).items() if k != 'own'}, files=files[p.name]) for p in plan.points])


def check_wandb_project(name: Any) -> str:
    """`name` if W&B takes it as a project name (:data:`WANDB_PROJECT_MAXLEN`, :data:`WANDB_PROJECT_FORBIDDEN`),
    else an error naming the rule: train.py would start, then fail in ``wandb.init``."""
    rule = (f'W&B takes a project name of 1 to {WANDB_PROJECT_MAXLEN} characters without any of '
            f'{" ".join(repr(c)[1:-1] for c in WANDB_PROJECT_FORBIDDEN)}')
    if not isinstance(name, str) or not name:
        raise InvalidArgumentError(f'wandb_project must be a non-empty string ({rule}), got {name!r}')
    if len(name) > WANDB_PROJECT_MAXLEN:
        raise InvalidArgumentError(f'wandb_project has {len(name)} characters ({rule}), got {name[:40]!r}…')
    bad = sorted({c for c in name if c in WANDB_PROJECT_FORBIDDEN})
    if bad:
        raise InvalidArgumentError(f'wandb_project {name!r} holds {" ".join(repr(c) for c in bad)} ({rule}; a team '
                                   f'or user is W&B\'s entity, set by WANDB_ENTITY, not part of the project)')
    return name


def _wandb_keys(group: str, point: str, seed: int, project: Optional[str]) -> Dict[str, Any]:
    """train.py's own W&B arguments: the point and seed as tags (with the group: train.py has no group argument;
    `pkmixer train` hands the recipe's ``# wandb group:`` line to W&B as ``WANDB_RUN_GROUP``)."""
    keys: Dict[str, Any] = dict(log_wandb=True, wandb_tags=[group, point, f'seed{seed}'])
    if project:
        keys['wandb_project'] = project
    return keys


def _existing(out: Path, plan: SweepPlan, add: bool) -> Dict[str, List[str]]:
    """The recipe files of each point; refuses a folder that holds a sweep (unless `add`) or any of these files."""
    if out.exists() and not out.is_dir():
        raise InvalidArgumentError(f'out_dir {out} is a file')
    existing = sorted(p.name for p in out.glob('*.yaml')) if out.is_dir() else []
    if out.is_dir() and (out / SWEEP_RECORD).is_file():
        existing.insert(0, SWEEP_RECORD)
    if existing and not add:
        raise InvalidArgumentError(f'out_dir {out} already holds a sweep ({len(existing)} YAML files, e.g. '
                                   f'{existing[0]}); choose another folder or add to it with add=True')
    names = {p.name: [f'{p.name}_seed{s}.yaml' for s in plan.seeds] for p in plan.points}
    clash = sorted(set(existing) & {f for fs in names.values() for f in fs})
    if clash:
        raise InvalidArgumentError(f'out_dir {out} already holds {", ".join(clash[:3])}'
                                   f'{" …" if len(clash) > 3 else ""}: adding would overwrite them')
    return names


def write_sweep(recipe: str, out_dir: str, add: bool = False, log_wandb: bool = False,
                wandb_project: Optional[str] = None, **kwargs: Any) -> List[Path]:
    """Write the recipes of a sweep (one per point and seed) and ``sweep.yaml`` into `out_dir`; returns the recipes.

    The plan is :func:`plan_sweep`'s (every point checked to build before anything is written), so a sweep that
    ``explain`` shows is one this writes. A folder that already holds a sweep (or other YAML files) is refused
    unless `add`; even then no file is overwritten. `log_wandb`: every recipe logs to W&B (`wandb_project`),
    grouped by the figure (else the experiment), tagged with its point and seed. Other arguments:
    :func:`plan_sweep`.
    """
    if wandb_project is not None:
        check_wandb_project(wandb_project)
        if not log_wandb:
            raise InvalidArgumentError('wandb_project names the W&B project of log_wandb: set log_wandb')
    plan = plan_sweep(recipe, **kwargs)
    out = Path(out_dir)
    names = _existing(out, plan, add)
    base = load_recipe(resolve_recipe(recipe))
    record_path = out / SWEEP_RECORD
    record = read_sweep_record(record_path) if record_path.is_file() else {}  # refused before anything is written
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for point in plan.points:
        for seed in plan.seeds:
            mk = dict(point.model_kwargs)
            if point.seeded:
                mk[point.seeded] = seed
            name = f'{point.name}_seed{seed}'
            cfg = {**base, **point.recipe, 'model': point.model, 'model_kwargs': mk, 'seed': seed,
                   'experiment': name}
            group = plan.figure.key if plan.figure else plan.experiment
            cfg.update(_wandb_keys(group, point.name, seed, wandb_project) if log_wandb else {})
            target = out / f'{name}.yaml'
            header = (f'# {point.experiment} experiment, point {point.name}, seed {seed}'
                      f'{f" ({plan.figure.title})" if plan.figure else ""}.\n'
                      f'# Written by `pkmixer sweep {recipe}`; every setting and its source: {SWEEP_RECORD}.\n'
                      + (comment_line('wandb group', group) if log_wandb else ''))
            write_text(target, header + yaml.safe_dump(cfg, sort_keys=False, allow_unicode=True))
            paths.append(target)
    sweeps = record.get('sweeps', []) + [_record(plan, names)]
    write_json(record_path, {'sweeps': sweeps}, ensure_ascii=False, default=str)
    explained = out / SWEEP_EXPLAINED
    previous = read_text(explained, lambda why: RunFileError(f'{explained}: cannot be read ({why})'), limit=None)
    write_text(explained, (previous + '\n' if previous is not None else '') + explain(plan))
    return paths


def recipe_experiments(folder: PathLike) -> Dict[str, str]:
    """{recipe file name: experiment} for the recipes `pkmixer sweep` wrote into `folder`, from its ``sweep.json``
    ({} when there is none or it cannot be read: a folder of hand-written recipes)."""
    path = Path(folder) / SWEEP_RECORD
    if not path.is_file():
        return {}
    try:
        record = read_sweep_record(path)
    except RunFileError:
        return {}
    found: Dict[str, str] = {}
    for sweep in record.get('sweeps', []):
        for point in (sweep.get('points') or []) if isinstance(sweep, dict) else []:
            if isinstance(point, dict) and isinstance(sweep.get('experiment'), str):
                found.update({f: sweep['experiment'] for f in point.get('files') or [] if isinstance(f, str)})
    return found


def swept_experiment(run_dir: PathLike) -> Optional[str]:
    """The experiment of the sweep whose recipe `pkmixer launch` ran into `run_dir` (its :data:`LAUNCH_MARKER`
    names the launched folder and the recipe); None for a run not launched from a sweep's folder."""
    try:
        marker = read_launch_marker(run_dir)
    except RunFileError:
        return None
    if not marker:
        return None
    return recipe_experiments(Path(run_dir) / marker['folder']).get(marker['recipe'])


def declared_claims(folder: PathLike) -> List[Claim]:
    """The claims declared in `folder`'s ``sweep.json`` (every sweep written into it; [] when there is none).

    Raises:
        RunFileError: a sweep.json that cannot be read.
        InvalidArgumentError: a claim in it that does not parse, or one name declared twice differently.
    """
    path = Path(folder) / SWEEP_RECORD
    if not path.is_file():
        return []
    try:
        return claims_from_records(read_sweep_record(path).get('sweeps', []))
    except InvalidArgumentError as e:
        if isinstance(e, RunFileError):
            raise
        raise RunFileError(f'{path}: {e}') from None


def launched_folder(run_dir: PathLike) -> Optional[Path]:
    """The folder `pkmixer launch` ran `run_dir`'s recipe from (its launch marker says), or None."""
    try:
        marker = read_launch_marker(run_dir)
    except RunFileError:
        return None
    return (Path(run_dir) / marker['folder']).resolve() if marker else None
