"""Layers of the PK family: fixed permutations, the PK layer, the first-block skip layer, masked linear."""
from .masked_linear import MaskedLinear, bernoulli_mask
from .permutation import FixedPermutation, Transpose, check_permutation, derive_permutation, permutation_digest
from .pk_layer import PKMlp, make_pk_mlp
from .skip_layer import SkipLayer
