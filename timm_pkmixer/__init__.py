"""timm-pkmixer: the PK family of Hayase & Karakida, "Understanding MLP-Mixer as a Wide and Sparse MLP"
(ICML 2024), as timm models. Importing this package registers ``pk_mixer_*``, ``rp_mixer_*``,
``s_mixer_*`` and ``sw_mlp_*`` in timm's model registry (after ``pip install`` this happens
automatically whenever timm is imported). It adds registry entries and changes nothing in torch or timm: the
data-parallel replica check and the CPU DDP fix are opt-in (``timm_pkmixer.replica_check``,
``timm_pkmixer.cpu_ddp``)."""
__version__ = '0.2.0'

from .description import ModelDescription, describe_mixer, describe_sw_mlp
from .distributed import check_replicas, install_cpu_ddp, install_ddp_replica_check
from .errors import (
    ArgumentTypeError,
    CheckpointMismatchError,
    InvalidArgumentError,
    NotMaterializedError,
    UserInputError,
)
from .expand import expand_resolution
from .layers import FixedPermutation, MaskedLinear, PKMlp, SkipLayer, make_pk_mlp
from .models import PKMixer, PKMixerBlock, SparseBlock, SwMlp, check_state_dict

