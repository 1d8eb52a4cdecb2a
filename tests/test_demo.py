"""`pkmixer demo`: Fashion-MNIST whenever it can be had, Synthetic Shapes (drawn from the seed) otherwise, saying
which; a run end to end, reproducible (the same command and seed print the same numbers), its CPU threads, and a
reading that concludes only what it measured (the mean accuracies over seeds, the gap and its noise: the seeds'
spread and the validation sample) and cites a committed depth study that says so."""
import hashlib
import math
import os
import re

import pytest

from timm_pkmixer.data.demo_data import SHAPES, write_shapes_dataset
from timm_pkmixer.data.fashion_mnist import DEBIAN_DIR, DEBIAN_PACKAGE, FASHION_MNIST_FILES
from timm_pkmixer.training.demo import DemoResult, accuracy_noise, reading, run_demo, summary_lines

from conftest import ROOT

DEBIAN = all((DEBIAN_DIR / f'{name}.gz').is_file() for name in FASHION_MNIST_FILES)
needs_debian = pytest.mark.skipif(not DEBIAN, reason=f"Debian's {DEBIAN_PACKAGE} is not installed ({DEBIAN_DIR}): "
                                                     f'as root, apt-get install {DEBIAN_PACKAGE}')


def test_shapes_dataset(tmp_path):
    write_shapes_dataset(str(tmp_path), train_per_class=3, val_per_class=2)
    for split, n in (('train', 3), ('validation', 2)):
        assert sorted(os.listdir(tmp_path / split)) == sorted(SHAPES)
        assert all(len(os.listdir(tmp_path / split / c)) == n for c in SHAPES)


def test_demo_runs_end_to_end(cli):
    """`pkmixer demo`: its progress (the threads, the data, the run, each epoch) on stderr; on stdout, after an empty
    line, the data it trained on and the results' table."""
    code, out, err = cli('demo', '--model', 's_mixer_rp_s64c64_32', '--data', 'shapes', '--epochs', '2', '--seeds', '1',
                         '--train-per-class', '8', '--batch-size', '16')
    assert code == 0
    progress = err.splitlines()
    assert len(progress) == 5 and re.fullmatch(r'\d+ threads? \(.+\)', progress[0])
    assert progress[1].startswith('data: Synthetic Shapes (circle, cross, square, triangle; 32x32 RGB, drawn from '
                                  'seed 0)')
    assert progress[2] == '[s_mixer_rp_s64c64_32 seed 0] 76,356 params, effective width m = 4096'
    assert [line.split('  ')[0] for line in progress[3:]] == ['[s_mixer_rp_s64c64_32 seed 0] epoch 1/2',
                                                              '[s_mixer_rp_s64c64_32 seed 0] epoch 2/2']
    blank, data, header, row, blank2, trained, rp = out.splitlines()  # stdout names the data too, as the progress did
    assert blank == blank2 == '' and data == progress[1] and header.split()[:3] == ['model', 'seed', 'params']
    name, seed, params, width, loss, acc, _ = row.split()
    assert (name, seed, params, width) == ('s_mixer_rp_s64c64_32', '0', '76,356', '4096')
    assert math.isfinite(float(loss)) and 0 <= float(acc.rstrip('%')) <= 100
    assert trained == ('trained: 2 epochs per run, 1 seed per model, AdamW at lr 0.002 with a warm-up cosine '
                       'schedule: a short run')
    assert rp.startswith('RP: Random-Permuted. The RP S-Mixer rearranges its S·C features')  # an RP model ran


def demo_lines(caplog, logged, **kwargs):
    """`run_demo(**kwargs)`'s results, and what `pkmixer demo` shows of it: the lines it logs, an empty line and its
    :func:`summary_lines`."""
    caplog.clear()
    results = run_demo(**kwargs)
    return results, logged() + [''] + summary_lines(results)


def test_demo_uses_the_idle_cores(monkeypatch):
    """Under load, one thread (two threads convoyed 9x slower on a busy 2-core machine); idle, all of them."""
    import os

    from timm_pkmixer.training import threads
    from timm_pkmixer.training.threads import choose_threads
    monkeypatch.delenv('OMP_NUM_THREADS', raising=False)
    monkeypatch.setattr(threads, 'available_cores', lambda: 2)
    monkeypatch.setattr(os, 'getloadavg', lambda: (3.1, 3.0, 2.5))
    assert choose_threads() == (1, '2 cores, load average 3.1')
    monkeypatch.setattr(os, 'getloadavg', lambda: (0.2, 0.3, 0.1))
    import torch
    assert choose_threads()[0] == min(torch.get_num_threads(), 2)
    assert choose_threads(3) == (3, 'as requested')


def runs(model: str, *accuracies: float, val_images: int = 300, classes: int = 4, **more):
    return [DemoResult(model, 76356, 4096, 0.5, acc, 1., classes, val_images, seed, **more)
            for seed, acc in enumerate(accuracies)]


def test_demo_reading_follows_its_numbers():
    rp, normal = runs('s_mixer_rp_s64c64_32', 91.0, 91.0), runs('s_mixer_s64c64_32', 96.3, 96.3)
    assert 'trails the normal one by 5.3 points' in reading(rp, normal)
    assert 'matched or beat the normal one here (+1.0 points)' in reading(runs(rp[0].model, 97.3, 97.3), normal)


def test_the_noise_covers_the_seeds_and_the_validation_sample():
    """Two standard errors of the difference of the means: the seeds' pooled spread × (1/n_a + 1/n_b) and each
    mean's binomial variance over its validation images; one seed per model measures no run-to-run variation."""
    rp, normal = runs('rp', 80.0, 84.0, val_images=2000), runs('n', 81.0, 83.0, val_images=2000)
    noise = accuracy_noise(rp, normal)
    pooled = (2 ** 2 + 2 ** 2 + 1 + 1) / 2  # points², 2 degrees of freedom
    assert noise.seeds == pytest.approx(2 * math.sqrt(pooled * (1 / 2 + 1 / 2)))
    assert noise.sample == pytest.approx(200 * math.sqrt(2 * 0.82 * 0.18 / 2000))
    assert noise.total == pytest.approx(math.hypot(noise.seeds, noise.sample))
    single = accuracy_noise(rp[:1], normal[:1])
    assert single.seeds is None and single.total is None and single.sample > 0


@pytest.mark.parametrize('rp_accs,normal_accs,expected', [
    ((36.0, 36.0), (36.3, 36.3), 'inconclusive. The models reached 36.0% (RP) and 36.3% (normal), the mean of 2 seeds '
                                 'each against 25% by chance'),
    ((60.0,), (95.0,), 'inconclusive'),
    ((95.5, 95.9), (96.1, 96.5), '95.7% (RP) and 96.3% (normal), the mean of 2 seeds each: the RP S-Mixer trails the '
                                 'normal one by 0.6 points, within the noise of ±3.2 points (two standard errors: ±0.6 '
                                 "from the seeds' spread, ±3.2 from the 300 validation images): no difference shown."),
    ((89.0, 91.0), (96.5, 97.5), 'trails the normal one by 7.0 points, beyond the noise of ±4.6 points (two standard '
                                 "errors: ±2.2 from the seeds' spread, ±4.0 from the 300 validation images), in 2 "
                                 'seeds of a short run on this small task: a measurement, not a cause. Over 5 seeds '
                                 'and depths 4-20 on the 8x8 digits, the committed depth study (benchmarks/digits/'
                                 'paper_experiments_results/depth/report.md) measured the RP S-Mixer ahead at every '
                                 'depth.'),
    ((90.0,), (97.0,), '90.0% (RP) and 97.0% (normal): the RP S-Mixer trails the normal one by 7.0 points; one seed '
                       'per model does not measure the run-to-run variation (the 300 validation images alone give '
                       '±4.0 points), so no difference is shown: two or more seeds measure it.'),
    ((96.0, 96.0), (95.0, 95.0), 'matched or beat the normal one here (+1.0 points), within the noise of ±3.4 points'),
    ((99.0, 99.0, 99.0), (85.0, 84.0, 86.0), 'the mean of 3 seeds each: the RP S-Mixer matched or beat the normal '
                                             'one here (+14.0 points), beyond the noise of ±4.4 points (two standard '
                                             "errors: ±1.2 from the seeds' spread, ±4.3 from the 300 validation "
                                             'images), in 3 seeds'),
])
def test_demo_concludes_only_what_it_measured(rp_accs, normal_accs, expected):
    """The mean accuracies, the gap and its noise (seeds and sample); no cause (a short run measures none), nothing
    without a measured run-to-run variation, and nothing the committed depth study contradicts (RP ahead at every
    depth)."""
    text = reading(runs('s_mixer_rp_s64c64_32', *rp_accs), runs('s_mixer_s64c64_32', *normal_accs))
    assert expected in text, text
    assert not any(claim in text for claim in ('because', 'neighbours', 'catch up', 'usually trails', 'the paper'))
    assert ('inconclusive' in text) == (min(sum(rp_accs) / len(rp_accs), sum(normal_accs) / len(normal_accs)) < 62.5)
    assert ('beyond' in text) <= (len(rp_accs) > 1)  # one seed never concludes


# ------------------------------------------------------------------------------ which data, and reproducibility

def numbers(lines):
    """The demo's output less what changes from run to run: times, and the temporary folder of the shapes."""
    return [re.sub(r'\(\d+\.\d s\)|\d+\.\ds$|pkmixer-demo-\w+', '<varies>', line) for line in lines]


def test_the_synthetic_shapes_are_a_function_of_the_seed(tmp_path):
    def digest(root):
        return hashlib.sha256(b''.join(p.read_bytes() for p in sorted(root.rglob('*.png')))).hexdigest()
    for name, seed in (('a', 3), ('b', 3), ('c', 4)):
        write_shapes_dataset(str(tmp_path / name), train_per_class=3, val_per_class=1, seed=seed)
    assert digest(tmp_path / 'a') == digest(tmp_path / 'b') != digest(tmp_path / 'c')


@pytest.mark.parametrize('data', ['shapes', pytest.param('fashion-mnist', marks=needs_debian)])
def test_the_same_command_and_seed_print_the_same_numbers(tmp_path, data, caplog, logged):
    """Twice the same tiny demo (both models, two seeds each): every printed number equal; the seeds differ."""
    from timm_pkmixer.data.demo_data import find_fashion_mnist
    if data == 'fashion-mnist':
        find_fashion_mnist(tmp_path / 'cache')  # prepared before both runs: each says "prepared earlier"
    outputs = []
    for _ in range(2):
        _, lines = demo_lines(caplog, logged, data=data, cache_dir=str(tmp_path / 'cache'), epochs=2, seeds=2,
                              train_per_class=4, val_per_class=3, batch_size=8, threads=1, seed=5)
        outputs.append(numbers(lines))
    assert outputs[0] == outputs[1]
    rows = [line.split() for line in outputs[0] if line.startswith('s_mixer')]
    assert [(r[0], r[1]) for r in rows] == [('s_mixer_rp_s64c64_32', '5'), ('s_mixer_rp_s64c64_32', '6'),
                                             ('s_mixer_s64c64_32', '5'), ('s_mixer_s64c64_32', '6')]
    assert rows[0][4] != rows[1][4]  # the two seeds trained differently (train loss)


@needs_debian
def test_the_demo_trains_on_fashion_mnist_when_it_can_and_says_so(tmp_path, caplog, logged):
    results, lines = demo_lines(caplog, logged, models=['s_mixer_s64c64_32'], cache_dir=str(tmp_path / 'cache'),
                                epochs=1, seeds=1, train_per_class=2, val_per_class=2, batch_size=8, threads=1)
    raw = tmp_path / 'cache' / 'fashion_mnist' / 'FashionMNIST' / 'raw'
    assert lines[1] == (f"data: Fashion-MNIST ({raw}, from Debian's {DEBIAN_DIR}): 20 training images (the first 2 of "
                        f'each of its 10 classes) and 20 validation images (the first 2 of each class of its test '
                        f'set), 28 px resized to 32')
    assert (results[0].num_classes, results[0].val_images) == (10, 20)
    _, lines = demo_lines(caplog, logged, models=['s_mixer_s64c64_32'], cache_dir=str(tmp_path / 'cache'), epochs=1,
                          seeds=1, train_per_class=2, val_per_class=2, batch_size=8, threads=1)
    assert lines[1].startswith(f'data: Fashion-MNIST ({raw}, prepared earlier): 20 training images')


def test_without_fashion_mnist_the_demo_trains_on_the_shapes_and_says_why(tmp_path, monkeypatch, caplog, logged):
    from torchvision.datasets import FashionMNIST

    from timm_pkmixer.data import fashion_mnist
    from timm_pkmixer.errors import InvalidArgumentError
    monkeypatch.setattr(fashion_mnist, 'DEBIAN_DIR', tmp_path / 'no-debian')
    monkeypatch.setattr(FashionMNIST, 'mirrors', ['http://127.0.0.1:9/'])  # no network: a refused connection
    results, lines = demo_lines(caplog, logged, models=['s_mixer_s64c64_32'], cache_dir=str(tmp_path / 'cache'),
                                epochs=1, seeds=1, train_per_class=2, batch_size=8, threads=1, seed=7)
    assert re.fullmatch(r"data: Synthetic Shapes \(circle, cross, square, triangle; 32x32 RGB, drawn from seed 7\) in "
                        r".*pkmixer-demo-\w+ \(Fashion-MNIST cannot be had here: could not download Fashion-MNIST "
                        r'into .*fashion_mnist \(RuntimeError: Error downloading .*Connection refused>\)\. Without a '
                        r"network, install Debian's copy .*\): 8 training and 4 validation images", lines[1]), lines[1]
    assert results[0].num_classes == 4
    with pytest.raises(InvalidArgumentError, match='^data: Fashion-MNIST cannot be had here: no Fashion-MNIST here'):
        run_demo(data='fashion-mnist', cache_dir=str(tmp_path / 'cache'), download=False, threads=1)


def test_the_depth_study_the_demo_cites_measured_rp_ahead_at_every_depth():
    import csv

    from timm_pkmixer.training.demo import DEPTH_STUDY
    with open(ROOT / DEPTH_STUDY.replace('report.md', 'report.csv'), encoding='utf-8') as f:
        rows = {(r['num_blocks'], r['permutation']): r for r in csv.DictReader(f)}
    depths = sorted({int(d) for d, _ in rows})
    assert depths == [4, 8, 12, 16, 20] and {r['runs'] for r in rows.values()} == {'5'}
    assert all(float(rows[str(d), 'random']['top1_err_mean']) < float(rows[str(d), 'normal']['top1_err_mean'])
               for d in depths)


# ------------------------------------------------------------------ what it says, and the input it cannot use

def test_the_output_says_what_rp_is_what_the_paper_predicts_and_how_long_it_trained():
    """`pkmixer demo` printed a table and a reading only: no word of what RP is, of the paper's prediction, or of the
    four epochs it trained (a short run, where the paper's ran 200)."""
    common = dict(epochs=4, lr=2e-3, data='Fashion-MNIST (…)')
    lines = summary_lines(runs('s_mixer_rp_s64c64_32', 81.0, 83.0, family='RP S-Mixer', **common)
                          + runs('s_mixer_s64c64_32', 82.0, 82.5, family='S-Mixer', **common))
    assert lines[0] == 'data: Fashion-MNIST (…)' and lines[1].split()[:2] == ['model', 'seed']
    assert [line.split()[:2] for line in lines[2:6]] == [['s_mixer_rp_s64c64_32', '0'], ['s_mixer_rp_s64c64_32', '1'],
                                                         ['s_mixer_s64c64_32', '0'], ['s_mixer_s64c64_32', '1']]
    assert lines[6:] == [
        '',
        'trained: 4 epochs per run, 2 seeds per model, AdamW at lr 0.002 with a warm-up cosine schedule: a short run',
        'RP: Random-Permuted. The RP S-Mixer rearranges its S·C features (S tokens × C channels) by fixed random '
        'permutations, drawn once from a seed, before and after each mixing layer, where the normal S-Mixer '
        'transposes them: the same parameters and the same effective width m = S·C, another sparse weight.',
        'The paper (Hayase & Karakida, ICML 2024, Fig. 7): at the same width m, the RP S-Mixer matches or beats the '
        'normal one as the depth grows, and trails it at limited depth (S = C = 128, 4 to 20 blocks, 200 epochs on '
        'CIFAR and STL-10).',
        reading(runs('s_mixer_rp_s64c64_32', 81.0, 83.0, **common), runs('s_mixer_s64c64_32', 82.0, 82.5, **common))]
    normal_only = summary_lines(runs('s_mixer_s64c64_32', 82.0, family='S-Mixer', epochs=15, lr=1e-3))
    assert normal_only[-1] == ('trained: 15 epochs per run, 1 seed per model, AdamW at lr 0.001 with a warm-up cosine '
                               'schedule: a short run')  # no RP model, no comparison: neither RP nor the paper


@pytest.mark.parametrize('lr,where', [('1e308', 'epoch 1, step 1 (its update overflowed float32)'),
                                      ('1e20', 'epoch 1, step 2 (loss nan)')])
def test_runs_that_diverge_are_named_with_what_to_do(cli, lr, where):
    """--lr 1e308 ended in a RuntimeError traceback from AdamW; a learning rate that makes the loss NaN trained on."""
    code, out, err = cli('demo', '--data', 'shapes', '--epochs', '2', '--seeds', '1', '--train-per-class', '8',
                         '--batch-size', '16', '--threads', '1', '--lr', lr)
    assert code == 2
    rows = [line.split() for line in out.splitlines() if line.startswith('s_mixer')]
    assert [r[:2] + r[4:6] for r in rows] == [['s_mixer_rp_s64c64_32', '0', 'diverged', '-'],
                                              ['s_mixer_s64c64_32', '0', 'diverged', '-']]
    assert not any(line.startswith('Same parameters') for line in out.splitlines())  # no reading of NaNs
    assert err.splitlines()[-1] == (
        f'pkmixer demo: error: --lr {float(lr):g}: 2 of 2 runs diverged: s_mixer_rp_s64c64_32 seed 0 at {where}, '
        f's_mixer_s64c64_32 seed 0 at {where}; train with a smaller --lr, such as the default, 0.002')
    assert f'[s_mixer_s64c64_32 seed 0] diverged at {where}: stopped' in err  # and not trained on for another epoch
    assert '[s_mixer_s64c64_32 seed 0] epoch 2/2' not in err


def test_a_learning_rate_below_the_default_that_diverges_suggests_a_tenth():
    from timm_pkmixer.errors import InvalidArgumentError
    from timm_pkmixer.training.demo import check_converged
    check_converged(runs('s_mixer_s64c64_32', 80.0, lr=1e-3))  # nothing diverged: nothing to say
    with pytest.raises(InvalidArgumentError, match=r'^lr 0\.001: 1 of 2 runs diverged: s_mixer_s64c64_32 seed 1 at '
                                                   r'epoch 3, step 9 \(loss inf\); train with a smaller `lr`, such as '
                                                   r'0\.0001$'):
        check_converged(runs('s_mixer_s64c64_32', 80.0, lr=1e-3) + [DemoResult(
            's_mixer_s64c64_32', 1, 1, math.nan, math.nan, 1., seed=1, lr=1e-3, diverged='epoch 3, step 9 (loss inf)')])


def _folder(root, classes, val_classes, val_images):
    """An ImageFolder: two images of each of `classes` to train on, `val_images` of each of `val_classes` to
    validate on."""
    from PIL import Image
    for split, names, count in (('train', classes, 2), ('validation', val_classes, val_images)):
        for name in names:
            (root / split / name).mkdir(parents=True)
            for i in range(count):
                Image.new('RGB', (32, 32), (i * 40, 0, 0)).save(root / split / name / f'{i}.png')
    return root


@pytest.mark.parametrize('classes,val_classes,val_images,why', [
    (['cat'], ['cat'], 2, 'its training images are of one class (cat): comparing two models needs two classes or more'),
    (['a', 'b', 'c'], ['b', 'c', 'd'], 2, 'its training and validation classes differ (validation lacks a; only '
                                          'validation has d): the labels of the two would not match'),
    (['a', 'b'], ['a', 'b'], 0, 'Found 0 images in subfolders of {root}/validation. Supported image extensions are'),
])
def test_an_image_folder_the_comparison_cannot_use_is_refused_before_training(cli, tmp_path, classes, val_classes,
                                                                              val_images, why):
    """A one-class folder printed '100.0 % (RP) and 100.0 % (normal): the RP S-Mixer matched or beat…'."""
    root = _folder(tmp_path / 'images', classes, val_classes, val_images)
    code, out, err = cli('demo', '--data-dir', root, '--seeds', '1', '--epochs', '1', '--threads', '1')
    assert code == 2 and out == ''
    assert err.splitlines()[-1].startswith(f'pkmixer demo: error: --data-dir {root}: {why.format(root=root)}')
    assert not any('params, effective width' in line for line in err.splitlines())  # nothing trained


def test_more_images_per_class_than_there_are_says_what_was_taken(tmp_path):
    """--train-per-class 7000 said 'the first 7000 of each' of a set that holds 6000 a class."""
    from test_fashion_mnist import idx_bytes

    from timm_pkmixer.data.demo_data import choose_demo_data
    from timm_pkmixer.data.fashion_mnist import fashion_mnist_raw_dir
    raw = fashion_mnist_raw_dir(tmp_path / 'fm')
    raw.mkdir(parents=True)
    for name, (_, kind, count) in FASHION_MNIST_FILES.items():
        (raw / name).write_bytes(idx_bytes(kind, count))
    data = choose_demo_data('auto', str(tmp_path / 'fm'), None, str(tmp_path), 0, 7000, 1001)
    assert (len(data.train), len(data.val)) == (60000, 10000)
    assert data.says == (f'Fashion-MNIST (prepared in {raw}): 60000 training images (all 6000 of each of its 10 '
                         f'classes: 7000 asked, it holds no more) and 10000 validation images (all 1000 of each class '
                         f'of its test set: 1001 asked, the test set holds no more), 28 px resized to 32')
    data = choose_demo_data('auto', str(tmp_path / 'fm'), None, str(tmp_path), 0, 6000, 3)
    assert data.says.endswith('60000 training images (the first 6000 of each of its 10 classes) and 30 validation '
                              'images (the first 3 of each class of its test set), 28 px resized to 32')


def test_a_prepared_fashion_mnist_with_a_bad_file_is_named_not_handed_to_torchvision(tmp_path, cli):
    from test_fashion_mnist import idx_bytes

    from timm_pkmixer.data.fashion_mnist import fashion_mnist_raw_dir
    raw = fashion_mnist_raw_dir(tmp_path / 'fm')
    raw.mkdir(parents=True)
    for name, (_, kind, count) in FASHION_MNIST_FILES.items():
        (raw / name).write_bytes(idx_bytes(kind, count)) if 'train-labels' not in name else os.mkfifo(raw / name)
    code, out, err = cli('demo', '--data-dir', tmp_path / 'fm', '--seeds', '1', '--threads', '1')
    assert code == 2 and err.splitlines()[-1] == (f'pkmixer demo: error: {raw / "train-labels-idx1-ubyte"} is a FIFO, '
                                                  f'not a regular file')
