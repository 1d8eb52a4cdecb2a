"""Layers of the PK family: the PK layer, its permutations and how they are gathered, the first-block skip
layer, the SW-MLP's masked linear layer, and the Monarch / Kronecker layers of the shallow MLPs (Fig. 2(d))."""
from .gather import GATHER_TABLE, permute, use_gather_backend
from .kron_linear import KroneckerLinear
from .masked_linear import MaskedLinear, bernoulli_mask
from .monarch import BlockDiagonalLinear, MonarchLinear, monarch_block_size
from .permutation import (
    FixedPermutation,
    IdentityPermutation,
    PermutationSpec,
    Transpose,
    check_permutation,
    derive_permutation,
    permutation_digest,
)
from .pk_layer import PKMlp, make_pk_mlp
from .skip_layer import SkipLayer
from .structure import DerivedStructure
