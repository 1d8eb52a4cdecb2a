"""Static sparse-weight linear layer of the SW-MLP baseline (App. A.2.5, §4.3).

The mask M is Bernoulli(p), drawn once at construction from a counter-based hash of
(seed, key) (identical on every machine) and frozen. The layer computes (M ⊙ W) x + b, so
masked entries of the effective weight are exactly zero whatever an optimizer does to W;
W is also zero there from the start, so gradients, momentum and weight decay keep it at 0.
W ~ N(0, 1/(p · fan_in)) on the kept entries: M ⊙ W has the variance 1/fan_in of a dense
layer, the same as the paper's scaled mask (value 1/√p) with A ~ N(0, 1/m).
"""
import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from .permutation import hashed_uniform_keys

__all__ = ['MaskedLinear', 'bernoulli_mask']


def bernoulli_mask(shape: tuple, density: float, seed: int, key: str) -> np.ndarray:
    """Boolean mask with each entry True with probability `density`, fixed by (seed, key)."""
    if not 0. < density <= 1.:
        raise ValueError(f'density p must be in (0, 1], got {density}')
    num = int(np.prod(shape))
    threshold = np.uint64(min(int(density * 2.0 ** 64), 2 ** 64 - 1))
    keys = hashed_uniform_keys(num, seed, key)
    return (keys < threshold).reshape(shape) if density < 1. else np.ones(shape, dtype=bool)


class MaskedLinear(nn.Linear):
    """y = x (M ⊙ W)ᵀ + b with a frozen Bernoulli(p) mask M (a persistent bool buffer)."""

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
        self.seed = int(seed)
        self.key = key
        super().__init__(in_features, out_features, bias=bias, device=device, dtype=dtype)
        device = self.weight.device
        mask = torch.empty((out_features, in_features), dtype=torch.bool, device=device)
        if device.type != 'meta':
            mask.copy_(torch.from_numpy(bernoulli_mask((out_features, in_features), density, seed, key)))
        self.register_buffer('mask', mask)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        if not hasattr(self, 'mask'):
            return  # nn.Linear.__init__ calls this before the mask exists
        with torch.no_grad():
            self.weight.normal_(0., 1. / math.sqrt(self.density * self.in_features))
            self.weight.mul_(self.mask)
            if self.bias is not None:
                self.bias.zero_()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(x, self.weight * self.mask, self.bias)

    def extra_repr(self) -> str:
        return f'{super().extra_repr()}, density={self.density}, seed={self.seed}'
