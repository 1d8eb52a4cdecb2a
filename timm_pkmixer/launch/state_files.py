"""The launcher's own files, read and written one way: regular files only (a FIFO, socket or device in their place
is named, never opened for a blocking read or write), JSON objects of an expected shape (anything else is a
:class:`~.errors.StateFileError` that names the file and what to do), written whole (a reader never sees half a
file: beside it, then renamed or linked into place)."""
import errno
import fcntl
import json
import os
import stat
from pathlib import Path
from typing import IO, Any, Dict, Mapping, Optional, Tuple

from ..atomic_json import temporary_beside
from .errors import StateFileError

__all__ = ['MAX_BYTES', 'open_regular', 'read_text', 'read_json', 'create_json', 'open_log']

MAX_BYTES = 1 << 20  # a state file larger than this is not one of the launcher's
_KINDS = ((stat.S_ISFIFO, 'a FIFO'), (stat.S_ISSOCK, 'a socket'), (stat.S_ISCHR, 'a character device'),
          (stat.S_ISBLK, 'a block device'), (stat.S_ISDIR, 'a folder'))


def _kind(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), 'not a file')


def open_regular(path: Path, flags: int, what: str, remedy: str, mode: int = 0o644) -> Optional[int]:
    """A descriptor of `path` opened with `flags` (blocking again once it is known to be a regular file), or None
    when there is no such file (and `flags` do not create one); anything but a regular file is refused."""
    try:
        fd = os.open(path, flags | os.O_NONBLOCK, mode)
    except FileNotFoundError:
        return None
    except OSError as e:
        why = 'a FIFO, not a regular file' if e.errno == errno.ENXIO else e.strerror or str(e)
        raise StateFileError(f'{path} is not {what} ({why}): {remedy}') from None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise StateFileError(f'{path} is not {what} ({_kind(st.st_mode)}, not a regular file): {remedy}')
    fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
    return fd


def read_text(path: Path, what: str, remedy: str) -> Optional[str]:
    """The text of a regular file (None if there is none)."""
    fd = open_regular(path, os.O_RDONLY, what, remedy)
    if fd is None:
        return None
    with os.fdopen(fd, 'rb') as f:
        data = f.read(MAX_BYTES + 1)
    if len(data) > MAX_BYTES:
        raise StateFileError(f'{path} is not {what} (larger than {MAX_BYTES} bytes): {remedy}')
    try:
        return data.decode('utf-8')
    except UnicodeDecodeError:
        raise StateFileError(f'{path} is not {what} (not text): {remedy}') from None


def _shape_problem(data: Any, shape: Mapping[str, Tuple[type, ...]]) -> str:
    if not isinstance(data, dict):
        return 'not a JSON object'
    for key, types in shape.items():
        value = data.get(key)
        if key in data and (not isinstance(value, types) or (isinstance(value, bool) and bool not in types)):
            return f'{key} is a {type(value).__name__}'
    return ''


def read_json(path: Path, what: str, remedy: str, shape: Mapping[str, Tuple[type, ...]]) -> Optional[Dict[str, Any]]:
    """A JSON object whose keys of `shape` (those present) have its types; None when there is no file."""
    text = read_text(path, what, remedy)
    if text is None:
        return None
    if not text.strip():
        problem = 'empty'
    else:
        try:
            data = json.loads(text)
            problem = _shape_problem(data, shape)
        except ValueError as e:
            problem = f'not JSON: {getattr(e, "msg", e)}'
    if problem:
        raise StateFileError(f'{path} is not {what} ({problem}): {remedy}')
    return data


def create_json(path: Path, data: Mapping[str, Any]) -> bool:
    """Create `path` holding `data` whole, only if there is no `path` (written beside it, then hard-linked into
    place, which fails when something is there); returns whether it was created."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = temporary_beside(path)
    tmp.write_text(json.dumps(data, indent=1) + '\n', encoding='utf-8')
    try:
        os.link(tmp, path)
        return True
    except FileExistsError:
        return False
    finally:
        tmp.unlink()


def open_log(path: Path, remedy: str) -> IO[str]:
    """A run's log, opened to append (created if there is none); a FIFO or device there is refused."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = open_regular(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 'a run log', remedy)
    assert fd is not None
    return os.fdopen(fd, 'a', encoding='utf-8')
