"""Static sparse-weight linear layer of the SW-MLP baseline (App. A.2.5, §4.3).

The mask M is Bernoulli(p), derived from a counter-based hash of (mask_seed, layer key) (identical on every
machine) and frozen. Like a permutation it is a non-persistent buffer: the state dict holds one int64
digest of it (``mask_digest``), so a checkpoint is the size of the dense weights alone, and a checkpoint made
with another ``mask_seed`` is refused (:class:`~.structure.DerivedStructure`).

The layer computes (M ⊙ W) x + b, so masked entries of the effective weight are exactly zero whatever an
optimizer does to W; W is also zero there from the start, so gradients, momentum and weight decay keep it at
0. W ~ N(0, 1/(p · fan_in)) on the kept entries: M ⊙ W has the variance 1/fan_in of a dense layer, the same
as the paper's scaled mask (value 1/√p) with A ~ N(0, 1/m).
"""
import math
from typing import List, Optional

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from ..sizes import PlannedTensor, Size, linear_tensors
from .structure import DerivedStructure, hashed_uniform_keys, structure_digest

__all__ = ['MaskedLinear', 'bernoulli_mask', 'mask_digest']


def bernoulli_mask(shape: tuple, density: float, seed: int, key: str) -> np.ndarray:
    """Boolean mask with each entry True with probability `density`, fixed by (seed, key)."""
    if not 0. < density <= 1.:
        raise ValueError(f'density p must be in (0, 1], got {density}')
    num = int(np.prod(shape))
    if density == 1.:
        return np.ones(shape, dtype=bool)
    threshold = np.uint64(min(int(density * 2.0 ** 64), 2 ** 64 - 1))
    return (hashed_uniform_keys(num, seed, key) < threshold).reshape(shape)


def mask_digest(mask: np.ndarray) -> int:
    """64-bit fingerprint of a boolean mask (of its shape and packed bits), as a signed int64."""
    header = np.asarray(mask.shape, dtype='<i8')
    return structure_digest(np.concatenate([header.view(np.uint8), np.packbits(mask.astype(bool).reshape(-1))]))


class MaskedLinear(DerivedStructure, nn.Linear):
    """y = x (M ⊙ W)ᵀ + b with a frozen Bernoulli(p) mask M derived from (seed, key)."""
    what = 'mask'
    seed_arg = 'mask_seed'
    digest_name = 'mask_digest'
    explicit_name = 'mask'
    digest_noun = 'masks'

    def __init__(
            self,
            in_features: int,
            out_features: int,
            density: float,
            seed: int = 0,
            key: str = '',
            bias: bool = True,
            device=None,
            dtype=None,
    ) -> None:
        if not 0. < density <= 1.:
            raise ValueError(f'density p must be in (0, 1], got {density}')
        self.density = float(density)
        nn.Linear.__init__(self, in_features, out_features, bias=bias, device=device, dtype=dtype)
        device = self._init_structure(seed, key, self.weight.device)
        self.register_buffer('mask', torch.empty((out_features, in_features), dtype=torch.bool, device=device),
                             persistent=False)
        self.reset_parameters()

    @staticmethod
    def planned_tensors(in_features: Size, out_features: Size, itemsize: int, name: str, args: str, count: int = 1,
                        bias: bool = True) -> List[PlannedTensor]:
        """What `count` such layers allocate, for the size bound: weight and bias, the bool mask of the weight's
        shape and the int64 digest."""
        return [*linear_tensors(name, in_features, out_features, itemsize, args, count, bias),
                PlannedTensor(f'{name}.mask', (out_features, in_features), 1, args, count),
                PlannedTensor(f'{name}.mask_digest', (), 8, args, count)]

    def mask_array(self, seed: Optional[int] = None) -> np.ndarray:
        """The mask for `seed` (default: this layer's), derived on the CPU."""
        return bernoulli_mask(tuple(self.weight.shape), self.density, self.seed if seed is None else seed, self.key)

    def _derive_digest(self, seed: int) -> int:
        return mask_digest(self.mask_array(seed))

    def _buffers_on_meta(self) -> bool:
        return self.mask.is_meta

    def _move_derived_buffers(self, device: torch.device) -> None:
        self.mask = torch.empty_like(self.mask, device=device)

    def _compute_buffers(self) -> None:
        mask = self.mask_array()
        self._digest = mask_digest(mask)
        self.mask.copy_(torch.from_numpy(mask))

    def _check_explicit(self, value: torch.Tensor, key: str) -> Optional[str]:
        if tuple(value.shape) != tuple(self.weight.shape):
            return f'{key}: mask shape {tuple(value.shape)} != weight shape {tuple(self.weight.shape)}'
        if mask_digest(value.detach().cpu().bool().numpy()) != self.expected_digest():
            return f'{key} does not match this model\'s mask ({self.seed_arg}={self.seed}, p={self.density:g})'
        return None

    def reset_parameters(self) -> None:
        """Kept weights N(0, 1/(p·fan_in)), masked weights 0, zero bias; recomputes the mask first."""
        if not hasattr(self, 'mask'):
            return  # nn.Linear.__init__ calls this before the mask exists
        self.init_non_persistent_buffers()
        if self.weight.is_meta:
            return
        with torch.no_grad():
            self.weight.normal_(0., 1. / math.sqrt(self.density * self.in_features))
            self.weight.mul_(self.mask)
            if self.bias is not None:
                self.bias.zero_()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not torch.jit.is_scripting():
            self.check_materialized()
        return F.linear(x, self.weight * self.mask, self.bias)

    def extra_repr(self) -> str:
        return f'{super().extra_repr()}, density={self.density}, seed={self.seed}'
