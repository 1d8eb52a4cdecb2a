"""Let timm's train.py run data-parallel on CPUs (gloo): ``--device-modules timm_pkmixer.cpu_ddp``.

train.py wraps the model as ``DistributedDataParallel(model, device_ids=[device])``. For a CPU module PyTorch
requires ``device_ids=None`` and raises ``ValueError`` otherwise, so ``torchrun … train.py --device cpu``
fails in its DDP setup. Importing this module (and only that: ``import timm_pkmixer`` does not load it) makes
``DistributedDataParallel`` treat CPU-only ``device_ids`` / ``output_device`` as None
(:func:`timm_pkmixer.distributed.install_cpu_ddp`); GPU runs pass through untouched. torch's class stays the
class callers find, so it works however a caller looks it up.
"""
from .replicas import install_cpu_ddp

install_cpu_ddp()
