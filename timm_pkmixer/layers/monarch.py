"""Monarch matrices (Dao et al., ICML 2022) as a layer: M = P L Pᵀ R, never built as an n × n matrix.

For n = b², L and R are block-diagonal with b blocks of b × b, and P is the permutation that reads a
length-n vector as a b × b matrix (row-major) and transposes it: P = Pᵀ = J_c, the package's
:class:`~.permutation.Transpose`. With x viewed as (B, b, b), row k being the k-th input block,

    R x:   row k ↦ R_k · row k             (a batched matmul over the b blocks)
    Pᵀ:    transpose                        (rows now gather one entry of every block)
    L:     row k ↦ L_k · row k
    P:     transpose back

i.e. O(n^{3/2}) multiply-adds instead of n². Hayase & Karakida (§3.3, eq. 12) show that an S-Mixer's mixing
pair is such a Monarch matrix with weight-shared blocks, L = I_S ⊗ Vᵀ and R = I_C ⊗ W (see
:class:`~.kron_linear.KroneckerLinear`, the shared-block case).
"""
import math

import torch
import torch.nn as nn

from ..errors import InvalidArgumentError
from ..validation import positive_int
from .permutation import Transpose

__all__ = ['BlockDiagonalLinear', 'MonarchLinear', 'monarch_block_size']


def monarch_block_size(name: str, n: int) -> int:
    """b = √n for a Monarch matrix of size n × n; refused naming `name` unless n is a perfect square."""
    n = positive_int(name, n)
    b = math.isqrt(n)
    if b * b != n:
        raise InvalidArgumentError(
            f'{name}={n} is not a perfect square: a Monarch matrix P L Pᵀ R needs n = b² (b blocks of b × b); '
            f'nearest are {b * b} and {(b + 1) ** 2}')
    return b


class BlockDiagonalLinear(nn.Module):
    """diag(W_1, …, W_k): (B, k, in_block) → (B, k, out_block), block i applied to row i.

    ``weight`` is (k, out_block, in_block): the k diagonal blocks, no zeros stored.
    """

    def __init__(self, num_blocks: int, in_block: int, out_block: int, device=None, dtype=None) -> None:
        super().__init__()
        self.num_blocks, self.in_block, self.out_block = num_blocks, in_block, out_block
        self.weight = nn.Parameter(torch.empty(num_blocks, out_block, in_block, device=device, dtype=dtype))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Each block N(0, 1/in_block): variance-preserving, as the Mixers' weights N(0, 1/fan_in) (§4.3)."""
        nn.init.normal_(self.weight, std=1. / math.sqrt(self.in_block))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.einsum('bki,koi->bko', x, self.weight)

    def dense(self) -> torch.Tensor:
        """The (k·out_block, k·in_block) block-diagonal matrix (for tests and analysis; O(k²) memory)."""
        return torch.block_diag(*self.weight.unbind(0))

    def extra_repr(self) -> str:
        return f'num_blocks={self.num_blocks}, in_block={self.in_block}, out_block={self.out_block}'


class MonarchLinear(nn.Module):
    """x ↦ P L Pᵀ R x for n = b²: (B, n) → (B, n), no bias. ``r.weight``, ``l.weight``: (b, b, b)."""

    def __init__(self, features: int, device=None, dtype=None) -> None:
        """
        Args:
            features: n, a perfect square b² (b blocks of b × b in L and R).
        """
        super().__init__()
        b = monarch_block_size('features', features)
        self.features, self.block = features, b
        self.r = BlockDiagonalLinear(b, b, b, device=device, dtype=dtype)
        self.perm = Transpose()  # P = Pᵀ: the b × b transpose, through the package's permutation seam
        self.l = BlockDiagonalLinear(b, b, b, device=device, dtype=dtype)  # noqa: E741 (the paper's L)

    def reset_parameters(self) -> None:
        self.r.reset_parameters()
        self.l.reset_parameters()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, b = x.shape[0], self.block
        y = self.r(x.reshape(batch, b, b))            # R x
        y = self.l(self.perm(y))                      # L Pᵀ R x
        return self.perm(y).reshape(batch, self.features)  # P L Pᵀ R x

    def dense(self) -> torch.Tensor:
        """The n × n matrix P L Pᵀ R (for analysis; O(n²) memory)."""
        w = self.r.weight
        perm = torch.arange(self.features, device=w.device).reshape(self.block, self.block).t().reshape(-1)
        p = torch.eye(self.features, dtype=w.dtype, device=w.device)[perm]
        return p @ self.l.dense() @ p.t() @ self.r.dense()

    def extra_repr(self) -> str:
        return f'features={self.features}, blocks={self.block}x({self.block}x{self.block})'
