"""How many intra-op threads a CPU process should use on a machine that other jobs share.

PyTorch's intra-op threads wait for each other at every parallel region; on a machine whose cores are busy with
other jobs one descheduled thread stalls the others: on a shared 2-core machine two threads took 9x longer than one
for the demo, and timm's train.py started by ``pkmixer train`` 12x (4.56 against 0.39 s/step, load 4-10). So: as
many threads as idle cores (cores − 1-minute load average), shared among the processes of this machine (torchrun's
``LOCAL_WORLD_SIZE``), at least one.
"""
import os
from typing import Optional, Tuple

from ..validation import positive_int

__all__ = ['choose_threads', 'set_threads']


def choose_threads(requested: Optional[int] = None, processes: Optional[int] = None) -> Tuple[int, str]:
    """Threads for one process, and why: `requested`, else ``$OMP_NUM_THREADS`` (torch reads it at start), else the
    idle cores divided among `processes` (default: ``$LOCAL_WORLD_SIZE`` as torchrun sets it, else 1)."""
    import torch
    if requested is not None:
        return positive_int('threads', requested), 'as requested'
    if 'OMP_NUM_THREADS' in os.environ:
        return torch.get_num_threads(), 'OMP_NUM_THREADS'
    if processes is None:
        local = os.environ.get('LOCAL_WORLD_SIZE', '1')
        processes = int(local) if local.isdigit() and int(local) > 0 else 1
    processes = positive_int('processes', processes)
    cores = os.cpu_count() or 1
    load = os.getloadavg()[0] if hasattr(os, 'getloadavg') else 0.
    idle = int(cores - load + 0.5)
    threads = max(1, min(torch.get_num_threads(), idle // processes))
    per = f', {processes} processes on this machine' if processes > 1 else ''
    return threads, f'{cores} cores, load average {load:.1f}{per}'


def set_threads(threads: int) -> None:
    """Use `threads` intra-op threads in this process (torch) and in the processes it starts (OMP_NUM_THREADS)."""
    import torch
    threads = positive_int('threads', threads)
    torch.set_num_threads(threads)
    os.environ['OMP_NUM_THREADS'] = str(threads)
