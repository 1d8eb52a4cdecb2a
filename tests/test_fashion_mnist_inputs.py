"""`pkmixer prepare-fashion-mnist` reads only regular files, and no more of them than an IDX header declares: a FIFO
in the prepared folder is named rather than waited on, a symlink to ``/dev/zero`` (prepared or as a source ``.gz``)
is named rather than read until memory runs out, and a gzip bomb (the right IDX header, then gigabytes of zeros) is
refused after the header's declared size and one byte; a file in place of the prepared folder is named."""
import gzip
import os
import signal
import zlib

import pytest
import test_fashion_mnist
from test_fashion_mnist import NAMES, idx_bytes, prepare, source_with

KEPT = 'it is kept as it is: delete it (or give another folder) and run this again'
synthetic_source = test_fashion_mnist.synthetic_source  # the four upstream .gz files, synthetic (a fixture)
REINSTALL = 'reinstall it (as root: apt-get install --reinstall dataset-fashion-mnist) or give another source'


def _bomb(head: bytes, gib: int) -> bytes:
    """A .gz of `head` and then `gib` GiB of zeros, a few MB: gzip members of 64 MiB of zeros each, concatenated
    (a reader decompresses them as one stream)."""
    zeros = zlib.compressobj(9, zlib.DEFLATED, 31)
    member = zeros.compress(bytes(64 << 20)) + zeros.flush()
    return gzip.compress(head, mtime=0) + member * (gib * 16)


@pytest.fixture
def alarm():
    """A test that would block raises TimeoutError after 60 s instead (PEP 475: a signal handler's exception ends a
    blocking open())."""
    def ring(*_):
        raise TimeoutError('blocked for 60 s')
    previous = signal.signal(signal.SIGALRM, ring)
    signal.alarm(60)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)


def test_a_fifo_in_the_prepared_folder_is_named_not_waited_on(synthetic_source, tmp_path, cli, alarm):
    """Was: blocked opening the FIFO until killed."""
    raw = tmp_path / 'fm' / 'FashionMNIST' / 'raw'
    raw.mkdir(parents=True)
    os.mkfifo(raw / NAMES[1])
    code, out, err = prepare(cli, tmp_path / 'fm', '--source', synthetic_source)
    assert code == 2 and out == ''
    assert err == f'pkmixer prepare-fashion-mnist: error: {raw / NAMES[1]} is a FIFO, not a regular file; {KEPT}\n'


def test_a_device_in_the_prepared_folder_is_named_not_read(synthetic_source, tmp_path, cli):
    raw = tmp_path / 'fm' / 'FashionMNIST' / 'raw'
    raw.mkdir(parents=True)
    (raw / NAMES[0]).symlink_to('/dev/zero')
    code, out, err = prepare(cli, tmp_path / 'fm', '--source', synthetic_source)
    assert code == 2 and err == (f'pkmixer prepare-fashion-mnist: error: {raw / NAMES[0]} is a character device, not '
                                 f'a regular file; {KEPT}\n')
    assert os.listdir(raw) == [NAMES[0]]


@pytest.mark.parametrize('target,why', [('/dev/zero', 'is a character device, not a regular file'),
                                        ('loop', 'is a symlink loop'),
                                        ('nowhere', 'is missing')])
def test_a_source_gz_that_is_no_regular_file_is_named(synthetic_source, tmp_path, cli, target, why):
    src = source_with(synthetic_source, tmp_path, NAMES[2])
    (src / f'{NAMES[2]}.gz').symlink_to(src / f'{NAMES[2]}.gz' if target == 'loop' else
                                        tmp_path / target if target == 'nowhere' else target)
    code, out, err = prepare(cli, tmp_path / 'fm', '--source', src)
    assert code == 2 and err == f'pkmixer prepare-fashion-mnist: error: {src / NAMES[2]}.gz {why}; {REINSTALL}\n'
    assert NAMES[2] not in os.listdir(tmp_path / 'fm' / 'FashionMNIST' / 'raw')


@pytest.mark.parametrize('name,head,message', ids=['images', 'labels', 'no-header'], argvalues=[
    (NAMES[2], idx_bytes('images', 10000)[:16], 'is truncated or padded: more than 7840016 bytes, expected 7840016'),
    (NAMES[1], idx_bytes('labels', 60000)[:8], 'is truncated or padded: more than 60008 bytes, expected 60008'),
    (NAMES[0], b'', 'is not the Fashion-MNIST images file: its IDX header says (0, 0, 0, 0)'),
])
def test_a_gzip_bomb_is_refused_after_the_size_its_header_declares(synthetic_source, tmp_path, cli, name, head,
                                                                   message):
    """8 GiB of zeros behind the header, 8 MB compressed: read whole, as before, it was a MemoryError."""
    src = source_with(synthetic_source, tmp_path, name, _bomb(head, 8))
    assert (src / f'{name}.gz').stat().st_size < 16 << 20
    code, out, err = prepare(cli, tmp_path / 'fm', '--source', src)
    assert code == 2 and err.startswith(f'pkmixer prepare-fashion-mnist: error: {src / name}.gz (decompressed) '
                                        f'{message}'), err
    assert err.endswith(f'; {REINSTALL}\n')
    assert name not in os.listdir(tmp_path / 'fm' / 'FashionMNIST' / 'raw')


@pytest.mark.parametrize('where', ['FashionMNIST', 'FashionMNIST/raw'])
def test_a_file_in_place_of_the_prepared_folder_is_named(synthetic_source, tmp_path, cli, where):
    (tmp_path / 'fm' / where).parent.mkdir(parents=True, exist_ok=True)
    os.mkfifo(tmp_path / 'fm' / where)
    code, out, err = prepare(cli, tmp_path / 'fm', '--source', synthetic_source)
    assert code == 2
    assert err == f'pkmixer prepare-fashion-mnist: error: {tmp_path / "fm" / where} exists and is not a folder\n'
