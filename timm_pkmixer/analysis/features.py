"""The hidden features of Fig. 2: each mixing block's branch, just before its skip connection (C.1).

* PK-family Mixers (MLP-Mixer, RP Mixer, S-Mixer, RP S-Mixer): two features per block, the token-mixing and
  the channel-mixing branch. A PK layer adds the skip connection inside J2 (``perm_out(x, residual)``), so the
  branch is taken as J2's input — the layer's own (I ⊗ W) output — by a forward pre-hook on ``perm_out``, and
  J2 alone (no residual) is applied to it: the (B, S, C) tensor the block adds to its skip path.
* SW-MLP: one feature per sparse block, φ((M ⊙ W) LN(x)) or φ((M2 ⊙ W2) φ((M1 ⊙ W1) LN(x))), the output of the
  block's last activation (a forward hook), before ``x +``.

Hooks only observe: the model computes what it computes without them, and they are removed on exit.
"""
from contextlib import contextmanager
from typing import Dict, Iterator, List, Tuple

import torch
import torch.nn as nn

from ..errors import InvalidArgumentError
from ..layers import PKMlp
from ..models.sw_mlp import SparseBlock

__all__ = ['mixing_branches', 'capture_branches']


def mixing_branches(model: nn.Module) -> List[Tuple[str, nn.Module]]:
    """(name, module) of every mixing branch of `model`, in order from the input: the PK layers of a Mixer
    ('blocks.0.mlp_tokens', 'blocks.0.mlp_channels', …) or the sparse blocks of an SW-MLP ('blocks.0', …)."""
    found = [(name, module) for name, module in model.named_modules() if isinstance(module, (PKMlp, SparseBlock))]
    if not found:
        raise InvalidArgumentError(f'model ({type(model).__name__}) has no mixing blocks: CKA features are taken '
                                   f'from PK-family Mixers and SW-MLPs')
    return found


def _sparse_branch_end(block: SparseBlock) -> nn.Module:
    """The module whose output is the branch of an SW-MLP block (its last activation)."""
    return block.act2 if block.fc2 is not None else block.act1


@contextmanager
def capture_branches(model: nn.Module) -> Iterator[Dict[str, torch.Tensor]]:
    """Within the context, every forward of `model` stores each mixing branch (detached) in the yielded dict,
    under the names of `mixing_branches` (ordered from the input): (B, S_out, C) for a PK layer, (B, m) for an
    SW-MLP block."""
    store: Dict[str, torch.Tensor] = {}
    handles = []

    def pk_hook(name: str):
        def hook(module: nn.Module, args: tuple) -> None:
            store[name] = module.forward(args[0]).detach()  # J2 alone: no residual
        return hook

    def sparse_hook(name: str):
        def hook(module: nn.Module, args: tuple, output: torch.Tensor) -> None:
            store[name] = output.detach()
        return hook

    try:
        for name, module in mixing_branches(model):
            if isinstance(module, PKMlp):
                handles.append(module.perm_out.register_forward_pre_hook(pk_hook(name)))
            else:
                handles.append(_sparse_branch_end(module).register_forward_hook(sparse_hook(name)))
        yield store
    finally:
        for handle in handles:
            handle.remove()
