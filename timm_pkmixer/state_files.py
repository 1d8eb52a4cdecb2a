"""The package's own files, opened in one place: every file the package reads back and trusts (a recipe, a sweep's
``sweep.json``, a train.py run's ``args.yaml`` and ``summary.csv``, the report's ``epochs.csv``, a run folder's
launch marker, ``pkmixer launch``'s lock, records, recorded train.py arguments and logs) and every one it writes.

* **Regular files only.** A FIFO, socket or device in a file's place is named and never opened for a blocking read
  or write; a symlink loop is named (:func:`open_regular`, :func:`read_text`, :func:`open_log`).
* **Written whole.** A reader never sees half a file: written beside it, then renamed over it (:func:`write_text`,
  :func:`write_json`) or hard-linked into place when it must not exist yet (:func:`create_json`); a write that fails
  leaves the previous file and no temporary one.
* **Bounded.** Each kind of file has a size limit (:data:`SIZE_LIMITS`, by its name's suffix; :data:`MAX_BYTES`
  for any other), checked before it is read: an 8 GiB sparse file is named with its size and the limit, never
  read into memory. The JSON of a ``.json`` file (and of the JSON cells of a ``.csv`` file, as the report's
  ``epochs.csv`` holds) nests at most :data:`MAX_DEPTH` deep and holds no number of more than :data:`MAX_DIGITS`
  digits, so that no ``json.loads`` of it recurses without end or makes a number Python cannot print.
* **JSON of a known shape** (:func:`read_json`) and **YAML read safely** (:func:`load_yaml`: ``yaml.safe_load``
  whose aliases may not expand a document beyond :data:`YAML_MAX_NODES` nodes or refer to a node that contains
  them, that nests at most :data:`MAX_DEPTH` deep and whose integers have at most :data:`MAX_DIGITS` digits;
  :func:`yaml_reason` says a YAML error in one line).

Each reader takes `problem`, which turns what is wrong (``'a FIFO, not a regular file'``, ``'not a text file'``, …)
into the caller's own exception, so that each wing keeps its error class and its words (the launcher's
:class:`~timm_pkmixer.launch.errors.StateFileError`, a run's :class:`~timm_pkmixer.runs.run_folder.RunFileError`).
"""
import csv
import errno
import fcntl
import io
import itertools
import json
import os
import re
import stat
import threading
from pathlib import Path
from typing import IO, Any, Callable, Dict, Mapping, Optional, Tuple, Union

import yaml

__all__ = ['MAX_BYTES', 'SIZE_LIMITS', 'MAX_DEPTH', 'MAX_DIGITS', 'Problem', 'size_limit', 'open_regular',
           'read_text', 'read_tail', 'json_problem', 'read_json', 'open_log', 'temporary_beside', 'write_text',
           'write_json', 'create_json', 'YAML_MAX_NODES', 'YAMLAliasError', 'YAMLDepthError', 'load_yaml',
           'yaml_reason']

PathLike = Union[str, 'os.PathLike[str]']
Problem = Callable[[str], Exception]   # what is wrong with a file, in words -> the exception the caller raises
# The most bytes a file of each kind may hold, by its name's suffix (any other: MAX_BYTES): far above any the
# package writes (a recipe or args.yaml: a few kB; the largest committed epochs.csv: 1.1 MB), far below what
# exhausts memory once parsed.
SIZE_LIMITS: Dict[str, int] = {'.yaml': 1 << 20, '.yml': 1 << 20, '.json': 64 << 20, '.csv': 256 << 20}
MAX_BYTES = 16 << 20
MAX_DEPTH = 100   # JSON or YAML nested deeper than this is no file of the package's (theirs nest 4 deep at most)
MAX_DIGITS = 100  # nor is a number of more digits (Python converts at most 4,300 to text; YAML's 1:2:…:9 and 0x…
# integers grow without end)
_KINDS = ((stat.S_ISFIFO, 'a FIFO'), (stat.S_ISSOCK, 'a socket'), (stat.S_ISCHR, 'a character device'),
          (stat.S_ISBLK, 'a block device'), (stat.S_ISDIR, 'a folder'))


def _kind(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), 'not a file')


def size_limit(path: PathLike) -> Tuple[int, str]:
    """(the most bytes `path` may hold, its kind in words: ``'a .yaml file'``), from its name's suffix."""
    suffix = Path(path).suffix.lower()
    return (SIZE_LIMITS[suffix], f'a {suffix} file') if suffix in SIZE_LIMITS else (MAX_BYTES, 'a file')


def _bytes(n: int) -> str:
    """``'8 GiB'``, ``'1.5 MiB'``, ``'12 bytes'``."""
    for unit, shift in (('GiB', 30), ('MiB', 20), ('KiB', 10)):
        if n >= 1 << shift:
            return f'{round(n / (1 << shift), 1):g} {unit}'
    return f'{n} bytes'


# ------------------------------------------------------------------------------------------------- reading

def open_regular(path: PathLike, flags: int, problem: Problem, mode: int = 0o644) -> Optional[int]:
    """A descriptor of `path` opened with `flags` (blocking again once it is known to be a regular file), or None
    when there is no such file (and `flags` do not create one); anything but a regular file is refused by
    ``raise problem(why)``."""
    try:
        fd = os.open(path, flags | os.O_NONBLOCK, mode)
    except FileNotFoundError:
        return None
    except OSError as e:
        why = ('a FIFO, not a regular file' if e.errno == errno.ENXIO else
               'a symlink loop' if e.errno == errno.ELOOP else e.strerror or str(e))
        raise problem(why) from None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise problem(f'{_kind(st.st_mode)}, not a regular file')
    fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
    return fd


def read_text(path: PathLike, problem: Problem, limit: Optional[int] = None) -> Optional[str]:
    """The UTF-8 text of the regular file `path` (None if there is none); a special file, a symlink loop, a file
    larger than `limit` bytes (None: the limit of its kind, :func:`size_limit`), one that is not text, or JSON
    nested deeper than :data:`MAX_DEPTH` or with a number of more than :data:`MAX_DIGITS` digits in a ``.json``
    file or a ``.csv`` file's cells (:func:`json_problem`) is ``raise problem(why)``."""
    fd = open_regular(path, os.O_RDONLY, problem)
    if fd is None:
        return None
    limit, whose = size_limit(path) if limit is None else (limit, '')
    with os.fdopen(fd, 'rb') as f:
        size = os.fstat(f.fileno()).st_size
        data = b'' if size > limit else f.read(limit + 1)  # /proc's files say 0 bytes: read, but no further
    if size > limit or len(data) > limit:
        raise problem(f'{_bytes(size) + ", " if size > limit else ""}larger than {_bytes(limit)}, the limit'
                      + (f' of {whose}' if whose else ''))
    try:
        text = data.decode('utf-8')
    except UnicodeDecodeError:
        raise problem('not a text file') from None
    why = _text_problem(Path(path).suffix.lower(), text)
    if why:
        raise problem(why)
    return text


def read_tail(path: PathLike, problem: Problem, size: int) -> Optional[str]:
    """The last `size` bytes of the regular file `path` as text (undecodable bytes replaced; None if there is no
    file): a log read while it is written."""
    fd = open_regular(path, os.O_RDONLY, problem)
    if fd is None:
        return None
    with os.fdopen(fd, 'rb') as f:
        f.seek(max(0, f.seek(0, 2) - size))
        return f.read().decode('utf-8', 'replace')


_JSON_STRING = re.compile(r'"(?:[^"\\\n]|\\.)*"')
_BRACKETS = re.compile(r'[^\[\]{}]+')
_STEP = {'[': 1, '{': 1, ']': -1, '}': -1}
_LONG_NUMBER = re.compile(rf'\d{{{MAX_DIGITS + 1}}}')


def json_problem(text: str) -> str:
    """What makes JSON `text` unsafe to parse (``'nested deeper than 100 levels'``, ``'a number of more than 100
    digits'``), or '' (also for text that is not JSON at all: its parser says why)."""
    outside = _JSON_STRING.sub('""', text)
    if max(itertools.accumulate(_STEP[c] for c in _BRACKETS.sub('', outside)), default=0) > MAX_DEPTH:
        return f'nested deeper than {MAX_DEPTH} levels'
    if _LONG_NUMBER.search(outside):
        return f'a number of more than {MAX_DIGITS} digits'
    return ''


def _text_problem(suffix: str, text: str) -> str:
    """:func:`json_problem` of a ``.json`` file's text or of each cell of a ``.csv`` file that holds JSON."""
    if suffix == '.json':
        return json_problem(text)
    if suffix == '.csv' and ('[' in text or '{' in text):
        try:
            cells = (c for row in csv.reader(io.StringIO(text, newline='')) for c in row if c[:1] in ('[', '{'))
            return next(filter(None, map(json_problem, cells)), '')
        except csv.Error:  # not CSV: its reader says why
            return ''
    return ''


def _shape_problem(data: Any, shape: Mapping[str, Tuple[type, ...]]) -> str:
    if not isinstance(data, dict):
        return 'not a JSON object'
    for key, types in shape.items():
        value = data.get(key)
        if key in data and (not isinstance(value, types) or (isinstance(value, bool) and bool not in types)):
            return f'{key} is a {type(value).__name__}'
    return ''


def read_json(path: PathLike, problem: Problem, shape: Mapping[str, Tuple[type, ...]]) -> Optional[Dict[str, Any]]:
    """A JSON object whose keys of `shape` (those present) have its types; None when there is no file. Empty, not
    JSON, unsafe to parse (:func:`json_problem`, whatever the file's name) or of another shape is
    ``raise problem(why)``."""
    text = read_text(path, problem)
    if text is None:
        return None
    why = 'empty' if not text.strip() else json_problem(text)
    if not why:
        try:
            data = json.loads(text)
            why = _shape_problem(data, shape)
        except ValueError as e:
            why = f'not JSON: {getattr(e, "msg", e)}'
    if why:
        raise problem(why)
    return data


def open_log(path: PathLike, problem: Problem) -> IO[str]:
    """A log, opened to append (created if there is none, its folder too); a FIFO or device there is refused."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fd = open_regular(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, problem)
    assert fd is not None
    return os.fdopen(fd, 'a', encoding='utf-8')


# ------------------------------------------------------------------------------------------------- writing

def temporary_beside(path: Path) -> Path:
    """A name beside `path` that no other process or thread writing `path` at the same time uses."""
    return path.with_name(f'.{path.name}.{os.getpid()}.{threading.get_ident()}.tmp')


def write_text(path: PathLike, text: str) -> None:
    """`text` (UTF-8) at `path`, its folder made if missing, replaced whole (written beside it, then
    ``os.replace``\\ d over it): on any error the file is as it was and the temporary file beside it is removed."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = temporary_beside(path)
    try:
        tmp.write_text(text, encoding='utf-8', newline='')  # no newline translation: the bytes given
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_json(path: PathLike, data: Any, ensure_ascii: bool = True,
               default: Optional[Callable[[Any], Any]] = None) -> None:
    """`data` as JSON (``indent=1``, a final newline; `ensure_ascii` and `default` as :func:`json.dumps` takes them)
    at `path`, replaced whole (:func:`write_text`)."""
    write_text(path, json.dumps(data, indent=1, ensure_ascii=ensure_ascii, default=default) + '\n')


def create_json(path: PathLike, data: Mapping[str, Any]) -> bool:
    """Create `path` holding `data` whole, only if there is no `path` (written beside it, then hard-linked into
    place, which fails when something is there); returns whether it was created."""
    path = Path(path)
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


# --------------------------------------------------------------------------------------------------- YAML

YAML_MAX_NODES = 10_000  # a document's nodes with its aliases expanded (or twice its own nodes, if more)


class YAMLAliasError(yaml.composer.ComposerError):
    """A YAML alias that expands the document beyond :data:`YAML_MAX_NODES` nodes, or refers to its own anchor."""


class YAMLDepthError(yaml.composer.ComposerError):
    """A YAML document nested deeper than :data:`MAX_DEPTH` levels (composing it would recurse without end)."""


class _BoundedSafeLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` counting each node's size with its aliases expanded and its depth, while composing, and
    refusing integers of more than :data:`MAX_DIGITS` digits."""

    def compose_document(self) -> Any:
        self._expanded: Dict[int, int] = {}   # id(node) → its node count, aliases expanded
        self._depth = 0
        return super().compose_document()

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            node = super().compose_node(parent, index)
            if id(node) not in self._expanded:  # its anchor is still being composed: the alias is inside it
                raise YAMLAliasError(None, None, f'the alias *{event.anchor} refers to a node that contains it',
                                     event.start_mark)
            return node
        if self._depth >= MAX_DEPTH:
            raise YAMLDepthError(None, None, f'nested deeper than {MAX_DEPTH} levels', self.peek_event().start_mark)
        self._depth += 1
        try:
            node = super().compose_node(parent, index)
        finally:
            self._depth -= 1
        if isinstance(node, yaml.MappingNode):
            children = [n for pair in node.value for n in pair]
        else:
            children = node.value if isinstance(node, yaml.SequenceNode) else []
        size = 1 + sum(self._expanded[id(c)] for c in children)
        if size > max(YAML_MAX_NODES, 2 * len(self._expanded)):
            raise YAMLAliasError(None, None, f'its aliases expand it to more than {YAML_MAX_NODES:,} nodes',
                                 node.start_mark)
        self._expanded[id(node)] = size
        return node

    def construct_yaml_int(self, node: Any) -> int:
        digits = len(re.sub(r'^[-+]?0[xbo]?|[_:]', '', str(node.value)))  # its digits, whatever the base
        if digits > MAX_DIGITS:
            raise yaml.constructor.ConstructorError(None, None, f'an integer of {digits:,} digits (at most '
                                                                f'{MAX_DIGITS} are read)', node.start_mark)
        return super().construct_yaml_int(node)


_BoundedSafeLoader.add_constructor('tag:yaml.org,2002:int', _BoundedSafeLoader.construct_yaml_int)


def load_yaml(text: str) -> Any:
    """``yaml.safe_load(text)`` (no Python tags), refusing aliases that expand the document beyond
    :data:`YAML_MAX_NODES` nodes or that refer to their own anchor (:class:`YAMLAliasError`), nesting deeper than
    :data:`MAX_DEPTH` (:class:`YAMLDepthError`) and integers of more than :data:`MAX_DIGITS` digits. Raises
    ``yaml.YAMLError``; :func:`yaml_reason` says it in one line."""
    return yaml.load(text, Loader=_BoundedSafeLoader)  # noqa: S506 (a SafeLoader)


def yaml_reason(error: BaseException) -> str:
    """A YAML error in one line: ``ParserError: expected ',' or ']' … at line 2, column 1``."""
    if isinstance(error, yaml.MarkedYAMLError) and error.problem:
        mark = error.problem_mark
        where = f' at line {mark.line + 1}, column {mark.column + 1}' if mark is not None else ''
        context = f'{error.context}: ' if error.context else ''
        return f'{type(error).__name__}: {context}{error.problem}{where}'
    return f'{type(error).__name__}: {" ".join(str(error).split())}'
