"""A permutation kind defined outside the package, as a structured permutation would be (tests/test_permutation_kinds.py
plugs it into PERMUTATION_KINDS by import path): 'reverse', whose J1 and J2 reverse the order of a layer's m features
(tile by tile in an expanded model). It is fixed, so it needs no seed; its digest in the state dict tells it apart
from the other kinds."""
from typing import Optional, Tuple

import torch
import torch.nn as nn

from timm_pkmixer.layers.permutation import FixedPermutation, PermutationSpec


class Reversal(FixedPermutation):
    """J·x = x reversed: output position i holds input position m - 1 - i (of its tile when tiled)."""

    def permutation(self, seed: Optional[int] = None) -> torch.Tensor:
        tiles = 1 if self.tiling is None else self.tiling.tiles
        reverse = torch.arange(self.num // tiles - 1, -1, -1)
        return reverse if self.tiling is None else self.tiling.lift(reverse)


class ReversePermutations:
    """J1, J2 of one PK layer, and their tensors for the size bound (those of a FixedPermutation)."""

    @staticmethod
    def layers(spec: PermutationSpec) -> Tuple[nn.Module, nn.Module]:
        tiling_in, tiling_out = spec.tilings()
        return (Reversal(spec.num_in, spec.rows_in, spec.seed, f'{spec.key}.perm_in', spec.device, tiling_in),
                Reversal(spec.num_out, (spec.num_tokens_out, spec.dim), spec.seed, f'{spec.key}.perm_out',
                         spec.device, tiling_out))

    planned_tensors = staticmethod(FixedPermutation.planned_tensors)
