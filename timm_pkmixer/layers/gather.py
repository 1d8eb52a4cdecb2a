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

A backend is a function ``(x (B, …), index (m,), inverse (m,), out_shape) -> (B, *out_shape)`` that
gathers from x's (B, m) flattening (x comes in its layer's shape: flattened inside the backend, the
reshape is no autograd node), returns a fresh tensor (not a view: FSDP2 warns about blocks that return
views) and is differentiable, with the gather by ``inverse`` as its backward, in x's shape (no scatter,
no atomics, deterministic). All backends compute bit-identical results. The eager ``index_select``,
``gather`` and ``tuned`` backends share one old-style autograd Function, :class:`_Permute` (host cost:
benchmarks/speed/rp_cost.py, the per-call table); in a graph being compiled they use traceable twins of it.

Adding a kernel (say, a fused GPU gather) is one new file that defines such
a function, plus one table entry naming it by import path, e.g.
``GATHER_TABLE['cuda', 'eager'] = 'timm_pkmixer.layers.gather_cuda:fused_gather'``; it is imported on
first use. :func:`use_gather_backend` switches an entry for a block of code (tests, benchmarks).
"""
import contextlib
import pkgutil
import time
from typing import Callable, Dict, Iterator, List, Sequence, Tuple, Type, Union

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


def _flat(x: torch.Tensor, m: int) -> torch.Tensor:
    """(B, *shape) with prod(shape) = m as (B, m): x itself when already 2-D (m, not -1: a batch of 0 reshapes too)."""
    return x if x.dim() == 2 else x.reshape(x.shape[0], m)


def _shaped(out: torch.Tensor, out_shape: Sequence[int]) -> torch.Tensor:
    """A fresh contiguous (B, m) tensor given the shape (B, *out_shape) in place: no copy, and not a view (a view
    costs a view node per call, and FSDP2 warns about blocks that return views); as it is when out_shape is (m,)."""
    return out if len(out_shape) == 1 else out.resize_((out.shape[0], *out_shape))


# ---------------------------------------------------------------- kernels: index_select, gather

# 2-byte floats are gathered as 2-byte integers: the same bits, and torch.gather's integer kernel is faster
# (bfloat16 (128, 4096), one thread: about 300 µs against 400; benchmarks/speed/rp_cost.py, the gather table)
_SAME_BITS = {torch.bfloat16: torch.int16, torch.float16: torch.int16}


def _index_select_into(x: torch.Tensor, index: torch.Tensor, out_shape: Sequence[int]) -> torch.Tensor:
    """x (B, …) → x[:, index] of its (B, m) flattening as a fresh (B, *out_shape) tensor, by index_select (one row at
    a time). :func:`_flat` and :func:`_shaped` written out: the eager path's every call counts."""
    y = torch.index_select(x if x.dim() == 2 else x.reshape(x.shape[0], index.shape[0]), 1, index)
    return y if len(out_shape) == 1 else y.resize_((y.shape[0], *out_shape))


def _gather_into(x: torch.Tensor, index: torch.Tensor, out_shape: Sequence[int]) -> torch.Tensor:
    """x (B, …) → x[:, index] of its (B, m) flattening as a fresh (B, *out_shape) tensor, by torch.gather with the
    index expanded over the batch (parallel over B·m on the CPU); 2-byte floats as 2-byte integers."""
    x = _flat(x, index.shape[0])
    expanded = index.long().expand(x.shape[0], -1)
    bits = _SAME_BITS.get(x.dtype)
    if bits is None:
        return _shaped(torch.gather(x, 1, expanded), out_shape)
    out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    torch.gather(x.view(bits), 1, expanded, out=out.view(bits))
    return _shaped(out, out_shape)


class _Permute(torch.autograd.Function):
    """y = kernel(x, index) with dy/dx applied as kernel(g, inverse): a gather, not a scatter; differentiable twice
    (create_graph=True: the backward gather is this function again).

    Old-style (``forward(ctx, ...)``, no ``setup_context``) on purpose: a Function with ``setup_context`` binds its
    arguments with ``inspect.signature`` on every ``apply``, which cost more host time than the whole gather of a
    small batch (benchmarks/speed/rp_cost.py, the per-call table). The index, inverse, kernel and input shape are kept
    on ``ctx`` (buffers of the layer, not outputs: no reference cycle, nothing for saved-tensor hooks to pack). The
    kernels flatten (B, …) to (B, m) themselves: a reshape here runs outside autograd (no view node per call), and the
    gradient arrives in the output's shape and leaves in the input's with no reshape in Python.
    """

    @staticmethod
    def forward(ctx, x: torch.Tensor, index: torch.Tensor, inverse: torch.Tensor, out_shape: Sequence[int],
                kernel: Callable) -> torch.Tensor:
        ctx.gather = (index, inverse, x.shape[1:], kernel)  # one attribute: each costs a set and a get per call
        return kernel(x, index, out_shape)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        index, inverse, in_shape, kernel = ctx.gather
        if torch.is_grad_enabled():  # create_graph=True: the backward gather is differentiable too
            return _Permute.apply(grad, inverse, index, in_shape, kernel), None, None, None, None
        return kernel(grad, inverse, in_shape), None, None, None, None


# ---------------------------------------------------------------- the same kernels in compiled and exported graphs


def _fresh(x: torch.Tensor, index: torch.Tensor, out_shape: Sequence[int]
           ) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(an uninitialised (B, *out_shape) output, its flat (B, m) view to write into, x (B, …) as (B, m))."""
    b, m = x.shape[0], index.shape[0]  # m, not -1: a batch of 0 is a (0, m) view too
    out = x.new_empty((b, *out_shape))
    return out, out.view(b, m), x.reshape(b, m)


def _index_select_out(x: torch.Tensor, index: torch.Tensor, out_shape: Sequence[int]) -> torch.Tensor:
    out, flat_out, flat_x = _fresh(x, index, out_shape)
    torch.index_select(flat_x, 1, index, out=flat_out)
    return out


def _gather_out(x: torch.Tensor, index: torch.Tensor, out_shape: Sequence[int]) -> torch.Tensor:
    out, flat_out, flat_x = _fresh(x, index, out_shape)
    torch.gather(flat_x, 1, index.long().expand(flat_x.shape[0], -1), out=flat_out)
    return out


def _traceable(kernel: Callable) -> Type[torch.autograd.Function]:
    """:class:`_Permute` as dynamo and torch.export trace it: a new-style Function (``setup_context``) over an
    out= kernel (they trace neither ``resize_`` nor a Python function passed as an argument)."""

    class Gather(torch.autograd.Function):
        @staticmethod
        def forward(x: torch.Tensor, index: torch.Tensor, inverse: torch.Tensor, out_shape: Sequence[int]):
            return kernel(x, index, out_shape)

        @staticmethod
        def setup_context(ctx, inputs, output) -> None:
            ctx.save_for_backward(inputs[1], inputs[2])
            ctx.in_shape = tuple(inputs[0].shape[1:])

        @staticmethod
        def backward(ctx, grad: torch.Tensor):
            index, inverse = ctx.saved_tensors
            if torch.is_grad_enabled():  # create_graph=True: the backward gather is differentiable too
                return Gather.apply(grad, inverse, index, ctx.in_shape), None, None, None
            return kernel(grad, inverse, ctx.in_shape), None, None, None

    Gather.__name__ = Gather.__qualname__ = f'_Traced_{kernel.__name__.strip("_")}'
    return Gather


# ---------------------------------------------------------------- backends: index_select, gather


def _backend(kernel: Callable, traced_kernel: Callable) -> GatherFn:
    """A backend from a kernel: :class:`_Permute` when a gradient is needed, the plain kernel otherwise; in a graph
    being compiled, its traceable twin."""
    traced = _traceable(traced_kernel)

    def gather(x: torch.Tensor, index: torch.Tensor, inverse: torch.Tensor, out_shape: Sequence[int]):
        if torch.compiler.is_compiling():
            if torch.is_grad_enabled() and x.requires_grad:
                return traced.apply(x, index, inverse, tuple(out_shape))
            return traced_kernel(x, index, out_shape)
        if x.requires_grad and torch.is_grad_enabled():
            return _Permute.apply(x, index, inverse, out_shape, kernel)
        return kernel(x, index, out_shape)
    gather.__name__ = gather.__qualname__ = f'{kernel.__name__.strip("_").replace("_into", "")}_gather'
    return gather


index_select_gather = _backend(_index_select_into, _index_select_out)
expanded_gather = _backend(_gather_into, _gather_out)


def plain_gather(x: torch.Tensor, index: torch.Tensor, inverse: torch.Tensor,
                 out_shape: Sequence[int]) -> torch.Tensor:
    """index_select and a reshape, whatever the grad mode; autograd's own backward (an index_add)."""
    return x.reshape(x.shape[0], index.shape[0]).index_select(1, index).reshape(x.shape[0], *out_shape)


# ---------------------------------------------------------------- backend: tuned (index_select or gather)

_CANDIDATES: Dict[str, Callable] = {'index_select': _index_select_into, 'gather': _gather_into}
_TUNED: Dict[tuple, Callable] = {}  # (dtype, B, m, threads, device or None for the CPU) -> the faster kernel


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
        _CANDIDATES[name](x, index, out_shape)
    best = {name: float('inf') for name in names}
    for r in range(reps):
        for name in (names if r % 2 == 0 else names[::-1]):
            best[name] = min(best[name], _time_once(_CANDIDATES[name], x, index, out_shape))
    return min(names, key=best.__getitem__)


def tuned_gather(x: torch.Tensor, index: torch.Tensor, inverse: torch.Tensor,
                 out_shape: Sequence[int]) -> torch.Tensor:
    """index_select or expanded gather, whichever was faster when this case (device, dtype, B, m, threads)
    was first seen. Both compute the same values; only the time differs."""
    if torch.compiler.is_compiling():  # nothing to time in a graph being traced
        return index_select_gather(x, index, inverse, out_shape)
    batch = x.shape[0]
    if batch == 0:  # an empty batch: nothing to time
        kernel = _index_select_into
    else:  # the key holds no torch.device on a CPU: building and hashing one costs more than the lookup
        key = (x.dtype, batch, index.shape[0], torch.get_num_threads(), None if x.is_cpu else x.device)
        kernel = _TUNED.get(key)
        if kernel is None:
            kernel = _TUNED[key] = _CANDIDATES[_pick(x.detach(), index, out_shape)]
    if x.requires_grad and torch.is_grad_enabled():
        return _Permute.apply(x, index, inverse, out_shape, kernel)
    return kernel(x, index, out_shape)


def tuned_choices() -> Dict[tuple, str]:
    """The choices the tuned backend has made: {(device, dtype, batch, m, threads): backend}."""
    names = {kernel: name for name, kernel in _CANDIDATES.items()}
    return {(torch.device('cpu') if device is None else device, dtype, b, m, threads): names[kernel]
            for (dtype, b, m, threads, device), kernel in _TUNED.items()}


# ---------------------------------------------------------------- backend: opaque custom op


@torch.library.custom_op('timm_pkmixer::permute', mutates_args=())
def _permute_op(x: torch.Tensor, index: torch.Tensor, inverse: torch.Tensor, out_shape: List[int]) -> torch.Tensor:
    """x[:, index] of a (B, …) tensor's (B, m) flattening as (B, *out_shape): one opaque op for compiled graphs."""
    return _index_select_out(x, index, out_shape)


@_permute_op.register_fake
def _(x: torch.Tensor, index: torch.Tensor, inverse: torch.Tensor, out_shape: List[int]) -> torch.Tensor:
    return x.new_empty((x.shape[0], *out_shape))


def _permute_setup_context(ctx, inputs, output) -> None:
    x, index, inverse, _ = inputs
    ctx.save_for_backward(index, inverse)
    ctx.in_shape = list(x.shape[1:])


def _permute_backward(ctx, grad: torch.Tensor):
    index, inverse = ctx.saved_tensors
    return _permute_op(grad.contiguous(), inverse, index, ctx.in_shape), None, None, None


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


_is_exporting: Callable[[], bool] = getattr(torch.compiler, 'is_exporting', lambda: False)  # torch ≥ 2.5


def current_mode() -> str:
    """'export' under torch.export / ONNX export, 'compile' under torch.compile, 'trace' under torch.jit.trace,
    else 'eager'."""
    if torch.jit.is_tracing():
        return 'trace'
    if _is_exporting():
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
    mode = current_mode()  # gather_backend inlined: this runs for every permutation of every step
    # x.is_cpu, not x.device.type alone: reading torch.device.type cost ~4 µs a call beside autograd (rp_cost.py)
    device_type = 'cpu' if x.is_cpu else x.device.type
    spec = GATHER_TABLE.get((device_type, mode)) or GATHER_TABLE[('*', mode)]
    fn = _RESOLVED.get(spec)
    return (fn or gather_backend(device_type, mode))(x, index, inverse, out_shape)


def permute(x: torch.Tensor, index: torch.Tensor, inverse: torch.Tensor, out_shape: List[int]) -> torch.Tensor:
    """``x[:, index]`` of a (B, …) tensor flattened to (B, m), returned as a fresh (B, *out_shape) tensor; backward
    ``g[:, inverse]``, in x's shape."""
    if torch.jit.is_scripting():
        return x.reshape([x.shape[0], index.shape[0]]).index_select(1, index).reshape([x.shape[0]] + out_shape)
    return _dispatch(x, index, inverse, out_shape)


@contextlib.contextmanager
def use_gather_backend(spec: Union[str, GatherFn], device_type: str = '*',
                       modes: Sequence[str] = MODES) -> Iterator[None]:
    """Run a block with `spec` as the backend for `device_type` ('*': every device type) in `modes`, then
    restore the table. `spec` is a built-in name, ``'package.module:function'``, or the backend function itself
    (entered in the table as ``'module:qualname'``; a script loaded from a file has no import path to name).

    Compiled graphs keep the backend they were traced with: reset dynamo (``torch._dynamo.reset()``)
    between compilations with different backends.
    """
    for mode in modes:
        if mode not in MODES:
            raise ValueError(f'mode must be one of {MODES}, got {mode!r}')
    if callable(spec):
        fn, spec = spec, f'{spec.__module__}:{spec.__qualname__}'
        _RESOLVED[spec] = fn  # this function, even where an earlier one had the same name
    elif spec not in _RESOLVED:
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
