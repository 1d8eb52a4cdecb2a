"""Fashion-MNIST (Xiao et al. 2017, Zalando; MIT licence) in the layout torchvision's `FashionMNIST` reads, which is
what timm's ``--dataset torch/fashion_mnist`` builds: ``DIR/FashionMNIST/raw/`` with the four upstream IDX files,
decompressed, under their upstream names.

Its sources, in this order (a folder given as `source` replaces the first):

* Debian's package ``dataset-fashion-mnist`` (``apt-get install dataset-fashion-mnist``), which installs the upstream
  files gzip-compressed under :data:`DEBIAN_DIR`. They are recompressed, so torchvision's download check (the MD5
  of its own .gz files) rejects them and symlinks are not enough: they are decompressed here.
* torchvision's own download (``FashionMNIST(root, download=True)``, checked against torchvision's MD5s), where a
  network can reach the upstream mirror.

Whatever the source, every file is checked before it is used: the IDX header (magic number, dimensions), the size,
labels in 0..9 and the balanced class counts of the upstream set (6000 per class in train, 1000 in test). A file
that fails is named with what is wrong. Only regular files are read (a FIFO, a device or a symlink loop in a file's
place is named, never opened to read: :func:`~timm_pkmixer.state_files.open_regular`), and no more of one, plain or
decompressed, than its IDX header declares and one byte (a gzip bomb is refused there). Files already prepared are
kept, never overwritten: a folder holding all four is checked and left as it is; one that holds a bad file is
refused, naming it.
"""
import contextlib
import gzip
import os
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Dict, Iterator, List, Optional, Tuple

from ..errors import UserInputError
from ..state_files import Problem, open_regular

__all__ = ['DEBIAN_DIR', 'DEBIAN_PACKAGE', 'FASHION_MNIST_FILES', 'FASHION_MNIST_CLASSES', 'FASHION_MNIST_MEAN',
           'FASHION_MNIST_STD', 'FashionMnistError', 'PreparedFashionMnist', 'prepare_fashion_mnist',
           'check_fashion_mnist', 'fashion_mnist_raw_dir', 'network_timeout']

DEBIAN_PACKAGE = 'dataset-fashion-mnist'
DEBIAN_DIR = Path('/usr/share/datasets/fashion-mnist')
# upstream name -> (split, kind, number of items)
FASHION_MNIST_FILES: Dict[str, Tuple[str, str, int]] = {
    'train-images-idx3-ubyte': ('train', 'images', 60000),
    'train-labels-idx1-ubyte': ('train', 'labels', 60000),
    't10k-images-idx3-ubyte': ('test', 'images', 10000),
    't10k-labels-idx1-ubyte': ('test', 'labels', 10000),
}
FASHION_MNIST_CLASSES = ('T-shirt/top', 'Trouser', 'Pullover', 'Dress', 'Coat', 'Sandal', 'Shirt', 'Sneaker', 'Bag',
                         'Ankle boot')
# per-pixel mean and std of the 60,000 training images, pixel values scaled to [0, 1] (computed by
# `check_fashion_mnist(..., stats=True)`; the recipes' `mean` / `std`)
FASHION_MNIST_MEAN, FASHION_MNIST_STD = 0.2860, 0.3530
_MAGIC = {'images': 2051, 'labels': 2049}  # IDX: 0x0803 (unsigned byte, 3 dims), 0x0801 (unsigned byte, 1 dim)


class FashionMnistError(UserInputError, ValueError):
    """A Fashion-MNIST file that is missing or not what upstream published (the file and the fault are named)."""


@dataclass(frozen=True)
class PreparedFashionMnist:
    """What :func:`prepare_fashion_mnist` did: the ``--data-dir`` to give train.py (`root`), where the files came from
    (`source`: ``debian``, ``torchvision download`` or ``already prepared``, with `origin` the folder or URL), and the
    images per split."""
    root: Path
    source: str
    origin: str
    counts: Dict[str, int]


def fashion_mnist_raw_dir(root: Path) -> Path:
    """Where torchvision reads the IDX files for ``root`` (train.py's ``--data-dir``)."""
    return Path(root) / 'FashionMNIST' / 'raw'


def _problem(path: Path) -> Problem:
    """``PATH is a FIFO, not a regular file``, ``PATH cannot be read (Permission denied)``."""
    return lambda why: FashionMnistError(f'{path} is {why}' if why.startswith(('a ', 'an ')) else
                                         f'{path} cannot be read ({why})')


def _open(path: Path, missing: str) -> BinaryIO:
    """`path` opened to read, if it is a regular file: a FIFO, a device (a symlink to ``/dev/zero``), a folder or a
    symlink loop is named, never read (:func:`~timm_pkmixer.state_files.open_regular`); `missing` is the message
    when there is no file."""
    fd = open_regular(path, os.O_RDONLY, _problem(path))
    if fd is None:
        raise FashionMnistError(missing)
    return os.fdopen(fd, 'rb')


def _check_idx(path: Path, kind: str, count: int) -> None:
    """The IDX file at `path` holds `count` items of `kind` (28×28 images or labels 0..9, 10 balanced classes)."""
    with _open(path, f'{path} is missing') as f:
        _read_idx(f, str(path), kind, count, os.fstat(f.fileno()).st_size)


def _read_idx(f: BinaryIO, name: str, kind: str, count: int, size: Optional[int] = None) -> bytes:
    """The IDX file read from `f` (a file, or a gzip stream of one: `size` unknown), checked: its header first, then
    no more bytes than the header declares and one, so that a gzip bomb or an endless file is refused after reading
    the 47 MB a Fashion-MNIST file holds at most."""
    import numpy as np
    header = 16 if kind == 'images' else 8
    head = f.read(header)
    if len(head) < header:
        raise FashionMnistError(f'{name} is not an IDX file: {len(head)} bytes, shorter than its header')
    fields = tuple(int(x) for x in np.frombuffer(head, dtype='>u4'))
    expected = (_MAGIC[kind], count) + ((28, 28) if kind == 'images' else ())
    if fields != expected:
        raise FashionMnistError(f'{name} is not the Fashion-MNIST {kind} file: its IDX header says {fields}, '
                                f'expected {expected} (magic, count[, rows, cols])')
    payload = count * (28 * 28 if kind == 'images' else 1)
    whole = header + payload
    if size is not None and size != whole:
        raise FashionMnistError(f'{name} is truncated or padded: {size} bytes, expected {whole}')
    data = head + f.read(payload + 1)
    if len(data) != whole:
        got = f'{len(data)} bytes' if len(data) < whole else f'more than {whole} bytes'
        raise FashionMnistError(f'{name} is truncated or padded: {got}, expected {whole}')
    if kind == 'labels':
        per_class = np.bincount(np.frombuffer(data, dtype=np.uint8, offset=header), minlength=10)
        if len(per_class) != 10 or set(per_class.tolist()) != {count // 10}:
            raise FashionMnistError(f'{name}: labels per class {per_class.tolist()}, expected {count // 10} in each '
                                    f'of classes 0..9')
    return data


def check_fashion_mnist(root: Path) -> Dict[str, int]:
    """Check the four files under ``root/FashionMNIST/raw``; returns the images per split (``train``, ``test``).

    Raises:
        FashionMnistError: a file is missing or is not upstream's (named, with what is wrong).
    """
    raw = fashion_mnist_raw_dir(root)
    counts = {}
    for name, (split, kind, count) in FASHION_MNIST_FILES.items():
        _check_idx(raw / name, kind, count)
        counts[split] = count
    return counts


def _prepared_files(root: Path) -> List[str]:
    """The upstream files already under ``root/FashionMNIST/raw`` (each checked: one that is there but not upstream's
    is refused, naming it; it is never overwritten)."""
    raw = fashion_mnist_raw_dir(root)
    present = []
    for name, (_, kind, count) in FASHION_MNIST_FILES.items():
        if os.path.lexists(raw / name):
            try:
                _check_idx(raw / name, kind, count)
            except FashionMnistError as e:
                raise FashionMnistError(f'{e}; it is kept as it is: delete it (or give another folder) and run this '
                                        f'again') from None
            present.append(name)
    return present


def _decompress(source: Path, target: Path, kind: str, count: int) -> None:
    """gunzip `source` into `target` once its content is checked, atomically (a reader never sees half a file or a
    bad one; `target` is only ever created); no more is decompressed than the IDX header declares and one byte."""
    try:
        with _open(source, f'{source} is missing') as raw, gzip.GzipFile(fileobj=raw) as f:
            data = _read_idx(f, f'{source} (decompressed)', kind, count)
    except (OSError, EOFError) as e:  # gzip.BadGzipFile is an OSError; a truncated .gz ends in EOFError
        raise FashionMnistError(f'{source} cannot be decompressed ({type(e).__name__}: {e}); {_REINSTALL}') from None
    except FashionMnistError as e:
        raise FashionMnistError(f'{e}; {_REINSTALL}') from None
    tmp = target.with_name(f'.{target.name}.{os.getpid()}.tmp')
    try:
        tmp.write_bytes(data)
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)


_REINSTALL = f'reinstall it (as root: apt-get install --reinstall {DEBIAN_PACKAGE}) or give another source'


def _make_raw_dir(root: Path) -> Path:
    """``root/FashionMNIST/raw``, made if missing; something else in the place of one of its folders is named."""
    raw = fashion_mnist_raw_dir(root)
    try:
        raw.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        where = next(p for p in (raw.parent, raw) if p.exists() and not p.is_dir())
        raise FashionMnistError(f'{where} exists and is not a folder') from None
    return raw


def _from_folder(root: Path, source: Path, present: List[str]) -> None:
    missing = [name for name in FASHION_MNIST_FILES
               if name not in present and not os.path.lexists(source / f'{name}.gz')]
    if missing:
        raise FashionMnistError(f'{source} lacks {", ".join(f + ".gz" for f in missing)}; {_REINSTALL}')
    raw = _make_raw_dir(root)
    for name, (_, kind, count) in FASHION_MNIST_FILES.items():
        if name not in present:
            _decompress(source / f'{name}.gz', raw / name, kind, count)


DOWNLOAD_TIMEOUT_S = 60  # a network that answers nothing fails after this, rather than hanging


@contextlib.contextmanager
def network_timeout(seconds: float = DOWNLOAD_TIMEOUT_S) -> Iterator[None]:
    """Sockets opened meanwhile (torchvision's downloads: urllib without a timeout) give up after `seconds`."""
    import socket
    previous = socket.getdefaulttimeout()
    socket.setdefaulttimeout(seconds)
    try:
        yield
    finally:
        socket.setdefaulttimeout(previous)


def _from_torchvision(root: Path, present: List[str]) -> str:
    """Download with torchvision (MD5-checked) into a temporary folder under `root`, then move the files not
    `present` into place (torchvision would rewrite all four); returns the mirror."""
    import shutil
    import tempfile

    from torchvision.datasets import FashionMNIST
    root.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix='.download-', dir=root))
    try:
        with network_timeout():
            for train in (True, False):
                FashionMNIST(str(tmp), train=train, download=True)
        raw = _make_raw_dir(root)
        for name in FASHION_MNIST_FILES:
            if name not in present:
                os.replace(fashion_mnist_raw_dir(tmp) / name, raw / name)
    except (OSError, RuntimeError) as e:  # no network (URLError), a refused connection, an MD5 mismatch
        reason = ' '.join(str(e).split())  # torchvision's message spans lines: one line
        raise FashionMnistError(
            f'could not download Fashion-MNIST into {root} ({type(e).__name__}: {reason}). Without a network, '
            f"install Debian's copy (as root: apt-get install {DEBIAN_PACKAGE}) and run this again, or put the four "
            f'upstream .gz files in a folder and give that folder as `source`') from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return FashionMNIST.mirrors[0]


def prepare_fashion_mnist(root: str, source: Optional[str] = None, download: bool = True) -> PreparedFashionMnist:
    """Write Fashion-MNIST under ``root`` as torchvision reads it (``root/FashionMNIST/raw``), from `source` (a
    folder with the four upstream ``.gz`` files; default: Debian's :data:`DEBIAN_DIR` when it is there), else by
    torchvision's download when `download`. A folder already prepared is checked and kept (`source` is then not
    read); files already there are never overwritten: one that is not upstream's is refused, naming it.

    Raises:
        FashionMnistError: a missing or corrupted file (named), or no source at all (the message says how to get one).
    """
    root_path = Path(root)
    if root_path.exists() and not root_path.is_dir():
        raise FashionMnistError(f'{root} exists and is not a folder')
    present = _prepared_files(root_path)
    if len(present) == len(FASHION_MNIST_FILES):
        return PreparedFashionMnist(root_path, 'already prepared', str(fashion_mnist_raw_dir(root_path)),
                                    check_fashion_mnist(root_path))
    folder = Path(source) if source is not None else DEBIAN_DIR
    if source is not None and not folder.is_dir():
        raise FashionMnistError(f'source {source}: no such folder')
    if folder.is_dir():
        _from_folder(root_path, folder, present)
        return PreparedFashionMnist(root_path, 'debian' if source is None else 'folder', str(folder),
                                    check_fashion_mnist(root_path))
    if not download:
        raise FashionMnistError(f"no Fashion-MNIST here: {DEBIAN_DIR} does not exist (as root: apt-get install "
                                f"{DEBIAN_PACKAGE}) and the download is switched off")
    origin = _from_torchvision(root_path, present)
    return PreparedFashionMnist(root_path, 'torchvision download', origin, check_fashion_mnist(root_path))
