"""The lock of a launched folder, ``DIR/launch/lock``: who is launching it (PID with its start time and boot, host,
and the batch job when there is one). A second launch of the folder is refused while that holder is alive
(:func:`holder_alive`: a reused PID is not the holder); a dead holder's lock is taken over.

Taking the lock is one critical section for every launch of the folder: an exclusive ``flock`` on
``DIR/launch/lock.mutex`` (a file that stays, unless the folder's first launch is refused; the kernel lets go of
it when its process dies) around reading the lock, judging its holder and writing ours. The lock is written beside
its place and hard-linked into it, so no reader ever sees a partial lock, and two launches never both take it."""
import contextlib
import fcntl
import os
import socket
import time
from pathlib import Path
from typing import Any, Dict, Iterator, Mapping

from ..state_files import create_json, open_regular, read_json, write_json
from . import executors
from .errors import LaunchLockedError, state_file
from .liveness import identity, same_process
from .records import launch_state_dir

__all__ = ['MUTEX_WAIT_S', 'read_lock', 'holder_alive', 'acquire_lock', 'update_lock', 'release_lock', 'drop_mutex']

MUTEX_WAIT_S = 120.  # the longest a launch waits for another one to finish taking the lock
_N = type(None)
_LOCK_SHAPE = dict(pid=(int, _N), host=(str, _N), executor=(str,), job=(str, _N), since=(int, float),
                   pid_start=(int, _N), boot_id=(str, _N))


def _remedy(folder: Path) -> str:
    return f'remove it if no launch of {folder} is running'


def read_lock(folder: Path) -> Dict[str, Any]:
    """The folder's lock ({} when there is none). Raises :class:`StateFileError` for a file that is not one."""
    path = launch_state_dir(folder) / 'lock'
    return read_json(path, state_file(path, 'a launch lock', _remedy(folder)), _LOCK_SHAPE) or {}


def holder_alive(record: Mapping[str, Any]) -> bool:
    """Whether the process or batch job named in a lock or run record lives, as its executor tells: a batch job while
    it is in the queue (the PID beside it is the run's process in the job, which a requeue replaces), else the same
    process (not a reused PID, :func:`.liveness.same_process`)."""
    if record.get('job'):
        return executors.holder_alive(record)
    return same_process(record) and executors.holder_alive(record)


def _describe_holder(lock: Mapping[str, Any]) -> str:
    job = f'SLURM job {lock["job"]} (`scancel {lock["job"]}` stops it)' if lock.get('job') else ''
    if lock.get('pid') is None:
        return job
    return f'PID {lock.get("pid")} on {lock.get("host")}' + (f', {job}' if job else '')


@contextlib.contextmanager
def _mutex(folder: Path) -> Iterator[None]:
    """Hold ``DIR/launch/lock.mutex`` exclusively (waiting at most :data:`MUTEX_WAIT_S`). The file held is the one in
    place when it is taken: one removed meanwhile (:func:`drop_mutex`) is let go and the one in place taken."""
    path = launch_state_dir(folder) / 'lock.mutex'
    problem = state_file(path, 'the mutex of a launch lock', _remedy(folder))
    deadline = time.monotonic() + MUTEX_WAIT_S
    while True:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = open_regular(path, os.O_RDWR | os.O_CREAT, problem)
        if fd is not None and _flock(fd, folder, path, deadline) and _same_file(fd, path):
            break
        if fd is not None:
            os.close(fd)
    try:
        yield
    finally:
        os.close(fd)  # lets go of the flock


def _flock(fd: int, folder: Path, path: Path, deadline: float) -> bool:
    """Take the flock of `fd` by the `deadline` (else :class:`LaunchLockedError`, `fd` closed)."""
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if time.monotonic() > deadline:
                os.close(fd)
                raise LaunchLockedError(f'{folder}: another launch has been taking its lock for over '
                                        f'{MUTEX_WAIT_S:.0f} s ({path}); try again') from None
            time.sleep(0.01)


def _same_file(fd: int, path: Path) -> bool:
    """Whether `fd` is the file at `path` (not one removed, or removed and made anew, since it was opened)."""
    try:
        here = os.stat(path)
    except FileNotFoundError:
        return False
    there = os.fstat(fd)
    return (here.st_dev, here.st_ino) == (there.st_dev, there.st_ino)


def drop_mutex(folder: Path) -> None:
    """Remove ``DIR/launch/lock.mutex`` unless a launch holds the folder: what a refused first launch undoes
    (taken first, so that a launch waiting for it takes the next one)."""
    with _mutex(folder):
        if not read_lock(folder):
            (launch_state_dir(folder) / 'lock.mutex').unlink(missing_ok=True)


def acquire_lock(folder: Path, executor: str) -> Path:
    """Take ``DIR/launch/lock`` for this process; a live holder's lock refuses (:class:`LaunchLockedError`), a
    dead holder's is taken over, a file that is not a lock is named (:class:`StateFileError`)."""
    path = launch_state_dir(folder) / 'lock'
    path.parent.mkdir(parents=True, exist_ok=True)
    mine = dict(pid=os.getpid(), host=socket.gethostname(), executor=executor, job=None, since=time.time(),
                **identity(os.getpid()))
    with _mutex(folder):
        held = read_lock(folder)
        if held and holder_alive(held):
            raise LaunchLockedError(f'{folder} is being launched already, by {_describe_holder(held)}; '
                                    f'`pkmixer status {folder}` shows its runs')
        if held:
            path.unlink()  # a dead holder's: nobody else can judge it meanwhile
        if not create_json(path, mine):  # only a launch that does not take the mutex (an older version) gets here
            raise LaunchLockedError(f'{folder}: another launch took {path} meanwhile; '
                                    f'`pkmixer status {folder}` shows its runs')
    return path


def _mine(lock: Mapping[str, Any]) -> bool:
    return lock.get('pid') == os.getpid() and lock.get('host') == socket.gethostname()


def update_lock(folder: Path, **fields: Any) -> None:
    """Add `fields` (the batch job) to this process's lock; ``pid=None`` hands it to the job."""
    lock = read_lock(folder)
    if _mine(lock):
        if 'pid' in fields and fields['pid'] is None:
            fields.update(pid_start=None, boot_id=None)
        write_json(launch_state_dir(folder) / 'lock', {**lock, **fields})


def release_lock(folder: Path) -> None:
    """Remove the lock if this process holds it."""
    if _mine(read_lock(folder)):
        (launch_state_dir(folder) / 'lock').unlink(missing_ok=True)
