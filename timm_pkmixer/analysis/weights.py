"""Effective weights of real layers as dense matrices (eq. 19, Fig. S.9) — for study and figures only.

A model never builds these m×m matrices; here they are recovered from the layer's own code by pushing the
m basis vectors through it, so what is shown is what the model computes.
"""
from typing import Dict, Tuple

import numpy as np
import timm
import torch
import torch.nn.functional as F

from ..errors import InvalidArgumentError
from ..layers import PKMlp
from ..validation import boolean

__all__ = ['paper_vec_order', 'pk_effective_weight', 'fig_s9_weights']


def paper_vec_order(num_tokens: int, dim: int) -> torch.Tensor:
    """Index map from the paper's column-major vec(X) (entry c·S + s) to this package's row-major layout
    (entry s·C + c): ``ours[paper_vec_order(S, C)]`` is vec(X)."""
    return torch.arange(num_tokens * dim).reshape(num_tokens, dim).t().reshape(-1)


@torch.no_grad()
def pk_effective_weight(
        layer: PKMlp,
        in_shape: Tuple[int, int],
        out_shape: Tuple[int, int],
        paper_order: bool = True,
) -> torch.Tensor:
    """W_eff = J2 (I ⊗ W) J1 of a one-FC (S-Mixer) PK layer as a dense (m_out, m_in) matrix (eq. 19).

    The layer computes φ(W_eff vec(X) + b_eff). Column j is the image of the j-th basis vector under the
    layer's own J1, fc1 weight (no bias, no φ) and J2.

    Args:
        layer: A PK layer with one FC (``block_type='fc'``).
        in_shape: (S_in, C) of the layer's input.
        out_shape: (S_out, C) of its output.
        paper_order: Index rows and columns by the paper's column-major vec (so a normal token-mixing layer
            is I_C ⊗ W); False keeps this package's row-major layout.
    """
    paper_order = boolean('paper_order', paper_order)
    if layer.fc2 is not None:
        raise InvalidArgumentError('pk_effective_weight needs a one-FC PK layer (S-Mixer, block_type="fc"); this '
                                   'layer is a two-layer MLP, whose effective map is not one matrix')
    m_in = in_shape[0] * in_shape[1]
    weight = layer.fc1.weight
    basis = torch.eye(m_in, dtype=weight.dtype, device=weight.device).reshape(m_in, *in_shape)
    out = layer.perm_out(F.linear(layer.perm_in(basis), weight))  # (m_in, S_out, C)
    if tuple(out.shape[1:]) != tuple(out_shape):
        raise InvalidArgumentError(f'out_shape {tuple(out_shape)} does not match the layer output '
                                   f'{tuple(out.shape[1:])}')
    w_eff = out.reshape(m_in, -1).t()
    if paper_order:
        w_eff = w_eff[paper_vec_order(*out_shape)][:, paper_vec_order(*in_shape)]
    return w_eff


@torch.no_grad()
def fig_s9_weights(size: int = 8, seed: int = 0) -> Dict[str, np.ndarray]:
    """The three weights of Fig. S.9 at S = C = `size` (m = size², p = 1/size), from the registered models:

    * ``'sw_mlp'``: M ⊙ A of block 0 of an SW-MLP of width m and density p (`sw_mlp_o18_32`),
    * ``'mixer'``: I_C ⊗ W, the token mixing of block 1 of an S-Mixer (`s_mixer_s64c64_32`),
    * ``'rp_mixer'``: J2 (I_C ⊗ W) J1, the same layer of the RP S-Mixer (`s_mixer_rp_s64c64_32`),

    each an (m, m) float array in the paper's vec order, at initialisation (torch seed, perm and mask seed `seed`).
    """
    if isinstance(size, bool) or not isinstance(size, int) or size < 2:
        raise InvalidArgumentError(f'size must be an integer >= 2, got {size!r}')
    torch.manual_seed(seed)
    sw = timm.create_model('sw_mlp_o18_32', width=size * size, density=1 / size, num_blocks=1, mask_seed=seed)
    fc = sw.blocks[0].fc1
    out = {'sw_mlp': (fc.weight * fc.mask).numpy()}
    shape = (size, size)
    for key, name in (('mixer', 's_mixer_s64c64_32'), ('rp_mixer', 's_mixer_rp_s64c64_32')):
        torch.manual_seed(seed)
        model = timm.create_model(name, num_tokens=size, embed_dim=size, num_blocks=2, perm_seed=seed)
        out[key] = pk_effective_weight(model.blocks[1].mlp_tokens, shape, shape).numpy()
    return out
