"""Whether the process named in a lock or run record is the one that wrote it. A PID alone can be reused (after the
process ends, or after a reboot), so a record names its process by PID, host, start time (field 22 of
``/proc/PID/stat``: clock ticks after boot) and boot (``/proc/sys/kernel/random/boot_id``); a live process with
that PID but another start or boot is not the holder."""
import functools
import os
import socket
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional

__all__ = ['boot_id', 'process_start', 'identity', 'pid_alive', 'same_process']


@functools.lru_cache(maxsize=1)
def boot_id() -> Optional[str]:
    """This boot's id (None where the kernel does not say)."""
    try:
        return Path('/proc/sys/kernel/random/boot_id').read_text().strip() or None
    except OSError:
        return None


def _stat(pid: Any) -> Optional[List[str]]:
    """Fields 3 … of ``/proc/PID/stat`` (after the command name; None: no such process, or no /proc)."""
    try:
        return Path(f'/proc/{int(pid)}/stat').read_text().rsplit(')', 1)[1].split()
    except (OSError, ValueError, TypeError, IndexError):
        return None


def _ended(fields: Optional[List[str]]) -> bool:
    """A process that has ended and is not yet reaped (a zombie, state Z; X: being reaped) runs nothing."""
    return bool(fields) and fields[0] in ('Z', 'X')


def process_start(pid: Any) -> Optional[int]:
    """When process `pid` started, in clock ticks after boot (None: no such process, one that has ended unreaped,
    or no /proc)."""
    fields = _stat(pid)
    if fields is None or _ended(fields):
        return None
    try:
        return int(fields[19])  # starttime is field 22
    except (ValueError, IndexError):
        return None


def identity(pid: int) -> Dict[str, Any]:
    """The fields a record keeps beside a PID of this host: ``pid_start`` and ``boot_id``."""
    return dict(pid_start=process_start(pid), boot_id=boot_id())


def pid_alive(pid: Any, host: Any) -> bool:
    """Whether process `pid` on `host` is alive, not ended unreaped (another host's process is taken to be)."""
    if host and host != socket.gethostname():
        return True
    try:
        pid = int(pid)
        if pid <= 0:
            return False  # 0 and negative numbers name process groups, never a holder
        os.kill(pid, 0)
    except (ProcessLookupError, ValueError, TypeError, OverflowError):
        return False
    except PermissionError:
        pass
    return not _ended(_stat(pid))


def same_process(record: Mapping[str, Any]) -> bool:
    """False when the record's PID on this host is not the process that wrote the record: dead, or alive since
    another start or boot. True when it is, or when this host cannot tell (no PID: a batch job's record; another
    host; a record without a start time is judged by its PID alone)."""
    pid, host = record.get('pid'), record.get('host')
    if pid is None or (host and host != socket.gethostname()):
        return True
    if record.get('boot_id') and boot_id() and record['boot_id'] != boot_id():
        return False
    if record.get('pid_start') is not None:
        return process_start(pid) == record['pid_start']
    return pid_alive(pid, host)
