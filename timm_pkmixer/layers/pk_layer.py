"""The PK layer (Hayase & Karakida 2024, Def. 5.1): PK-Layer_W(X; J1, J2) = φ[J2 (I_{n1} ⊗ W) J1 vec(X)].

`PKMlp` is the one implementation used by every Mixer in this package. It computes

    x ──J1──▶ (B, n1, n2_in) ──fc1, φ [, fc2]──▶ (B, n1, n2_out) ──J2 [+ residual]──▶ (B, S_out, C)

i.e. the rearrangement J1, the same small matrix W applied to each of the n1 rows (that is I_{n1} ⊗ W),
the activation, and the rearrangement J2. No m×m matrix is built.

* Token mixing of a normal Mixer: J1 = J_c (transpose to (B, C, S)), J2 = J_cᵀ, W is S×S.
* Channel mixing of a normal Mixer: J1 = J2 = I, W is C×C.
* Random-Permuted (RP) Mixer: J1, J2 are fixed uniform random permutations of the m = S·C features
  (`FixedPermutation`); the block shapes stay those of the normal Mixer.

The kind of J1, J2 is a name (``permutation='random'``) that ``permutation_kinds.PERMUTATION_KINDS`` maps to what
builds them and to whether J2 adds the skip connection itself.

With `hidden_features` the layer is the MLP-Mixer's two-layer MLP (W1, φ, W2, eq. S.2); without it, the
S-Mixer's single FC with activation (eq. S.3). The feature layout is row-major over (S, C): flat index
s·C + c, i.e. vec(Xᵀ); the paper's column-major vec differs by the fixed commutation J_c, which uniform
random J1, J2 absorb (App. B.2).
"""
from typing import Optional, Type

import torch
import torch.nn as nn

from ..permutation_kinds import permutation_kind
from .permutation import PermutationSpec

__all__ = ['PKMlp', 'make_pk_mlp']


class PKMlp(nn.Module):
    """J2 · (I_{n1} ⊗ f) · J1 with f = fc2∘φ∘fc1 (MLP-Mixer) or φ∘fc1 (S-Mixer).

    Parameter names match timm's ``Mlp`` (``fc1``, ``fc2``), so timm Mixer weights load as they are.
    """

    def __init__(
            self,
            in_features: int,
            out_features: int,
            hidden_features: Optional[int],
            perm_in: nn.Module,
            perm_out: nn.Module,
            permutation: str,
            act_layer: Type[nn.Module] = nn.GELU,
            drop: float = 0.,
            bias: bool = True,
            device=None,
            dtype=None,
    ) -> None:
        """
        Args:
            in_features: Row width n2 seen by W (S for token mixing, C for channel mixing).
            out_features: Output row width (differs from `in_features` only in a first block S0 → S).
            hidden_features: Hidden width of the two-layer MLP; None for one FC (S-Mixer).
            perm_in: J1, mapping (B, S, C) to (B, n1, in_features).
            perm_out: J2, mapping (B, n1, out_features) to (B, S_out, C), with an optional residual added.
            permutation: The kind of J1, J2, a key of ``PERMUTATION_KINDS`` ('normal', 'random'); whether J2 adds
                the residual itself is the kind's (``fused``).
            act_layer: Activation φ.
            drop: Dropout after the activation and after fc2.
            bias: Use biases in the FCs.
        """
        super().__init__()
        dd = {'device': device, 'dtype': dtype}
        self.perm_in = perm_in
        self.fc1 = nn.Linear(in_features, hidden_features or out_features, bias=bias, **dd)
        self.act = act_layer()
        self.drop1 = nn.Dropout(drop)
        self.fc2 = nn.Linear(hidden_features, out_features, bias=bias, **dd) if hidden_features else None
        self.drop2 = nn.Dropout(drop) if hidden_features else nn.Identity()
        self.perm_out = perm_out
        self.permutation = permutation
        self.fused_residual = permutation_kind(permutation).fused

    def forward(self, x: torch.Tensor, residual: Optional[torch.Tensor] = None) -> torch.Tensor:
        """(B, S_in, C) → (B, S_out, C); with `residual`, residual + the layer's output."""
        x = self.perm_in(x)                    # J1
        x = self.drop1(self.act(self.fc1(x)))  # φ((I ⊗ W1) ·)
        if self.fc2 is not None:
            x = self.drop2(self.fc2(x))        # (I ⊗ W2) ·
        if self.fused_residual:
            return self.perm_out(x, residual)  # J2 [+ residual]
        x = self.perm_out(x)                   # J2
        return x if residual is None else residual + x


def make_pk_mlp(
        mixing: str,
        num_tokens_in: int,
        num_tokens_out: int,
        dim: int,
        hidden_features: Optional[int],
        permutation: str,
        seed: int = 0,
        key: str = '',
        act_layer: Type[nn.Module] = nn.GELU,
        drop: float = 0.,
        tiles: int = 1,
        device=None,
        dtype=None,
) -> PKMlp:
    """Build the token- or channel-mixing PK layer of a Mixer block, its J1, J2 of kind `permutation`.

    Args:
        mixing: 'token' (W acts on the S axis) or 'channel' (W acts on the C axis).
        num_tokens_in: S_in of the input (B, S_in, C).
        num_tokens_out: S_out of the output; must equal S_in for channel mixing.
        dim: Channels C.
        hidden_features: Hidden width of the two-layer MLP, None for one FC.
        permutation: A key of ``PERMUTATION_KINDS``: 'normal' (J_c / identity, no gather), 'random' (fixed random
            J1, J2), …
        seed: Permutation seed (kinds derived from a seed only).
        key: Name of the layer in the model; J1 and J2 of every layer are independent.
        tiles: The tokens are `tiles` groups (image tiles, tile-major) of a model expanded to a larger image: J1, J2
            act on each tile alone (random ones: the per-tile ones lifted tile by tile).
    """
    spec = PermutationSpec(mixing, num_tokens_in, num_tokens_out, dim, seed, key, tiles, device)
    perm_in, perm_out = permutation_kind(permutation).load().layers(spec)
    return PKMlp(
        spec.rows_in[1], spec.rows_out[1], hidden_features, perm_in, perm_out, permutation,
        act_layer=act_layer, drop=drop, device=device, dtype=dtype,
    )
