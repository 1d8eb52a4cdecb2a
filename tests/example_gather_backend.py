"""A gather backend defined outside the package, as a new kernel would be (tests/test_structure.py plugs it into
GATHER_TABLE by import path): x[:, index] as a fresh (B, *out_shape) tensor, backward by the inverse."""
from typing import Sequence

import torch

CALLS = []


class _TakeGather(torch.autograd.Function):
    @staticmethod
    def forward(x, index, inverse, out_shape):
        flat = x.reshape(x.shape[0], index.shape[0])  # a backend gets x in its layer's shape (B, …)
        return torch.take_along_dim(flat, index.long()[None], dim=1).reshape(x.shape[0], *out_shape)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(inputs[1], inputs[2])
        ctx.in_shape = inputs[0].shape

    @staticmethod
    def backward(ctx, grad):
        index, inverse = ctx.saved_tensors
        return grad.reshape(grad.shape[0], -1).index_select(1, inverse).reshape(ctx.in_shape), None, None, None


def take_gather(x: torch.Tensor, index: torch.Tensor, inverse: torch.Tensor, out_shape: Sequence[int]) -> torch.Tensor:
    CALLS.append(tuple(x.shape))
    return _TakeGather.apply(x, index, inverse, tuple(out_shape))
