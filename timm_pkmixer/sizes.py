"""Refusing a model too large to build, before anything is allocated.

The rule: the parameters and buffers that a model's arguments ask for must fit in the total memory of the
device the model is built on (this machine's RAM for ``'cpu'``, the accelerator's own memory for ``'cuda'`` and
the like; 1 PiB on ``'meta'``, where nothing is allocated but a larger model could never be materialised).
That is a lower bound of what building needs (activations, gradients and optimizer state come on top), so no
model that could be built is refused; one that could not is refused with a
:class:`~timm_pkmixer.errors.ModelTooLargeError` that names the arguments setting its largest tensor, the bytes
it would need and the memory there is, instead of torch's "Storage size calculation overflowed",
"can't allocate memory" or a machine that swaps until the process is killed.

The bound is read from the model's record (``model_args``), arithmetically, by :func:`check_model_size`, which
every constructor calls before its first layer and ``expand_resolution`` calls for the expanded model; no model
is built for it:

1. the record's tensors (:class:`PlannedTensor`, listed by the model file next to its record, each naming the
   arguments that set it): every parameter and buffer, numel × itemsize in Python integers, so that absurd sizes
   are refused naming the argument where a build could not even be attempted (element counts past torch's int64
   or any float, a hidden width of γ = 1e300);
2. then the tensors of the layers given by timm name (a norm layer such as ``'rmsnorm'``, an activation with
   parameters such as ``'prelu'``): one of each built on the ``meta`` device (no memory) and counted.

Their sum is the exact bytes of the model's parameters and buffers (``tests/test_sizes.py`` compares it with the
real tensors of every registered model and of builds that give every constructor argument another value).
"""
import math
import os
from dataclasses import dataclass
from typing import Any, Callable, Iterable, List, Optional, Tuple, Union

import torch
import torch.nn as nn

from .errors import ModelTooLargeError

__all__ = ['PlannedTensor', 'META_LIMIT', 'device_memory', 'target', 'check_memory', 'model_nbytes',
           'check_model_size', 'refuse_unbounded', 'format_count', 'format_bytes', 'linear_tensors',
           'module_tensors']

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


def linear_tensors(name: str, in_features: Size, out_features: Size, itemsize: int, args: str, count: int = 1,
                   bias: bool = True) -> List[PlannedTensor]:
    """The tensors of `count` ``nn.Linear(in_features, out_features, bias)``: weight (out, in) and bias (out,)."""
    tensors = [PlannedTensor(f'{name}.weight', (out_features, in_features), itemsize, args, count)]
    if bias:
        tensors.append(PlannedTensor(f'{name}.bias', (out_features,), itemsize, args, count))
    return tensors


def module_tensors(name: str, module: nn.Module, args: str, count: int = 1) -> List[PlannedTensor]:
    """The parameters and buffers of `count` modules like `module` (a small layer built on the meta device to be
    counted: a norm layer or an activation given by timm name)."""
    return [PlannedTensor(f'{name}.{n}', tuple(t.shape), t.element_size(), args, count)
            for n, t in (*module.named_parameters(), *module.named_buffers())]


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


def check_model_size(
        plan: Callable[[int], List[PlannedTensor]],
        layers: Callable[[Optional[torch.dtype]], List[PlannedTensor]],
        device: Any = None,
        dtype: Any = None,
        cause: str = '',
        copies: int = 1,
        what: str = 'the model',
        advice: str = 'Choose smaller sizes.',
) -> int:
    """Refuse a model whose parameters and buffers would not fit in `device`'s memory, before anything is
    allocated (module docstring); returns their bytes (× `copies`), exactly.

    Args:
        plan: ``plan(itemsize)``: the record's tensors but those of its layers given by name, in Python integers.
        layers: ``layers(dtype)``: the tensors of those layers (each counted on the meta device); asked only once
            `plan` fits, so that no layer is built at an absurd size.
        device: Where the model will be built (torch.device contexts honoured).
        dtype: Its parameter dtype.
        cause, copies, what, advice: As :func:`check_memory` (``expand_resolution``: the factor, 2 copies).
    """
    device, itemsize = target(device, dtype)
    planned = plan(itemsize)
    check_memory(planned, device, cause=cause, copies=copies, what=what, advice=advice)
    planned += layers(dtype)
    return int(check_memory(planned, device, cause=cause, copies=copies, what=what, advice=advice))
