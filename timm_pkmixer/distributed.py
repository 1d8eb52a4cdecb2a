"""Keeping data-parallel replicas of a model with frozen random structure identical.

An RP Mixer's permutations and an SW-MLP's masks are drawn from ``perm_seed`` / ``mask_seed``, not learned.
Every rank of a data-parallel run must hold the same ones: DDP averages gradients across ranks, which is only
meaningful when every rank computes the same function. DDP broadcasts rank 0's buffers when it wraps the model,
but not with ``broadcast_buffers=False`` (train.py's ``--no-ddp-bb``), and a rank with other permutations would
then train a different function without any error.

So a model of ours with random structure, created while a process group of more than one rank is initialised,
compares its :func:`structure_fingerprint` across ranks through the process group's key-value store
(backend-independent: gloo, NCCL, …) and refuses to exist if the ranks disagree. Set
``TIMM_PKMIXER_CHECK_REPLICAS=0`` to skip this, e.g. when only some ranks create a model.
"""
import hashlib
import itertools
import os
from collections import defaultdict
from datetime import timedelta
from typing import Dict, Iterator, List, Optional

import torch.distributed as dist
from torch import nn

from .layers.masked_linear import MaskedLinear
from .layers.permutation import FixedPermutation

__all__ = ['structure_fingerprint', 'check_replicas', 'check_replicas_if_distributed', 'CHECK_ENV']

CHECK_ENV = 'TIMM_PKMIXER_CHECK_REPLICAS'
_STORE_PREFIX = 'timm_pkmixer/replica'
_serials: Dict[str, Iterator[int]] = defaultdict(itertools.count)


def _structure_items(model: nn.Module) -> List[str]:
    items = []
    for name, module in model.named_modules():
        if isinstance(module, FixedPermutation):
            items.append(f'{name}:perm:{module.num}:{module.expected_digest()}')
        elif isinstance(module, MaskedLinear):
            items.append(f'{name}:mask:{tuple(module.weight.shape)}:{module.density!r}:{module.seed}:{module.key}')
    return items


def structure_fingerprint(model: nn.Module) -> Optional[str]:
    """A hex digest of the model's frozen random structure (permutations, masks); None if it has none.

    Computed from the seeds and layer keys, so it needs no buffer values (works on the meta device).
    """
    items = _structure_items(model)
    if not items:
        return None
    return hashlib.blake2b('\n'.join(items).encode(), digest_size=16).hexdigest()


def check_replicas(model: nn.Module, name: str = 'model', timeout_s: float = 300.) -> None:
    """Compare the model's structure fingerprint across all ranks of the default process group.

    Every rank must call this for the same model (in the same order as other models with the same
    ``name``). Raises ``RuntimeError`` naming the disagreeing ranks, or if some rank does not report
    within ``timeout_s`` seconds.
    """
    fingerprint = structure_fingerprint(model) or '-'
    rank, world = dist.get_rank(), dist.get_world_size()
    key = f'{_STORE_PREFIX}/{name}/{next(_serials[name])}'
    store = dist.distributed_c10d._get_default_store()
    store.set(f'{key}/{rank}', fingerprint)
    keys = [f'{key}/{r}' for r in range(world)]
    try:
        store.wait(keys, timedelta(seconds=timeout_s))
    except RuntimeError as e:  # c10d raises DistStoreError (a RuntimeError) on timeout
        raise RuntimeError(
            f'{name}: not every rank created this model within {timeout_s:g} s, so its permutations could not '
            f'be compared across ranks. If only some ranks create it, set {CHECK_ENV}=0.') from e
    prints = [store.get(k).decode() for k in keys]
    if len(set(prints)) > 1:
        groups = defaultdict(list)
        for r, p in enumerate(prints):
            groups[p].append(r)
        detail = '; '.join(f'ranks {ranks}: {p}' for p, ranks in groups.items())
        raise RuntimeError(
            f'{name}: ranks hold different permutations/masks (different perm_seed or mask_seed?), so '
            f'data-parallel training would average gradients of different functions. Structure fingerprints: '
            f'{detail}. Use the same --model-kwargs on every rank.')


def check_replicas_if_distributed(model: nn.Module, name: str) -> nn.Module:
    """Run :func:`check_replicas` when a process group of >1 ranks is up and the model has random structure.

    Models on the meta device are skipped: they hold no values and cannot train (they are built to inspect
    shapes, often on one rank only).
    """
    on_meta = any(t.is_meta for t in itertools.chain(model.parameters(), model.buffers()))
    if (os.environ.get(CHECK_ENV, '1') != '0' and not on_meta and dist.is_available() and dist.is_initialized()
            and dist.get_world_size() > 1 and structure_fingerprint(model) is not None):
        check_replicas(model, name)
    return model
