"""Training recipes for timm's train.py: finding, loading and checking them, and the effective batch and lr.

The paper's sweep tables live with the sweeps (:mod:`timm_pkmixer.experiments.sweep_tables`).

A recipe is a YAML file for ``train.py --config``: its keys are train.py argument names (``dest``s such as
``batch_size``, ``model_kwargs``). train.py turns the keys into parser defaults, so command-line flags still
override them, and it accepts unknown keys *silently*; :func:`check_recipe_keys` catches those.
"""
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Iterable, List

import yaml

from ..errors import UserInputError
from ..validation import positive_int
from .safe_yaml import load_yaml, yaml_reason

__all__ = [
    'RecipeError', 'RecipeInfo', 'recipe_root', 'list_recipes', 'resolve_recipe', 'load_recipe', 'check_recipe_keys',
    'BatchAndLr', 'resolve_batch_and_lr',
]


class RecipeError(UserInputError, ValueError):
    """A recipe file that cannot be used (not YAML, not a mapping, keys train.py does not know)."""


def recipe_root() -> Path:
    """The packaged recipes: ``timm_pkmixer/train_recipes`` in a wheel, ``train_recipes/`` in a checkout."""
    package = Path(__file__).resolve().parent.parent
    for candidate in (package / 'train_recipes', package.parent / 'train_recipes'):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(2, 'the packaged recipes are missing (a broken install?)', str(package / 'train_recipes'))


@dataclass(frozen=True)
class RecipeInfo:
    """A packaged recipe: its name (``imagenet/rp_mixer_b_w``), file, dataset, model and paper section."""
    name: str
    path: Path
    dataset: str
    model: str
    section: str


def _section(path: Path) -> str:
    for line in path.read_text(encoding='utf-8').splitlines():
        if line.startswith('# paper:'):
            return line[len('# paper:'):].strip()
    return ''


def list_recipes() -> List[RecipeInfo]:
    """Every packaged recipe, sorted by name."""
    root = recipe_root()
    out = []
    for path in sorted(root.glob('*/*.yaml')):
        cfg = load_recipe(path)
        dataset = str(cfg.get('dataset') or '').split('/')[-1] or path.parent.name
        out.append(RecipeInfo(f'{path.parent.name}/{path.stem}', path, dataset, str(cfg.get('model', '')),
                              _section(path)))
    return out


def resolve_recipe(name_or_path: str) -> Path:
    """A recipe file: an existing path, or the name of a packaged recipe (``imagenet/rp_mixer_b_w``, with or
    without ``.yaml``)."""
    path = Path(name_or_path)
    if path.exists():
        return path
    name = str(name_or_path).removesuffix('.yaml')
    candidate = recipe_root() / f'{name}.yaml'
    if candidate.is_file():
        return candidate
    names = [r.name for r in list_recipes()]
    close = [n for n in names if n.split('/')[-1] == name.split('/')[-1] or name in n]
    hint = f'. Did you mean {", ".join(close)}?' if close else ' (`pkmixer recipes` lists them)'
    raise FileNotFoundError(f'no recipe file and no packaged recipe named {name_or_path!r}{hint}')


def load_recipe(path: str) -> Dict[str, Any]:
    """The recipe as a dict (safe YAML as train.py reads it, no Python tags; aliases bounded:
    :func:`timm_pkmixer.experiments.safe_yaml.load_yaml`)."""
    path = Path(path)
    if path.is_dir():
        raise IsADirectoryError(21, 'a recipe must be a YAML file, not a directory', str(path))
    try:
        cfg = load_yaml(path.read_text(encoding='utf-8'))
    except (yaml.YAMLError, UnicodeDecodeError) as e:
        raise RecipeError(f'{path}: not a valid YAML recipe ({yaml_reason(e)})') from e
    if not isinstance(cfg, dict):
        raise RecipeError(f'{path}: a recipe must be a YAML mapping of train.py arguments, got {type(cfg).__name__}')
    return cfg


def check_recipe_keys(cfg: Dict[str, Any], known: Iterable[str], name: str = 'recipe') -> None:
    """Refuse, naming every key, a recipe with keys that are not train.py arguments (train.py would ignore them)."""
    unknown = sorted(set(cfg) - set(known))
    if unknown:
        raise RecipeError(f'{name}: {unknown} are not arguments of train.py (it would silently ignore them)')


@dataclass(frozen=True)
class BatchAndLr:
    per_device_batch: int
    world_size: int
    grad_accum_steps: int
    global_batch: int
    lr: float
    rule: str  # how lr was obtained


def resolve_batch_and_lr(cfg: Dict[str, Any], world_size: int) -> BatchAndLr:
    """The global batch and learning rate train.py will use for these (resolved) arguments.

    train.py: global = batch_size × world_size × grad_accum_steps; if ``lr`` is unset,
    lr = lr_base × (global / lr_base_size), square-rooted for ``lr_base_scale='sqrt'`` (the default for
    Ada*/Lamb optimizers, linear otherwise). A batch size, accumulation count or world size below 1 (a global batch
    of 0) is refused, naming the argument.
    """
    b = positive_int('batch_size', cfg.get('batch_size', 128))
    accum = positive_int('grad_accum_steps', 1 if cfg.get('grad_accum_steps') is None else cfg['grad_accum_steps'])
    world_size = positive_int('world_size', world_size)
    global_batch = b * world_size * accum
    if cfg.get('lr'):
        return BatchAndLr(b, world_size, accum, global_batch, float(cfg['lr']), 'lr set explicitly')
    base, base_size = float(cfg.get('lr_base', 0.1)), float(cfg.get('lr_base_size', 256))
    scale = cfg.get('lr_base_scale') or ('sqrt' if any(o in str(cfg.get('opt', 'sgd')).lower()
                                                        for o in ('ada', 'lamb')) else 'linear')
    ratio = global_batch / base_size
    if scale == 'sqrt':
        ratio = math.sqrt(ratio)
    return BatchAndLr(b, world_size, accum, global_batch, base * ratio,
                      f'lr_base {base:g} × ({global_batch}/{base_size:g})' + ('^½' if scale == 'sqrt' else ''))
