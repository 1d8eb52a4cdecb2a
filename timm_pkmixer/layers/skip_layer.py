"""SkipLayer of the first token-mixing block (App. A.2.4): SkipLayer(X) = LN(W̃ X), W̃ of S × S0."""
from typing import Callable

import torch
import torch.nn as nn

__all__ = ['SkipLayer']


class SkipLayer(nn.Module):
    """Map S0 tokens to S tokens on the residual path: (B, S0, C) → (B, S, C)."""

    def __init__(
            self,
            num_tokens_in: int,
            num_tokens_out: int,
            dim: int,
            norm_layer: Callable[..., nn.Module] = nn.LayerNorm,
            device=None,
            dtype=None,
    ) -> None:
        super().__init__()
        dd = {'device': device, 'dtype': dtype}
        self.proj = nn.Linear(num_tokens_in, num_tokens_out, bias=False, **dd)
        self.norm = norm_layer(dim, **dd)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(self.proj(x.transpose(1, 2)).transpose(1, 2))
