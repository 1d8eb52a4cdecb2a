"""Fashion-MNIST as a first-class dataset: `pkmixer prepare-fashion-mnist DIR` writes the layout timm's
``torch/fashion_mnist`` reads (real files, upstream names, 60,000 / 10,000 images, 6,000 / 1,000 per class), from
Debian's ``dataset-fashion-mnist``, a ``--source`` folder or torchvision's download; names a missing or corrupted file
(truncated, not gzip, wrong IDX magic), keeps a folder already prepared, and without a network says in one line how
to get the data; and a packaged ``fashion_mnist/`` recipe trains on the real images through timm's train.py.

The tests that read the real data need Debian's package (`.ci/install-fashion-mnist` installs it where CI runs as
root); elsewhere they skip and say why. The faults are tested on synthetic files of the upstream shapes."""
import csv
import gzip
import os
import re
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

from timm_pkmixer.data.fashion_mnist import DEBIAN_DIR, DEBIAN_PACKAGE, FASHION_MNIST_FILES

from conftest import DPKG_FRONTEND_LOCK as FRONTEND
from conftest import command_messages, dpkg_lock_held, needs_apt_root, run_releasing_when_said

NAMES = list(FASHION_MNIST_FILES)
DEBIAN = all((DEBIAN_DIR / f'{name}.gz').is_file() for name in NAMES)
NOT_INSTALLED = (f"Debian's {DEBIAN_PACKAGE} is not installed ({DEBIAN_DIR}): as root, apt-get install "
                 f'{DEBIAN_PACKAGE} (.ci/install-fashion-mnist)')
needs_debian = pytest.mark.skipif(not DEBIAN, reason=NOT_INSTALLED)
REAL_TRAIN_PY = os.environ.get('TIMM_TRAIN_PY')  # read before a fixture clears it


def idx_bytes(kind: str, count: int, magic: int = None) -> bytes:
    """An IDX file of the upstream shape: `count` blank 28×28 images, or labels cycling through the 10 classes."""
    if kind == 'images':
        header = np.array([magic or 2051, count, 28, 28], dtype='>u4').tobytes()
        return header + bytes(count * 28 * 28)
    return np.array([magic or 2049, count], dtype='>u4').tobytes() + (np.arange(count) % 10).astype(np.uint8).tobytes()


@pytest.fixture(scope='module')
def synthetic_source(tmp_path_factory) -> Path:
    """A folder with the four upstream .gz files (synthetic content of the upstream shapes)."""
    folder = tmp_path_factory.mktemp('source')
    for name, (_, kind, count) in FASHION_MNIST_FILES.items():
        with gzip.open(folder / f'{name}.gz', 'wb', compresslevel=1) as f:
            f.write(idx_bytes(kind, count))
    return folder


def source_with(synthetic_source: Path, tmp_path: Path, name: str, content: bytes = None) -> Path:
    """A copy of the synthetic source with `name`.gz replaced by `content` (None: removed)."""
    folder = tmp_path / 'src'
    shutil.copytree(synthetic_source, folder)
    target = folder / f'{name}.gz'
    target.unlink()
    if content is not None:
        target.write_bytes(content)
    return folder


def prepare(cli, *argv):
    code, out, err = cli('prepare-fashion-mnist', *map(str, argv))
    return code, out, command_messages(err)


@pytest.fixture(scope='module')
def debian_prepared(tmp_path_factory) -> Path:
    if not DEBIAN:
        pytest.skip(NOT_INSTALLED)
    from timm_pkmixer.data.fashion_mnist import prepare_fashion_mnist
    root = tmp_path_factory.mktemp('fashion_mnist')
    prepared = prepare_fashion_mnist(str(root), download=False)
    assert (prepared.source, prepared.origin) == ('debian', str(DEBIAN_DIR))
    return root


# ----------------------------------------------------------------------------------------------- the real data

@needs_debian
def test_prepared_from_debian_is_what_timm_reads(debian_prepared):
    """Real files (not links to Debian's recompressed .gz, which torchvision rejects) under their upstream names,
    read by timm's torch/fashion_mnist as train.py reads it: 60,000 / 10,000 28×28 grayscale images, balanced."""
    from timm.data import create_dataset
    raw = debian_prepared / 'FashionMNIST' / 'raw'
    assert sorted(os.listdir(raw)) == sorted(NAMES)
    sizes = {'train-images-idx3-ubyte': 16 + 60000 * 784, 'train-labels-idx1-ubyte': 8 + 60000,
             't10k-images-idx3-ubyte': 16 + 10000 * 784, 't10k-labels-idx1-ubyte': 8 + 10000}
    for name, size in sizes.items():
        assert (raw / name).is_file() and not (raw / name).is_symlink() and (raw / name).stat().st_size == size
    for split, count in (('train', 60000), ('validation', 10000)):
        ds = create_dataset('torch/fashion_mnist', root=str(debian_prepared), split=split, download=False)
        assert len(ds) == count
        assert np.bincount(ds.targets.numpy(), minlength=10).tolist() == [count // 10] * 10
        image, label = ds[0]
        assert (image.size, image.mode) == ((28, 28), 'L') and 0 <= label < 10
    assert ds.classes[0] == 'T-shirt/top' and ds.classes[9] == 'Ankle boot'


WEIGHTS = Path(__file__).resolve().parents[1] / 'benchmarks' / 'fashion_mnist' / 'weights'
# each committed folder (written by `pkmixer push --out-dir`) -> the run it holds, in the findings' epochs.csv
PUSHED_RUNS = {'s_mixer_s64c64_L8_normal': 'runs/depth_L8_normal_seed{}',
               'rp_s_mixer_s64c64_L8': 'runs/depth_L8_random_seed{}'}


@pytest.fixture
def one_thread():
    """One torch thread, as the runs validated (a sum's order, hence a rare tie, may follow the thread count)."""
    import torch
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _final_top1(run: str) -> float:
    """The run's test top-1 at its last epoch, as train.py wrote it (the findings' epochs.csv)."""
    with open(WEIGHTS.parent / 'rp' / 'epochs.csv', newline='', encoding='utf-8') as f:
        rows = [r for r in csv.DictReader(f) if r['run'] == run]
    return float(max(rows, key=lambda r: int(r['epoch']))['eval_top1'])


@needs_debian
@pytest.mark.slow
@pytest.mark.parametrize('folder', sorted(PUSHED_RUNS))
def test_the_pushed_s_mixers_reproduce_their_top1_on_the_real_test_set(debian_prepared, folder, one_thread):
    """timm loads the committed folder (local-dir:, pretrained) with its data config, and its accuracy on the 10,000
    real test images, read and transformed as train.py's validation reads them, is the run's final top-1."""
    import timm
    import torch
    from timm.data import create_dataset, create_loader, resolve_data_config
    path = WEIGHTS / folder
    model = timm.create_model(f'local-dir:{path}', pretrained=True).eval()
    cfg = resolve_data_config(model=model)
    assert cfg['input_size'] == (1, 32, 32) and model.num_classes == 10
    dataset = create_dataset('torch/fashion_mnist', root=str(debian_prepared), split='validation', download=False)
    loader = create_loader(dataset, input_size=cfg['input_size'], batch_size=128, is_training=False,
                           interpolation=cfg['interpolation'], mean=cfg['mean'], std=cfg['std'],
                           crop_pct=cfg['crop_pct'], num_workers=0, device=torch.device('cpu'))
    correct = 0
    with torch.no_grad():
        for images, targets in loader:
            correct += (model(images).argmax(-1) == targets).sum().item()
    import yaml
    seed = yaml.safe_load((path / 'train_hparams.yaml').read_text(encoding='utf-8'))['seed']
    assert round(100 * correct / len(dataset), 2) == _final_top1(PUSHED_RUNS[folder].format(seed))


@needs_debian
def test_the_cli_prepares_from_debian_and_says_so(tmp_path, cli):
    code, out, err = prepare(cli, tmp_path / 'fm')
    assert code == 0, err
    assert out.splitlines() == [
        f"{tmp_path / 'fm' / 'FashionMNIST' / 'raw'}: Fashion-MNIST, 60000 train and 10000 test images, 10 classes "
        f"(Debian's dataset-fashion-mnist {DEBIAN_DIR})",
        f"train on it with: pkmixer train fashion_mnist/s_mixer_fig7 --data-dir {tmp_path / 'fm'}",
        f"validate a model trained on it (pushed to the Hub as ORG/NAME) with timm's validate.py: python validate.py "
        f"--model hf-hub:ORG/NAME --pretrained --dataset torch/fashion_mnist --split validation --data-dir "
        f"{tmp_path / 'fm'} --in-chans 1 --device cpu"]


def test_an_already_prepared_folder_is_checked_and_kept(synthetic_source, tmp_path, cli):
    root = tmp_path / 'fm'
    assert prepare(cli, root, '--source', synthetic_source)[0] == 0
    raw = root / 'FashionMNIST' / 'raw'
    before = {name: (raw / name).stat() for name in NAMES}
    bad_source = source_with(synthetic_source, tmp_path, NAMES[0], b'not gzip')  # not read: nothing to do
    for argv in ((), ('--source', bad_source), ('--no-download',)):
        code, out, err = prepare(cli, root, *argv)
        assert code == 0, err
        assert out.startswith(f'{raw}: Fashion-MNIST, 60000 train and 10000 test images, 10 classes (already '
                              f'prepared, checked and kept: {raw})')
    assert {name: (raw / name).stat() for name in NAMES} == before  # the same files, untouched


def test_source_folder_and_a_partly_prepared_folder(synthetic_source, tmp_path, cli):
    """--source names the folder; a folder holding some of the files gets the others, its own kept."""
    root = tmp_path / 'fm'
    code, out, err = prepare(cli, root, '--source', synthetic_source)
    assert code == 0 and f'(the folder {synthetic_source})' in out, err
    raw = root / 'FashionMNIST' / 'raw'
    (raw / NAMES[3]).unlink()
    kept = (raw / NAMES[0]).stat()
    code, out, err = prepare(cli, root, '--source', synthetic_source)
    assert code == 0 and (raw / NAMES[3]).is_file() and (raw / NAMES[0]).stat() == kept, err


# ------------------------------------------------------------------------------------------------------- faults

@pytest.mark.parametrize('name,content,message', ids=['missing', 'not-gzip', 'truncated-gz', 'wrong-magic',
                                                      'truncated-idx', 'no-header'], argvalues=[
    (NAMES[0], None, '{src} lacks train-images-idx3-ubyte.gz; reinstall it (as root: apt-get install --reinstall '
                     'dataset-fashion-mnist) or give another source'),
    (NAMES[3], b'not a gzip file', "{src}/t10k-labels-idx1-ubyte.gz cannot be decompressed (BadGzipFile: Not a "
                                   "gzipped file (b'no')); reinstall it"),
    (NAMES[0], 'truncated', '{src}/train-images-idx3-ubyte.gz cannot be decompressed (EOFError: Compressed file ended '
                            'before the end-of-stream marker was reached); reinstall it'),
    (NAMES[1], gzip.compress(idx_bytes('labels', 60000, magic=2051), mtime=0),
     '{src}/train-labels-idx1-ubyte.gz (decompressed) is not the Fashion-MNIST labels file: its IDX header says '
     '(2051, 60000), expected (2049, 60000) (magic, count[, rows, cols]); reinstall it'),
    (NAMES[2], gzip.compress(idx_bytes('images', 10000)[:-5], mtime=0),
     '{src}/t10k-images-idx3-ubyte.gz (decompressed) is truncated or padded: 7840011 bytes, expected 7840016'),
    (NAMES[3], gzip.compress(bytes(8) + bytes(10000), mtime=0),
     '{src}/t10k-labels-idx1-ubyte.gz (decompressed) is not the Fashion-MNIST labels file: its IDX header says (0, 0)'),
])
def test_a_missing_or_corrupted_source_file_is_named(synthetic_source, tmp_path, cli, name, content, message):
    if content == 'truncated':
        content = (synthetic_source / f'{name}.gz').read_bytes()[:1000]
    src = source_with(synthetic_source, tmp_path, name, content)
    code, out, err = prepare(cli, tmp_path / 'fm', '--source', src)
    assert code == 2 and out == ''
    assert err.startswith(f'pkmixer prepare-fashion-mnist: error: {message.format(src=src)}'), err
    assert len(err.splitlines()) == 1
    raw = tmp_path / 'fm' / 'FashionMNIST' / 'raw'
    assert not raw.exists() or name not in os.listdir(raw) and not any(f.startswith('.') for f in os.listdir(raw))


def test_a_bad_file_already_prepared_is_named_and_kept(synthetic_source, tmp_path, cli):
    raw = tmp_path / 'fm' / 'FashionMNIST' / 'raw'
    raw.mkdir(parents=True)
    (raw / NAMES[2]).write_bytes(idx_bytes('images', 10000)[:100])
    code, out, err = prepare(cli, tmp_path / 'fm', '--source', synthetic_source)
    assert code == 2 and err == (f'pkmixer prepare-fashion-mnist: error: {raw / NAMES[2]} is truncated or padded: 100 '
                                 f'bytes, expected 7840016; it is kept as it is: delete it (or give another folder) '
                                 f'and run this again\n')
    assert (raw / NAMES[2]).stat().st_size == 100 and os.listdir(raw) == [NAMES[2]]


def test_a_source_that_is_not_a_folder_is_named_by_its_flag(tmp_path, cli):
    code, out, err = prepare(cli, tmp_path / 'fm', '--source', tmp_path / 'nowhere')
    assert code == 2
    assert err == f"pkmixer prepare-fashion-mnist: error: --source {tmp_path / 'nowhere'}: no such folder\n"


@pytest.fixture
def no_network(monkeypatch):
    """No Debian copy, and torchvision's mirrors on a port where nothing listens (a refused connection)."""
    from torchvision.datasets import FashionMNIST

    from timm_pkmixer.data import fashion_mnist
    monkeypatch.setattr(fashion_mnist, 'DEBIAN_DIR', Path('/nonexistent/fashion-mnist'))
    monkeypatch.setattr(FashionMNIST, 'mirrors', ['http://127.0.0.1:9/'])


def test_no_network_is_one_line_naming_debian_s_package(tmp_path, cli, no_network):
    code, out, err = prepare(cli, tmp_path / 'fm')
    assert code == 2 and out == ''
    assert err.startswith('pkmixer prepare-fashion-mnist: error: could not download Fashion-MNIST into '
                          f"{tmp_path / 'fm'} (RuntimeError: Error downloading train-images-idx3-ubyte.gz: Tried "
                          'http://127.0.0.1:9/, got: <urlopen error [Errno 111] Connection refused>). Without a '
                          "network, install Debian's copy (as root: apt-get install dataset-fashion-mnist) and run "
                          'this again, or put the four upstream .gz files in a folder and give that folder as '
                          '--source'), err
    assert len(err.splitlines()) == 1
    assert os.listdir(tmp_path / 'fm') == []  # the download's temporary folder is gone
    code, out, err = prepare(cli, tmp_path / 'fm2', '--no-download')
    assert code == 2 and err == ('pkmixer prepare-fashion-mnist: error: no Fashion-MNIST here: /nonexistent/'
                                 'fashion-mnist does not exist (as root: apt-get install dataset-fashion-mnist) and '
                                 'the download is switched off\n')


# ------------------------------------------------------------------------------------------- pkmixer train on it

def write_subset(prepared: Path, root: Path, train: int, test: int) -> Path:
    """The first `train` / `test` images of a prepared Fashion-MNIST as a folder torchvision reads (real images:
    a short run on the real data)."""
    raw = root / 'FashionMNIST' / 'raw'
    raw.mkdir(parents=True)
    for name, (split, kind, _) in FASHION_MNIST_FILES.items():
        n = train if split == 'train' else test
        header, item = (16, 784) if kind == 'images' else (8, 1)
        data = (prepared / 'FashionMNIST' / 'raw' / name).read_bytes()
        (raw / name).write_bytes(data[:4] + n.to_bytes(4, 'big') + data[8:header] + data[header:header + n * item])
    return root


@pytest.mark.slow  # 200 steps of the recipe's S-Mixer: about 20 s idle, 40 s on this busy 2-core machine
@pytest.mark.skipif(not REAL_TRAIN_PY, reason="TIMM_TRAIN_PY is not set: timm's train.py is not in the timm wheel")
def test_a_packaged_recipe_trains_on_the_real_images(debian_prepared, tmp_path):
    """`pkmixer train fashion_mnist/s_mixer_fig7` through timm's train.py: 200 steps (batch 32) on the first 6,400
    real training images, evaluated on the first 1,000 test images: a real top-1, far above chance (10 %)."""
    import subprocess
    data = write_subset(debian_prepared, tmp_path / 'data', 6400, 1000)
    proc = subprocess.run(
        [sys.executable, '-m', 'timm_pkmixer', 'train', 'fashion_mnist/s_mixer_fig7', '--train-py', REAL_TRAIN_PY,
         '--data-dir', str(data), '--epochs', '1', '-b', '32', '-j', '1', '--threads', '1', '--device', 'cpu',
         '--output', str(tmp_path / 'runs'), '--experiment', 'fm'], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (f"[pkmixer] dataset: Fashion-MNIST (torchvision's FashionMNIST), {data / 'FashionMNIST' / 'raw'} (there)"
            in proc.stdout.splitlines())
    assert 'Train: 0 [ 199/200 (100%)]' in proc.stdout + proc.stderr
    with open(tmp_path / 'runs' / 'fm' / 'summary.csv', newline='') as f:
        (row,) = list(csv.DictReader(f))
    assert 50 < float(row['eval_top1']) <= 100 and float(row['train_loss']) < 2.3  # ln 10 = 2.30: chance


# ----------------------------------------------------------------------- .ci/install-fashion-mnist (CI installs it)

INSTALL = Path(__file__).resolve().parent.parent / '.ci' / 'install-fashion-mnist'


def _install_env(wait_s: int, path: str = None) -> dict:
    return dict(os.environ, PKMIXER_APT_LOCK_WAIT=str(wait_s), **({'PATH': path} if path else {}))


def install(wait_s: int, path: str = None):
    import subprocess
    return subprocess.run(['/bin/bash', str(INSTALL)], capture_output=True, text=True, timeout=600,
                          env=_install_env(wait_s, path))


@needs_apt_root
def test_the_install_waits_for_apt_s_lock_and_fails_rather_than_skips():
    """Against the real apt-get and dpkg lock, held by a process that lets go only when the test says (never first,
    however busy the machine): a lock held until the install has met it and said so is waited for, then the package
    is installed (or found installed) by apt-get's next try; one held past the wait fails with exit 1, not 3 (which
    skips)."""
    with dpkg_lock_held() as holder:
        said = (f'apt-get install: Could not get lock {FRONTEND}. It is held by {holder.who}; waiting up to 120 s '
                f'for it …')
        proc = run_releasing_when_said(['/bin/bash', str(INSTALL)], said, holder, env=_install_env(120))
    assert proc.returncode == 0, proc.stderr
    assert said in proc.stderr.splitlines()
    assert re.search(r'\n\d+ upgraded, \d+ newly installed', proc.stderr.split(said, 1)[1])  # apt-get's, after it
    assert DEBIAN_DIR.is_dir()
    with dpkg_lock_held() as holder:
        proc = install(3)
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr.splitlines()[-1] == (
        f'install-fashion-mnist: apt-get install -y dataset-fashion-mnist: the lock was still held after 3 s (Could '
        f'not get lock {FRONTEND}. It is held by {holder.who}); run again once that process is done '
        f'(PKMIXER_APT_LOCK_WAIT sets the wait, in seconds)')


def test_the_install_without_apt_get_says_why_and_skips(tmp_path):
    for tool in ('id', 'cat', 'rm', 'mktemp', 'grep', 'cut', 'sleep'):
        if shutil.which(tool):
            (tmp_path / tool).symlink_to(shutil.which(tool))
    proc = install(3, path=str(tmp_path))
    assert proc.returncode == 3, proc.stderr
    assert proc.stderr.startswith('Fashion-MNIST unavailable: dataset-fashion-mnist is not installed and ')


# ------------------------------------------------------------------------------------- RP's cost per real epoch

def _rp_cost_script():
    import importlib.util
    spec = importlib.util.spec_from_file_location(
        'rp_cost', Path(__file__).resolve().parents[1] / 'benchmarks' / 'speed' / 'rp_cost.py')
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_rp_cost_times_whole_epochs_through_the_recipes_loader(synthetic_source, tmp_path, capsys):
    """benchmarks/speed/rp_cost.py --data-dir: each model's epochs through timm's loader of the prepared set, in
    turn; the ratio of each repetition is RP's epoch over normal's, and the tables say what was timed."""
    import json

    from timm_pkmixer.data.fashion_mnist import prepare_fashion_mnist
    data = tmp_path / 'fm'
    prepare_fashion_mnist(str(data), source=str(synthetic_source))
    rp_cost = _rp_cost_script()
    out = tmp_path / 'out'
    rp_cost.main(['--modes', 'eager', '--reps', '1', '--steps', '1', '--warmup', '1', '--data-dir', str(data),
                  '--epoch-reps', '2', '--epoch-batches', '2', '--loader-workers', '0', '--out-dir', str(out)])
    measured = json.loads((out / 'rp_cost.json').read_text(encoding='utf-8'))
    epochs = measured['results'][0]['epochs']
    assert (epochs['reps'], epochs['steps'], epochs['images']) == (2, 2, 256)
    assert [len(epochs['seconds'][p]) for p in ('normal', 'random')] == [2, 2]
    assert epochs['ratios'] == [r / n for r, n in zip(epochs['seconds']['random'], epochs['seconds']['normal'])]
    assert measured['env']['loader_workers'] == 0
    text = (out / 'rp_cost.md').read_text(encoding='utf-8')
    assert ('Whole epochs of real training: 256 Fashion-MNIST images (2 steps) through the recipe\'s training loader '
            '(0 loading workers), the two models alternating') in text
    assert '\n| eager (2 epochs each) | ' in text and capsys.readouterr().out == text


def test_rp_cost_refuses_a_missing_data_dir_and_a_device_it_cannot_use(tmp_path, capsys):
    rp_cost = _rp_cost_script()
    for argv, message in ((['--data-dir', str(tmp_path / 'none')],
                           f'--data-dir {tmp_path / "none"}: no such folder (prepare it with pkmixer '
                           f'prepare-fashion-mnist)'),
                          (['--device', 'tpu'], '--device tpu: not a device name (cpu, cuda, cuda:1)'),
                          (['--device', 'meta'], '--device meta: a CPU or a CUDA device')):
        with pytest.raises(SystemExit) as e:
            rp_cost.main([*argv, '--out-dir', str(tmp_path / 'out')])
        assert e.value.code == 2 and capsys.readouterr().err.rstrip().endswith(f'error: {message}')
    assert not (tmp_path / 'out').exists()
