"""``--device-modules timm_pkmixer.replica_check``: the stable name every recipe uses for
:mod:`timm_pkmixer.distributed.replica_check` (importing it installs the replica check at every DDP wrap)."""
from .distributed import replica_check  # noqa: F401
