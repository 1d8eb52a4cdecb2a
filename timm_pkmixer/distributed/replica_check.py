"""The replica check for timm's train.py: ``--device-modules timm_pkmixer.replica_check`` (every recipe has it).

Importing this module registers the models (it imports :mod:`timm_pkmixer`) and makes every
``DistributedDataParallel(model, …)`` compare the model's permutation / mask seeds across ranks first
(:func:`timm_pkmixer.distributed.install_ddp_replica_check`). ``import timm`` and ``import timm_pkmixer`` alone
change nothing in torch.
"""
from .replicas import install_ddp_replica_check

install_ddp_replica_check()
