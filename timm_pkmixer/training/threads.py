"""How many intra-op threads (and data-loading workers) a CPU process should use on a machine that other jobs
share.

PyTorch's intra-op threads wait for each other at every parallel region; on a machine whose cores are busy with
other jobs one descheduled thread stalls the others: on a shared 2-core machine two threads took 9x longer than one
for the demo, and timm's train.py started by ``pkmixer train`` 12x (4.56 against 0.39 s/step, load 4-10). So: as
many threads as idle cores (cores − 1-minute load average), shared among the processes of this machine (torchrun's
``LOCAL_WORLD_SIZE``), at least one. Data-loading workers: at most the cores this process may run on, shared the
same way (more only queue for the same cores; torch's DataLoader warns about them).
"""
import os
from typing import Optional, Tuple

from ..validation import positive_int
from .env import env_int

__all__ = ['available_cores', 'local_processes', 'choose_threads', 'choose_workers', 'set_threads']


def available_cores() -> int:
    """The cores this process may run on (its CPU affinity, as a container or ``taskset`` limits it), at least 1."""
    if hasattr(os, 'sched_getaffinity'):
        return max(1, len(os.sched_getaffinity(0)))
    return os.cpu_count() or 1


def local_processes() -> int:
    """The processes of this run on this machine: ``$LOCAL_WORLD_SIZE`` as torchrun sets it, else 1."""
    return env_int('LOCAL_WORLD_SIZE', 1, minimum=1)


def choose_threads(requested: Optional[int] = None, processes: Optional[int] = None) -> Tuple[int, str]:
    """Threads for one process, and why: `requested`, else ``$OMP_NUM_THREADS`` (torch reads it at start), else the
    idle cores divided among `processes` (default: ``$LOCAL_WORLD_SIZE`` as torchrun sets it, else 1)."""
    import torch
    if requested is not None:
        return positive_int('threads', requested), 'as requested'
    if 'OMP_NUM_THREADS' in os.environ:
        return torch.get_num_threads(), 'OMP_NUM_THREADS'
    processes = positive_int('processes', local_processes() if processes is None else processes)
    cores = available_cores()
    load = os.getloadavg()[0] if hasattr(os, 'getloadavg') else 0.
    idle = int(cores - load + 0.5)
    threads = max(1, min(torch.get_num_threads(), idle // processes))
    per = f', {processes} processes on this machine' if processes > 1 else ''
    return threads, f'{cores} cores, load average {load:.1f}{per}'


def choose_workers(default: int, processes: Optional[int] = None) -> Tuple[int, str]:
    """Data-loading workers for one process: `default` (train.py's), at most the available cores divided among
    `processes` (default: :func:`local_processes`), at least 1; and why, when that is fewer than `default`."""
    processes = positive_int('processes', local_processes() if processes is None else processes)
    cores = available_cores()
    workers = min(default, max(1, cores // processes))
    per = f' among {processes} processes' if processes > 1 else ''
    return workers, (f'{cores} core{"s" if cores != 1 else ""} available{per}' if workers < default else '')


def set_threads(threads: int) -> None:
    """Use `threads` intra-op threads in this process (torch) and in the processes it starts (OMP_NUM_THREADS)."""
    import torch
    threads = positive_int('threads', threads)
    torch.set_num_threads(threads)
    os.environ['OMP_NUM_THREADS'] = str(threads)
