"""Kronecker-product weights as a layer: x ↦ (V ⊗ W) x, never built as an n × n matrix.

With the row-major flattening x = vec_r(X) of X ∈ R^{p_in × q_in} (the layout torch uses),
(V ⊗ W) vec_r(X) = vec_r(V X Wᵀ): W acts on every row of X (an ``nn.Linear`` on the last axis, i.e. I ⊗ W)
and V on every column (transpose, ``nn.Linear``, transpose back, i.e. V ⊗ I). This is a Monarch matrix
P L Pᵀ R whose diagonal blocks are shared, R = I ⊗ W and L = I ⊗ V (Hayase & Karakida §3.3, eq. 12; with
the paper's column-major vec the roles of V and W swap): O(n^{3/2}) multiply-adds and 2b² parameters for
n = b², against 2b³ for a Monarch matrix. The transposes are the package's
:class:`~.permutation.Transpose` (J_c).
"""
import math
from typing import Sequence, Tuple, Union

import torch
import torch.nn as nn

from ..validation import int_pair
from .permutation import Transpose

__all__ = ['KroneckerLinear']


class KroneckerLinear(nn.Module):
    """x ↦ (V ⊗ W) x: (B, p_in·q_in) → (B, p_out·q_out), no bias.

    ``v.weight`` is V (p_out, p_in), ``w.weight`` is W (q_out, q_in).
    """

    def __init__(
            self,
            in_shape: Union[int, Sequence[int]],
            out_shape: Union[int, Sequence[int], None] = None,
            device=None,
            dtype=None,
    ) -> None:
        """
        Args:
            in_shape: (p_in, q_in): the input read as a p_in × q_in matrix (an int b: b × b).
            out_shape: (p_out, q_out); default `in_shape` (square V and W).
        """
        super().__init__()
        self.in_shape: Tuple[int, int] = int_pair('in_shape', in_shape)
        self.out_shape: Tuple[int, int] = self.in_shape if out_shape is None else int_pair('out_shape', out_shape)
        self.in_features = self.in_shape[0] * self.in_shape[1]
        self.out_features = self.out_shape[0] * self.out_shape[1]
        dd = {'device': device, 'dtype': dtype}
        self.w = nn.Linear(self.in_shape[1], self.out_shape[1], bias=False, **dd)   # I ⊗ W, on rows
        self.perm = Transpose()
        self.v = nn.Linear(self.in_shape[0], self.out_shape[0], bias=False, **dd)   # V ⊗ I, on columns
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """V, W ~ N(0, 1/fan_in): V ⊗ W has the variance 1/n of a dense layer, as a Monarch matrix does."""
        for fc in (self.w, self.v):
            nn.init.normal_(fc.weight, std=1. / math.sqrt(fc.in_features))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch = x.shape[0]
        y = self.w(x.reshape(batch, self.in_shape[0], self.in_shape[1]))  # X Wᵀ: (B, p_in, q_out)
        y = self.v(self.perm(y))                                            # (V X Wᵀ)ᵀ: (B, q_out, p_out)
        return self.perm(y).reshape(batch, self.out_features)              # vec_r(V X Wᵀ)

    def dense(self) -> torch.Tensor:
        """The (p_out·q_out, p_in·q_in) matrix V ⊗ W (for analysis; O(n²) memory)."""
        return torch.kron(self.v.weight, self.w.weight)

    def extra_repr(self) -> str:
        return f'in_shape={self.in_shape}, out_shape={self.out_shape}'
