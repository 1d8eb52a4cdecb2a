"""The rearrangements J1, J2 of a PK layer: identity, transpose (J_c), or a fixed random permutation.

All three are modules with one interface, ``forward(x, residual=None)``: J·x, or ``residual + J·x``, from
(B, S, C) or (B, n1, n2) to (B, *out_shape). A block adds its skip connection through J2 and never asks
which kind it holds; a random permutation writes the sum into its freshly gathered output (one buffer and
one pass fewer than a separate add, the same values).

* :class:`IdentityPermutation`: J = I (channel mixing of a normal Mixer).
* :class:`Transpose`: J = J_c, a transpose (token mixing of a normal Mixer): no gather.
* :class:`FixedPermutation`: a uniform random permutation of the m = S·C features (RP Mixers), applied as a
  gather (:mod:`.gather` decides how, per device and mode), its backward a gather by the inverse.

Random permutations are derived, not drawn from torch's RNG: the stable argsort of SplitMix64 keys of
(seed, layer key, position) is a uniform random permutation, bit-identical in every process and with every
torch/numpy version. The state dict holds only a 64-bit digest (:class:`~.structure.DerivedStructure`); in
memory the permutation and its inverse are int32 (int64 only past 2³¹ features).

The kinds of :data:`~timm_pkmixer.permutation_kinds.PERMUTATION_KINDS` build a PK layer's J1, J2 from a
:class:`PermutationSpec`: :class:`NormalPermutations` (transposes / identities) and :class:`RandomPermutations`
(fixed random permutations, lifted tile by tile in an expanded model) are the two built in.
"""
from dataclasses import dataclass
from typing import List, Optional, Sequence, Tuple

import numpy as np
import torch
import torch.nn as nn
from timm.layers import register_notrace_module

from ..sizes import PlannedTensor, Size
from .gather import permute
from .structure import DerivedStructure, hashed_uniform_keys, structure_digest

__all__ = ['derive_permutation', 'permutation_digest', 'check_permutation', 'index_dtype', 'compose', 'Tiling',
           'IdentityPermutation', 'Transpose', 'FixedPermutation', 'PermutationSpec', 'NormalPermutations',
           'RandomPermutations']


def _argsort_distinct(keys: np.ndarray) -> torch.Tensor:
    """Stable argsort (int64 tensor) of *distinct* uint64 keys: with no ties every sort gives the stable
    order, so torch's (faster) sort is used on the keys mapped order-preservingly to int64."""
    return torch.from_numpy((keys ^ np.uint64(1 << 63)).view(np.int64)).argsort()


def _derive(num: int, seed: int, key: str) -> torch.Tensor:
    if num <= 0:
        raise ValueError(f'permutation length must be positive, got {num}')
    # the keys are distinct: counter -> key is a bijection of uint64 (xor, SplitMix64 are bijections)
    return _argsort_distinct(hashed_uniform_keys(num, seed, key))


def derive_permutation(num: int, seed: int, key: str) -> np.ndarray:
    """A uniform random permutation of 0..num-1 (int64), fixed by (seed, key).

    Args:
        num: Length m of the permuted vector.
        seed: Permutation seed (the model argument ``perm_seed``).
        key: Name of the permutation inside the model, e.g. ``'blocks.3.mlp_tokens.perm_in'``.
    """
    return _derive(num, seed, key).numpy()


def permutation_digest(perm: np.ndarray) -> int:
    """64-bit fingerprint of a permutation (of its int64 values), as a signed int64."""
    return structure_digest(np.asarray(perm, dtype='<i8'))


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


@dataclass(frozen=True)
class Tiling:
    """How a permutation of one image tile is lifted to an image of `tiles` such tiles (`expand_resolution`).

    A per-tile permutation maps a (r1, r2) input layout to a (q1, q2) output layout. In the expanded layer the
    tiles sit side by side along one axis of each layout: axis 0 (rows: tokens, tile-major) or axis 1 (each row
    holds one segment per tile). The lifted permutation applies the tile's permutation to every tile and never
    mixes tiles: for tile k, output (k, o) takes input (k, perm[o]).
    """
    tiles: int
    in_shape: Tuple[int, int]     # per-tile input layout
    in_axis: int                  # the expanded input's tile axis
    out_shape: Tuple[int, int]    # per-tile output layout
    out_axis: int                 # the expanded output's tile axis

    def lift(self, perm: torch.Tensor) -> torch.Tensor:
        """The expanded permutation (int64) of a per-tile permutation `perm`: (tiles · m,)."""
        m = perm.numel()
        r2 = self.in_shape[1]
        p = perm.long()
        # flat input position of (tile k, per-tile position p) = base[p] + k · step
        base, step = (p, m) if self.in_axis == 0 else ((p // r2) * (self.tiles * r2) + p % r2, r2)
        sources = base + torch.arange(self.tiles).unsqueeze(1) * step  # (tiles, m): [k, o]
        if self.out_axis == 0:  # output (k, o) sits at k · m + o
            return sources.reshape(-1)
        q1, q2 = self.out_shape  # output (k, (a, b)) sits at row a, segment k, column b
        return sources.view(self.tiles, q1, q2).transpose(0, 1).reshape(-1)


def _add(y: torch.Tensor, residual: Optional[torch.Tensor]) -> torch.Tensor:
    return y if residual is None else residual + y


class IdentityPermutation(nn.Module):
    """J = I: (B, S, C) → (B, S, C); with a residual, residual + x."""

    def forward(self, x: torch.Tensor, residual: Optional[torch.Tensor] = None) -> torch.Tensor:
        return _add(x, residual)


class Transpose(nn.Module):
    """J = J_c, the commutation matrix: (B, n1, n2) → (B, n2, n1), a plain transpose (no gather)."""

    def forward(self, x: torch.Tensor, residual: Optional[torch.Tensor] = None) -> torch.Tensor:
        return _add(x.transpose(1, 2), residual)


def compose(first: torch.Tensor, second: torch.Tensor) -> torch.Tensor:
    """The one gather index that applies `first`, then `second`: ``x[:, first][:, second] == x[:, first[second]]``
    (m,) → (m,), same dtype; its inverse is ``inverse_second[inverse_first]``.

    Two gathers compose only where nothing but elementwise-per-feature work lies between them. In the package's
    blocks none do: J1 is followed by W (a linear map over each row), J2 by the skip add and the next LayerNorm (a
    reduction over each token's C features) before the next J1; a LayerNorm's statistics mix features, so a
    permutation cannot be moved across it. Kinds or layers with two gathers in a row compose them with this at
    construction.
    """
    return first[second.long()]


@register_notrace_module
class FixedPermutation(DerivedStructure, nn.Module):
    """J·vec(X) for a fixed uniform random permutation J, as a gather.

    Input (B, *in_shape) with prod(in_shape) = m; output (B, *out_shape), where flat output position i
    holds flat input position ``index[i]``.
    """
    what = 'permutation'
    seed_arg = 'perm_seed'
    digest_name = 'digest'
    explicit_name = 'index'
    digest_noun = 'permutation digests'

    def __init__(
            self,
            num: int,
            out_shape: Sequence[int],
            seed: int,
            key: str,
            device: Optional[torch.device] = None,
            tiling: Optional[Tiling] = None,
    ) -> None:
        """
        Args:
            num: Length m of the permuted vector.
            out_shape: Output layout (prod = m).
            seed: Permutation seed.
            key: Name of the permutation in the model (with the seed, it fixes the permutation).
            device: Device of the buffers.
            tiling: Lift a permutation of m / tiles features tile by tile (a model expanded to a larger image).
        """
        super().__init__()
        if int(np.prod(out_shape)) != num:
            raise ValueError(f'out_shape {tuple(out_shape)} does not hold {num} features')
        if tiling is not None and tiling.tiles * int(np.prod(tiling.out_shape)) != num:
            raise ValueError(f'{tiling.tiles} tiles of {tiling.out_shape} do not hold {num} features')
        self.num = num
        self.tiling = tiling
        self.out_shape: List[int] = [int(s) for s in out_shape]
        device = self._init_structure(seed, key, device)
        dtype = index_dtype(num)
        self.register_buffer('index', torch.empty(num, dtype=dtype, device=device), persistent=False)
        self.register_buffer('inverse', torch.empty(num, dtype=dtype, device=device), persistent=False)
        self.init_non_persistent_buffers()

    @staticmethod
    def planned_tensors(num: Size, name: str, args: str, count: int = 1) -> List[PlannedTensor]:
        """What `count` permutations of `num` features allocate, for the size bound: the index and its inverse
        (:func:`index_dtype`) and the int64 digest."""
        itemsize = 4 if num <= torch.iinfo(torch.int32).max else 8
        return [PlannedTensor(f'{name}.index', (num,), itemsize, args, count),
                PlannedTensor(f'{name}.inverse', (num,), itemsize, args, count),
                PlannedTensor(f'{name}.digest', (), 8, args, count)]

    def permutation(self, seed: Optional[int] = None) -> torch.Tensor:
        """The permutation as an int64 CPU tensor, derived from (seed, key) (lifted tile by tile if tiled)."""
        seed = self.seed if seed is None else seed
        if self.tiling is None:
            return _derive(self.num, seed, self.key)
        return self.tiling.lift(_derive(self.num // self.tiling.tiles, seed, self.key))

    def _derive_digest(self, seed: int) -> int:
        return permutation_digest(self.permutation(seed).numpy())

    def _buffers_on_meta(self) -> bool:
        return self.index.is_meta

    def _move_derived_buffers(self, device: torch.device) -> None:
        self.index = torch.empty_like(self.index, device=device)
        self.inverse = torch.empty_like(self.inverse, device=device)

    def _compute_buffers(self) -> None:
        perm = self.permutation()
        self._digest = permutation_digest(perm.numpy())
        perm = perm.to(self.index.dtype)
        inverse = torch.empty_like(perm)
        inverse[perm] = torch.arange(self.num, dtype=perm.dtype)
        self.index.copy_(perm)
        self.inverse.copy_(inverse)

    def _check_explicit(self, value: torch.Tensor, key: str) -> Optional[str]:
        try:
            check_permutation(value, self.num, name=key)
        except ValueError as e:
            return str(e)
        ours = self.index if self._materialized else self.permutation()
        if not torch.equal(value.detach().cpu().long(), ours.cpu().long()):
            return f'{key} does not match this model\'s permutation ({self.seed_arg}={self.seed})'
        return None

    def forward(self, x: torch.Tensor, residual: Optional[torch.Tensor] = None) -> torch.Tensor:
        """J·x, or residual + J·x with the sum written into J·x's fresh buffer."""
        if not torch.jit.is_scripting():
            self.check_materialized()
        y = permute(x, self.index, self.inverse, self.out_shape)  # (B, …) flattened inside, not by a view here
        if residual is None:
            return y
        if residual.dtype == y.dtype and residual.shape == y.shape:
            return y.add_(residual)
        return residual + y  # e.g. an fp32 residual and a bf16 branch under autocast: promoted, out of place

    def reset_parameters(self) -> None:
        self.init_non_persistent_buffers()

    def extra_repr(self) -> str:
        tiles = f', tiles={self.tiling.tiles}' if self.tiling is not None else ''
        return f'm={self.num}, out_shape={tuple(self.out_shape)}, seed={self.seed}{tiles}'


@dataclass(frozen=True)
class PermutationSpec:
    """What a PK layer asks its permutation kind for: J1 maps the input (B, S_in, C) to (B, *rows_in) rows, the
    small W acts on each row, and J2 maps the (B, *rows_out) rows to the output (B, S_out, C)."""
    mixing: str                            # 'token' (rows of S values, one per channel) or 'channel' (of C)
    num_tokens_in: int                     # S_in
    num_tokens_out: int                    # S_out (differs from S_in only in a first block S0 → S)
    dim: int                               # C
    seed: int                              # perm_seed (for a kind derived from a seed)
    key: str                               # the layer's name in the model, e.g. 'blocks.3.mlp_tokens'
    tiles: int = 1                         # the tokens form `tiles` tile-major groups (an expanded model)
    device: Optional[torch.device] = None

    def __post_init__(self) -> None:
        if self.mixing not in ('token', 'channel'):
            raise ValueError(f"mixing must be 'token' or 'channel', got {self.mixing!r}")
        if self.mixing == 'channel' and self.num_tokens_in != self.num_tokens_out:
            raise ValueError('channel mixing keeps the number of tokens')

    @property
    def num_in(self) -> int:
        """m_in = S_in·C, the features J1 permutes."""
        return self.num_tokens_in * self.dim

    @property
    def num_out(self) -> int:
        """m_out = S_out·C, the features J2 permutes."""
        return self.num_tokens_out * self.dim

    @property
    def rows_in(self) -> Tuple[int, int]:
        """(n1, n2_in): C rows of S_in (token mixing) or S rows of C (channel mixing)."""
        return (self.dim, self.num_tokens_in) if self.mixing == 'token' else (self.num_tokens_in, self.dim)

    @property
    def rows_out(self) -> Tuple[int, int]:
        """(n1, n2_out): what W's rows hold before J2."""
        return (self.dim, self.num_tokens_out) if self.mixing == 'token' else (self.num_tokens_out, self.dim)

    def tilings(self) -> Tuple[Optional[Tiling], Optional[Tiling]]:
        """How J1, J2 of one tile are lifted to the `tiles` tiles (None, None when there is one tile): tokens are
        tile-major, so token rows hold one segment per tile."""
        if self.tiles == 1:
            return None, None
        s_in, s_out, c = self.num_tokens_in // self.tiles, self.num_tokens_out // self.tiles, self.dim
        if self.mixing == 'token':
            return Tiling(self.tiles, (s_in, c), 0, (c, s_in), 1), Tiling(self.tiles, (c, s_out), 1, (s_out, c), 0)
        return Tiling(self.tiles, (s_in, c), 0, (s_in, c), 0), Tiling(self.tiles, (s_out, c), 0, (s_out, c), 0)


class NormalPermutations:
    """Kind 'normal', the MLP-Mixer's: J1 = J2 = J_c (transposes) for token mixing, identities for channel mixing;
    nothing to store, no gather (a transpose and a block-diagonal W keep the tiles of an expanded model apart)."""

    @staticmethod
    def layers(spec: PermutationSpec) -> Tuple[nn.Module, nn.Module]:
        if spec.mixing == 'token':
            return Transpose(), Transpose()
        return IdentityPermutation(), IdentityPermutation()

    @staticmethod
    def planned_tensors(num: Size, name: str, args: str, count: int = 1) -> List[PlannedTensor]:
        return []


class RandomPermutations:
    """Kind 'random', the RP Mixer's: J1, J2 are fixed uniform random permutations of the m features
    (:class:`FixedPermutation`), derived from (perm_seed, layer key) and lifted tile by tile when tiled."""

    @staticmethod
    def layers(spec: PermutationSpec) -> Tuple[nn.Module, nn.Module]:
        tiling_in, tiling_out = spec.tilings()
        perm_in = FixedPermutation(spec.num_in, spec.rows_in, seed=spec.seed, key=f'{spec.key}.perm_in',
                                   device=spec.device, tiling=tiling_in)
        perm_out = FixedPermutation(spec.num_out, (spec.num_tokens_out, spec.dim), seed=spec.seed,
                                    key=f'{spec.key}.perm_out', device=spec.device, tiling=tiling_out)
        return perm_in, perm_out

    planned_tensors = staticmethod(FixedPermutation.planned_tensors)
