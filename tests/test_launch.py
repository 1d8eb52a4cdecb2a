"""`pkmixer train` (the train.py launcher), `pkmixer sweep` and `pkmixer prepare-stl10`.

timm's train.py is not in the wheel, so these tests run the launcher against a stand-in with train.py's
structure (``config_parser``, ``parser``, ``_parse_args``, ``main``) that records what it was given. Set
``TIMM_TRAIN_PY`` to a real train.py to also check every ImageNet recipe against it.
"""
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import timm
import yaml
from PIL import Image

from timm_pkmixer.cli import main as cli_main
from timm_pkmixer.experiments.datasets import export_image_folder

from conftest import MINI_TRAIN_PY

ROOT = Path(__file__).resolve().parent.parent

STUB_TRAIN_PY = textwrap.dedent('''
    import argparse, json, os, sys
    import yaml
    from timm.utils import ParseKwargs

    config_parser = parser = argparse.ArgumentParser(description='Training Config', add_help=False)
    parser.add_argument('-c', '--config', default='', type=str)
    parser = argparse.ArgumentParser(description='stand-in for timm train.py')
    parser.add_argument('--model', default='resnet50')
    parser.add_argument('-b', '--batch-size', type=int, default=128)
    parser.add_argument('--grad-accum-steps', type=int, default=1)
    parser.add_argument('--lr', type=float, default=None)
    parser.add_argument('--lr-base', type=float, default=0.1)
    parser.add_argument('--lr-base-size', type=int, default=256)
    parser.add_argument('--lr-base-scale', type=str, default='')
    parser.add_argument('--opt', default='sgd')
    parser.add_argument('--sched', default='cosine')
    parser.add_argument('--epochs', type=int, default=300)
    parser.add_argument('--num-classes', type=int, default=None)
    parser.add_argument('--model-kwargs', nargs='*', default={}, action=ParseKwargs)
    parser.add_argument('--device-modules', nargs='+', default=None)
    parser.add_argument('--out', default='')
    parser.add_argument('--fail', action='store_true')

    def _parse_args():
        args_config, remaining = config_parser.parse_known_args()
        if args_config.config:
            with open(args_config.config) as f:
                parser.set_defaults(**yaml.safe_load(f))
        args = parser.parse_args(remaining)
        return args, yaml.safe_dump(args.__dict__)

    def main():
        args, _ = _parse_args()
        if args.fail:
            raise ValueError('boom inside training')
        import timm
        rank = os.environ.get('RANK', '0')
        record = dict(argv=sys.argv, batch_size=args.batch_size, grad_accum_steps=args.grad_accum_steps,
                      model=args.model, model_kwargs=args.model_kwargs, registered=args.model in timm.list_models())
        with open(os.path.join(args.out, f'rank{rank}.json'), 'w') as f:
            json.dump(record, f)

    if __name__ == '__main__':
        main()
''')

RECIPE = textwrap.dedent('''
    model: rp_mixer_b_w
    device_modules: [timm_pkmixer]
    batch_size: 32
    grad_accum_steps: 2
    opt: adamw
    lr_base: 1.0e-3
    lr_base_size: 4096
    lr_base_scale: sqrt
    model_kwargs: {perm_seed: 3}
''')


@pytest.fixture
def stub(tmp_path):
    train_py = tmp_path / 'train.py'
    train_py.write_text(STUB_TRAIN_PY)
    recipe = tmp_path / 'recipe.yaml'
    recipe.write_text(RECIPE)
    out = tmp_path / 'out'
    out.mkdir()
    return train_py, recipe, out


def pkmixer(*args, env_extra=None, module=('-m', 'timm_pkmixer')) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ('TIMM_TRAIN_PY', 'WORLD_SIZE', 'RANK')}
    env.update(env_extra or {})
    return subprocess.run([sys.executable, *module, *map(str, args)], capture_output=True, text=True, env=env,
                          timeout=600)


def test_missing_train_py_says_how_to_get_it(stub, cli, launch_env):
    _, recipe, _ = stub
    code, _, err = cli('train', recipe)
    assert code == 2
    assert "timm's train.py is not part of the timm wheel" in err
    assert f'pytorch-image-models/v{timm.__version__}/train.py' in err
    assert 'TIMM_TRAIN_PY' in err
    code, _, err = cli('train', '--train-py', '/nonexistent/train.py', recipe)
    assert code == 2 and 'no train.py at /nonexistent/train.py' in err


def test_train_runs_train_py_with_the_recipe_and_the_plugin(stub):
    train_py, recipe, out = stub
    proc = pkmixer('train', recipe, '-b', 16, '--out', out,
                   env_extra={'TIMM_TRAIN_PY': str(train_py), 'TIMM_PKMIXER_AUTOLOAD': '0'})
    assert proc.returncode == 0, proc.stderr
    record = json.loads((out / 'rank0.json').read_text())
    assert record['argv'] == [str(train_py), '--config', str(recipe), '-b', '16', '--out', str(out)]
    assert record['registered'] and record['model'] == 'rp_mixer_b_w'  # registered without the autoload hook
    assert (record['batch_size'], record['grad_accum_steps'], record['model_kwargs']) == (16, 2, {'perm_seed': 3})
    assert "model rp_mixer_b_w {'perm_seed': 3}: S=256 C=588 m=150528 params=31.06M" in proc.stdout
    assert ('global batch 32 = 16 per process × 1 process × 2 accumulation steps; lr 8.83883e-05 '
            '(lr_base 0.001 × (32/4096)^½); adamw, cosine schedule, 300 epochs') in proc.stdout


def test_global_batch_sets_the_accumulation_steps(stub, cli, launch_env):
    train_py, recipe, out = stub
    launch_env.setenv('WORLD_SIZE', '2')
    launch_env.setenv('RANK', '0')
    launch_env.setenv('OMP_NUM_THREADS', '1')
    code, stdout, err = cli('train', '--train-py', train_py, '--global-batch', 128, recipe, '-b', 16, '--out', out)
    assert code == 0, err
    record = json.loads((out / 'rank0.json').read_text())
    assert record['argv'][-2:] == ['--grad-accum-steps', '4'] and record['grad_accum_steps'] == 4
    assert 'global batch 128 = 16 per process × 2 processes × 4 accumulation steps; lr 0.000176777' in stdout
    code, _, err = cli('train', '--train-py', train_py, '--global-batch', 100, recipe, '-b', 16)
    assert code == 2
    assert '--global-batch 100 is not a multiple of batch_size 16 × 2 processes = 32' in err


def test_errors_of_train_py_itself_propagate_with_their_traceback(stub, capsys, launch_env):
    train_py, recipe, out = stub
    launch_env.setenv('OMP_NUM_THREADS', '1')
    code = cli_main(['train', '--train-py', str(train_py), str(recipe), '--out', str(out), '--fail'])
    err = capsys.readouterr().err
    assert code == 1
    assert 'Traceback' in err and 'ValueError: boom inside training' in err
    assert 'pkmixer train: boom' not in err


def test_unknown_recipe_key_stops_the_launch(stub, cli, launch_env):
    train_py, recipe, out = stub
    recipe.write_text(RECIPE + 'warmup_epoch: 5\n')  # a typo train.py would ignore silently
    code, _, err = cli('train', '--train-py', train_py, recipe, '--out', out)
    assert code == 2
    assert "['warmup_epoch'] are not arguments of train.py" in err
    assert not (out / 'rank0.json').exists()


def test_train_works_as_a_torchrun_entry(stub):
    train_py, recipe, out = stub
    proc = pkmixer('--standalone', '--nproc_per_node=2', '-m', 'timm_pkmixer', 'train', '--train-py', train_py,
                   recipe, '--out', out, module=('-m', 'torch.distributed.run'), env_extra={'OMP_NUM_THREADS': '1'})
    assert proc.returncode == 0, proc.stderr
    records = [json.loads((out / f'rank{r}.json').read_text()) for r in range(2)]
    assert all(r['registered'] for r in records)
    assert proc.stdout.count('[pkmixer] global batch') == 1  # the plan is printed by rank 0 only
    assert 'global batch 128 = 32 per process × 2 processes × 2 accumulation steps' in proc.stdout


def test_list_train_args_writes_the_data_file_format(stub, cli):
    train_py, _, _ = stub
    code, stdout, err = cli('train', '--list-train-args', '--train-py', train_py)
    assert code == 0, err
    lines = stdout.splitlines()
    assert lines[0].startswith('# Arguments of timm train.py (train.py sha256 ')
    assert 'batch_size: -b --batch-size' in lines and 'config: -c --config' in lines
    assert 'model_kwargs: --model-kwargs' in lines


@pytest.mark.skipif(not os.environ.get('TIMM_TRAIN_PY'), reason='set TIMM_TRAIN_PY to a real timm train.py')
def test_imagenet_recipes_against_the_real_train_py():
    for recipe in sorted((ROOT / 'train_recipes' / 'imagenet').glob('*.yaml')):
        proc = pkmixer('train', '--dry-run', recipe, env_extra={'TIMM_TRAIN_PY': os.environ['TIMM_TRAIN_PY'],
                                                                'WORLD_SIZE': '8'})
        assert proc.returncode == 0, proc.stderr
        assert 'global batch 4096 = 128 per process × 8 processes × 4 accumulation steps; lr 0.001 ' in proc.stdout


def test_sweep_command_writes_recipes_and_prints_commands(tmp_path, capsys):
    rc = cli_main(['sweep', str(ROOT / 'train_recipes' / 'imagenet' / 'rp_mixer_b_w.yaml'), '--out-dir',
                   str(tmp_path), '--permutation', 'random', '--seeds', '0', '1'])
    out = capsys.readouterr().out.splitlines()
    assert rc == 0 and out[0] == f'# 12 recipes in {tmp_path}; run each with (add --data-dir … where the data lives):'
    assert out[1] == f'pkmixer train {tmp_path}/rp_mixer_b_w_p7_s923_c147_seed0.yaml'
    assert len(list(tmp_path.glob('*.yaml'))) == 12
    assert cli_main(['sweep', str(ROOT / 'train_recipes' / 'cifar10' / 's_mixer_fig5.yaml'), '--out-dir',
                     str(tmp_path), '--omega', '12345']) == 2
    assert 'the paper lists (C, S) pairs for Ω in [262144, 2097152, 134217728], not 12345' in capsys.readouterr().err


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


# ------------------------------------------------------------------ a new user's machine: no CUDA, two cores

TINY_RECIPE = textwrap.dedent('''
    model: s_mixer_s64c64_32
    model_kwargs: {img_size: 8, patch_size: 4, num_tokens: 4, embed_dim: 4, num_blocks: 1}
    num_classes: 2
    img_size: 8
    batch_size: 2
    epochs: 1
    stop_after_epochs: 0
''')


@pytest.fixture
def tiny_run(tmp_path, launch_env):
    """A recipe for the stand-in train.py (train.py's defaults: --device cuda, 4 workers) on a 2-image folder."""
    for split in ('train', 'validation'):
        for i, name in enumerate(('a', 'b')):
            (tmp_path / 'data' / split / name).mkdir(parents=True)
            Image.new('RGB', (8, 8), (255 * i, 0, 0)).save(tmp_path / 'data' / split / name / '0.png')
    (tmp_path / 'r.yaml').write_text(TINY_RECIPE + f'data_dir: {tmp_path / "data"}\noutput: {tmp_path / "runs"}\n')
    launch_env.setenv('OMP_NUM_THREADS', '1')
    return tmp_path


@pytest.mark.parametrize('cuda,cores,local_world,recipe,argv,device,workers,lines', [
    (False, 2, None, '', [], 'cpu', 2,
     ["[pkmixer] device cpu: CUDA is not available on this machine (train.py's default is cuda; pass --device to "
      "choose)", "[pkmixer] 2 data-loading workers per process (2 cores available; train.py's default is 4; pass "
      "--workers to choose)"]),
    (False, 1, None, '', [], 'cpu', 1, ['[pkmixer] device cpu: CUDA is not available',
                                        '[pkmixer] 1 data-loading worker per process (1 core available;']),
    (False, 4, '2', '', [], 'cpu', 2, ['[pkmixer] device cpu: CUDA is not available',
                                       '[pkmixer] 2 data-loading workers per process (4 cores available among 2 '
                                       'processes;']),
    (False, 16, None, '', [], 'cpu', 4, ['[pkmixer] device cpu: CUDA is not available']),
    (False, 2, None, '', ['--device', 'cpu', '-j', '3'], 'cpu', 3, []),
    (False, 2, None, 'workers: 1\n', [], 'cpu', 1, ['[pkmixer] device cpu: CUDA is not available']),
    (True, 2, None, '', [], 'cuda', 2, ['[pkmixer] 2 data-loading workers per process']),
])
def test_train_fits_the_machine_when_the_user_does_not_choose(tiny_run, cli, monkeypatch, cuda, cores, local_world,
                                                              recipe, argv, device, workers, lines):
    """Without CUDA, train.py's default `--device cuda` would end in its AssertionError: `pkmixer train` passes
    --device cpu and says so; workers: no more than the cores per process, unless given (here or in the recipe)."""
    import torch

    from timm_pkmixer.experiments import threads
    monkeypatch.setattr(torch.cuda, 'is_available', lambda: cuda)
    monkeypatch.setattr(threads, 'available_cores', lambda: cores)
    if local_world:
        monkeypatch.setenv('LOCAL_WORLD_SIZE', local_world)
    (tiny_run / 'r.yaml').write_text((tiny_run / 'r.yaml').read_text() + recipe)
    code, out, err = cli('train', '--train-py', MINI_TRAIN_PY, tiny_run / 'r.yaml', *argv)
    assert code == 0, err
    saved = yaml.safe_load((tiny_run / 'runs' / 's_mixer_s64c64_32' / 'args.yaml').read_text())
    assert (saved['device'], saved['workers']) == (device, workers)
    plan = [line for line in out.splitlines() if 'device' in line or 'worker' in line]
    assert len(plan) == len(lines) and all(got.startswith(want) for got, want in zip(plan, lines)), plan


@pytest.mark.parametrize('argv,recipe,message', [
    (['--device', 'cuda'], '', '--device cuda asks for CUDA, which this machine does not have'),
    (['--device=cuda:1'], '', '--device cuda:1 asks for CUDA'),
    ([], 'device: cuda\n', '--device cuda asks for CUDA'),
])
def test_train_refuses_a_cuda_device_on_a_machine_without_cuda(tiny_run, cli, monkeypatch, argv, recipe, message):
    import torch
    monkeypatch.setattr(torch.cuda, 'is_available', lambda: False)
    (tiny_run / 'r.yaml').write_text((tiny_run / 'r.yaml').read_text() + recipe)
    code, out, err = cli('train', '--train-py', MINI_TRAIN_PY, tiny_run / 'r.yaml', *argv, '--dry-run')
    assert code == 2 and err.startswith(f'pkmixer train: error: {message}'), err
    assert not (tiny_run / 'runs').exists()


@pytest.mark.parametrize('env,message', [
    ({'WORLD_SIZE': 'two'}, "environment variable WORLD_SIZE must be a positive integer (as torchrun sets it), got "
                            "'two'"),
    ({'WORLD_SIZE': '0'}, "WORLD_SIZE must be a positive integer (as torchrun sets it), got '0'"),
    ({'WORLD_SIZE': '2.0'}, "WORLD_SIZE must be a positive integer (as torchrun sets it), got '2.0'"),
    ({'RANK': 'x'}, "environment variable RANK must be a non-negative integer (as torchrun sets it), got 'x'"),
    ({'RANK': '-1'}, "RANK must be a non-negative integer (as torchrun sets it), got '-1'"),
    ({'LOCAL_WORLD_SIZE': 'four'}, "LOCAL_WORLD_SIZE must be a positive integer (as torchrun sets it), got 'four'"),
])
def test_torchrun_variables_that_are_not_integers_are_named(tiny_run, cli, monkeypatch, env, message):
    monkeypatch.delenv('OMP_NUM_THREADS')  # LOCAL_WORLD_SIZE counts when the threads are chosen
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    code, out, err = cli('train', '--train-py', MINI_TRAIN_PY, tiny_run / 'r.yaml', '--dry-run', '--device', 'cpu')
    assert code == 2 and err.startswith('pkmixer train: error: ') and message in err, err
    assert not (tiny_run / 'runs').exists()
