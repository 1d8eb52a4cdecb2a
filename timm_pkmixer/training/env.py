"""Integers from the environment that torchrun sets (``WORLD_SIZE``, ``RANK``, ``LOCAL_WORLD_SIZE``): a value that
is not one is refused by the variable's name, not read as a default or met later as a bare ``ValueError``."""
import os

from ..errors import InvalidArgumentError

__all__ = ['env_int']


def env_int(name: str, default: int, minimum: int = 0) -> int:
    """``$name`` as an integer ≥ `minimum`, `default` when unset or empty; :class:`InvalidArgumentError` naming the
    variable otherwise."""
    text = os.environ.get(name, '').strip()
    if not text:
        return default
    try:
        value = int(text)
    except ValueError:
        value = None
    if value is None or value < minimum:
        kind = {0: 'a non-negative integer', 1: 'a positive integer'}.get(minimum, f'an integer ≥ {minimum}')
        raise InvalidArgumentError(f'environment variable {name} must be {kind} (as torchrun sets it), '
                                   f'got {os.environ[name]!r}')
    return value
