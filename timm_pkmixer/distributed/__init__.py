"""Data-parallel replicas of models with frozen random structure (`replicas`), and the two opt-in modules that
timm's train.py loads with ``--device-modules``: `replica_check` (the check at every DDP wrap) and `cpu_ddp` (DDP
on CPUs with gloo). Importing this package changes nothing in torch; importing either opt-in module does."""
from .replicas import (
    CHECK_ENV,
    DEFAULT_TIMEOUT_S,
    ReplicaCheckMissingError,
    ReplicaCheckTimeoutError,
    ReplicaMismatchError,
    check_replicas,
    install_cpu_ddp,
    install_ddp_replica_check,
    structure_fingerprint,
)

__all__ = ['CHECK_ENV', 'DEFAULT_TIMEOUT_S', 'ReplicaMismatchError', 'ReplicaCheckTimeoutError',
           'ReplicaCheckMissingError', 'structure_fingerprint', 'check_replicas', 'install_ddp_replica_check',
           'install_cpu_ddp']
