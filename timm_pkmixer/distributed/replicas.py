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
  of the DDP's process group exchange a :func:`structure_fingerprint` (one all-gather of a short tagged string,
  beside DDP's own collectives at construction) and refuse to wrap the model if they disagree. A rank that does not
  run the check (``timm_pkmixer.replica_check`` imported in some processes only) meets it with DDP's own collective:
  the tag tells that apart from other seeds, and the ranks that ran it say the check is missing there
  (:class:`ReplicaCheckMissingError`).

Creating a model does no distributed communication, so a model built on one rank alone returns at once.
:func:`check_replicas` waits at most ``timeout`` seconds (300 by default) for the other ranks and, when one never
comes, says that every rank must call it.
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
from collections.abc import Mapping
from datetime import timedelta
from typing import Any, Callable, Dict, List, Optional

import torch
import torch.distributed as dist
from torch import nn

from ..errors import ArgumentTypeError, UserInputError
from ..layers.structure import DerivedStructure
from ..validation import positive_real

__all__ = ['CHECK_ENV', 'DEFAULT_TIMEOUT_S', 'ReplicaMismatchError', 'ReplicaCheckTimeoutError',
           'ReplicaCheckMissingError', 'structure_fingerprint', 'check_replicas', 'install_ddp_replica_check',
           'install_cpu_ddp']

CHECK_ENV = 'TIMM_PKMIXER_CHECK_REPLICAS'
DEFAULT_TIMEOUT_S = 300.0  # how long check_replicas waits for the other ranks


class ReplicaMismatchError(UserInputError, RuntimeError):
    """Ranks of a data-parallel run hold different permutations or masks."""


class ReplicaCheckTimeoutError(UserInputError, RuntimeError):
    """:func:`check_replicas` was not called by every rank of the group within its timeout."""


class ReplicaCheckMissingError(UserInputError, RuntimeError):
    """A rank of the group did not run the replica check: its collective was another one (e.g. DDP's own, where
    ``timm_pkmixer.replica_check`` was imported on some ranks only), or it left the group."""


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


def _check_args(model: Any, group: Any, timeout: Optional[float]) -> None:
    if not isinstance(model, nn.Module):
        hint = (' (a state dict? pass the model itself: check_replicas compares the permutations and masks its '
                'seeds derive, which a state dict holds only as digests)' if isinstance(model, Mapping) else '')
        raise ArgumentTypeError(f'check_replicas: model must be the torch.nn.Module built on this rank, got '
                                f'{type(model).__name__}{hint}')
    if group is not None and not (dist.is_available() and isinstance(group, dist.ProcessGroup)):
        raise ArgumentTypeError(f'check_replicas: group must be a torch.distributed.ProcessGroup (from '
                                f'dist.new_group) or None for the default group, got {group!r} '
                                f'({type(group).__name__})')
    if timeout is not None:
        positive_real('timeout', timeout)


# every rank's message starts with this tag, so a rank whose collective is another one (DDP's own, where the check
# was installed on some ranks only) is told apart from a rank with other permutations
_TAG = b'pkmixer-replica1'
_MISSING_ADVICE = ('Every rank must run the check: import timm_pkmixer.replica_check in every process '
                   '(--device-modules timm_pkmixer.replica_check on every rank, as the packaged recipes do), or call '
                   'check_replicas on every rank.')


def _gather(fingerprint: str, group: Any, world: int, timeout: Optional[float], name: str) -> List[Optional[str]]:
    """Every rank's fingerprint (one all-gather of the tag and 16 bytes), waiting at most `timeout` seconds; None
    for a rank whose message is no replica check's."""
    device = torch.device('cpu')
    if dist.get_backend(group) == 'nccl':
        device = torch.device('cuda', torch.cuda.current_device())
    mine = torch.frombuffer(bytearray(_TAG + bytes.fromhex(fingerprint)), dtype=torch.uint8).to(device)
    gathered = [torch.empty_like(mine) for _ in range(world)]
    work = dist.all_gather(gathered, mine, group=group, async_op=True)
    try:
        if timeout is None:
            work.wait()
        else:
            work.wait(timeout=timedelta(seconds=timeout))
    except RuntimeError as e:
        if not any(word in str(e).lower() for word in ('timed out', 'timeout')):  # the exchange itself broke
            first_line = (str(e).strip().splitlines() or [repr(e)])[0]
            raise ReplicaCheckMissingError(
                f'{name}: the replica check\'s exchange failed on rank {dist.get_rank()}: another rank of the group '
                f'(world size {world}) met it with a different collective or left it. Most likely the replica check '
                f'is missing on that rank; else it failed (see its log). {_MISSING_ADVICE} '
                f'(torch.distributed: {first_line})') from None
        waited = f'{timeout:g} s' if timeout is not None else "the process group's timeout"
        raise ReplicaCheckTimeoutError(
            f'{name}: check_replicas waited {waited} on rank {dist.get_rank()} for the other ranks of the group '
            f'(world size {world}), and not all of them called it. It is a collective: every rank of the group must '
            f'call check_replicas, once per model and in the same order (e.g. right after building the model; '
            f'DistributedDataParallel(...) does it on every rank). If some ranks are merely slower to get there, '
            f'pass a larger timeout. (torch.distributed: {e})') from None
    raw = [bytes(t.cpu().tolist()) for t in gathered]
    return [r[len(_TAG):].hex() if r.startswith(_TAG) else None for r in raw]


def _refuse_differences(prints: List[Optional[str]], name: str) -> None:
    """Raise what differs between the ranks' fingerprints (None: that rank ran no replica check)."""
    missing = [rank for rank, p in enumerate(prints) if p is None]
    if missing:
        ran = [rank for rank, p in enumerate(prints) if p is not None]
        raise ReplicaCheckMissingError(
            f'{name}: the replica check is missing on ranks {missing}: ranks {ran} ran it, but what came from ranks '
            f'{missing} is no replica-check message (their collective was another one, e.g. '
            f'DistributedDataParallel\'s own), so the permutations and masks were not compared. {_MISSING_ADVICE}')
    if len(set(prints)) > 1:
        groups = defaultdict(list)
        for rank, p in enumerate(prints):
            groups[p].append(rank)
        detail = '; '.join(f'ranks {ranks}: {p}' for p, ranks in groups.items())
        raise ReplicaMismatchError(
            f'{name}: ranks hold different permutations/masks (different perm_seed or mask_seed?), so '
            f'data-parallel training would average gradients of different functions. Structure fingerprints: '
            f'{detail}. Use the same --model-kwargs on every rank.')


def check_replicas(model: nn.Module, group: Optional[Any] = None, name: str = 'model',
                   timeout: Optional[float] = DEFAULT_TIMEOUT_S) -> None:
    """Compare the model's structure fingerprint across the ranks of `group` (default: the default group).

    A collective: every rank of the group must call it. Nothing happens without an initialised process
    group of more than one rank, for a model without random structure, or with ``TIMM_PKMIXER_CHECK_REPLICAS=0``.

    Args:
        model: The model built on this rank (not a state dict).
        group: A ``torch.distributed.ProcessGroup``; None for the default group.
        name: What to call the model in messages.
        timeout: Seconds to wait for the other ranks (they must all call it within that time of each other);
            None: the process group's own timeout.

    Raises:
        ReplicaMismatchError: Ranks hold different permutations or masks; the message names the ranks.
        ReplicaCheckTimeoutError: Not every rank called it within `timeout`.
        ReplicaCheckMissingError: A rank met it with another collective (the check is missing there) or left.
        ArgumentTypeError: `model` is no nn.Module or `group` no process group.
    """
    _check_args(model, group, timeout)
    fingerprint = structure_fingerprint(model)
    if (fingerprint is None or not _enabled() or not dist.is_available() or not dist.is_initialized()
            or dist.get_world_size(group) <= 1):
        return
    _refuse_differences(_gather(fingerprint, group, dist.get_world_size(group), timeout, name), name)


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
        # ranks may reach DDP minutes apart (data set-up comes first): wait as long as DDP's own collectives do
        check_replicas(module, group=arguments.get('process_group'), name=type(module).__name__, timeout=None)

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
