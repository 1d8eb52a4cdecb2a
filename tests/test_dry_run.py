"""`pkmixer train --dry-run` checks what the run will meet, and the run (`pkmixer train`, every run `pkmixer launch`
starts) refuses the same before train.py makes its run folder: train.py (which one it is, and that it imports with
this timm), the model, and the data as train.py will read them — there, the model's channels and classes, the two
splits where timm will read them, a training batch. Every problem is named, not only the first; data that can only be
a mistake (validation on the training images, labels numbered apart, no step) are refused by name, and what the data
hold is said plainly. Image folders are written here; Fashion-MNIST is the real one (Debian's files) where installed.
"""
import io
import os
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from timm_pkmixer.data.fashion_mnist import DEBIAN_DIR, FASHION_MNIST_FILES

from conftest import MINI_TRAIN_PY, ROOT

REAL_TRAIN_PY = os.environ.get('TIMM_TRAIN_PY')  # read before the fixture clears it
# the stand-in train.py with train.py's own data arguments (the stand-in lacks them; its training is never reached)
_DATA_ARGS = ("parser.add_argument('--dataset', default='')\n"
              "parser.add_argument('--dataset-download', action='store_true', default=False)\n"
              "parser.add_argument('--mean', type=float, nargs='+', default=None)\n"
              "parser.add_argument('--std', type=float, nargs='+', default=None)\n"
              "parser.add_argument('--input-img-mode', default=None)\n"
              "parser.add_argument('--class-map', default='')\n")
TINY_RECIPE = ('model: s_mixer_s64c64_32\nmodel_kwargs: {img_size: 8, patch_size: 4, num_tokens: 4, embed_dim: 4, '
               'num_blocks: 1}\nnum_classes: 2\nimg_size: 8\nbatch_size: 2\nepochs: 1\ndevice: cpu\nworkers: 0\n')
DRY_RUN_DONE = '[pkmixer] dry run: the plan above was checked (train.py, the model, the data); train.py was not started'


def images(folder: Path, classes: str, count: int, mode: str = 'RGB', size: int = 8) -> None:
    """`count` images of `mode` in each class folder (one per letter of `classes`) of `folder`."""
    png = io.BytesIO()
    Image.new(mode, (size, size)).save(png, 'PNG')
    for name in classes:
        (folder / name).mkdir(parents=True, exist_ok=True)
        for i in range(count):
            (folder / name / f'{i}.png').write_bytes(png.getvalue())


@pytest.fixture
def work(tmp_path, launch_env):
    """train.py (the stand-in, with train.py's data arguments), a tiny S-Mixer's recipe (2 classes, batch 2, 8 px)
    whose runs go to runs/, and a good image folder: good/train/{a,b}/ (2 images each), good/validation/{a,b}/."""
    launch_env.setenv('OMP_NUM_THREADS', '1')
    text = MINI_TRAIN_PY.read_text(encoding='utf-8')
    anchor = "parser.add_argument('--out',"
    assert anchor in text
    (tmp_path / 'train.py').write_text(text.replace(anchor, _DATA_ARGS + anchor, 1))
    (tmp_path / 'r.yaml').write_text(TINY_RECIPE + f'output: {tmp_path / "runs"}\n')
    images(tmp_path / 'good' / 'train', 'ab', 2)
    images(tmp_path / 'good' / 'validation', 'ab', 1)
    return tmp_path


def train(cli, work, *argv, dry=True):
    return cli('train', '--train-py', work / 'train.py', work / 'r.yaml', *argv, *(['--dry-run'] if dry else []))


def refused_both_ways(cli, work, argv, message):
    """The dry run and the run: exit status 2, `message` alone on stderr, nothing on stdout, no run folder."""
    for dry in (True, False):
        code, out, err = train(cli, work, *argv, dry=dry)
        assert (code, out) == (2, ''), err
        assert err == f'pkmixer train: error: {message}\n'
        assert not (work / 'runs').exists()


# ------------------------------------------------------------------------------------------------- image folders

def test_a_good_image_folder_is_said_plainly_and_trains(work, cli):
    code, out, err = train(cli, work, '--data-dir', work / 'good')
    assert code == 0, err
    lines = out.splitlines()
    assert f'[pkmixer] data: image folder {work / "good/train"}: 4 training images in 2 classes (a, b); images 8×8 ' \
           f"RGB (3 channels; resized and cropped to 8×8 by train.py's transforms)" in lines
    assert f'[pkmixer] data: image folder {work / "good/validation"}: 2 validation images' in lines
    assert lines[-1] == DRY_RUN_DONE and not (work / 'runs').exists()
    code, out, err = train(cli, work, '--data-dir', work / 'good', dry=False)
    assert code == 0, err
    assert (work / 'runs' / 's_mixer_s64c64_32' / 'summary.csv').is_file()  # the stand-in trained an epoch


def test_gray_images_for_a_three_channel_model_are_said_to_be_converted(work, cli):
    images(work / 'gray' / 'train', 'ab', 1, mode='L', size=28)
    images(work / 'gray' / 'validation', 'ab', 1, mode='L', size=28)
    code, out, err = train(cli, work, '--data-dir', work / 'gray')
    assert code == 0, err
    assert f'[pkmixer] data: image folder {work / "gray/train"}: 2 training images in 2 classes (a, b); images ' \
           f"28×28 L, read as RGB (3 channels; resized and cropped to 8×8 by train.py's transforms)" in out.splitlines()


def test_no_validation_split_is_said_plainly(work, cli):
    code, out, err = train(cli, work, '--data-dir', work / 'good', '--val-split', '')
    assert code == 0, err
    assert ("[pkmixer] data: no validation split (val_split ''): train.py validates nothing, so the run records no "
            'eval top-1') in out.splitlines()
    assert f'[pkmixer] dataset: an image folder, {work / "good"} (sub-folder train/, no validation split, one folder ' \
           f'per class)' in out.splitlines()


def _train_only(work):
    images(work / 'd' / 'train', 'ab', 2)


def _other_classes(work):
    images(work / 'd' / 'train', 'ab', 2)
    images(work / 'd' / 'validation', 'ac', 1)


def _good(work):
    images(work / 'd' / 'train', 'ab', 1)
    images(work / 'd' / 'validation', 'ab', 1)


def _not_an_image(work):
    _good(work)
    (work / 'd' / 'train' / 'a' / '0.png').write_bytes(b'not a PNG')


VALIDATION_FOLDERS = 'validation/, val/, valid/, eval/ or evaluation/'


@pytest.mark.parametrize('make,argv,message', [
    (None, [], "--data-dir {d}: no such folder (the run's dataset is an image folder: give the folder holding train/ "
               'and validation/)'),
    (_train_only, [], f"image folder {{d}}: no {VALIDATION_FOLDERS} folder for the validation split 'validation' (it "
                      'holds train/): timm would read all of {d} as the validation images, the training images '
                      "included; give --val-split the name of the validation folder, or --val-split '' to validate on "
                      'nothing'),
    (_other_classes, [], 'image folder {d}: train/ and validation/ name different classes (only in train/: b; only in '
                         'validation/: c): timm numbers the class folders of each split on its own, so a validation '
                         'label would name another class'),
    (_good, ['--val-split', 'nosuch'], "image folder {d}: no nosuch/ folder for the validation split 'nosuch' (it "
                                       'holds train/, validation/): timm would read all of {d} as the validation '
                                       'images, the training images included; give --val-split the name of the '
                                       "validation folder, or --val-split '' to validate on nothing"),
    (_good, ['--train-split', 'training_set'],
     "image folder {d}: no training_set/ folder for the training split 'training_set' (it holds train/, "
     'validation/): timm would read all of {d} as the training images; give --train-split the name of the training '
     'folder'),
    (_good, ['-b', '8'], 'image folder {d}/train: 2 training images, fewer than one batch of 8: train.py drops an '
                         'incomplete last batch, so the run would make no step. Give -b/--batch-size 2 or fewer, or '
                         'more images'),
    (_good, ['--num-classes', '3'], 'image folder {d}/train: 2 classes (a, b), and the model has 3 outputs '
                                    '(num_classes 3): give --num-classes 2'),
    (_good, ['--val-split', 'train'], "image folder {d}: the validation split 'train' is the training folder "
                                      '{d}/train: the run would validate on its training images; give --val-split '
                                      'the name of the validation folder'),
    (_not_an_image, [], "{d}/train/a/0.png: not an image train.py can read (cannot identify image file "
                        "'{d}/train/a/0.png')"),
], ids=['missing', 'train-only', 'other-classes', 'val-split-nosuch', 'train-split-nosuch', 'fewer-than-a-batch',
        'num-classes', 'val-split-train', 'not-an-image'])
def test_data_that_cannot_be_meant_is_refused_by_name_before_the_run_folder(work, cli, make, argv, message):
    if make:
        make(work)
    refused_both_ways(cli, work, ['--data-dir', work / 'd', *argv], message.format(d=work / 'd'))


def test_a_batch_is_counted_in_each_process(work, cli, launch_env):
    """Under torchrun each process takes its share of the images (padded to the same size): 4 images in 2
    processes give each 2, fewer than a batch of 4."""
    launch_env.setenv('WORLD_SIZE', '2')
    launch_env.setenv('RANK', '0')
    refused_both_ways(cli, work, ['--data-dir', work / 'good', '-b', '4'],
                      f'image folder {work / "good/train"}: 4 training images, fewer than one batch of 4 in each of 2 '
                      f'processes: train.py drops an incomplete last batch, so the run would make no step. Give '
                      f'-b/--batch-size 2 or fewer, or more images')
    code, out, err = train(cli, work, '--data-dir', work / 'good', '-b', '2')
    assert code == 0, err


def test_every_problem_is_named_not_only_the_first(work, cli):
    images(work / 'd' / 'train', 'ab', 0)  # class folders without an image
    images(work / 'd' / 'validation', 'ab', 0)
    _train_only(work / 'e')
    refused_both_ways(cli, work, ['--data-dir', work / 'd'], (
        'the run would fail, for 2 reasons:\n'
        f'- image folder {work / "d/train"}: no training images (timm reads .png, .jpg and .jpeg files in <class>/ '
        f'folders)\n'
        f'- image folder {work / "d/validation"}: no validation images (timm reads .png, .jpg and .jpeg files in '
        f'<class>/ folders)'))
    refused_both_ways(cli, work, ['--data-dir', work / 'e/d', '-b', '0', '--model', 'nosuch_model',
                                  '--num-classes', '5'], (
        'the run would fail, for 4 reasons:\n'
        '- -b/--batch-size must be a positive integer, got 0\n'
        "- model 'nosuch_model' is neither a registered timm model nor a local-dir:/hf-hub: one; `pkmixer models` "
        'lists the timm-pkmixer models\n'
        f"- image folder {work / 'e/d'}: no {VALIDATION_FOLDERS} folder for the validation split 'validation' (it "
        f"holds train/): timm would read all of {work / 'e/d'} as the validation images, the training images "
        "included; give --val-split the name of the validation folder, or --val-split '' to validate on nothing\n"
        f"- image folder {work / 'e/d/train'}: 2 classes (a, b), and the model has 5 outputs (num_classes 5): give "
        '--num-classes 2'))


def test_channels_train_py_cannot_read_an_image_folder_as_are_refused(work, cli):
    refused_both_ways(cli, work, ['--data-dir', work / 'good', '--in-chans', '4', '--mean', '0.5', '--std', '0.5'],
                      "the model takes 4 input channels (in_chans 4) and train.py reads the images as L (1 channel): "
                      'give --input-img-mode a mode of 4 channels, or --in-chans 1')
    code, out, err = train(cli, work, '--data-dir', work / 'good', '--in-chans', '4', '--mean', '0.5', '--std', '0.5',
                           '--input-img-mode', 'RGBA')
    assert code == 0, err
    assert '(4 channels; resized' in out


# --------------------------------------------------------------------------------- Fashion-MNIST (torchvision's)

def _idx(kind: str, count: int) -> bytes:
    if kind == 'images':
        return np.array([2051, count, 28, 28], dtype='>u4').tobytes() + bytes(count * 28 * 28)
    return np.array([2049, count], dtype='>u4').tobytes() + (np.arange(count) % 10).astype(np.uint8).tobytes()


@pytest.fixture(scope='module')
def fashion_mnist(tmp_path_factory):
    """(a --data-dir of Fashion-MNIST as `pkmixer prepare-fashion-mnist` writes it, training and test images): the
    real one from Debian's files where installed, else 64 / 16 blank images of its shape."""
    root = tmp_path_factory.mktemp('fashion_mnist')
    if DEBIAN_DIR.is_dir():
        from timm_pkmixer.data.fashion_mnist import prepare_fashion_mnist
        prepare_fashion_mnist(str(root), download=False)
        return root, 60000, 10000
    raw = root / 'FashionMNIST' / 'raw'
    raw.mkdir(parents=True)
    for name, (split, kind, _) in FASHION_MNIST_FILES.items():
        (raw / name).write_bytes(_idx(kind, 64 if split == 'train' else 16))
    return root, 64, 16


ONE_CHANNEL = ['--in-chans', '1', '--mean', '0.2860', '--std', '0.3530', '--num-classes', '10']


def test_fashion_mnist_for_a_three_channel_model_is_refused_naming_the_channels(work, cli, fashion_mnist):
    root, _, _ = fashion_mnist
    refused_both_ways(cli, work, ['--dataset', 'torch/fashion_mnist', '--data-dir', root, '--num-classes', '10'],
                      "dataset torch/fashion_mnist: its images have 1 channel (L, 28×28), and the model takes 3 "
                      "(train.py's default in_chans): timm does not convert a torchvision dataset's images, so "
                      'train.py would stop at its first batch. Give --in-chans 1 with a 1-value --mean and --std, or '
                      'a recipe made for this dataset')


def test_fashion_mnist_with_its_channel_is_said_plainly(work, cli, fashion_mnist):
    root, train_count, test_count = fashion_mnist
    code, out, err = train(cli, work, '--dataset', 'torch/fashion_mnist', '--data-dir', root, *ONE_CHANNEL)
    assert code == 0, err
    assert (f'[pkmixer] data: dataset torch/fashion_mnist: {train_count} training images, {test_count} validation '
            f'images, 10 classes (T-shirt/top, Trouser, Pullover, Dress, Coat, … (10 in all)); images 28×28 L (1 '
            f"channel; resized and cropped to 8×8 by train.py's transforms)") in out.splitlines()
    assert '[pkmixer] input 8×8 px, 1 channel (from the recipe)' in out.splitlines()


@pytest.mark.parametrize('argv,message', [
    (['--num-classes', '2'], 'dataset torch/fashion_mnist: 10 classes (T-shirt/top, Trouser, Pullover, Dress, Coat, … '
                             '(10 in all)), and the model has 2 outputs (num_classes 2): give --num-classes 10'),
    (['--train-split', 'test'], "the training split 'test' of torch/fashion_mnist is its test set (it has a training "
                                'set and a test set, and timm reads the test set for any split but train or '
                                'training): the run would train on the test images; give --train-split train'),
    (['--val-split', 'train'], "the validation split 'train' of torch/fashion_mnist is its training set: the run would "
                               'validate on the training images; give --val-split validation (its test set)'),
    (['--val-split', 'nosuch'], "the validation split 'nosuch' is not a split of torch/fashion_mnist (timm reads its "
                                'test set for validation, test, val, valid, eval or evaluation, and for any misspelt '
                                "name): give --val-split validation, or --val-split '' to validate on nothing"),
    (['--mean', '0.5', '0.5', '0.5'], '--mean has 3 values (given) for 1 input channel: train.py would stop at its '
                                      'first batch; give one value, or one per channel'),
], ids=['classes', 'train-split-test', 'val-split-train', 'val-split-nosuch', 'mean'])
def test_fashion_mnist_splits_classes_and_normalisation_are_checked(work, cli, fashion_mnist, argv, message):
    root, _, _ = fashion_mnist
    refused_both_ways(cli, work, ['--dataset', 'torch/fashion_mnist', '--data-dir', root, *ONE_CHANNEL, *argv], message)


def test_the_test_split_by_its_name_is_accepted(work, cli, fashion_mnist):
    root, _, test_count = fashion_mnist
    code, out, err = train(cli, work, '--dataset', 'torch/fashion_mnist', '--data-dir', root, *ONE_CHANNEL,
                           '--val-split', 'test')
    assert code == 0 and f'{test_count} validation images' in out, err


def test_fashion_mnist_not_prepared_is_refused_saying_how_to_get_it(work, cli):
    refused_both_ways(cli, work, ['--dataset', 'torch/fashion_mnist', '--data-dir', work / 'fm', *ONE_CHANNEL],
                      f"dataset torch/fashion_mnist: Fashion-MNIST (torchvision's FashionMNIST), "
                      f"{work / 'fm/FashionMNIST/raw'}: not there (pkmixer prepare-fashion-mnist {work / 'fm'} writes "
                      f"it; or train on an image folder you have instead: --dataset '' --data-dir DIR --num-classes N "
                      f'(DIR/train/<class>/…, DIR/validation/<class>/…))')


def test_a_dataset_to_download_is_checked_by_what_is_known_of_it(work, cli):
    """CIFAR-10 not downloaded yet: its 3 channels and 10 classes are known, so a 1-channel model is refused before
    any download."""
    refused_both_ways(cli, work, ['--dataset', 'torch/cifar10', '--dataset-download', '--data-dir', work / 'c10',
                                  '--in-chans', '1', '--mean', '0.5', '--std', '0.5', '--num-classes', '10'],
                      'dataset torch/cifar10: its images have 3 channels (RGB, 32×32), and the model takes 1 '
                      '(in_chans 1): '
                      "timm does not convert a torchvision dataset's images, so train.py would stop at its first "
                      'batch. Give --in-chans 3 with a 3-value --mean and --std, or a recipe made for this dataset')
    assert not (work / 'c10').exists()  # nothing downloaded


def test_what_a_download_brings_is_checked_before_the_run_folder(work, cli, monkeypatch):
    """Fashion-MNIST to be downloaded: its size is not known before, so a batch larger than the downloaded training set
    passes the dry run and stops the run after the download, before train.py starts (the download stood in for by 64
    images written where torchvision puts them)."""
    from timm_pkmixer.data import datasets

    def download(source):
        raw = Path(source.root) / 'FashionMNIST' / 'raw'
        raw.mkdir(parents=True)
        for name, (split, kind, _) in FASHION_MNIST_FILES.items():
            (raw / name).write_bytes(_idx(kind, 64 if split == 'train' else 16))

    monkeypatch.setattr(datasets, 'fetch_data', download)
    argv = ['--dataset', 'torch/fashion_mnist', '--dataset-download', '--data-dir', work / 'fm', *ONE_CHANNEL,
            '-b', '100']
    code, out, err = train(cli, work, *argv)
    assert code == 0, err
    assert ('[pkmixer] data: dataset torch/fashion_mnist: not there yet; known: 28×28 L images (1 channel), 10 '
            'classes; its images checked once downloaded, before train.py starts') in out.splitlines()
    code, out, err = train(cli, work, *argv, dry=False)
    assert code == 2 and err == ('pkmixer train: error: dataset torch/fashion_mnist: 64 training images, fewer than '
                                 'one batch of 100: train.py drops an incomplete last batch, so the run would make no '
                                 'step. Give -b/--batch-size 64 or fewer, or more images\n')
    assert not (work / 'runs').exists()


# ------------------------------------------------------------------------------------------------------ train.py

def test_the_plan_says_which_train_py_it_is(work, cli):
    code, out, err = train(cli, work, '--data-dir', work / 'good')
    assert code == 0, err
    line = out.splitlines()[0]
    assert line.startswith(f'[pkmixer] train.py: {work / "train.py"} (sha256 ') and \
        "…): not timm 1.0.31's, the train.py the packaged recipes were checked against (sha256 f0bb70b9e1c8c576…); " \
        'it lacks ' in line and line.endswith("; this recipe's keys are all its arguments"), line


@pytest.mark.skipif(not REAL_TRAIN_PY, reason='set TIMM_TRAIN_PY to a real timm train.py')
def test_the_real_train_py_is_known(cli, launch_env, tmp_path, fashion_mnist):
    root, _, _ = fashion_mnist
    code, out, err = cli('train', '--train-py', REAL_TRAIN_PY, 'fashion_mnist/s_mixer_fig7', '--data-dir', root,
                         '--dry-run')
    assert code == 0, err
    assert out.splitlines()[0] == (f"[pkmixer] train.py: {REAL_TRAIN_PY} (sha256 f0bb70b9e1c8c576…): timm 1.0.31's, "
                                   f'the one the packaged recipes were checked against')


def test_a_train_py_of_another_timm_version_is_refused_by_name(work, cli):
    import timm
    (work / 'train.py').write_text('from timm.data import no_such_name_of_this_timm\n'
                                   + MINI_TRAIN_PY.read_text(encoding='utf-8'))
    code, out, err = train(cli, work, '--data-dir', work / 'good')
    assert code == 2 and out == ''
    assert err.startswith(f"pkmixer train: error: {work / 'train.py'} does not import with the installed timm "
                          f"{timm.__version__} (ImportError: cannot import name 'no_such_name_of_this_timm' from "
                          f"'timm.data'"), err
    assert "it is the train.py of another timm version\ntimm's train.py is not part of the timm wheel." in err


# ------------------------------------------------------------------------------- the case, real train.py

@pytest.mark.skipif(not REAL_TRAIN_PY, reason='set TIMM_TRAIN_PY to a real timm train.py')
def test_a_cifar_recipe_on_fashion_mnist_is_refused_before_its_run_folder(cli, launch_env, tmp_path, fashion_mnist):
    """Issue 52: the dry run passed, and the run ended in train.py's RuntimeError (shape [128, 1, 32, 32] against
    [128, 3, 32, 32]) with args.yaml and pkmixer_env.json left behind."""
    root, _, _ = fashion_mnist
    argv = ['train', '--train-py', REAL_TRAIN_PY, 'cifar10/s_mixer_fig7', '--dataset', 'torch/fashion_mnist',
            '--data-dir', root, '--output', tmp_path / 'runs', '--experiment', 'x']
    for dry in (['--dry-run'], []):
        code, out, err = cli(*argv, *dry)
        assert (code, out) == (2, '')
        assert err.startswith('pkmixer train: error: dataset torch/fashion_mnist: its images have 1 channel (L, '
                              "28×28), and the model takes 3 (train.py's default in_chans)"), err
        assert not (tmp_path / 'runs').exists()
    code, out, err = cli('train', '--train-py', REAL_TRAIN_PY, 'cifar10/s_mixer_fig7', '--dataset', '', '--data-dir',
                         tmp_path / 'MISSING', '--dry-run')
    assert (code, out) == (2, '') and err == (f"pkmixer train: error: --data-dir {tmp_path / 'MISSING'}: no such "
                                              f"folder (the run's dataset is an image folder: give the folder holding "
                                              f'train/ and validation/)\n')


# -------------------------------------------------------------------------------------- the sweep's explanation

def test_the_sweeps_settings_say_a_gray_recipes_channels(cli):
    """C.4's images are 32×32×3 (the paper's datasets are RGB); a Fashion-MNIST recipe feeds 32×32×1: said."""
    code, out, err = cli('sweep', 'fashion_mnist/s_mixer_fig7', '--experiment', 'depth', '--explain')
    assert code == 0, err
    assert '| img_size | 32 | C.4: images resized to 32×32×3; this recipe: 32×32×1 (in_chans 1) |' in out.splitlines()
    code, out, err = cli('sweep', ROOT / 'train_recipes' / 'cifar10' / 's_mixer_fig7.yaml', '--experiment', 'depth',
                         '--explain')
    assert code == 0, err
    assert '| img_size | 32 | C.4: images resized to 32×32×3 |' in out.splitlines()
