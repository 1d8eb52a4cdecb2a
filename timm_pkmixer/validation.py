"""Validation of values, in one place: used by the models, the width formulas and the command line.

Each check returns the value (converted to its canonical type) or raises an error that names the argument:
:class:`~timm_pkmixer.errors.ArgumentTypeError` for a wrong type (a float or bool where an integer is
needed, a string where a number is), :class:`~timm_pkmixer.errors.InvalidArgumentError` for a wrong value
(out of range, not finite, not one of the choices). ``bool`` is never accepted as a number, and floats are
never silently truncated to integers: ``perm_seed=1.5`` is refused, not read as seed 1.

A model name is checked against the architectures the package registers, known without importing torch or timm
(:func:`registered_models`: the ``@register_model`` functions of ``models/*.py``, read from their source): the
commands refuse a name of one of the package's families that is not registered, with the closest registered
names, before anything heavy is imported (:func:`unknown_model`). The registry stays the list of models
(``catalog.list_pkmixer_models()``): ``tests/test_cli_refusals.py`` holds these names equal to it, and the families
(a name's first word: ``rp`` of ``rp_mixer_b_w``) to no other timm model's.
"""
import argparse
import ast
import difflib
import functools
import math
import numbers
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, TypeVar

from .errors import ArgumentTypeError, InvalidArgumentError

__all__ = [
    'integer', 'positive_int', 'non_negative_int', 'real', 'positive_real', 'non_negative_real', 'probability', 'rate',
    'boolean', 'choice', 'int_pair', 'real_pair', 'optional', 'cli_type', 'registered_models', 'model_families',
    'closest_models', 'closest_flags', 'did_you_mean_flags', 'unknown_model',
]

T = TypeVar('T')


def _describe(value: Any) -> str:
    return f'{value!r} ({type(value).__name__})'


def integer(name: str, value: Any, minimum: Optional[int] = None) -> int:
    """An integer (not bool, not float), at least `minimum` if given."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ArgumentTypeError(f'{name} must be an integer, got {_describe(value)}')
    value = int(value)
    if minimum is not None and value < minimum:
        what = {0: 'a non-negative integer', 1: 'a positive integer'}.get(minimum, f'an integer ≥ {minimum}')
        raise InvalidArgumentError(f'{name} must be {what}, got {value}')
    return value


def positive_int(name: str, value: Any) -> int:
    return integer(name, value, minimum=1)


def non_negative_int(name: str, value: Any) -> int:
    return integer(name, value, minimum=0)


def real(
        name: str,
        value: Any,
        low: Optional[float] = None,
        high: Optional[float] = None,
        low_open: bool = False,
        high_open: bool = False,
) -> float:
    """A finite real number (int or float, not bool) in the interval given by `low`/`high`."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ArgumentTypeError(f'{name} must be a number, got {_describe(value)}')
    value = float(value)
    if not math.isfinite(value):
        raise InvalidArgumentError(f'{name} must be a finite number, got {value}')
    below = low is not None and (value <= low if low_open else value < low)
    above = high is not None and (value >= high if high_open else value > high)
    if below or above:
        if low == 0 and low_open and high is None:
            raise InvalidArgumentError(f'{name} must be positive, got {value:g}')
        lo = '-∞' if low is None else f'{low:g}'
        hi = '∞' if high is None else f'{high:g}'
        interval = f'{"(" if low_open or low is None else "["}{lo}, {hi}{")" if high_open or high is None else "]"}'
        raise InvalidArgumentError(f'{name} must be in {interval}, got {value:g}')
    return value


def positive_real(name: str, value: Any) -> float:
    return real(name, value, low=0., low_open=True)


def non_negative_real(name: str, value: Any) -> float:
    return real(name, value, low=0.)


def probability(name: str, value: Any) -> float:
    """A probability of keeping something: in (0, 1]."""
    return real(name, value, low=0., high=1., low_open=True)


def rate(name: str, value: Any) -> float:
    """A dropout-like rate: in [0, 1)."""
    return real(name, value, low=0., high=1., high_open=True)


def boolean(name: str, value: Any) -> bool:
    """True or False only (a string such as 'no' is refused, not read as truthy)."""
    if not isinstance(value, bool):
        raise ArgumentTypeError(f'{name} must be True or False, got {_describe(value)}')
    return value


def choice(name: str, value: Any, choices: Sequence[Any]) -> Any:
    if not isinstance(value, type(choices[0])) or value not in choices:
        raise InvalidArgumentError(f'{name} must be one of {tuple(choices)}, got {value!r}')
    return value


def _pair(name: str, value: Any, check: Callable[[str, Any], T], meaning: str) -> Tuple[T, T]:
    if isinstance(value, (tuple, list)):
        if len(value) != 2:
            raise InvalidArgumentError(f'{name} must be one value or a pair {meaning}, got {len(value)} '
                                       f'values {tuple(value)!r}')
        return check(f'{name}[0]', value[0]), check(f'{name}[1]', value[1])
    v = check(name, value)
    return v, v


def int_pair(name: str, value: Any, meaning: str = '(height, width)') -> Tuple[int, int]:
    """A positive integer or a pair of them (image and patch sizes); `meaning` names the pair in messages."""
    return _pair(name, value, positive_int, meaning)


def real_pair(name: str, value: Any, meaning: str = '(tokens, channels)') -> Tuple[float, float]:
    """A positive number or a pair of them (token and channel ratios); `meaning` names the pair in messages."""
    return _pair(name, value, positive_real, meaning)


def optional(check: Callable[..., T], name: str, value: Any, *args: Any) -> Optional[T]:
    """None, or `check(name, value, *args)`."""
    return None if value is None else check(name, value, *args)


def cli_type(check: Callable[[str, Any], T], parse: Callable[[str], Any] = int,
             name: str = 'the value') -> Callable[[str], T]:
    """An argparse ``type=`` from a check: parse the string, then validate; argparse reports errors as
    ``pkmixer CMD: error: argument --X: NAME must …`` with exit status 2."""
    def convert(text: str) -> T:
        try:
            value = parse(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f'expected {"an integer" if parse is int else "a number"}, '
                                             f'got {text!r}') from None
        try:
            return check(name, value)
        except (InvalidArgumentError, ArgumentTypeError) as e:
            raise argparse.ArgumentTypeError(str(e)) from None
    convert.__name__ = check.__name__  # argparse names the type in some messages
    return convert


# ------------------------------------------------------------------------ model names, without torch

_MODEL_FILES = Path(__file__).resolve().parent / 'models'


def _registers(node: ast.stmt) -> bool:
    """Whether `node` is a function decorated with timm's ``register_model`` (by name or as an attribute)."""
    return isinstance(node, ast.FunctionDef) and any(
        (d.id if isinstance(d, ast.Name) else d.attr if isinstance(d, ast.Attribute) else '') == 'register_model'
        for d in node.decorator_list)


@functools.lru_cache(maxsize=1)
def registered_models() -> Tuple[str, ...]:
    """Every architecture the model files register, sorted (empty where their source is not there to read)."""
    names: List[str] = []
    for path in sorted(_MODEL_FILES.glob('*.py')):
        try:
            tree = ast.parse(path.read_text(encoding='utf-8'))
        except (OSError, UnicodeDecodeError, SyntaxError, ValueError):
            return ()
        names += [node.name for node in tree.body if _registers(node)]
    return tuple(sorted(names))


def model_families() -> Tuple[str, ...]:
    """The first words of the registered names (``pk``, ``rp``, ``s``, ``shallow``, ``sw``): a model name that begins
    with one of them and ``_`` is this package's to know."""
    return tuple(sorted({name.split('_')[0] for name in registered_models()}))


def closest_models(name: str, n: int = 3) -> List[str]:
    """The registered names closest to `name`, closest first (none when none is close)."""
    return difflib.get_close_matches(name, registered_models(), n=n, cutoff=0.6)


def closest_flags(args: Sequence[str], known: Sequence[str], cutoff: float) -> Dict[str, str]:
    """The closest long flag of `known` to each flag among `args` (``--wrkers`` or ``--wrkers=1``; values and
    ``-``/``--`` are not flags) that is not one of `known` and has one within `cutoff`
    (:func:`difflib.get_close_matches`), in the order given: ``{'--wrkers': '--workers'}``."""
    long_flags = [f for f in known if f.startswith('--')]
    close: Dict[str, str] = {}
    for arg in args:
        flag = arg.split('=', 1)[0]
        if not flag.startswith('-') or flag in ('-', '--') or flag in close or flag in known:
            continue
        match = difflib.get_close_matches(flag, long_flags, n=1, cutoff=cutoff)
        close.update({flag: match[0]} if match else {})
    return close


def did_you_mean_flags(close: Dict[str, str]) -> str:
    """:func:`closest_flags`' answer as a hint: `` (did you mean --workers?)`` for one flag, `` (did you mean
    --experiment for --experimnt, --out-dir for --out-dri?)`` for several, '' for none."""
    if len(close) > 1:
        return f' (did you mean {", ".join(f"{good} for {typo}" for typo, good in close.items())}?)'
    return ''.join(f' (did you mean {good}?)' for good in close.values())


def unknown_model(name: str) -> Optional[str]:
    """Why `name` (a pretrained tag ``NAME.TAG`` allowed) is not a registered architecture, with the closest
    registered names, when it is named as one of this package's families (``rp_mixr_b_w``); None when it is
    registered, or when only timm can tell (a name of no family of ours, ``resnet50``, ``hf-hub:…``; or the model
    files' source is not there to read)."""
    arch = name.split('.', 1)[0]
    if not registered_models() or arch in registered_models() or ':' in name or '_' not in arch or \
            arch.split('_')[0] not in model_families():
        return None
    close = closest_models(arch)
    hint = f'; did you mean {", ".join(close)}?' if close else ''
    return f'unknown model {name!r}: not a registered timm-pkmixer model{hint} (see `pkmixer models`)'
