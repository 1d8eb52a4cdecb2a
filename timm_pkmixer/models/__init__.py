"""Registers the PK-family models in timm's model registry."""
from ._checkpoint import check_state_dict, checkpoint_filter_fn
from ._common import ModelArgs
from .pk_mixer import MixerArgs, PKMixer, PKMixerBlock
from .shallow import ShallowArgs, ShallowBlock, ShallowMlp
from .sw_mlp import SparseBlock, SwMlp, SwMlpArgs
