"""JSON files replaced whole: written beside the file and renamed over it (``os.replace``), so that a reader never
sees half a file and a write that fails (a full disk, a kill) leaves the previous file as it was. Used for every JSON
file the package rewrites in place (a sweep's ``sweep.json``, ``pkmixer launch``'s records and lock)."""
import json
import os
import threading
from pathlib import Path
from typing import Any, Callable, Optional, Union

__all__ = ['write_json', 'temporary_beside']


def temporary_beside(path: Path) -> Path:
    """A name beside `path` that no other process or thread writing `path` at the same time uses."""
    return path.with_name(f'.{path.name}.{os.getpid()}.{threading.get_ident()}.tmp')


def write_json(path: Union[str, 'os.PathLike[str]'], data: Any, ensure_ascii: bool = True,
               default: Optional[Callable[[Any], Any]] = None) -> None:
    """`data` as JSON (``indent=1``, a final newline; `ensure_ascii` and `default` as :func:`json.dumps` takes them)
    at `path`, its folder made if missing, replaced whole: on any error the file is as it was and the temporary file
    beside it is removed."""
    path = Path(path)
    text = json.dumps(data, indent=1, ensure_ascii=ensure_ascii, default=default) + '\n'
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = temporary_beside(path)
    try:
        tmp.write_text(text, encoding='utf-8')
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
