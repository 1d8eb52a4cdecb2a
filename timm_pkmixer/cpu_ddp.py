"""Let timm's train.py run data-parallel on CPUs (gloo): ``--device-modules timm_pkmixer.cpu_ddp``.

train.py wraps the model as ``DistributedDataParallel(model, device_ids=[device])``. For a CPU module PyTorch
requires ``device_ids=None`` and raises ``ValueError`` otherwise, so ``torchrun … train.py --device cpu``
fails in its DDP setup. Importing this module replaces ``torch.nn.parallel.DistributedDataParallel`` with a
subclass that drops ``device_ids``/``output_device`` when they name only CPU devices, and changes nothing
else (GPU runs pass through untouched). It is imported only when asked for; ``import timm_pkmixer`` does not
load it.
"""
from typing import Any, Optional, Sequence

import torch
import torch.nn.parallel
from torch.nn.parallel import DistributedDataParallel

__all__ = ['CpuFriendlyDDP']


def _only_cpu(devices: Optional[Sequence[Any]]) -> bool:
    return bool(devices) and all(torch.device(d).type == 'cpu' for d in devices)


class CpuFriendlyDDP(DistributedDataParallel):
    """DistributedDataParallel that accepts ``device_ids=[cpu]`` (treated as None, as CPU modules need)."""

    def __init__(self, module: torch.nn.Module, device_ids: Optional[Sequence[Any]] = None,
                 output_device: Optional[Any] = None, *args, **kwargs) -> None:
        if _only_cpu(device_ids):
            device_ids = None
            if output_device is not None and torch.device(output_device).type == 'cpu':
                output_device = None
        super().__init__(module, device_ids, output_device, *args, **kwargs)


if not issubclass(torch.nn.parallel.DistributedDataParallel, CpuFriendlyDDP):
    torch.nn.parallel.DistributedDataParallel = CpuFriendlyDDP
