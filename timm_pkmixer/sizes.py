"""Refusing a model too large to build, before anything is allocated.

The rule: the parameters and buffers that a model's arguments ask for must fit in the total memory of the
device the model is built on (this machine's RAM for ``'cpu'``, the accelerator's own memory for ``'cuda'`` and
the like; 1 PiB on ``'meta'``, where nothing is allocated but a larger model could never be materialised).
That is a lower bound of what building needs (activations, gradients and optimizer state come on top), so no
model that could be built is refused; one that could not is refused with a
:class:`~timm_pkmixer.errors.ModelTooLargeError` that names the arguments setting its largest tensor, the bytes
it would need and the memory there is, instead of torch's "Storage size calculation overflowed",
"can't allocate memory" or a machine that swaps until the process is killed.

The bound is read from the model's record (``model_args``) in two steps, by :func:`check_model_size`, which every
constructor calls before its first layer and ``expand_resolution`` calls for the expanded model:

1. an arithmetic pre-check: the record's largest tensors (:class:`PlannedTensor`, listed by the model file next to
   its record, each naming the arguments that set it) in Python integers, a lower bound that refuses absurd
   sizes naming the argument, where a build could not even be attempted (element counts past torch's int64 or
   any float, a hidden width of γ = 1e300);
2. the exact bytes: the model built from the record on the ``meta`` device (no memory, no values), summing
   ``numel × itemsize`` of its parameters and buffers, so the bound cannot drift from the model's tensors.
"""
import contextvars
import math
import os
from dataclasses import dataclass
from typing import Any, Callable, Iterable, List, Tuple, Union

import torch
import torch.nn as nn

from .errors import ModelTooLargeError

__all__ = ['PlannedTensor', 'META_LIMIT', 'device_memory', 'target', 'check_memory', 'model_nbytes',
           'check_model_size', 'refuse_unbounded', 'format_count', 'format_bytes']

META_LIMIT = 2 ** 50  # 1 PiB: the bound on the meta device

Size = Union[int, float]  # elements; float('inf') when an argument's product is past any float


@dataclass(frozen=True)
class PlannedTensor:
    """A tensor (or `count` alike, one per block) a model would allocate, and the arguments that set its size."""
    name: str
    shape: Tuple[Size, ...]
    itemsize: int
    args: str
    count: int = 1

    @property
    def numel(self) -> Size:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> Size:
        return self.numel * self.itemsize * self.count


def format_count(n: Size) -> str:
    """A count as 3 significant digits (Python ints of any size, inf)."""
    if n == float('inf') or n >= 10 ** 308:
        return 'more than 1e308'
    if n < 1000:
        return str(int(n))
    digits = str(int(n))
    return f'{digits[0]}.{digits[1:3]}e{len(digits) - 1}'


def format_bytes(n: Size) -> str:
    """A byte count in decimal units, 3 significant digits ('999 bytes', '1.5 kB', '5.24 MB', '1 MB' for 999 500;
    past 1e18 bytes as a count, inf included)."""
    if n == float('inf') or n >= 999.5 * 10 ** 15:
        return f'{format_count(n)} bytes'
    if n < 1000:
        return f'{int(n)} bytes'
    for unit, scale in (('kB', 10 ** 3), ('MB', 10 ** 6), ('GB', 10 ** 9), ('TB', 10 ** 12), ('PB', 10 ** 15)):
        shown = f'{n / scale:.3g}'
        if float(shown) < 1000:  # else it rounds up to the next unit
            return f'{shown} {unit}'
    raise AssertionError(n)  # unreachable: n < 999.5e15


def _ram() -> Tuple[int, str]:
    try:
        return os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES'), "this machine's memory (RAM)"
    except (AttributeError, ValueError, OSError):  # no sysconf (Windows): a bound no machine of today passes
        return 2 ** 42, 'a 4 TiB bound (this machine\'s memory is unknown)'


def device_memory(device: torch.device) -> Tuple[int, str]:
    """(bytes, description) of the memory a model built on `device` must fit in."""
    if device.type == 'meta':
        return META_LIMIT, 'the 1 PiB bound of the meta device (no device could materialise more)'
    if device.type != 'cpu':
        try:
            props = getattr(torch, device.type).get_device_properties(device)
            return int(props.total_memory), f'the memory of {device.type} device {props.name!r}'
        except (AttributeError, RuntimeError, AssertionError, ValueError):
            pass
    return _ram()


def target(device: Any, dtype: Any) -> Tuple[torch.device, int]:
    """The device a constructor will build on (torch.device contexts honoured) and its bytes per parameter."""
    device = torch.empty(0, device=device).device if not isinstance(device, torch.device) else device
    try:
        itemsize = torch.empty((), dtype=dtype, device='meta').element_size()
    except (TypeError, RuntimeError):
        itemsize = 4
    return device, itemsize


def check_memory(tensors: Iterable[PlannedTensor], device: torch.device, cause: str = '', copies: int = 1,
                 what: str = 'the model', advice: str = 'Choose smaller sizes.') -> Size:
    """Raise :class:`ModelTooLargeError` unless `copies` × the `tensors` fit in `device`'s memory (module
    docstring); returns the bytes they need.

    Args:
        tensors: What would be allocated.
        device: Where.
        cause: The arguments to name (default: those of the largest tensor).
        copies: How many copies exist at once (``expand_resolution`` holds the new weights and the model).
        what: What is being built, for the message.
        advice: The message's last sentence.
    """
    tensors = list(tensors)
    total = sum(t.nbytes for t in tensors) * copies
    limit, where = device_memory(device)
    if total <= limit:
        return total
    big = max(tensors, key=lambda t: t.nbytes)
    shape = ' × '.join(format_count(s) for s in big.shape)
    per = f' × {big.count}' if big.count > 1 else ''
    raise ModelTooLargeError(
        f'{cause or big.args}: {what} would need {format_bytes(total)} for its parameters and buffers alone'
        + (f' ({copies} copies)' if copies > 1 else '')
        + f', more than the {format_bytes(limit)} of {where}; the largest is {big.name} ({shape}{per}, '
        f'{format_bytes(big.nbytes)}). Refused before allocating anything: a model must fit in the memory of the '
        f'device it is built on. {advice}')


def refuse_unbounded(name: str, args: str, what: str = 'the model') -> None:
    """Raise :class:`ModelTooLargeError` for a size past any float (`args` set tensor `name`: γ·S = inf)."""
    check_memory([PlannedTensor(name, (float('inf'),), 1, args)], torch.device('meta'), what=what)


def model_nbytes(model: nn.Module) -> int:
    """Bytes of `model`'s parameters and buffers (on any device, meta included): Σ numel × itemsize."""
    return sum(t.numel() * t.element_size() for t in (*model.parameters(), *model.buffers()))


_MEASURING = contextvars.ContextVar('timm_pkmixer_measuring', default=False)


def check_model_size(
        build: Callable[..., nn.Module],
        plan: Callable[[int], List[PlannedTensor]],
        device: Any = None,
        dtype: Any = None,
        cause: str = '',
        copies: int = 1,
        what: str = 'the model',
        advice: str = 'Choose smaller sizes.',
) -> int:
    """Refuse a model whose parameters and buffers would not fit in `device`'s memory, before anything is
    allocated (module docstring); returns their bytes (× `copies`).

    Args:
        build: ``build(device=..., dtype=...)`` builds the model (its constructor, from its record); it is called
            on the meta device, where its own size check is skipped (this one measures it).
        plan: ``plan(itemsize)``: the record's largest tensors, the arithmetic pre-check (a lower bound).
        device: Where the model will be built (torch.device contexts honoured).
        dtype: Its parameter dtype.
        cause, copies, what, advice: As :func:`check_memory` (``expand_resolution``: the factor, 2 copies).
    """
    if _MEASURING.get():  # the meta build of an outer check: measured there
        return 0
    device, itemsize = target(device, dtype)
    planned = plan(itemsize)
    check_memory(planned, device, cause=cause, copies=copies, what=what, advice=advice)
    token = _MEASURING.set(True)
    try:
        model = build(device=torch.device('meta'), dtype=dtype)
    finally:
        _MEASURING.reset(token)
    cause = cause or max(planned, key=lambda t: t.nbytes).args  # the arguments of the bulk
    tensors = [PlannedTensor(name, tuple(t.shape), t.element_size(), cause)
               for name, t in (*model.named_parameters(), *model.named_buffers())]
    check_memory(tensors, device, cause=cause, copies=copies, what=what, advice=advice)
    return model_nbytes(model) * copies
