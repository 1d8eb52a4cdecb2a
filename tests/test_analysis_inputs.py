"""Bad input to the analysis library and `pkmixer analyze` (issue 28): each case was a silent result, a hang or a
traceback; now a UserInputError naming the argument (library) or exit 2 naming the option or file (CLI)."""
import csv
import os

import numpy as np
import pytest
import timm
import torch
import yaml
from PIL import Image

from timm_pkmixer.analysis import (
    cka_matrix,
    effective_singular_values,
    fig4_spectra,
    fig_s1_spectra,
    init_edge,
    linear_cka,
    mp_edge,
    pk_effective_weight,
    width_report,
)
from timm_pkmixer.analysis.cka import HsicAccumulator, gram
from timm_pkmixer.analysis.spectra import sparse_bernoulli, sparse_masked_gaussian
from timm_pkmixer.cli import main
from timm_pkmixer.errors import ArgumentTypeError, InvalidArgumentError, UserInputError

from conftest import randomize_

KW = dict(img_size=8, patch_size=2, num_blocks=2, num_tokens=16, embed_dim=16, gamma=2.0, num_classes=10)
CLI_KW = ['--model', 'pk_mixer_ss8_32', '--model-kwargs'] + [f'{k}={v}' for k, v in KW.items()]


def mixer(seed=0):
    torch.manual_seed(seed)
    return randomize_(timm.create_model('pk_mixer_ss8_32', **KW))


def features(n=8, d=5, seed=0):
    return torch.randn(n, d, generator=torch.Generator().manual_seed(seed))


def run_cli(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


# ------------------------------------------------------------------ CKA of features where it is undefined

def _nan(x):
    x = x.clone()
    x[2, 1] = float('nan')
    return x


def _inf(x, sign=1.):
    x = x.clone()
    x[0, 0] = sign * float('inf')
    return x


@pytest.mark.parametrize('unbiased', [False, True])
@pytest.mark.parametrize('x, y, message', [
    (torch.zeros(8, 5), features(), 'x is all zero: its HSIC with itself, the denominator of CKA, is 0'),
    (torch.ones(8, 5) * 3, features(), 'x is constant (the same for every example)'),
    (features().expand(8, 5) * 0 + features()[:1], features(), 'x is constant'),
    (features(), torch.zeros(8, 3), 'y is all zero'),
    (_nan(features()), features(), 'x holds 1 non-finite values (nan or inf)'),
    (features(), _inf(features()), 'y holds 1 non-finite values'),
    (features(), _inf(features(), -1.), 'y holds 1 non-finite values'),
])
def test_linear_cka_refuses_undefined_features(x, y, message, unbiased):
    with pytest.raises(InvalidArgumentError) as e:
        linear_cka(x, y, unbiased=unbiased)
    assert str(e.value).startswith(message) and 'CKA is undefined' in str(e.value)


@pytest.mark.parametrize('value', ['no', 'False', 0, 1, None, 1.0])
def test_linear_cka_flag_must_be_a_bool(value):
    with pytest.raises(ArgumentTypeError, match=r'^unbiased must be True or False, got'):
        linear_cka(features(), features(seed=1), unbiased=value)


@pytest.mark.parametrize('value', ['no', 0, None])
def test_effective_singular_values_flag_must_be_a_bool(value):
    with pytest.raises(ArgumentTypeError, match=r'^repeat must be True or False'):
        effective_singular_values(mixer(), repeat=value)


def test_cka_matrix_refuses_constant_features_naming_them():
    """One image repeated: every feature is the same for every example, HSIC(K, K) = 0 up to rounding."""
    x = torch.randn(1, 3, 8, 8).expand(6, 3, 8, 8).contiguous()
    with pytest.raises(InvalidArgumentError) as e:
        cka_matrix(mixer(0), mixer(1), [x])
    assert str(e.value).startswith('model_a feature blocks.0.mlp_tokens has HSIC')
    assert 'constant or zero' in str(e.value)


def test_cka_matrix_refuses_non_finite_features_naming_them():
    x = torch.randn(6, 3, 8, 8)
    x[0, 0, 0, 0] = float('nan')
    with pytest.raises(InvalidArgumentError) as e:
        cka_matrix(mixer(0), mixer(1), [x])
    assert str(e.value).startswith('model_a feature blocks.0.mlp_tokens has HSIC nan with itself')


def test_hsic_accumulator_refuses_zero_self_hsic():
    acc = HsicAccumulator(1, 1)
    k = gram(torch.ones(6, 4))
    acc.update((k,), (gram(features(6, 4)),))
    with pytest.raises(InvalidArgumentError, match=r'^row feature 0 has HSIC'):
        acc.cka()


@pytest.mark.parametrize('n_a, n_b, message', [
    (3, 2, 'batches_b ends after 2 batches while batches has more'),
    (1, 2, 'batches ends after 1 batches while batches_b has more'),
    (0, 1, 'batches ends after 0 batches while batches_b has more'),
])
def test_cka_matrix_refuses_batch_lists_of_different_lengths(n_a, n_b, message):
    gen = torch.Generator().manual_seed(0)
    a = [torch.randn(5, 3, 8, 8, generator=gen) for _ in range(n_a)]
    b = [torch.randn(5, 3, 8, 8, generator=gen) for _ in range(n_b)]
    with pytest.raises(InvalidArgumentError, match=f'^{message}'):
        cka_matrix(mixer(0), mixer(1), a, b)


# ------------------------------------------------------------------ random-matrix settings out of range

@pytest.mark.parametrize('call, message', [
    (lambda: mp_edge(10, 20, -1.), 'std must be in [0, ∞), got -1'),
    (lambda: mp_edge(0, 20, 1.), 'rows must be a positive integer, got 0'),
    (lambda: init_edge(10, 20, -0.5), 'std must be in [0, ∞), got -0.5'),
    (lambda: init_edge(10, 20, 1., density=1.5), 'density must be in (0, 1], got 1.5'),
    (lambda: init_edge(10, 20, 1., density=0.), 'density must be in (0, 1], got 0'),
    (lambda: sparse_masked_gaussian(8, 8, 1.5, 1., np.random.default_rng(0)), 'density must be in (0, 1], got 1.5'),
    (lambda: sparse_masked_gaussian(8, 8, 0.5, -2., np.random.default_rng(0)), 'std must be in [0, ∞), got -2'),
    (lambda: sparse_masked_gaussian(-8, 8, 0.5, 1., np.random.default_rng(0)), 'rows must be a positive integer'),
    (lambda: sparse_bernoulli(8, 2., np.random.default_rng(0)), 'density must be in (0, 1], got 2'),
    (lambda: fig4_spectra(omega=0.5, dims=[4], tokens=[8], trials=1), 'omega must be at least 1'),
    (lambda: fig4_spectra(omega=512, dims=[4], tokens=[8], trials=1001), 'trials must be at most 1000'),
    (lambda: fig4_spectra(omega=512, dims=[4], tokens=[8], trials=0), 'trials must be a positive integer'),
    (lambda: fig_s1_spectra([0.5], omega=0.5, trials=1), 'omega must be at least 1'),
    (lambda: fig_s1_spectra([0.5], omega=10, trials=5000), 'trials must be at most 1000'),
    (lambda: fig_s1_spectra(['x'], omega=10, trials=1), "a must be a number, got 'x'"),
    (lambda: fig_s1_spectra([0.5], omega=10, trials=1, seed=1.5), 'seed must be an integer'),
])
def test_random_matrix_settings_are_validated(call, message):
    with pytest.raises(UserInputError) as e:
        call()
    assert str(e.value).startswith(message)


def test_random_matrix_experiments_report_each_trial(caplog, logged):
    rows, _ = fig_s1_spectra([0., 0.5], omega=10, trials=3)
    lines = logged()
    assert len(rows) == 2 and len(lines) == 6
    assert lines[0].startswith('a=0 m=3 (point 1/2): trial 1/3') and lines[5].startswith('a=0.5 m=6 (point 2/2): '
                                                                                          'trial 3/3')
    caplog.clear()
    fig4_spectra(omega=512, dims=[4], tokens=[8], trials=2)
    assert [line.split(',')[0] for line in logged()] == ['C=4 S=8 (point 1/1): trial 1/2',
                                                      'C=4 S=8 (point 1/1): trial 2/2']


# ------------------------------------------------------------------ pkmixer analyze

def _image_folder(root, splits=('validation',), n=4):
    rng = np.random.default_rng(0)
    for split in splits:
        for label in ('0', '1'):
            (root / split / label).mkdir(parents=True)
            for i in range(n):
                Image.fromarray(rng.integers(0, 255, (8, 8, 3), dtype=np.uint8)).save(root / split / label / f'{i}.png')


def _run(path, seed, data_dir):
    path.mkdir(parents=True)
    args = dict(model='pk_mixer_ss8_32', model_kwargs={k: v for k, v in KW.items() if k != 'num_classes'},
                num_classes=10, img_size=8, crop_pct=1.0, mean=[0.5] * 3, std=[0.5] * 3, data_dir=str(data_dir),
                seed=seed)
    (path / 'args.yaml').write_text(yaml.safe_dump(args))
    torch.save({'state_dict': mixer(seed).state_dict(), 'epoch': 1}, path / 'last.pth.tar')
    return path


@pytest.mark.parametrize('splits, split_args, message', [
    (('validation',), ['--split', 'test'], "--split 'test': "),
    (('train',), [], "--split 'validation': "),
    (('train',), ['--split', 'val'], "--split 'val': "),
])
def test_cli_cka_refuses_a_split_the_folder_does_not_have(capsys, tmp_path, splits, split_args, message):
    _image_folder(tmp_path / 'data', splits)
    a, b = _run(tmp_path / 'a', 0, tmp_path / 'data'), _run(tmp_path / 'b', 1, tmp_path / 'data')
    code, _, err = run_cli(capsys, 'analyze', 'cka', a, b, *split_args, '--batch-size', 4, '--out-dir',
                           tmp_path / 'out', '--no-figures')
    assert code == 2 and 'Traceback' not in err
    assert err.startswith(f'pkmixer analyze cka: error: {message}{tmp_path / "data"} has no sub-folder')
    assert f'(it has: {", ".join(splits)})' in err


def test_cli_cka_reads_a_synonym_of_the_split(capsys, tmp_path):
    """timm reads 'validation' from a folder named val/: that is the split, not a fallback."""
    _image_folder(tmp_path / 'data', ('val',))
    a, b = _run(tmp_path / 'a', 0, tmp_path / 'data'), _run(tmp_path / 'b', 1, tmp_path / 'data')
    code, out, err = run_cli(capsys, 'analyze', 'cka', a, b, '--batch-size', 4, '--out-dir', tmp_path / 'out',
                             '--no-figures')
    assert code == 0, err
    assert 'over 8 examples' in out and 'a vs b: batch 2/2' in err


def test_a_runs_model_and_evaluation_batches_without_the_command(tmp_path):
    """The library behind `pkmixer analyze cka`: the run's model (its checkpoint found in the folder), its evaluation
    transform, the split checked as timm resolves it, seeded random batches; errors name the argument."""
    from timm_pkmixer.analysis.eval_data import check_split, eval_data_config, eval_loader
    from timm_pkmixer.errors import ArgumentValueError
    from timm_pkmixer.publish.checkpoint_file import load_trained_model
    from timm_pkmixer.runs.run_folder import find_checkpoint
    _image_folder(tmp_path / 'data', ('val',))
    run = _run(tmp_path / 'run', 0, tmp_path / 'data')
    trained = load_trained_model(run)
    assert (trained.name, trained.model.training, trained.train_args['data_dir']) == (
        'pk_mixer_ss8_32', False, str(tmp_path / 'data'))
    assert torch.equal(trained.model.state_dict()['head.weight'], mixer(0).state_dict()['head.weight'])
    config = eval_data_config(trained.train_args, trained.model)
    assert config['input_size'] == (3, 8, 8)
    first, again = (eval_loader(trained.train_args, config, batch_size=4, batch_seed=3) for _ in range(2))
    assert [len(b) for b in first.batch_sampler] == [4, 4] and first.batch_sampler == again.batch_sampler
    assert [tuple(x.shape) for x, _ in first] == [(4, 3, 8, 8)] * 2
    with pytest.raises(ArgumentValueError) as e:
        check_split(tmp_path / 'data', '', 'train')
    assert (e.value.argument, str(e.value)) == ('split', f"split 'train': {tmp_path / 'data'} has no sub-folder "
                                                         f"train or training (it has: val); timm would read the whole "
                                                         f"folder, other images, instead")
    check_split(tmp_path / 'data', 'torch/cifar10', 'train')  # a named dataset knows its splits
    with pytest.raises(ArgumentValueError) as e:
        eval_loader({}, config, batch_size=4)
    assert str(e.value) == 'data_dir must be given: the run does not record its data_dir'
    (run / 'last.pth.tar').rename(run / 'model_best.pth.tar')
    assert find_checkpoint(run) == run / 'model_best.pth.tar'
    (run / 'args.yaml').unlink()
    with pytest.raises(ArgumentValueError) as e:
        load_trained_model(run / 'model_best.pth.tar')
    assert str(e.value) == (f'model must be given: {run / "model_best.pth.tar"} does not record its model (no '
                            f'train.py arguments in it and no args.yaml beside it)')


def test_cli_names_the_model_option_for_a_checkpoint_without_its_model(capsys, tmp_path):
    run = _run(tmp_path / 'run', 0, tmp_path / 'data')
    (run / 'args.yaml').unlink()
    code, _, err = run_cli(capsys, 'analyze', 'spectra', run, '--out-dir', tmp_path / 'out', '--no-figures')
    assert (code, err) == (2, f'pkmixer analyze spectra: error: --model must be given: {run} does not record its '
                              f'model (no train.py arguments in it and no args.yaml beside it)\n')


def test_cli_runs_of_the_same_name_get_distinct_outputs(capsys, tmp_path):
    _image_folder(tmp_path / 'data')
    a = _run(tmp_path / 'a', 0, tmp_path / 'data')
    b1, b2 = _run(tmp_path / 'seed1' / 'run', 1, tmp_path / 'data'), _run(tmp_path / 'seed2' / 'run', 2,
                                                                          tmp_path / 'data')
    code, out, err = run_cli(capsys, 'analyze', 'cka', a, b1, b2, '--batch-size', 4, '--out-dir', tmp_path / 'cka',
                             '--no-figures')
    assert code == 0, err
    with open(tmp_path / 'cka' / 'cka_summary.csv') as f:
        assert [r['model_b'] for r in csv.DictReader(f)] == ['seed1_run', 'seed2_run']
    first, second = ((tmp_path / 'cka' / f'cka_seed{i}_run.csv').read_text() for i in (1, 2))
    assert first != second

    code, out, err = run_cli(capsys, 'analyze', 'spectra', b1, b2, '--out-dir', tmp_path / 'sp', '--no-figures')
    assert code == 0, err
    assert sorted(os.listdir(tmp_path / 'sp')) == ['spectra_runs.csv', 'spectra_seed1_run.csv',
                                                    'spectra_seed2_run.csv']


@pytest.mark.parametrize('command', ['cka', 'spectra'])
def test_cli_refuses_the_same_run_twice(capsys, tmp_path, command):
    _image_folder(tmp_path / 'data')
    a, b = _run(tmp_path / 'a', 0, tmp_path / 'data'), _run(tmp_path / 'b', 1, tmp_path / 'data')
    runs = [a, b, tmp_path / 'x' / '..' / 'b'] if command == 'cka' else [b, tmp_path / 'x' / '..' / 'b']
    (tmp_path / 'x').mkdir()
    code, _, err = run_cli(capsys, 'analyze', command, *runs, '--out-dir', tmp_path / 'out', '--no-figures')
    assert code == 2 and 'Traceback' not in err
    assert f"{tmp_path / 'x' / '..' / 'b'} is given twice" in err


@pytest.mark.parametrize('argv, message', [
    (['--omega', '0.5'], 'argument --omega: --omega must be in [1, ∞), got 0.5'),
    (['--fig-s1', '--omega', '0'], 'argument --omega: --omega must be in [1, ∞), got 0'),
    (['--trials', '1001'], 'argument --trials: --trials must be at most 1000, got 1001'),
    (['--trials', '0'], 'argument --trials: --trials must be a positive integer, got 0'),
    (['--threads', '0'], 'argument --threads: the value must be a positive integer, got 0'),
])
def test_cli_spectra_refuses_out_of_range_settings(capsys, tmp_path, argv, message):
    code, _, err = run_cli(capsys, 'analyze', 'spectra', *argv, '--out-dir', tmp_path / 'out')
    assert code == 2 and message in err and 'Traceback' not in err


@pytest.mark.parametrize('argv', [
    ['spectra', '--fig-s1', '--omega', '10', '--a', '0', '0.5', '--trials', '2', '--no-figures'],
    ['cost', '--models', 'rp_mixer', '--steps', '0'],
])
def test_cli_applies_the_thread_policy(capsys, tmp_path, monkeypatch, argv):
    """No --threads, no $OMP_NUM_THREADS: the idle cores (2 cores at load 9.5: one thread), as `pkmixer demo`."""
    monkeypatch.delenv('OMP_NUM_THREADS', raising=False)
    monkeypatch.setattr(os, 'cpu_count', lambda: 2)
    monkeypatch.setattr(os, 'getloadavg', lambda: (9.5, 9.5, 9.5))
    before = torch.get_num_threads()
    try:
        code, out, err = run_cli(capsys, 'analyze', *argv, '--out-dir', tmp_path / 'out')
        assert code == 0, err
        assert torch.get_num_threads() == 1 and os.environ['OMP_NUM_THREADS'] == '1'
        assert '1 thread (2 cores, load average 9.5))' in out
    finally:
        torch.set_num_threads(before)
        os.environ.pop('OMP_NUM_THREADS', None)


def test_cli_spectra_reports_progress_per_trial(capsys, tmp_path):
    code, out, err = run_cli(capsys, 'analyze', 'spectra', '--fig-s1', '--omega', '10', '--a', '0', '0.5',
                             '--trials', '2', '--threads', '1', '--no-figures', '--out-dir', tmp_path / 'out')
    assert code == 0, err
    assert [line.split(',')[0] for line in err.splitlines()] == [
        'a=0 m=3 (point 1/2): trial 1/2', 'a=0 m=3 (point 1/2): trial 2/2',
        'a=0.5 m=6 (point 2/2): trial 1/2', 'a=0.5 m=6 (point 2/2): trial 2/2']


@pytest.mark.parametrize('fraction', [0.1, 0.5, 0.9, 0.99])
@pytest.mark.parametrize('command', ['spectra', 'cka'])
def test_cli_names_a_truncated_checkpoint(capsys, tmp_path, fraction, command):
    _image_folder(tmp_path / 'data')
    run = _run(tmp_path / 'run', 0, tmp_path / 'data')
    data = (run / 'last.pth.tar').read_bytes()
    (run / 'last.pth.tar').write_bytes(data[:int(len(data) * fraction)])
    other = [_run(tmp_path / 'other', 1, tmp_path / 'data')] if command == 'cka' else []
    code, _, err = run_cli(capsys, 'analyze', command, run, *other, '--out-dir', tmp_path / 'out', '--no-figures')
    assert code == 2 and 'Traceback' not in err
    assert err.startswith(f'pkmixer analyze {command}: error: {run / "last.pth.tar"}: cannot be read as a '
                          f'checkpoint, it is truncated or corrupt')


@pytest.mark.parametrize('call, message', [
    (lambda v: pk_effective_weight(timm.create_model('s_mixer_s64c64_32', img_size=8, patch_size=2, num_tokens=16,
                                                     embed_dim=4, num_blocks=1).blocks[0].mlp_channels,
                                   (16, 4), (16, 4), paper_order=v), 'paper_order must be True or False'),
    (lambda v: width_report(omega=2 ** 18, dims=[32], mirror=v), 'mirror must be True or False'),
])
@pytest.mark.parametrize('value', ['no', 1, None])
def test_analysis_flags_must_be_bools(call, message, value):
    with pytest.raises(ArgumentTypeError) as e:
        call(value)
    assert str(e.value).startswith(message)


def test_the_clis_trial_bound_is_the_librarys():
    from timm_pkmixer.analysis.spectra import MAX_TRIALS
    from timm_pkmixer.cli import analyze
    assert analyze.MAX_TRIALS == MAX_TRIALS == 1000
