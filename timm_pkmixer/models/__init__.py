"""Registers the PK-family models in timm's model registry."""
from .pk_mixer import PKMixer, PKMixerBlock
from .sw_mlp import SparseBlock, SwMlp
