"""Keeping data-parallel replicas of a model with frozen random structure identical.

An RP Mixer's permutations and an SW-MLP's masks are derived from ``perm_seed`` / ``mask_seed``, not learned.
Every rank of a data-parallel run must hold the same ones: DDP averages gradients across ranks, which is only
meaningful when every rank computes the same function, and a rank built with another seed would otherwise
train a different function without any error.

Importing the package changes nothing in torch. The check runs only where it is asked for:

* :func:`check_replicas` on every rank after building the model (any wrapper: FSDP2's ``fully_shard``, your own
  loop);
* at ``DistributedDataParallel(...)``, once :func:`install_ddp_replica_check` has run — what
  ``--device-modules timm_pkmixer.replica_check`` does in timm's train.py (every recipe asks for it). The ranks
  of the DDP's process group exchange a :func:`structure_fingerprint` (one all-gather of a short string, beside
  DDP's own collectives at construction) and refuse to wrap the model if they disagree.

Creating a model does no distributed communication, so a model built on one rank alone returns at once.
``TIMM_PKMIXER_CHECK_REPLICAS=0`` turns the check off. Without it, DDP's own initial broadcast (train.py's
default, ``broadcast_buffers=True``) copies rank 0's permutation and mask buffers to every rank: the replicas
then compute rank 0's function, whatever seed each rank was given; with ``--no-ddp-bb`` nothing is copied and
ranks with different seeds train different functions without an error.
"""
import functools
import hashlib
import inspect
import os
from collections import defaultdict
from typing import Any, Callable, Dict, Optional

import torch.distributed as dist
from torch import nn

from .errors import UserInputError
from .layers.structure import DerivedStructure

__all__ = ['CHECK_ENV', 'ReplicaMismatchError', 'structure_fingerprint', 'check_replicas',
           'install_ddp_replica_check', 'install_cpu_ddp']

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


# (arguments bound to DistributedDataParallel.__init__'s signature) -> None; may edit the arguments in place
DdpInitStep = Callable[[Dict[str, Any]], None]


def _add_ddp_init_step(tag: str, step: DdpInitStep) -> None:
    """Run `step` on the bound arguments of every ``DistributedDataParallel(...)`` before torch's own ``__init__``.

    The class itself gets the wrapped ``__init__`` (however a caller looks the class up: timm imports it inside
    the function that wraps the model); each `tag` is installed once.
    """
    from torch.nn.parallel import DistributedDataParallel
    original = DistributedDataParallel.__init__
    tags = getattr(original, '_timm_pkmixer_steps', ())
    if tag in tags:
        return
    signature = inspect.signature(original)

    @functools.wraps(original)
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        bound = signature.bind(self, *args, **kwargs)
        step(bound.arguments)
        original(*bound.args, **bound.kwargs)

    __init__._timm_pkmixer_steps = (*tags, tag)
    DistributedDataParallel.__init__ = __init__


def install_ddp_replica_check() -> None:
    """Make ``DistributedDataParallel(module, …)`` run :func:`check_replicas` on `module` first (idempotent;
    every rank constructs the DDP wrapper together, so the collective cannot hang). Opt-in: imported by
    ``--device-modules timm_pkmixer.replica_check``; importing the package does not call it."""
    def check(arguments: Dict[str, Any]) -> None:
        module = arguments['module']
        check_replicas(module, group=arguments.get('process_group'), name=type(module).__name__)

    _add_ddp_init_step('replica_check', check)


def _cpu_only(devices: Any) -> bool:
    import torch
    return bool(devices) and all(torch.device(d).type == 'cpu' for d in devices)


def install_cpu_ddp() -> None:
    """Let ``DistributedDataParallel(cpu_module, device_ids=[cpu])`` through, as ``device_ids=None`` (what PyTorch
    requires of a CPU module; timm's train.py passes its device). GPU calls are untouched. Opt-in: imported by
    ``--device-modules timm_pkmixer.cpu_ddp``."""
    def drop_cpu_device_ids(arguments: Dict[str, Any]) -> None:
        if _cpu_only(arguments.get('device_ids')):
            arguments['device_ids'] = None
            output = arguments.get('output_device')
            if output is not None and _cpu_only([output]):
                arguments['output_device'] = None

    _add_ddp_init_step('cpu_device_ids', drop_cpu_device_ids)
