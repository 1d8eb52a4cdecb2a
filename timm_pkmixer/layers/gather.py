"""How a fixed permutation is applied: ``y = x[:, index]`` on a (B, m) tensor, backward ``g[:, inverse]``.

Every gather of the package goes through :func:`permute`, and one table, :data:`GATHER_TABLE`, decides
which backend runs for a device type and a mode:

=================  ============  ==============================================================
device type        mode          backend
=================  ============  ==============================================================
``cpu``            ``eager``     ``tuned``: index_select or an expanded ``torch.gather``, picked
                                 per case by timing both once (which is faster depends on the
                                 batch, m and the thread count: benchmarks/RESULTS.md)
``cpu``            ``compile``   ``opaque``: one custom op, ``timm_pkmixer::permute``, that inductor
                                 fuses around but not into (fused into a LayerNorm reduction the
                                 gather is recomputed in every pass: 1.5× slower per step)
any other          ``eager``     ``index_select``
any other          ``compile``   ``index_select`` (inductor may fuse it with its neighbours)
any                ``export``    ``index_select`` (``torch.export``, ONNX)
any                ``trace``     ``plain``: index_select with autograd's own backward (``torch.jit.trace``
                                 checks that graphs match with and without gradients, so one code path)
any                ``script``    ``index_select`` (fixed: TorchScript cannot call Python)
=================  ============  ==============================================================

A backend is a function ``(x (B, m), index (m,), inverse (m,), out_shape) -> (B, *out_shape)`` that
returns a fresh tensor (not a view: FSDP2 warns about blocks that return views) and is differentiable,
with the gather by ``inverse`` as its backward (no scatter, no atomics, deterministic). All backends
compute bit-identical results. Adding a kernel (say, a fused GPU gather) is one new file that defines such
a function, plus one table entry naming it by import path, e.g.
``GATHER_TABLE['cuda', 'eager'] = 'timm_pkmixer.layers.gather_cuda:fused_gather'``; it is imported on
first use. :func:`use_gather_backend` switches an entry for a block of code (tests, benchmarks).
"""
import contextlib
import pkgutil
import time
from typing import Callable, Dict, Iterator, List, Sequence, Tuple, Type

import torch

__all__ = ['GATHER_TABLE', 'MODES', 'GatherFn', 'permute', 'current_mode', 'gather_spec', 'gather_backend',
           'use_gather_backend', 'tuned_choices']

GatherFn = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, Sequence[int]], torch.Tensor]
MODES = ('eager', 'compile', 'export', 'trace')

# (device type, mode) -> backend: a built-in name or 'package.module:function'. '*' is any device type.
GATHER_TABLE: Dict[Tuple[str, str], str] = {
    ('cpu', 'eager'): 'tuned',
    ('cpu', 'compile'): 'opaque',
    ('*', 'eager'): 'index_select',
    ('*', 'compile'): 'index_select',
    ('*', 'export'): 'index_select',
    ('*', 'trace'): 'plain',
}


def _fresh(x: torch.Tensor, out_shape: Sequence[int]) -> Tuple[torch.Tensor, torch.Tensor]:
    """An uninitialised (B, *out_shape) output and its flat (B, m) view to write into."""
    out = x.new_empty((x.shape[0], *out_shape))
    return out, out.view(x.shape[0], x.shape[1])  # m, not -1: a batch of 0 is a (0, m) view too


# ---------------------------------------------------------------- backends: index_select, gather


def _index_select_into(x: torch.Tensor, index: torch.Tensor, out_shape: Sequence[int]) -> torch.Tensor:
    out, flat = _fresh(x, out_shape)
    torch.index_select(x, 1, index, out=flat)
    return out


def _gather_into(x: torch.Tensor, index: torch.Tensor, out_shape: Sequence[int]) -> torch.Tensor:
    """torch.gather with the index expanded over the batch (parallel over B·m on the CPU)."""
    out, flat = _fresh(x, out_shape)
    torch.gather(x, 1, index.long().expand(x.shape[0], -1), out=flat)
    return out


def _differentiable(kernel: Callable) -> Type[torch.autograd.Function]:
    """y = kernel(x, index) with dy/dx applied as kernel(g, inverse): a gather, not a scatter; differentiable
    twice (create_graph=True)."""

    class Gather(torch.autograd.Function):
        @staticmethod
        def forward(x: torch.Tensor, index: torch.Tensor, inverse: torch.Tensor, out_shape: Sequence[int]):
            return kernel(x, index, out_shape)

        @staticmethod
        def setup_context(ctx, inputs, output) -> None:
            ctx.save_for_backward(inputs[1], inputs[2])

        @staticmethod
        def backward(ctx, grad: torch.Tensor):
            index, inverse = ctx.saved_tensors
            grad = grad.reshape(grad.shape[0], index.shape[0])
            if torch.is_grad_enabled():  # create_graph=True: the backward gather is differentiable too
                return Gather.apply(grad, inverse, index, (grad.shape[1],)), None, None, None
            return kernel(grad, inverse, (grad.shape[1],)), None, None, None

    Gather.__name__ = Gather.__qualname__ = f'_Gather_{kernel.__name__.strip("_")}'
    return Gather


def _backend(kernel: Callable) -> Tuple[GatherFn, Type[torch.autograd.Function]]:
    """A backend from a kernel: the autograd function when a gradient is needed, the plain kernel otherwise."""
    function = _differentiable(kernel)

    def gather(x: torch.Tensor, index: torch.Tensor, inverse: torch.Tensor, out_shape: Sequence[int]):
        if torch.is_grad_enabled() and x.requires_grad:
            return function.apply(x, index, inverse, tuple(out_shape))
        return kernel(x, index, out_shape)
    return gather, function


index_select_gather, _IndexSelect = _backend(_index_select_into)
expanded_gather, _ExpandedGather = _backend(_gather_into)


def plain_gather(x: torch.Tensor, index: torch.Tensor, inverse: torch.Tensor,
                 out_shape: Sequence[int]) -> torch.Tensor:
    """index_select and a reshape, whatever the grad mode; autograd's own backward (an index_add)."""
    return x.index_select(1, index).reshape(x.shape[0], *out_shape)


# ---------------------------------------------------------------- backend: tuned (index_select or gather)

_CANDIDATES: Dict[str, Tuple[GatherFn, Callable]] = {
    'index_select': (index_select_gather, _index_select_into),
    'gather': (expanded_gather, _gather_into),
}
_TUNED: Dict[tuple, str] = {}


def _time_once(kernel: Callable, x: torch.Tensor, index: torch.Tensor, out_shape: Sequence[int]) -> float:
    t0 = time.perf_counter()
    kernel(x, index, out_shape)
    return time.perf_counter() - t0


@torch.no_grad()
def _pick(x: torch.Tensor, index: torch.Tensor, out_shape: Sequence[int], reps: int = 9) -> str:
    """The faster candidate for this case: one warm-up call each, then `reps` interleaved timed calls, min.

    9 calls, not 3: at Mixer-S/16's (8, 100352) with 2 threads on a shared machine, 3 calls picked the slower
    index_select 5 times in 30 (9 calls: once), and in the model that pick cost 5-8 % of an inference step.
    """
    names = list(_CANDIDATES)
    for name in names:
        _CANDIDATES[name][1](x, index, out_shape)
    best = {name: float('inf') for name in names}
    for r in range(reps):
        for name in (names if r % 2 == 0 else names[::-1]):
            best[name] = min(best[name], _time_once(_CANDIDATES[name][1], x, index, out_shape))
    return min(names, key=best.__getitem__)


def tuned_gather(x: torch.Tensor, index: torch.Tensor, inverse: torch.Tensor,
                 out_shape: Sequence[int]) -> torch.Tensor:
    """index_select or expanded gather, whichever was faster when this case (device, dtype, B, m, threads)
    was first seen. Both compute the same values; only the time differs."""
    if x.shape[0] == 0:  # an empty batch: nothing to time
        return index_select_gather(x, index, inverse, out_shape)
    key = (x.device, x.dtype, x.shape[0], x.shape[1], torch.get_num_threads())
    name = _TUNED.get(key)
    if name is None:
        name = _TUNED[key] = _pick(x.detach(), index, out_shape)
    return _CANDIDATES[name][0](x, index, inverse, out_shape)


def tuned_choices() -> Dict[tuple, str]:
    """The choices the tuned backend has made: {(device, dtype, batch, m, threads): backend}."""
    return dict(_TUNED)


# ---------------------------------------------------------------- backend: opaque custom op


@torch.library.custom_op('timm_pkmixer::permute', mutates_args=())
def _permute_op(x: torch.Tensor, index: torch.Tensor, inverse: torch.Tensor, out_shape: List[int]) -> torch.Tensor:
    """x[:, index] of a (B, m) tensor as (B, *out_shape): one opaque op for compiled graphs."""
    return _index_select_into(x, index, out_shape)


@_permute_op.register_fake
def _(x: torch.Tensor, index: torch.Tensor, inverse: torch.Tensor, out_shape: List[int]) -> torch.Tensor:
    return x.new_empty((x.shape[0], *out_shape))


def _permute_setup_context(ctx, inputs, output) -> None:
    _, index, inverse, _ = inputs
    ctx.save_for_backward(index, inverse)


def _permute_backward(ctx, grad: torch.Tensor):
    index, inverse = ctx.saved_tensors
    grad = grad.reshape(grad.shape[0], index.shape[0]).contiguous()
    return _permute_op(grad, inverse, index, [grad.shape[1]]), None, None, None


_permute_op.register_autograd(_permute_backward, setup_context=_permute_setup_context)


def opaque_gather(x: torch.Tensor, index: torch.Tensor, inverse: torch.Tensor,
                  out_shape: Sequence[int]) -> torch.Tensor:
    return _permute_op(x, index, inverse, list(out_shape))


# ---------------------------------------------------------------- dispatch

_RESOLVED: Dict[str, GatherFn] = {
    'index_select': index_select_gather,
    'plain': plain_gather,
    'gather': expanded_gather,
    'tuned': tuned_gather,
    'opaque': opaque_gather,
}


def current_mode() -> str:
    """'export' under torch.export / ONNX export, 'compile' under torch.compile, 'trace' under torch.jit.trace,
    else 'eager'."""
    if torch.jit.is_tracing():
        return 'trace'
    is_exporting = getattr(torch.compiler, 'is_exporting', None)
    if is_exporting is not None and is_exporting():
        return 'export'
    return 'compile' if torch.compiler.is_compiling() else 'eager'


def gather_spec(device_type: str, mode: str) -> str:
    """The backend :data:`GATHER_TABLE` names for (device type, mode): its own entry, else the ``'*'`` one."""
    return GATHER_TABLE.get((device_type, mode)) or GATHER_TABLE[('*', mode)]


def gather_backend(device_type: str, mode: str) -> GatherFn:
    """The backend :data:`GATHER_TABLE` names for (device type, mode) (:func:`gather_spec`), imported on first use."""
    spec = gather_spec(device_type, mode)
    fn = _RESOLVED.get(spec)
    if fn is None:
        fn = _RESOLVED[spec] = pkgutil.resolve_name(spec)
    return fn


@torch.jit.unused
def _dispatch(x: torch.Tensor, index: torch.Tensor, inverse: torch.Tensor, out_shape: List[int]) -> torch.Tensor:
    return gather_backend(x.device.type, current_mode())(x, index, inverse, out_shape)


def permute(x: torch.Tensor, index: torch.Tensor, inverse: torch.Tensor, out_shape: List[int]) -> torch.Tensor:
    """``x[:, index]`` of a (B, m) tensor, returned as a fresh (B, *out_shape) tensor; backward ``g[:, inverse]``."""
    if torch.jit.is_scripting():
        return x.index_select(1, index).reshape([x.shape[0]] + out_shape)
    return _dispatch(x, index, inverse, out_shape)


@contextlib.contextmanager
def use_gather_backend(spec: str, device_type: str = '*', modes: Sequence[str] = MODES) -> Iterator[None]:
    """Run a block with `spec` as the backend for `device_type` ('*': every device type) in `modes`, then
    restore the table.

    Compiled graphs keep the backend they were traced with: reset dynamo (``torch._dynamo.reset()``)
    between compilations with different backends.
    """
    for mode in modes:
        if mode not in MODES:
            raise ValueError(f'mode must be one of {MODES}, got {mode!r}')
    if spec not in _RESOLVED:
        _RESOLVED[spec] = pkgutil.resolve_name(spec)
    devices = {device_type}
    if device_type == '*':  # everywhere: also replace the entries of specific device types
        devices |= {d for d, m in GATHER_TABLE if m in modes}
    keys = [(d, mode) for d in sorted(devices) for mode in modes]
    saved = {k: GATHER_TABLE[k] for k in keys if k in GATHER_TABLE}
    try:
        for k in keys:
            GATHER_TABLE[k] = spec
        yield
    finally:
        for k in keys:
            GATHER_TABLE.pop(k, None)
        GATHER_TABLE.update(saved)
