"""Layers of the PK family: the PK layer, its permutations and how they are gathered, the first-block skip
layer, and the SW-MLP's masked linear layer."""
from .gather import GATHER_TABLE, permute, use_gather_backend
from .masked_linear import MaskedLinear, bernoulli_mask
from .permutation import (
    FixedPermutation,
    IdentityPermutation,
    Transpose,
    check_permutation,
    derive_permutation,
    permutation_digest,
)
from .pk_layer import PERMUTATIONS, PKMlp, make_pk_mlp
from .skip_layer import SkipLayer
from .structure import DerivedStructure
