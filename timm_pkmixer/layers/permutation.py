"""Fixed permutations of the flattened S·C feature vector (the J1, J2 of a PK layer).

A permutation is applied as an index gather, and its backward is a gather with the
inverse permutation: no m×m matrix, no scatter, no atomics, deterministic.

Permutations are derived, not drawn from torch's RNG: a counter-based hash (SplitMix64)
of (seed, layer key, index) gives one 64-bit sort key per position, and the stable
argsort of those keys is a uniform random permutation. The stream depends on nothing
but integer arithmetic, so the same seed gives bit-identical permutations in every
process, on every machine and with every torch/numpy version.

Only a 64-bit digest of each permutation is stored in the state dict (`digest`), so an
RP checkpoint is the size of a normal one; loading a checkpoint made with another seed,
or a corrupted one, is refused. In memory the permutation and its inverse are int32
(int64 only past 2³¹ features): half the memory of int64 and a faster gather.

Under ``torch.compile`` on the CPU the gather is one opaque custom op
(``timm_pkmixer::permute``): inductor fuses everything around it but not the gather itself,
because fused into a LayerNorm reduction it would be recomputed with scalar indirect loads
in every pass of the reduction (measured 1.5× slower per step; benchmarks/RESULTS.md).
"""
import hashlib
from typing import Optional, Sequence, Tuple

import numpy as np
import torch
import torch.nn as nn
from timm.layers import register_notrace_module

__all__ = ['derive_permutation', 'permutation_digest', 'check_permutation', 'permute', 'FixedPermutation',
           'Transpose', 'COMPILE_OPAQUE_DEVICES']

# Device types on which a compiled graph calls the gather as an opaque kernel instead of letting
# inductor fuse it (see the module docstring); an empty tuple lets inductor fuse it everywhere.
COMPILE_OPAQUE_DEVICES: Tuple[str, ...] = ('cpu',)

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)


def _splitmix64(x: np.ndarray) -> np.ndarray:
    """SplitMix64 finaliser on a uint64 array (wrapping arithmetic)."""
    with np.errstate(over='ignore'):
        z = x + _GOLDEN
        z = (z ^ (z >> np.uint64(30))) * _MIX1
        z = (z ^ (z >> np.uint64(27))) * _MIX2
        return z ^ (z >> np.uint64(31))


def _stream(seed: int, key: str) -> Tuple[np.uint64, np.uint64]:
    digest = hashlib.blake2b(f'timm_pkmixer/v1/{int(seed)}/{key}'.encode(), digest_size=16).digest()
    return np.uint64(int.from_bytes(digest[:8], 'little')), np.uint64(int.from_bytes(digest[8:], 'little'))


def hashed_uniform_keys(num: int, seed: int, key: str) -> np.ndarray:
    """`num` pseudo-random uint64 values for stream (seed, key); identical everywhere."""
    hi, lo = _stream(seed, key)
    counter = np.arange(num, dtype=np.uint64)
    return _splitmix64(_splitmix64(counter ^ hi) ^ lo)


def _argsort_distinct(keys: np.ndarray) -> torch.Tensor:
    """Stable argsort (int64 tensor) of *distinct* uint64 keys.

    With no ties every sort gives the stable order, so torch's (faster) sort may be used on the
    keys mapped order-preservingly to int64 (flip the sign bit).
    """
    return torch.from_numpy((keys ^ np.uint64(1 << 63)).view(np.int64)).argsort()


def _derive(num: int, seed: int, key: str) -> torch.Tensor:
    if num <= 0:
        raise ValueError(f'permutation length must be positive, got {num}')
    # the keys are distinct: counter -> key is a bijection of uint64 (xor, SplitMix64 are bijections)
    return _argsort_distinct(hashed_uniform_keys(num, seed, key))


def derive_permutation(num: int, seed: int, key: str) -> np.ndarray:
    """A uniform random permutation of 0..num-1 (int64), fixed by (seed, key).

    It is the stable argsort of `hashed_uniform_keys(num, seed, key)`.

    Args:
        num: Length m of the permuted vector.
        seed: Permutation seed (a model argument).
        key: Name of the permutation inside the model, e.g. ``'blocks.3.mlp_tokens.perm_in'``.
    """
    return _derive(num, seed, key).numpy()


def permutation_digest(perm: np.ndarray) -> int:
    """64-bit fingerprint of a permutation (as a signed int64, to fit a torch buffer)."""
    raw = hashlib.blake2b(np.ascontiguousarray(perm, dtype='<i8').tobytes(), digest_size=8).digest()
    return int.from_bytes(raw, 'little', signed=True)


def check_permutation(index: torch.Tensor, num: int, name: str = 'permutation') -> None:
    """Raise ValueError unless `index` is a 1-D integer tensor holding each of 0..num-1 once."""
    if index.dtype.is_floating_point or index.dtype == torch.bool or index.dtype.is_complex:
        raise ValueError(f'{name} must be an integer tensor, got dtype {index.dtype}')
    if tuple(index.shape) != (num,):
        raise ValueError(f'{name} must have shape ({num},), got {tuple(index.shape)}')
    counts = torch.bincount(index.detach().cpu().long().clamp(-1, num).add(1), minlength=num + 2)
    if counts[0] or counts[-1] or not bool((counts[1:-1] == 1).all()):
        raise ValueError(f'{name} is not a permutation of 0..{num - 1}: '
                         f'{int((counts[1:-1] == 0).sum())} values missing, '
                         f'{int(counts[0] + counts[-1])} out of range')


def index_dtype(num: int) -> torch.dtype:
    """int32 indices (half the memory of int64, a faster gather) unless `num` needs int64."""
    return torch.int32 if num <= torch.iinfo(torch.int32).max else torch.int64


class _Gather(torch.autograd.Function):
    """y = x[..., index]; dy/dx applied as g[..., inverse] (a gather, not a scatter)."""

    @staticmethod
    def forward(x: torch.Tensor, index: torch.Tensor, inverse: torch.Tensor) -> torch.Tensor:
        return x.index_select(-1, index)

    @staticmethod
    def setup_context(ctx, inputs, output) -> None:
        _, index, inverse = inputs
        ctx.save_for_backward(index, inverse)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        index, inverse = ctx.saved_tensors
        if torch.is_grad_enabled():  # create_graph=True: the backward gather is differentiable too
            return _Gather.apply(grad, inverse, index), None, None
        return grad.index_select(-1, inverse), None, None


@torch.library.custom_op('timm_pkmixer::permute', mutates_args=())
def _permute_op(x: torch.Tensor, index: torch.Tensor, inverse: torch.Tensor) -> torch.Tensor:
    """x[:, index] of a (B, m) tensor, as one opaque op for compiled graphs; backward gathers by `inverse`."""
    return x.index_select(1, index)


@_permute_op.register_fake
def _(x: torch.Tensor, index: torch.Tensor, inverse: torch.Tensor) -> torch.Tensor:
    return x.new_empty((x.shape[0], index.shape[0]))


def _permute_setup_context(ctx, inputs, output) -> None:
    _, index, inverse = inputs
    ctx.save_for_backward(index, inverse)


def _permute_backward(ctx, grad: torch.Tensor):
    index, inverse = ctx.saved_tensors
    return _permute_op(grad.contiguous(), inverse, index), None, None


_permute_op.register_autograd(_permute_backward, setup_context=_permute_setup_context)


def _compile_opaque(x: torch.Tensor) -> bool:
    """True while torch.compile (not torch.export) traces a graph on a device of COMPILE_OPAQUE_DEVICES."""
    if not torch.compiler.is_compiling():
        return False
    is_exporting = getattr(torch.compiler, 'is_exporting', None)
    return not (is_exporting is not None and is_exporting()) and x.device.type in COMPILE_OPAQUE_DEVICES


@torch.jit.unused
def permute(x: torch.Tensor, index: torch.Tensor, inverse: torch.Tensor) -> torch.Tensor:
    """y = x[:, index] for a (B, m) tensor x and a permutation `index` with inverse `inverse`.

    The backward is the gather g[:, inverse] (no scatter). Eager: index_select, wrapped in an
    autograd function when a gradient is needed. Compiled on a device of COMPILE_OPAQUE_DEVICES:
    the opaque op ``timm_pkmixer::permute``.
    """
    if _compile_opaque(x):
        return _permute_op(x, index, inverse)
    if torch.is_grad_enabled() and x.requires_grad:
        return _Gather.apply(x, index, inverse)
    return x.index_select(1, index)


@register_notrace_module
class FixedPermutation(nn.Module):
    """J·vec(X) for a fixed uniform random permutation J, as a gather.

    Input (B, *in_shape) with prod(in_shape) = m; output (B, *out_shape), prod(out_shape) = m,
    where flat output position i holds flat input position ``index[i]``.
    """

    def __init__(
            self,
            num: int,
            out_shape: Sequence[int],
            seed: int,
            key: str,
            device: Optional[torch.device] = None,
    ) -> None:
        super().__init__()
        if int(np.prod(out_shape)) != num:
            raise ValueError(f'out_shape {tuple(out_shape)} does not hold {num} features')
        self.num = num
        self.out_shape = tuple(int(s) for s in out_shape)
        self.seed = int(seed)
        self.key = key
        self._digest: Optional[int] = None
        device = torch.empty(0, device=device).device  # honours torch.device(...) contexts
        dtype = index_dtype(num)
        self.register_buffer('index', torch.empty(num, dtype=dtype, device=device), persistent=False)
        self.register_buffer('inverse', torch.empty(num, dtype=dtype, device=device), persistent=False)
        self.register_buffer('digest', torch.zeros((), dtype=torch.long, device=device))
        self.init_non_persistent_buffers()

    def _permutation(self) -> torch.Tensor:
        return _derive(self.num, self.seed, self.key)

    def expected_digest(self) -> int:
        if self._digest is None:
            self._digest = permutation_digest(self._permutation().numpy())
        return self._digest

    @torch.no_grad()
    def init_non_persistent_buffers(self) -> None:
        """(Re)compute index, inverse and digest from (seed, key); a no-op on the meta device."""
        if self.index.device.type == 'meta':
            return
        perm = self._permutation()
        self._digest = permutation_digest(perm.numpy())
        perm = perm.to(self.index.dtype)
        inverse = torch.empty_like(perm)
        inverse[perm] = torch.arange(self.num, dtype=perm.dtype)
        self.index.copy_(perm)
        self.inverse.copy_(inverse)
        self.digest.fill_(self._digest)

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                              error_msgs) -> None:
        index_key, digest_key = prefix + 'index', prefix + 'digest'
        if index_key in state_dict:
            # an explicit permutation (e.g. written by another implementation): validate, never adopt
            index = state_dict.pop(index_key)
            try:
                check_permutation(index, self.num, name=index_key)
                if not torch.equal(index.cpu().long(), self._permutation()):
                    raise ValueError(f'{index_key} does not match this model\'s permutation (perm_seed={self.seed})')
            except ValueError as e:
                error_msgs.append(str(e))
        if digest_key in state_dict:
            got = state_dict[digest_key]
            if got.numel() != 1 or int(got.reshape(-1)[0]) != self.expected_digest():
                error_msgs.append(
                    f'{digest_key}: permutation digest {got.reshape(-1).tolist()} != {self.expected_digest()} '
                    f'expected for perm_seed={self.seed}; the checkpoint was made with another permutation '
                    f'seed or architecture, or is corrupted')
                return
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                                      error_msgs)

    def forward(self, x: torch.Tensor, residual: Optional[torch.Tensor] = None) -> torch.Tensor:
        """J·x, or residual + J·x with the sum written into J·x's fresh buffer (one allocation and one
        output stream fewer than a separate add; the result is the same)."""
        batch = x.shape[0]
        out_shape = [batch] + list(self.out_shape)
        x = x.reshape(batch, self.num)
        if torch.jit.is_scripting():
            y = x.index_select(1, self.index)
        else:
            y = permute(x, self.index, self.inverse)
        if residual is None:
            return y.view(out_shape)
        if residual.dtype == y.dtype and list(residual.shape) == out_shape:
            return y.add_(residual.reshape(batch, self.num)).view(out_shape)
        return residual + y.view(out_shape)

    def extra_repr(self) -> str:
        return f'm={self.num}, out_shape={self.out_shape}, seed={self.seed}'


class Transpose(nn.Module):
    """The commutation matrix J_c on a (B, n1, n2) feature: a plain transpose (B, n2, n1), no gather."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.transpose(1, 2)
