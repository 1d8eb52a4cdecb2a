"""What this process trains with, as ``pkmixer train`` records it in the run folder
(:mod:`timm_pkmixer.runs.provenance`): timm-pkmixer's version and git commit, torch, timm, Python, train.py's
sha256, the device, the intra-op threads and the flags that change the arithmetic. No host name and no path: the
package's checkout is asked for its commit, never the caller's working directory, and train.py is named by its file
name only.
"""
import hashlib
import os
import platform
import subprocess
from datetime import datetime, timezone
from functools import cache
from pathlib import Path
from typing import Any, Dict, Optional, Tuple

from ..state_files import read_text

__all__ = ['package_commit', 'cpu_name', 'arithmetic_flags', 'collect_environment']

_PACKAGE_ROOT = Path(__file__).resolve().parent.parent  # timm_pkmixer/
_PACKAGE_FILES = _PACKAGE_ROOT.name + '/'


def _git(root: Path, *argv: str) -> Optional[str]:
    try:
        proc = subprocess.run(['git', '-C', str(root), *argv], capture_output=True, text=True, timeout=20,
                              stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError):
        return None
    return proc.stdout if proc.returncode == 0 else None


@cache
def package_commit(package_root: Path = _PACKAGE_ROOT) -> Tuple[Optional[str], Optional[bool]]:
    """(the commit of the git checkout the package is imported from, whether that checkout has changes: tracked
    files, or new files in the package), or (None, None) when the package does not sit at the top of a checkout
    (a wheel in site-packages, even a site-packages inside another repository)."""
    top = _git(package_root, 'rev-parse', '--show-toplevel')
    if top is None or Path(top.strip()).resolve() != package_root.parent.resolve():
        return None, None
    head = _git(package_root, 'rev-parse', 'HEAD')
    status = _git(package_root.parent, 'status', '--porcelain', '--untracked-files=all')
    if head is None or status is None:
        return None, None
    dirty = any(not line.startswith('??') or line[3:].startswith(_PACKAGE_FILES) for line in status.splitlines()
                if line.strip())
    return head.strip(), dirty


def cpu_name() -> str:
    """The CPU's model name (/proc/cpuinfo's ``model name``, else the platform's processor or machine)."""
    try:
        text = read_text('/proc/cpuinfo', OSError, limit=None) or ''
    except OSError:
        text = ''
    for line in text.splitlines():
        key, _, value = line.partition(':')
        if key.strip() in ('model name', 'Model', 'cpu model') and value.strip():
            return ' '.join(value.split())
    return platform.processor() or platform.machine() or 'unknown'


def arithmetic_flags(device_type: str) -> Dict[str, Any]:
    """The switches that change a run's arithmetic, as they stand now: torch's deterministic algorithms and float32
    matmul precision; the instruction set torch's CPU kernels were dispatched to (``AVX2``, ``AVX512``, ``DEFAULT``:
    the same seed and code on another one sums in another order, so its runs drift apart by rounding); on CUDA, TF32
    (train.py allows it for matrix products on CUDA; NVIDIA_TF32_OVERRIDE=0 forbids it below torch), cuDNN's TF32,
    autotuning and determinism."""
    import torch
    capability = getattr(torch.backends.cpu, 'get_cpu_capability', None)
    flags: Dict[str, Any] = dict(cuda=device_type == 'cuda',
                                 deterministic_algorithms=torch.are_deterministic_algorithms_enabled(),
                                 float32_matmul_precision=torch.get_float32_matmul_precision(),
                                 cpu_capability=capability() if capability else None)
    if device_type == 'cuda':
        flags.update(cuda_matmul_allow_tf32=bool(torch.backends.cuda.matmul.allow_tf32),
                     cudnn_allow_tf32=bool(torch.backends.cudnn.allow_tf32),
                     cudnn_benchmark=bool(torch.backends.cudnn.benchmark),
                     cudnn_deterministic=bool(torch.backends.cudnn.deterministic),
                     NVIDIA_TF32_OVERRIDE=os.environ.get('NVIDIA_TF32_OVERRIDE'))
    return flags


def _device(device: Any) -> Tuple[str, str]:
    """(type, name) of train.py's ``--device``: a CUDA device's name (its index, else LOCAL_RANK's, as train.py
    picks it), else the CPU's."""
    import torch
    try:
        parsed = torch.device(device or 'cpu')
    except (RuntimeError, TypeError):
        return str(device), cpu_name()
    if parsed.type == 'cuda' and torch.cuda.is_available():
        index = parsed.index if parsed.index is not None else int(os.environ.get('LOCAL_RANK', '0') or 0)
        try:
            return 'cuda', torch.cuda.get_device_name(index)
        except (RuntimeError, AssertionError, ValueError):
            return 'cuda', 'unknown CUDA device'
    if parsed.type == 'cpu':
        return 'cpu', cpu_name()
    return parsed.type, parsed.type


def collect_environment(train_py: Path, device: Any, processes: int = 1, started: Optional[str] = None
                        ) -> Dict[str, Any]:
    """What this process trains with (see :mod:`timm_pkmixer.runs.provenance` for the keys): `train_py` the file
    train.py was imported from, `device` train.py's ``--device``, `processes` the world size. The intra-op threads
    are torch's now (set them first)."""
    import timm
    import torch

    from .. import __version__
    commit, dirty = package_commit()
    device_type, device_name = _device(device)
    train_py = Path(train_py)
    return dict(
        pkmixer_env=1, started=started or datetime.now(timezone.utc).strftime('%Y-%m-%dT%H:%M:%S.%fZ'),
        pkmixer_version=__version__, pkmixer_commit=commit, pkmixer_dirty=dirty, torch=torch.__version__,
        timm=timm.__version__, python=platform.python_version(), train_py=train_py.name,
        train_py_sha256=hashlib.sha256(train_py.read_bytes()).hexdigest(), device_type=device_type,
        device=device_name, cpu=cpu_name(), threads=torch.get_num_threads(), processes=processes,
        flags=arithmetic_flags(device_type))
