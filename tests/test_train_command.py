"""`pkmixer train`: timm's train.py launched with a recipe, in this process or as a torchrun entry; the plan it
prints (batch, learning rate, input size, threads, device, workers), its options wherever they stand and the rest
handed to train.py in order; and its refusals, each naming the argument or the file (a model, batch sizes, a file
that is not train.py, an input size the model does not take, CUDA on a machine without it, torchrun variables).

timm's train.py is not in the wheel, so these tests run the launcher against the stand-in with train.py's structure
(``tests/mini_train_py.py``), which trains for real or, with ``--out DIR``, records what it was given.
Set ``TIMM_TRAIN_PY`` to a real train.py to also check every ImageNet recipe and the fine-tuning recipe against it.
"""
import io
import json
import os
import subprocess
import sys
import textwrap

import pytest
import timm
import yaml
from PIL import Image

from timm_pkmixer.cli import main as cli_main

from conftest import MINI_TRAIN_PY, ROOT

REAL_TRAIN_PY = os.environ.get('TIMM_TRAIN_PY')  # read before the fixture clears it
STUB_TRAIN_PY = MINI_TRAIN_PY.read_text(encoding='utf-8')  # written as the train.py a test launches

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
# the recipe.yaml of `files`: the small RP S-Mixer at its own input size
SMALL_RECIPE = ('model: s_mixer_rp_s64c64_32\ndevice_modules: [timm_pkmixer]\nbatch_size: 32\nnum_classes: 10\n'
                'img_size: 32\n')
# what `pkmixer expand CKPT --model s_mixer_rp_s64c64_32 --factor 2` writes as config.json (the weights are not read)
EXPANDED_CONFIG = {
    'architecture': 's_mixer_rp_s64c64_32', 'num_classes': 10, 'num_features': 64, 'global_pool': 'avg',
    'model_args': {'num_classes': 10, 'img_size': [64, 64], 'in_chans': 3, 'patch_size': [4, 4], 'num_blocks': 8,
                   'embed_dim': 64, 'num_tokens': 256, 'block_type': 'fc', 'permutation': 'random', 'perm_seed': 0,
                   'skip_layer': True, 'norm_eps': 1e-05, 'act_layer': 'gelu', 'stem_norm': False,
                   'global_pool': 'avg', 'tiles': 2},
    'pretrained_cfg': {'custom_load': False, 'input_size': [3, 64, 64], 'fixed_input_size': True,
                       'interpolation': 'bicubic', 'crop_pct': 1.0, 'crop_mode': 'center', 'mean': [0.5, 0.5, 0.5],
                       'std': [0.5, 0.5, 0.5], 'num_classes': 10, 'pool_size': None, 'first_conv': 'stem.proj',
                       'classifier': 'head', 'license': 'apache-2.0'},
}
# what the recording stand-in's recipes add: train.py's data, device and loader keys (it reads no data, and `pkmixer
# train` checks them: an image folder of the model's classes; a CPU device and no loader workers, so that `pkmixer
# train` adds no --device or --workers to what it hands on)
STAND_IN_KEYS = 'data_dir: {data}\ndevice: cpu\nworkers: 0\n'
# the packaged fine-tuning recipe's shape: another model's name and its 448 px input size
FINETUNE_RECIPE = ('model: local-dir:pk_mixer_b16_448\npretrained: true\nnum_classes: 10\nimg_size: 448\n'
                   'crop_pct: 0.875\n')


def image_folder(root, classes: int, train: int, validation: int = 1):
    """An image folder of `classes` classes (c0000, …) with `train` and `validation` 8×8 images each: what `pkmixer
    train` checks a recipe's data for (the model's classes, a training batch) before it starts train.py."""
    png = io.BytesIO()
    Image.new('RGB', (8, 8)).save(png, 'PNG')
    for split, count in (('train', train), ('validation', validation)):
        for c in range(classes):
            (root / split / f'c{c:04d}').mkdir(parents=True)
            for i in range(count):
                (root / split / f'c{c:04d}' / f'{i}.png').write_bytes(png.getvalue())
    return root


@pytest.fixture(scope='module')
def thousand_classes(tmp_path_factory):
    """ImageNet's shape for the recipes of rp_mixer_b_w (1000 classes): 2000 training images, a step of 128 images in
    each of 8 processes."""
    return image_folder(tmp_path_factory.mktemp('thousand_classes'), 1000, 2)


@pytest.fixture(scope='module')
def ten_classes(tmp_path_factory):
    """The recipes of the small S-Mixer (10 classes): 130 training images, a batch of train.py's default 128."""
    return image_folder(tmp_path_factory.mktemp('ten_classes'), 10, 13)


@pytest.fixture
def stub(tmp_path, thousand_classes):
    train_py = tmp_path / 'train.py'
    train_py.write_text(STUB_TRAIN_PY)
    recipe = tmp_path / 'recipe.yaml'
    recipe.write_text(RECIPE + STAND_IN_KEYS.format(data=thousand_classes))
    out = tmp_path / 'out'
    out.mkdir()
    return train_py, recipe, out


def pkmixer(*args, env_extra=None, module=('-m', 'timm_pkmixer')) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ('TIMM_TRAIN_PY', 'WORLD_SIZE', 'RANK')}
    env.update(env_extra or {})
    return subprocess.run([sys.executable, *module, *map(str, args)], capture_output=True, text=True, env=env,
                          timeout=600)


@pytest.fixture
def files(files, ten_classes):
    """The working folder (conftest) with the stand-in train.py, a recipe, a fine-tuning recipe for another model
    (both on an image folder of 10 classes), an expanded model's config.json, an out/ folder and two files that are
    not train.py."""
    (files / 'train.py').write_text(STUB_TRAIN_PY)
    (files / 'recipe.yaml').write_text(SMALL_RECIPE + STAND_IN_KEYS.format(data=ten_classes))
    (files / 'finetune.yaml').write_text(FINETUNE_RECIPE + STAND_IN_KEYS.format(data=ten_classes))
    (files / 'expanded').mkdir()
    (files / 'expanded' / 'config.json').write_text(json.dumps(EXPANDED_CONFIG))
    (files / 'out').mkdir()
    (files / 'binary.py').write_bytes(bytes(range(256)))
    (files / 'broken.py').write_text('config_parser = parser = None\ndef _parse_args(:\ndef main(): pass\n')
    return files


def train(cli, *argv):
    """`pkmixer train --train-py train.py ARGV` in this process (the stand-in written by `files`)."""
    return cli('train', '--train-py', 'train.py', *argv)


# ------------------------------------------------------------------------------------------------ launching train.py

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


@pytest.mark.slow  # torchrun with two processes: 20 s on this busy 2-core machine
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
def test_imagenet_recipes_against_the_real_train_py(thousand_classes):
    for recipe in sorted((ROOT / 'train_recipes' / 'imagenet').glob('*.yaml')):
        proc = pkmixer('train', '--dry-run', recipe, '--data-dir', thousand_classes,
                       env_extra={'TIMM_TRAIN_PY': os.environ['TIMM_TRAIN_PY'], 'WORLD_SIZE': '8'})
        assert proc.returncode == 0, proc.stderr
        assert 'global batch 4096 = 128 per process × 8 processes × 4 accumulation steps; lr 0.001 ' in proc.stdout


# ---------------------------------------------------------------------------- pkmixer train's options and train.py's

def test_e_train_options_before_or_after_the_recipe(tmp_path, cli, launch_env, thousand_classes):
    """The same plan wherever `pkmixer train`'s own options stand. The plan prints the load average (the thread
    count follows it): both runs see the same one, so the comparison does not depend on the machine's load."""
    launch_env.delenv('OMP_NUM_THREADS', raising=False)
    launch_env.setattr(os, 'getloadavg', lambda: (1.5, 1.5, 1.5))
    (tmp_path / 'train.py').write_text(STUB_TRAIN_PY)
    (tmp_path / 'r.yaml').write_text(RECIPE + f'data_dir: {thousand_classes}\n')
    before = cli('train', '--dry-run', '--train-py', tmp_path / 'train.py', tmp_path / 'r.yaml', '-b', '16')
    after = cli('train', tmp_path / 'r.yaml', '-b', '16', '--dry-run', f'--train-py={tmp_path / "train.py"}')
    assert before[0] == after[0] == 0, (before[2], after[2])
    assert before[1] == after[1] and 'global batch 32 = 16 per process' in after[1]
    assert 'load average 1.5' in after[1]
    code, _, err = cli('train', tmp_path / 'r.yaml', '--train-py', tmp_path / 'train.py', '--dry-run',
                       '--no-such-flag')
    assert code == 2
    assert 'pkmixer train: error: train.py refuses its arguments: unrecognized arguments: --no-such-flag' in err
    assert 'usage:' not in err  # not train.py's whole usage


@pytest.mark.parametrize('argv,passed', [
    (['recipe.yaml', '--dry-run', '-b', '16'], None),
    (['recipe.yaml', '-b', '16', '--out', 'out'], ['-b', '16', '--out', 'out']),
    (['recipe.yaml', '-b16', '--lr=0.5', '--out', 'out', '--threads', '1'], ['-b16', '--lr=0.5', '--out', 'out']),
    (['--threads', '1', 'recipe.yaml', '--model-kwargs', 'perm_seed=2', '--out', 'out'],
     ['--model-kwargs', 'perm_seed=2', '--out', 'out']),
    (['recipe.yaml', '--out', 'out', '--global-batch=64', '-b', '32'], ['--out', 'out', '-b', '32',
                                                                        '--grad-accum-steps', '2']),
])
def test_train_hands_the_unknown_rest_to_train_py_in_order(files, cli, argv, passed):
    rc, out, err = train(cli, *argv)
    assert rc == 0, err
    record = files / 'out' / 'record.json'
    if passed is None:
        assert not record.exists() and 'dry run' in out
    else:
        assert json.loads(record.read_text())['argv'] == ['train.py', '--config', 'recipe.yaml', *passed]


# ------------------------------------------------------------------------------------- refusals, naming the argument

@pytest.mark.parametrize('argv,message', [
    (['recipe.yaml', '--model', 'nope_model', '--dry-run'],
     "model 'nope_model' is neither a registered timm model nor a local-dir:/hf-hub: one; `pkmixer models` lists"),
    (['recipe.yaml', '--model', 'resnet_nope.a1', '--dry-run'], "model 'resnet_nope.a1' is neither"),
    (['recipe.yaml', '--model', 'local-dir:missing', '--dry-run'], 'model local-dir:missing: Config file not found'),
    (['recipe.yaml', '-b', '0', '--dry-run'], '-b/--batch-size must be a positive integer, got 0'),
    (['recipe.yaml', '-b', '-4', '--dry-run'], '-b/--batch-size must be a positive integer, got -4'),
    (['recipe.yaml', '--batch-size=0', '--dry-run'], '-b/--batch-size must be a positive integer, got 0'),
    (['recipe.yaml', '--grad-accum-steps', '0', '--dry-run'], '--grad-accum-steps must be a positive integer, got 0'),
    (['recipe.yaml', '--global-batch', '0'], 'argument --global-batch: global batch must be a positive integer'),
    (['recipe.yaml', '--global-batch', '48', '--dry-run'],
     '--global-batch 48 is not a multiple of batch_size 32 × 1 process = 32'),
    (['recipe.yaml', '--threads', '0'], 'argument --threads: threads must be a positive integer, got 0'),
    (['cifar10/nope', '--dry-run'],
     "no recipe file and no packaged recipe named 'cifar10/nope' (`pkmixer recipes` lists them)\n"),
])
def test_train_refuses_naming_the_argument(files, cli, argv, message):
    code, out, err = train(cli, *argv)
    assert code == 2 and message in err, err
    assert err.startswith('pkmixer train: error: ') or err.startswith('usage:')
    assert not (files / 'out' / 'record.json').exists()


@pytest.mark.parametrize('train_py,message', [
    ('{root}/LICENSE', "LICENSE is not timm's train.py (it defines no config_parser, parser, _parse_args, main)"),
    ('binary.py', "binary.py is not timm's train.py (not a text file)"),
    ('broken.py', "broken.py is not timm's train.py (not Python: invalid syntax, line 2)"),
    ('{root}/timm_pkmixer', 'no train.py at'),
    ('missing/train.py', 'no train.py at missing/train.py'),
])
def test_train_py_that_is_not_train_py(files, cli, train_py, message):
    code, _, err = cli('train', '--train-py', train_py.format(root=ROOT), 'recipe.yaml', '--dry-run')
    assert code == 2 and message in err, err
    assert 'then pass --train-py PATH/train.py or set TIMM_TRAIN_PY=PATH/train.py.' in err


def test_library_launch_errors_are_in_argument_terms(files):
    from timm_pkmixer.training.train_py import LaunchArgumentError, prepare_train
    with pytest.raises(LaunchArgumentError) as e:
        prepare_train('recipe.yaml', ['-b', '0'], 'train.py')
    assert str(e.value) == 'batch_size must be a positive integer, got 0'
    assert (e.value.argument, e.value.options) == ('batch_size', ('-b', '--batch-size'))
    with pytest.raises(LaunchArgumentError, match='^global_batch 48 is not a multiple of batch_size 32'):
        prepare_train('recipe.yaml', [], 'train.py', global_batch=48)


def test_dry_run_says_it_is_one_and_counts_in_the_singular(files, cli):
    code, out, _ = train(cli, 'recipe.yaml', '--dry-run')
    assert code == 0
    assert 'global batch 32 = 32 per process × 1 process × 1 accumulation step; lr 0.0125' in out
    assert out.splitlines()[-1] == ('[pkmixer] dry run: the plan above was checked (train.py, the model, the data); '
                                    'train.py was not started')
    assert not (files / 'out' / 'record.json').exists()


# -------------------------------------------------------------------- fine-tuning another expanded model: input size

@pytest.mark.parametrize('extra,code,message', [
    ([], 0, "input 64×64 px, 3 channels (the model's config; the recipe's img_size is for its own model)"),
    (['--img-size', '64'], 0, 'input 64×64 px, 3 channels (given)'),
    (['--input-size', '3', '64', '64'], 0, 'input 64×64 px, 3 channels (given)'),
    (['--img-size', '448'], 2, '--img-size 448 (given) does not fit model local-dir:expanded: it is built for 64×64 px '
                               'and takes no other input size. Leave the size to the model'),
    (['--img-size', '128'], 2, 'Leave the size to the model, or expand the model 2× first (`pkmixer expand`)'),
    (['--input-size', '3', '32', '32'], 2, '--input-size 3 32 32 (given) does not fit model local-dir:expanded'),
])
def test_finetune_takes_the_input_size_from_the_model(files, cli, extra, code, message):
    rc, out, err = train(cli, 'finetune.yaml', '--model', 'local-dir:expanded', *extra, '--dry-run')
    assert rc == code and message in (out if code == 0 else err), out + err
    if code == 0:
        assert 'model local-dir:expanded' in out and 'S=256 C=64' in out


def test_finetune_real_run_gets_the_model_size(files, cli):
    rc, _, err = train(cli, 'finetune.yaml', '--model', 'local-dir:expanded', '--out', 'out')
    assert rc == 0, err
    record = json.loads((files / 'out' / 'record.json').read_text())
    assert record['img_size'] == 64 and record['argv'][-2:] == ['--img-size', '64']


@pytest.mark.parametrize('recipe,extra,message', [
    ('model: s_mixer_rp_s64c64_32\nimg_size: 64\n', [], '--img-size 64 (from the recipe) does not fit model '
                                                          's_mixer_rp_s64c64_32: it is built for 32×32 px'),
    ('model: s_mixer_rp_s64c64_32\n', ['--img-size', '96'], 'expand the model 3× first'),
    ('model: s_mixer_rp_s64c64_32\n', ['--input-size', '3', '32', '48'], '--input-size 3 32 48 (given)'),
])
def test_a_size_the_model_does_not_take_is_refused_in_the_dry_run(files, cli, recipe, extra, message):
    (files / 'r.yaml').write_text(recipe)
    rc, _, err = train(cli, 'r.yaml', *extra, '--dry-run')
    assert rc == 2 and message in err, err


@pytest.mark.skipif(not REAL_TRAIN_PY, reason='set TIMM_TRAIN_PY to a real timm train.py')
def test_packaged_finetune_recipe_with_another_model_against_the_real_train_py(files, cli, monkeypatch):
    monkeypatch.setenv('TIMM_TRAIN_PY', REAL_TRAIN_PY)
    rc, out, err = cli('train', 'finetune/pk_mixer_b16_448_cifar10', '--model', 'local-dir:expanded',
                       '--dry-run')
    assert rc == 0 and 'input 64×64 px, 3 channels' in out, err
    rc, _, err = cli('train', 'finetune/pk_mixer_b16_448_cifar10', '--model', 'local-dir:expanded',
                     '--img-size', '448', '--dry-run')
    assert rc == 2 and '--img-size 448 (given) does not fit model local-dir:expanded' in err


# ------------------------------------------------------------------------------------------------------- CPU threads

@pytest.mark.parametrize('argv,threads,line', [
    (['--threads', '1'], 1, '[pkmixer] 1 CPU thread per process (as requested)'),
    (['--threads=2'], 2, '[pkmixer] 2 CPU threads per process (as requested)'),
])
def test_train_sets_the_threads_of_train_py(files, cli, argv, threads, line):
    rc, out, err = train(cli, 'recipe.yaml', '--out', 'out', *argv)
    assert rc == 0, err
    assert line in out.splitlines()
    record = json.loads((files / 'out' / 'record.json').read_text())
    assert (record['threads'], record['omp']) == (threads, str(threads))


# -------------------------------------------------------------------------- a new user's machine: no CUDA, two cores

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

    from timm_pkmixer.training import threads
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


@pytest.mark.parametrize('argv,env,message', [
    (['--device', 'CUDA'], {}, "--device 'CUDA' is not a device train.py can train on; use cpu, cuda or cuda:N "
                               "(where CUDA is available), mps, xpu, npu or hpu (where torch has one) (lowercase)"),
    (['--device', 'meta'], {}, "--device 'meta' holds no data, so nothing can train on it; use cpu, cuda or cuda:N"),
    (['--device', ''], {}, "--device '' is not a device train.py can train on; use cpu, cuda or cuda:N"),
    (['--device', 'mps'], {}, '--device mps is not available on this machine (torch sees no such device); use cpu'),
    (['--device', 'cpu', '-j', '-1'], {}, '-j/--workers must be a non-negative integer (0 loads in the main '
                                          'process), got -1'),
    (['--device', 'cpu'], {'WORLD_SIZE': '2', 'RANK': '5'},
     'environment variable RANK=5 is not a rank of WORLD_SIZE=2: it must be 0 … 1 (as torchrun sets them)'),
    (['--device', 'cpu'], {'RANK': '1'}, 'environment variable RANK=1 is not a rank of WORLD_SIZE=1: it must be 0 … 0'),
])
def test_train_refuses_a_device_workers_or_rank_that_cannot_work(tiny_run, cli, monkeypatch, argv, env, message):
    """Each would otherwise reach train.py and end in a traceback (torch.device's RuntimeError, a DataLoader's
    ValueError, a process group that never forms): refused in the dry run, naming the flag or variable."""
    import torch
    if torch.backends.mps.is_available() and 'mps' in argv:
        pytest.skip('this machine has an MPS device')
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    code, out, err = cli('train', '--train-py', MINI_TRAIN_PY, tiny_run / 'r.yaml', *argv, '--dry-run')
    assert code == 2 and err.startswith(f'pkmixer train: error: {message}'), err
    assert out == '' and not (tiny_run / 'runs').exists()


@pytest.mark.parametrize('argv', [['--device', 'cpu', '-j', '0'], ['--device', 'cpu:0']])
def test_train_accepts_zero_workers_and_an_indexed_cpu(tiny_run, cli, argv):
    code, out, err = cli('train', '--train-py', MINI_TRAIN_PY, tiny_run / 'r.yaml', *argv, '--dry-run')
    assert code == 0, err


# ------------------------------------------------------------------------------------- SW-MLP masks follow --seed

SW_RECIPE = textwrap.dedent('''
    model: sw_mlp_o18_32
    model_kwargs: {img_size: 8, patch_size: 4, embed_dim: 4, width: 16, num_blocks: 1, density: 0.5}
    num_classes: 2
    img_size: 8
    batch_size: 2
    epochs: 1
''')


def sw_masks(tiny_run, *argv):
    """The plan of `pkmixer train` for an SW-MLP recipe with `argv`, and the masks of the model it builds."""
    import torch

    from timm_pkmixer.training.train_py import prepare_train
    (tiny_run / 'sw.yaml').write_text(SW_RECIPE + f'data_dir: {tiny_run / "data"}\noutput: {tiny_run / "runs"}\n')
    plan = prepare_train(str(tiny_run / 'sw.yaml'), ['--device', 'cpu', *argv], str(MINI_TRAIN_PY))
    model = timm.create_model(plan.args.model, num_classes=2, **plan.args.model_kwargs)
    return plan, torch.cat([b.flatten() for n, b in model.named_buffers() if n.endswith('mask')])


def test_sw_mlp_masks_follow_the_training_seed_unless_mask_seed_is_given(tiny_run):
    """`--seed 3` and `--seed 4` train different masks (as different weights): mask_seed follows train.py's seed,
    passed on as a model argument, so args.yaml records it and push, analyze and validate rebuild the same masks;
    an explicit mask_seed (recipe or command line) fixes them."""
    plan3, masks3 = sw_masks(tiny_run, '--seed', '3')
    plan4, masks4 = sw_masks(tiny_run, '--seed', '4')
    assert (plan3.args.model_kwargs['mask_seed'], plan4.args.model_kwargs['mask_seed']) == (3, 4)
    assert not (masks3 == masks4).all()
    assert plan3.args.model_kwargs == {'img_size': 8, 'patch_size': 4, 'embed_dim': 4, 'width': 16, 'num_blocks': 1,
                                       'density': 0.5, 'mask_seed': 3}  # the recipe's kept
    assert "[pkmixer] mask_seed 3: train.py's --seed (the masks differ from seed to seed; --model-kwargs " \
           "mask_seed=N fixes them)" in plan3.describe()
    _, default = sw_masks(tiny_run)  # train.py's default seed (42)
    assert not (default == masks3).all()
    fixed = ['--model-kwargs', 'img_size=8', 'patch_size=4', 'embed_dim=4', 'width=16', 'num_blocks=1',
             'density=0.5', 'mask_seed=7']
    plan_a, fixed_a = sw_masks(tiny_run, '--seed', '3', *fixed)
    plan_b, fixed_b = sw_masks(tiny_run, '--seed', '4', *fixed)
    assert (fixed_a == fixed_b).all() and plan_a.args.model_kwargs['mask_seed'] == 7
    assert not any('mask_seed' in line for line in plan_a.describe()[3:])


def test_the_seeded_mask_is_what_the_run_records(tiny_run, cli):
    sw_masks(tiny_run)  # writes sw.yaml
    code, out, err = cli('train', '--train-py', MINI_TRAIN_PY, tiny_run / 'sw.yaml', '--device', 'cpu', '--seed', '5')
    assert code == 0, err
    saved = yaml.safe_load((tiny_run / 'runs' / 'sw_mlp_o18_32' / 'args.yaml').read_text())
    assert saved['seed'] == 5 and saved['model_kwargs']['mask_seed'] == 5
