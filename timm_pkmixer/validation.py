"""Validation of values, in one place: used by the models, the width formulas and the command line.

Each check returns the value (converted to its canonical type) or raises an error that names the argument:
:class:`~timm_pkmixer.errors.ArgumentTypeError` for a wrong type (a float or bool where an integer is
needed, a string where a number is), :class:`~timm_pkmixer.errors.InvalidArgumentError` for a wrong value
(out of range, not finite, not one of the choices). ``bool`` is never accepted as a number, and floats are
never silently truncated to integers: ``perm_seed=1.5`` is refused, not read as seed 1.
"""
import argparse
import math
import numbers
from typing import Any, Callable, Optional, Sequence, Tuple, TypeVar

from .errors import ArgumentTypeError, InvalidArgumentError

__all__ = [
    'integer', 'positive_int', 'non_negative_int', 'real', 'positive_real', 'non_negative_real', 'probability', 'rate',
    'boolean', 'choice', 'int_pair', 'real_pair', 'optional', 'cli_type',
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
