"""Keeping data-parallel replicas of a model with frozen random structure identical.

An RP Mixer's permutations and an SW-MLP's masks are derived from ``perm_seed`` / ``mask_seed``, not learned.
Every rank of a data-parallel run must hold the same ones: DDP averages gradients across ranks, which is only
meaningful when every rank computes the same function, and a rank built with another seed would otherwise
train a different function without any error.

The check runs where the ranks already meet: when a model is wrapped in ``DistributedDataParallel`` (what
timm's train.py does, on every rank, after ``--device-modules timm_pkmixer`` imported this package). The
ranks of the DDP's process group exchange a :func:`structure_fingerprint` of the model (one all-gather of
a short string, beside DDP's own collectives at construction) and refuse to wrap it if they disagree.
Creating a model does no distributed communication, so a model built on one rank alone (export, push,
evaluation) returns at once. Other wrappers (FSDP2's ``fully_shard``) do not go through this hook: call
:func:`check_replicas` on every rank after building the model. ``TIMM_PKMIXER_CHECK_REPLICAS=0`` turns the
check off.
"""
import functools
import hashlib
import inspect
import os
from collections import defaultdict
from typing import Any, Optional

import torch.distributed as dist
from torch import nn

from .errors import UserInputError
from .layers.structure import DerivedStructure

__all__ = ['CHECK_ENV', 'ReplicaMismatchError', 'structure_fingerprint', 'check_replicas',
           'install_ddp_replica_check']

CHECK_ENV = 'TIMM_PKMIXER_CHECK_REPLICAS'


class ReplicaMismatchError(UserInputError, RuntimeError):
    """Ranks of a data-parallel run hold different permutations or masks."""


def structure_fingerprint(model: nn.Module) -> Optional[str]:
    """A hex digest of the model's frozen random structure (permutations, masks); None if it has none.

    Computed from the seeds and layer keys, so it needs no buffer values (works on the meta device).
    """
    items = [m.fingerprint_item(name) for name, m in model.named_modules() if isinstance(m, DerivedStructure)]
    if not items:
        return None
    return hashlib.blake2b('\n'.join(items).encode(), digest_size=16).hexdigest()


def _enabled() -> bool:
    return os.environ.get(CHECK_ENV, '1').strip() != '0'


def check_replicas(model: nn.Module, group: Optional[Any] = None, name: str = 'model') -> None:
    """Compare the model's structure fingerprint across the ranks of `group` (default: the default group).

    A collective: every rank of the group must call it. Nothing happens without an initialised process
    group of more than one rank, for a model without random structure, or with ``TIMM_PKMIXER_CHECK_REPLICAS=0``.
    Raises :class:`ReplicaMismatchError` naming the ranks that disagree.
    """
    fingerprint = structure_fingerprint(model)
    if (fingerprint is None or not _enabled() or not dist.is_available() or not dist.is_initialized()
            or dist.get_world_size(group) <= 1):
        return
    prints = [None] * dist.get_world_size(group)
    dist.all_gather_object(prints, fingerprint, group=group)
    if len(set(prints)) > 1:
        groups = defaultdict(list)
        for rank, p in enumerate(prints):
            groups[p].append(rank)
        detail = '; '.join(f'ranks {ranks}: {p}' for p, ranks in groups.items())
        raise ReplicaMismatchError(
            f'{name}: ranks hold different permutations/masks (different perm_seed or mask_seed?), so '
            f'data-parallel training would average gradients of different functions. Structure fingerprints: '
            f'{detail}. Use the same --model-kwargs on every rank.')


def install_ddp_replica_check() -> None:
    """Make ``DistributedDataParallel(module, …)`` run :func:`check_replicas` on `module` first (idempotent;
    every rank constructs the DDP wrapper together, so the collective cannot hang)."""
    from torch.nn.parallel import DistributedDataParallel
    original = DistributedDataParallel.__init__
    if getattr(original, '_timm_pkmixer_replica_check', False):
        return
    signature = inspect.signature(original)

    @functools.wraps(original)
    def __init__(self, module: nn.Module, *args: Any, **kwargs: Any) -> None:
        group = signature.bind_partial(self, module, *args, **kwargs).arguments.get('process_group')
        check_replicas(module, group=group, name=type(module).__name__)
        original(self, module, *args, **kwargs)

    __init__._timm_pkmixer_replica_check = True
    DistributedDataParallel.__init__ = __init__
