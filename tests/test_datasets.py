"""Datasets for train.py (`timm_pkmixer.data.datasets`): an image folder as timm reads it, as `pkmixer
prepare-stl10` writes it; where a run's data come from, as `pkmixer train` says in its plan, and a download without
a network refused in one line that names the way out (one's own image folder, `--dataset ''`)."""
import os

import pytest
import timm
from PIL import Image

from timm_pkmixer.data.datasets import DataUnavailableError, data_source, export_image_folder, fetch_data

from conftest import MINI_TRAIN_PY


def test_export_image_folder_is_readable_by_timm(tmp_path):
    colours = [(255, 0, 0), (0, 255, 0), (0, 0, 255)]
    samples = [(Image.new('RGB', (96, 96), colours[i % 3]), i % 3) for i in range(7)]
    counts = export_image_folder(samples, ['airplane', 'bird', 'car'], tmp_path / 'train')
    assert counts == {'airplane': 3, 'bird': 2, 'car': 2}
    ds = timm.data.create_dataset('', root=str(tmp_path), split='train')
    assert len(ds) == 7 and ds.reader.class_to_idx == {'airplane': 0, 'bird': 1, 'car': 2}
    image, label = ds[0]
    assert image.size == (96, 96) and label == 0 and image.getpixel((0, 0)) == (255, 0, 0)
    with pytest.raises(ValueError, match='sample 0 has label 5, outside the 3 classes'):
        export_image_folder([(samples[0][0], 5)], ['a', 'b', 'c'], tmp_path / 'bad')


# ----------------------------------------------------------------- where a run's data come from (`pkmixer train`)

REAL_TRAIN_PY = os.environ.get('TIMM_TRAIN_PY')  # read before a fixture clears it
OWN = ("train on an image folder you have instead: --dataset '' --data-dir DIR --num-classes N (DIR/train/<class>/…, "
       'DIR/validation/<class>/…)')


@pytest.fixture
def no_network(monkeypatch):
    """torchvision's CIFAR-10 and Fashion-MNIST downloads aimed at a port where nothing listens (refused at once)."""
    from torchvision.datasets import CIFAR10, FashionMNIST
    monkeypatch.setattr(CIFAR10, 'url', 'http://127.0.0.1:9/cifar-10-python.tar.gz')
    monkeypatch.setattr(FashionMNIST, 'mirrors', ['http://127.0.0.1:9/'])


def test_a_download_without_a_network_is_one_line_naming_the_way_out(tmp_path, no_network):
    source = data_source('torch/cifar10', str(tmp_path / 'cifar'), download=True)
    assert (source.kind, source.present) == ('torchvision', False)
    assert source.describe() == (f"dataset: torch/cifar10 (torchvision's) in {tmp_path / 'cifar'}: not there yet, "
                                 f'torchvision downloads it (a network is needed; without one, {OWN})')
    with pytest.raises(DataUnavailableError) as e:
        fetch_data(source)
    assert str(e.value) == (f"dataset torch/cifar10: could not download it into {tmp_path / 'cifar'} (URLError: "
                            f'<urlopen error [Errno 111] Connection refused>). Without a network, {OWN}')
    fm = data_source('torch/fashion_mnist', str(tmp_path / 'fm'), download=True)
    with pytest.raises(DataUnavailableError, match=r"could not download it into .*\. Without a network, pkmixer "
                                                   r"prepare-fashion-mnist .*/fm, or train on an image folder"):
        fetch_data(fm)


def test_each_kind_of_dataset_says_where_it_comes_from(tmp_path):
    (tmp_path / 'mine' / 'train').mkdir(parents=True)
    folder = data_source('', str(tmp_path / 'mine'))
    assert folder.describe() == (f'dataset: an image folder, {tmp_path / "mine"} (sub-folders train/ and validation/, '
                                 f'one folder per class)')
    fetch_data(folder)  # there: nothing to do
    missing = data_source('', str(tmp_path / 'nowhere'))
    assert missing.describe().endswith(': no such folder')
    with pytest.raises(DataUnavailableError) as e:
        fetch_data(missing)
    assert str(e.value) == (f"--data-dir {tmp_path / 'nowhere'}: no such folder (the run's dataset is an image "
                            f'folder: give the folder holding train/ and validation/)')
    fm = data_source('torch/fashion_mnist', str(tmp_path / 'fm'), download=False)
    assert fm.describe() == (f"dataset: Fashion-MNIST (torchvision's FashionMNIST), "
                             f"{tmp_path / 'fm/FashionMNIST/raw'}: not there (pkmixer prepare-fashion-mnist "
                             f"{tmp_path / 'fm'} writes it; or {OWN})")
    with pytest.raises(DataUnavailableError, match='^dataset torch/fashion_mnist: Fashion-MNIST .*: not there '
                                                   r'\(pkmixer prepare-fashion-mnist'):
        fetch_data(fm)
    assert data_source('hfds/user/set', 'x').describe() == "dataset: hfds/user/set from x (read by timm's reader)"


def test_the_plan_says_where_the_data_come_from_and_a_missing_folder_stops_the_run(tmp_path, cli, launch_env):
    """The dry run refuses what the run would refuse (exit status 2, the folder named), and the run stops before
    train.py makes its folder."""
    launch_env.setenv('OMP_NUM_THREADS', '1')
    (tmp_path / 'r.yaml').write_text('model: s_mixer_s64c64_32\nmodel_kwargs: {img_size: 8, patch_size: 4, num_tokens: '
                                     '4, embed_dim: 4, num_blocks: 1}\nnum_classes: 2\nimg_size: 8\nbatch_size: 2\n'
                                     f'epochs: 1\noutput: {tmp_path / "runs"}\n')
    refused = (f"pkmixer train: error: --data-dir {tmp_path / 'nowhere'}: no such folder (the run's dataset is an "
               f'image folder: give the folder holding train/ and validation/)\n')
    for dry in (['--dry-run'], []):
        code, out, err = cli('train', '--train-py', MINI_TRAIN_PY, tmp_path / 'r.yaml', '--data-dir',
                             tmp_path / 'nowhere', '--device', 'cpu', *dry)
        assert (code, out, err) == (2, '', refused)
        assert not (tmp_path / 'runs').exists()
    for split in ('train', 'validation'):
        for name in ('a', 'b'):
            (tmp_path / 'mine' / split / name).mkdir(parents=True)
            Image.new('RGB', (8, 8)).save(tmp_path / 'mine' / split / name / '0.png')
    code, out, err = cli('train', '--train-py', MINI_TRAIN_PY, tmp_path / 'r.yaml', '--data-dir', tmp_path / 'mine',
                         '--device', 'cpu', '--dry-run')
    assert code == 0, err
    assert (f"[pkmixer] dataset: an image folder, {tmp_path / 'mine'} (sub-folders train/ and validation/, one "
            f"folder per class)") in out.splitlines()


@pytest.mark.skipif(not REAL_TRAIN_PY, reason="TIMM_TRAIN_PY is not set: timm's train.py is not in the timm wheel")
def test_a_packaged_recipe_that_downloads_says_so_and_fails_in_one_line_without_a_network(tmp_path, cli, launch_env,
                                                                                           no_network):
    launch_env.setenv('OMP_NUM_THREADS', '1')
    argv = ('train', '--train-py', REAL_TRAIN_PY, 'cifar10/s_mixer_fig5', '--data-dir', tmp_path / 'c10',
            '--output', tmp_path / 'runs', '--epochs', '1')
    code, out, err = cli(*argv, '--dry-run')
    assert code == 0, err
    assert (f"[pkmixer] dataset: torch/cifar10 (torchvision's) in {tmp_path / 'c10'}: not there yet, torchvision "
            f'downloads it (a network is needed; without one, {OWN})') in out.splitlines()
    code, out, err = cli(*argv)
    assert code == 2 and err == (f"pkmixer train: error: dataset torch/cifar10: could not download it into "
                                 f"{tmp_path / 'c10'} (URLError: <urlopen error [Errno 111] Connection refused>). "
                                 f'Without a network, {OWN}\n')
    assert not (tmp_path / 'runs').exists()
    for split in ('train', 'validation'):  # the way out: one's own image folder
        for name in ('a', 'b'):
            (tmp_path / 'mine' / split / name).mkdir(parents=True)
            Image.new('RGB', (8, 8)).save(tmp_path / 'mine' / split / name / '0.png')
    code, out, err = cli(*argv, '--dataset', '', '--data-dir', tmp_path / 'mine', '--num-classes', '2', '-b', '2',
                         '--dry-run')
    assert code == 0 and f"[pkmixer] dataset: an image folder, {tmp_path / 'mine'} (sub-folders train/ and " \
                         f'validation/, one folder per class)' in out.splitlines()
