"""The lock of a launched folder, ``DIR/launch/lock``: who is launching it (PID and host, and the batch job when
there is one). A second launch of the folder is refused while that holder is alive; a dead holder's lock is taken
over."""
import json
import os
import socket
import time
from pathlib import Path
from typing import Any, Dict, Mapping

from ..experiments.atomic_json import write_json
from .executors import holder_alive
from .tasks import LaunchLockedError, launch_state_dir

__all__ = ['read_lock', 'acquire_lock', 'update_lock', 'release_lock']


def read_lock(folder: Path) -> Dict[str, Any]:
    try:
        return json.loads((launch_state_dir(folder) / 'lock').read_text(encoding='utf-8'))
    except (OSError, ValueError):
        return {}


def _describe_holder(lock: Mapping[str, Any]) -> str:
    job = f'SLURM job {lock["job"]} (`scancel {lock["job"]}` stops it)' if lock.get('job') else ''
    if lock.get('pid') is None:
        return job
    return f'PID {lock.get("pid")} on {lock.get("host")}' + (f', {job}' if job else '')


def acquire_lock(folder: Path, executor: str) -> Path:
    """Take ``DIR/launch/lock`` for this process; a live holder's lock refuses (:class:`LaunchLockedError`), a
    dead holder's is taken over."""
    path = launch_state_dir(folder) / 'lock'
    path.parent.mkdir(parents=True, exist_ok=True)
    mine = dict(pid=os.getpid(), host=socket.gethostname(), executor=executor, job=None, since=time.time())
    for _ in range(3):
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            held = read_lock(folder)
            if held and holder_alive(held):
                raise LaunchLockedError(f'{folder} is being launched already, by {_describe_holder(held)}; '
                                        f'`pkmixer status {folder}` shows its runs') from None
            try:
                path.unlink()  # a dead holder's (or an unreadable) lock
            except FileNotFoundError:
                pass
            continue
        with os.fdopen(fd, 'w') as f:
            json.dump(mine, f)
        return path
    raise LaunchLockedError(f'{folder}: could not take {path} (another launch keeps taking it)')


def update_lock(folder: Path, **fields: Any) -> None:
    """Add `fields` (the batch job) to this process's lock."""
    lock = read_lock(folder)
    if lock.get('pid') == os.getpid():
        write_json(launch_state_dir(folder) / 'lock', {**lock, **fields})


def release_lock(folder: Path) -> None:
    """Remove the lock if this process holds it."""
    lock = read_lock(folder)
    if lock.get('pid') == os.getpid() and lock.get('host') == socket.gethostname():
        (launch_state_dir(folder) / 'lock').unlink(missing_ok=True)
