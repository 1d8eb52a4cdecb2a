"""``--device-modules timm_pkmixer.cpu_ddp``: the stable name for :mod:`timm_pkmixer.distributed.cpu_ddp`
(importing it lets DDP wrap CPU modules, for timm's train.py under torchrun on CPUs)."""
from .distributed import cpu_ddp  # noqa: F401
