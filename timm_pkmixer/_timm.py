"""The private timm names this package needs, imported here and nowhere else, each with why.

Everything else comes from timm's public API (``timm.models``, ``timm.layers``, ``timm.data``). When timm
moves or renames one of these, this file is the one to mend (importing the package then fails here, naming it).
"""
# The names timm's dataset factory reads an image folder's split under ('validation' from val/, eval/, …), so that
# `pkmixer analyze cka` checks a split the way timm resolves it: module-private in timm.data.dataset_factory.
from timm.data.dataset_factory import _EVAL_SYNONYM as EVAL_SPLIT_NAMES
from timm.data.dataset_factory import _TRAIN_SYNONYM as TRAIN_SPLIT_NAMES

# The block indices of `forward_intermediates` / `prune_intermediate_layers` exactly as timm's own models
# resolve them (negative indices, an int for the last n blocks): timm's feature API contract, no public export.
from timm.models._features import feature_take_indices

# The Hub model card text in timm's own layout (YAML header, model details, usage, citation), as timm's
# push_to_hf_hub writes it: timm exports no public card renderer.
from timm.models._hub import generate_readme

# timm's MLP-Mixer weight init (xavier uniform, tiny MLP biases), so that weight_init='timm' is exactly timm's
# Mixer initialisation: the function is module-private in timm.models.mlp_mixer.
from timm.models.mlp_mixer import _init_weights as mixer_init_weights

__all__ = ['feature_take_indices', 'generate_readme', 'mixer_init_weights', 'EVAL_SPLIT_NAMES', 'TRAIN_SPLIT_NAMES']
