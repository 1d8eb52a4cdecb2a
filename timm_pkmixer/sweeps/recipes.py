"""Training recipes for timm's train.py: finding, loading and checking them, and the effective batch and lr.

The paper's sweep tables live with the sweeps (:mod:`timm_pkmixer.sweeps.sweep_tables`).

A recipe is a YAML file for ``train.py --config``: its keys are train.py argument names (``dest``s such as
``batch_size``, ``model_kwargs``). train.py turns the keys into parser defaults, so command-line flags still
override them, and it accepts unknown keys *silently*; :func:`check_recipe_keys` catches those.

A recipe's comments also carry metadata train.py never sees, one ``# KEY: VALUE`` line each (:data:`COMMENT_KEYS`):
``# paper:`` its place in the paper (`pkmixer recipes`), ``# figure:`` each figure it is the base of
(`pkmixer sweep`), ``# wandb group:`` its W&B group (`pkmixer train --log-wandb`; train.py has no argument for it).
:func:`read_recipe_comments` is their one reader, :func:`comment_line` their one writer.
"""
import errno
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Iterable, List, Optional, Tuple, Union

import yaml

from ..errors import UserInputError
from ..state_files import load_yaml, read_text, yaml_reason
from ..validation import positive_int
from .sweep_tables import FIGURES

__all__ = [
    'RecipeError', 'RecipeInfo', 'recipe_root', 'list_recipes', 'resolve_recipe', 'load_recipe', 'check_recipe_keys',
    'BatchAndLr', 'resolve_batch_and_lr', 'COMMENT_KEYS', 'RecipeComments', 'read_recipe_comments',
    'parse_recipe_comments', 'comment_line', 'recipe_notes',
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


COMMENT_KEYS = ('paper', 'figure', 'wandb group')  # a recipe's ``# KEY: VALUE`` lines; only `figure` repeats
_COMMENT_LINE = re.compile(r'^#\s*(paper|figure|wandb group)\s*:(.*)$')


@dataclass(frozen=True)
class RecipeComments:
    """A recipe's comment metadata: ``paper`` (its section of the paper, '' without a ``# paper:`` line),
    ``figures`` (the figure keys of its ``# figure:`` lines, in file order) and ``wandb_group`` (its
    ``# wandb group:`` line's name, or None)."""
    paper: str = ''
    figures: Tuple[str, ...] = ()
    wandb_group: Optional[str] = None


def parse_recipe_comments(text: str, name: str = 'recipe') -> RecipeComments:
    """The metadata of a recipe's text (`name` names it in errors). Refused, naming the line: a key given twice
    (a figure named twice), a line with no value, a ``# figure:`` that is not one key of
    :data:`~timm_pkmixer.sweeps.sweep_tables.FIGURES`."""
    found: Dict[str, Dict[str, int]] = {key: {} for key in COMMENT_KEYS}  # key -> value -> its line
    for number, line in enumerate(text.splitlines(), 1):
        m = _COMMENT_LINE.match(line)
        if not m:
            continue
        key, value = m.group(1), m.group(2).strip()
        where = f'{name}, line {number}'
        if not value:
            raise RecipeError(f'{where}: `# {key}:` has no value')
        if key == 'figure' and value not in FIGURES:
            raise RecipeError(f'{where}: `# figure: {value}` names no figure (known: {", ".join(FIGURES)})')
        if key != 'figure' and found[key]:
            raise RecipeError(f'{where}: a second `# {key}:` line (the first is line '
                              f'{next(iter(found[key].values()))}); a recipe has one')
        if value in found[key]:
            raise RecipeError(f'{where}: `# figure: {value}` again (first on line {found[key][value]})')
        found[key][value] = number
    return RecipeComments(paper=''.join(found['paper']), figures=tuple(found['figure']),
                          wandb_group=''.join(found['wandb group']) or None)


def read_recipe_comments(path: Union[str, Path]) -> RecipeComments:
    """The comment metadata of the recipe file at `path` (:func:`parse_recipe_comments`)."""
    return parse_recipe_comments(_recipe_text(Path(path)), str(path))


def recipe_notes(path: Union[str, Path]) -> List[str]:
    """The recipe's own words: every comment line of the file at `path`, in order, without its ``#`` and without the
    metadata lines (:data:`COMMENT_KEYS`); an empty comment line is kept as ''. What the recipe says it takes from the
    paper and where it differs, carried into a sweep's SWEEP.md."""
    notes = []
    for line in _recipe_text(Path(path)).splitlines():
        text = line.strip()
        if text.startswith('#') and not _COMMENT_LINE.match(text):
            notes.append(text[2:] if text.startswith('# ') else text[1:])  # text is stripped: '#' alone is ''
    return notes


def _recipe_text(path: Path) -> str:
    """The text of the recipe file `path`: a FIFO, a symlink loop or a file that is not text is a
    :class:`RecipeError`; a missing one a ``FileNotFoundError``."""
    text = read_text(path, lambda why: RecipeError(f'{path}: not a valid YAML recipe ({why})'), limit=None)
    if text is None:
        raise FileNotFoundError(errno.ENOENT, 'No such file or directory', str(path))
    return text


def comment_line(key: str, value: str) -> str:
    """One metadata line as :func:`parse_recipe_comments` reads it back: ``# KEY: VALUE`` and a newline."""
    if key not in COMMENT_KEYS:
        raise ValueError(f'{key!r} is not a recipe comment key ({", ".join(COMMENT_KEYS)})')
    if not str(value).strip() or '\n' in str(value):
        raise ValueError(f'a `# {key}:` line needs a one-line value, got {value!r}')
    return f'# {key}: {value}\n'


@dataclass(frozen=True)
class RecipeInfo:
    """A packaged recipe: its name (``imagenet/rp_mixer_b_w``), file, dataset, model, paper section and the figures
    it is the base of (its comment metadata: :class:`RecipeComments`)."""
    name: str
    path: Path
    dataset: str
    model: str
    section: str
    figures: Tuple[str, ...] = ()


def list_recipes() -> List[RecipeInfo]:
    """Every packaged recipe, sorted by name."""
    root = recipe_root()
    out = []
    for path in sorted(root.glob('*/*.yaml')):
        cfg = load_recipe(path)
        comments = read_recipe_comments(path)
        dataset = str(cfg.get('dataset') or '').split('/')[-1] or path.parent.name
        out.append(RecipeInfo(f'{path.parent.name}/{path.stem}', path, dataset, str(cfg.get('model', '')),
                              comments.paper, comments.figures))
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
    :func:`timm_pkmixer.state_files.load_yaml`)."""
    path = Path(path)
    if path.is_dir():
        raise IsADirectoryError(21, 'a recipe must be a YAML file, not a directory', str(path))
    try:
        cfg = load_yaml(_recipe_text(path))
    except yaml.YAMLError as e:
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
