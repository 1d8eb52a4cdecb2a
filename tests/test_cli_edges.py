"""Edges of the command line a new or careless user reaches, by class: `pkmixer train` refusals (unknown model, a
file that is not train.py, impossible batch sizes), fine-tuning another expanded model (input size), CPU threads,
`pkmixer width` and `pkmixer plot run` on absurd input, one parser for `pkmixer train`, wording, and `--help`
without torch. Each refusal asserts exit status 2, no traceback, and that the message names the argument or the
fault. The commands run in this process (no torch import per case) against a stand-in train.py."""
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from timm_pkmixer.errors import ArgumentValueError, InvalidArgumentError
from timm_pkmixer.experiments.recipes import resolve_batch_and_lr

ROOT = Path(__file__).resolve().parent.parent
REAL_TRAIN_PY = os.environ.get('TIMM_TRAIN_PY')  # read before the fixture clears it

# train.py's structure (config_parser, parser, _parse_args, main), with the input-size arguments of the real one
STUB_TRAIN_PY = textwrap.dedent('''
    import argparse, json, os, sys
    import yaml
    from timm.utils import ParseKwargs

    config_parser = parser = argparse.ArgumentParser(description='Training Config', add_help=False)
    parser.add_argument('-c', '--config', default='', type=str)
    parser = argparse.ArgumentParser(description='stand-in for timm train.py')
    parser.add_argument('--model', default='resnet50')
    parser.add_argument('--pretrained', action='store_true')
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
    parser.add_argument('--img-size', type=int, default=None)
    parser.add_argument('--input-size', default=None, nargs=3, type=int)
    parser.add_argument('--in-chans', type=int, default=None)
    parser.add_argument('--crop-pct', type=float, default=None)
    parser.add_argument('--model-kwargs', nargs='*', default={}, action=ParseKwargs)
    parser.add_argument('--device-modules', nargs='+', default=None)
    parser.add_argument('--out', default='')

    def _parse_args():
        args_config, remaining = config_parser.parse_known_args()
        if args_config.config:
            with open(args_config.config) as f:
                parser.set_defaults(**yaml.safe_load(f))
        args = parser.parse_args(remaining)
        return args, yaml.safe_dump(args.__dict__)

    def main():
        import torch
        args, _ = _parse_args()
        record = dict(argv=sys.argv, batch_size=args.batch_size, img_size=args.img_size, input_size=args.input_size,
                      lr=args.lr, threads=torch.get_num_threads(), omp=os.environ.get('OMP_NUM_THREADS'))
        with open(os.path.join(args.out, 'record.json'), 'w') as f:
            json.dump(record, f)
''')

RECIPE = 'model: s_mixer_rp_s64c64_32\ndevice_modules: [timm_pkmixer]\nbatch_size: 32\nnum_classes: 10\nimg_size: 32\n'
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
# the packaged fine-tuning recipe's shape: another model's name and its 448 px input size
FINETUNE_RECIPE = ('model: local-dir:pk_mixer_b16_448\npretrained: true\nnum_classes: 10\nimg_size: 448\n'
                   'crop_pct: 0.875\n')


@pytest.fixture
def files(tmp_path, launch_env):
    launch_env.setenv('OMP_NUM_THREADS', str(torch.get_num_threads()))
    (tmp_path / 'train.py').write_text(STUB_TRAIN_PY)
    (tmp_path / 'recipe.yaml').write_text(RECIPE)
    (tmp_path / 'finetune.yaml').write_text(FINETUNE_RECIPE)
    (tmp_path / 'expanded').mkdir()
    (tmp_path / 'expanded' / 'config.json').write_text(json.dumps(EXPANDED_CONFIG))
    (tmp_path / 'out').mkdir()
    (tmp_path / 'binary.py').write_bytes(bytes(range(256)))
    (tmp_path / 'broken.py').write_text('config_parser = parser = None\ndef _parse_args(:\ndef main(): pass\n')
    launch_env.chdir(tmp_path)
    return tmp_path


def train(cli, *argv):
    """`pkmixer train --train-py train.py ARGV` in this process (the stand-in written by `files`)."""
    return cli('train', '--train-py', 'train.py', *argv)


# ------------------------------------------------------------------------------ 1. pkmixer train refuses, naming it

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


@pytest.mark.parametrize('cfg,world_size,message', [
    (dict(batch_size=0), 1, 'batch_size must be a positive integer, got 0'),
    (dict(batch_size=-2), 4, 'batch_size must be a positive integer, got -2'),
    (dict(batch_size=8, grad_accum_steps=0), 1, 'grad_accum_steps must be a positive integer, got 0'),
    (dict(batch_size=8), 0, 'world_size must be a positive integer, got 0'),
])
def test_library_batch_planning_refuses_a_global_batch_of_zero(cfg, world_size, message):
    with pytest.raises(InvalidArgumentError) as e:
        resolve_batch_and_lr(cfg, world_size)
    assert str(e.value) == message and '--' not in str(e.value)


def test_library_launch_errors_are_in_argument_terms(files):
    from timm_pkmixer.experiments.train_py import LaunchArgumentError, prepare_train
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
    assert out.splitlines()[-1] == '[pkmixer] dry run: the plan above was checked; train.py was not started'
    assert not (files / 'out' / 'record.json').exists()


# ------------------------------------------------------------------- 1b. fine-tuning another expanded model: input size

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


# ------------------------------------------------------------------------------------------ 2. threads on a busy CPU

@pytest.mark.parametrize('cores,load,local_world,expected', [
    (2, 3.1, None, (1, '2 cores, load average 3.1')),
    (16, 4.0, None, (12, '16 cores, load average 4.0')),
    (16, 4.0, '4', (3, '16 cores, load average 4.0, 4 processes on this machine')),
    (8, 7.9, '2', (1, '8 cores, load average 7.9, 2 processes on this machine')),
])
def test_threads_are_the_idle_cores_per_process(monkeypatch, cores, load, local_world, expected):
    from timm_pkmixer.experiments import threads
    from timm_pkmixer.experiments.threads import choose_threads
    monkeypatch.delenv('OMP_NUM_THREADS', raising=False)
    monkeypatch.setattr(threads, 'available_cores', lambda: cores)
    monkeypatch.setattr(os, 'getloadavg', lambda: (load, load, load))
    monkeypatch.setattr(torch, 'get_num_threads', lambda: cores)
    if local_world is None:
        monkeypatch.delenv('LOCAL_WORLD_SIZE', raising=False)
    else:
        monkeypatch.setenv('LOCAL_WORLD_SIZE', local_world)
    assert choose_threads() == expected
    assert choose_threads(5) == (5, 'as requested')
    monkeypatch.setenv('OMP_NUM_THREADS', '2')
    assert choose_threads()[1] == 'OMP_NUM_THREADS'


@pytest.mark.parametrize('env,cores,load,expected', [
    ({}, 2, 0.2, {'OMP_NUM_THREADS': '2'}),
    ({}, 2, 3.0, {'OMP_NUM_THREADS': '1', 'TIMEOUT': '720'}),  # two other jobs on two cores
    ({}, 16, 4.0, {'OMP_NUM_THREADS': '12'}),
    ({'OMP_NUM_THREADS': '2'}, 2, 3.0, {'TIMEOUT': '720'}),
    ({'TIMEOUT': '100'}, 2, 9.0, {'OMP_NUM_THREADS': '1'}),
    ({}, 2, 8.5, {'OMP_NUM_THREADS': '1', 'TIMEOUT': '1800'}),
])
def test_timm_suite_keeps_its_timeouts_on_a_busy_machine(monkeypatch, env, cores, load, expected):
    from timm_suite import load_env

    from timm_pkmixer.experiments import threads
    for var in ('OMP_NUM_THREADS', 'TIMEOUT', 'LOCAL_WORLD_SIZE'):
        monkeypatch.delenv(var, raising=False)
    for var, value in env.items():
        monkeypatch.setenv(var, value)
    monkeypatch.setattr(threads, 'available_cores', lambda: cores)
    monkeypatch.setattr(os, 'getloadavg', lambda: (load, load, load))
    monkeypatch.setattr(torch, 'get_num_threads', lambda: cores)
    assert load_env(os.environ, cores, load) == expected


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


# -------------------------------------------------------------------------- 3. width and plot run on absurd input

@pytest.mark.parametrize('argv,message', [
    (['width', '--omega', '1e300'], '--omega 1e+300 is too large: omega/gamma = 1e+300 exceeds 1e+200'),
    (['width', '--omega', '1e-300'], '--omega must be at least 1 (connections per layer), got 1e-300'),
    (['width', '--omega', '0.5', '--C', '3'], '--omega must be at least 1'),
    (['width', '--omega', '100', '--gamma', '1e300'], '--omega 100 is below gamma 1e+300'),
    (['width', '--omega', '1e250', '--patch', '4'], '--omega 1e+250 is too large'),
    (['width', '--S', '3', '--C', '4', '--omega', '1e-300'], '--omega must be at least 1'),
    (['plot', 'width', '--omega', '1e300', '--out', 'x.png'], '--omega 1e+300 is too large'),
])
def test_width_refuses_absurd_omega(files, cli, argv, message):
    pytest.importorskip('matplotlib')
    code, _, err = cli(*argv)
    assert code == 2 and message in err, err
    assert not (files / 'x.png').exists()


@pytest.mark.parametrize('call', [
    lambda w: w.optimal_width(1e300), lambda w: w.optimal_width(1e-300), lambda w: w.tokens_for_omega(8, 1e300),
    lambda w: w.width_curve(1e-300), lambda w: w.sw_mlp_width(1e300, 0.5),
])
def test_width_library_names_omega_without_flags(call):
    import timm_pkmixer.width as width
    with pytest.raises(ArgumentValueError) as e:
        call(width)
    assert e.value.argument == 'omega' and str(e.value).startswith('omega ') and '--' not in str(e.value)


@pytest.mark.parametrize('content,message', [
    (b'epoch,train_loss,eval_top1\n0,1.5,abc\n', "bad.csv, line 2: column 'eval_top1' holds 'abc', not a number"),
    (b'epoch,train_loss\n0,1.5\n1,x\n', "bad.csv, line 3: column 'train_loss' holds 'x', not a number"),
    (bytes(range(128, 256)) * 3, 'bad.csv is not a timm train.py summary.csv: not a text file'),
    (b'epoch,train_loss\n0,1.5,7\n', 'bad.csv, line 2: 3 values for 2 columns'),
    (b'foo,bar\n1,2\n', 'bad.csv is not a timm train.py summary.csv (needs epoch and train_loss columns'),
    (b'', 'bad.csv is not a timm train.py summary.csv'),
])
def test_plot_run_on_a_csv_that_is_not_a_summary(files, cli, content, message):
    pytest.importorskip('matplotlib')
    (files / 'bad.csv').write_bytes(content)
    code, _, err = cli('plot', 'run', 'bad.csv', '--out', 'x.png')
    assert code == 2 and err.startswith('pkmixer plot run: error: ') and message in err, err


# -------------------------------------------------------------------------------- 8. one parser for pkmixer train

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


@pytest.mark.parametrize('argv,message', [
    (['models', '--bogus'], 'pkmixer: error: unrecognized arguments: --bogus'),
    (['width', '--omega', '100', 'extra'], 'pkmixer: error: unrecognized arguments: extra'),
    (['recipes', 'a', 'b'], 'pkmixer: error: unrecognized arguments: b'),
])
def test_other_commands_still_refuse_unknown_arguments(cli, argv, message):
    code, _, err = cli(*argv)
    assert code == 2 and message in err, err


# ------------------------------------------------------------------------- 4. --help without torch (no timing)

def test_help_and_the_cli_import_neither_torch_nor_timm():
    code = textwrap.dedent('''
        import contextlib, io, sys
        from timm_pkmixer.cli import build_parser, main
        for argv in (['--help'], ['train', '--help'], ['width', '--help'], ['demo', '--help'], ['plot', 'run', '-h']):
            with contextlib.redirect_stdout(io.StringIO()):
                assert main(argv) == 0, argv
        print(sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'timm', 'numpy')))
    ''')
    env = dict(os.environ, PYTHONPATH=str(ROOT), TIMM_PKMIXER_AUTOLOAD='1')
    out = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, env=env, check=True).stdout
    assert out.strip() == '[]'


WIDTH_ARITHMETIC = [  # every mode of `pkmixer width` but --model: what it prints, and that torch stayed out
    (['width', '--omega', '262144'], 'optimum (eq. 15): C* = S* = (Ω/γ)^(1/3) = 64.00, max m = (Ω/γ)^(2/3) = 4096'),
    (['width', '--omega', '262144', '--gamma', '4', '--C', '64', '--mirror'], 'Ω = 262144, γ = 4'),
    (['width', '--omega', '1e6', '--patch', '4', '8'], 'Ω = 1000000, γ = 1'),
    (['width', '--S', '64', '--C', '64', '--omega', '262144'], 'γ = 1 (solved from Ω, S, C by eq. 14)'),
    (['width', '--omega', '262144', '--json'], '"mode": "curve"'),
    (['width', '--omega', 'inf'], ''),  # a refusal (exit 2) does not import torch either
]


def test_width_arithmetic_imports_neither_torch_nor_timm():
    code = textwrap.dedent(f'''
        import contextlib, io, json, sys
        from timm_pkmixer.cli import main
        results = []
        for argv, _ in {WIDTH_ARITHMETIC!r}:
            out, err = io.StringIO(), io.StringIO()
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                results.append((main(argv), out.getvalue()))
        print(json.dumps([results, sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'timm'))]))
    ''')
    env = dict(os.environ, PYTHONPATH=str(ROOT), TIMM_PKMIXER_AUTOLOAD='1')
    results, modules = json.loads(subprocess.run([sys.executable, '-c', code], capture_output=True, text=True,
                                                 env=env, check=True).stdout)
    assert modules == []
    for (argv, expected), (code, out) in zip(WIDTH_ARITHMETIC, results):
        assert code == (0 if expected else 2) and expected in out, (argv, out)


@pytest.mark.parametrize('first', ['from timm_pkmixer.layers import gather', 'import timm_pkmixer.catalog',
                                   'import timm_pkmixer', 'import timm_pkmixer.cli'])
def test_the_models_register_once_timm_is_imported(first):
    code = f'{first}\nimport timm\nprint(timm.is_model("rp_mixer_b_w"), timm.is_model("sw_mlp_o18_32"))'
    env = dict(os.environ, PYTHONPATH=str(ROOT), TIMM_PKMIXER_AUTOLOAD='0')
    out = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, env=env, check=True).stdout
    assert out.split() == ['True', 'True']


# -------------------------------------------------------------------------------------- 5. the demo's conclusion

@pytest.mark.parametrize('rp_acc,normal_acc,expected', [
    (36.0, 36.3, 'inconclusive. The models reached 36.0% (RP) and 36.3% (normal) against 25% by chance'),
    (60.0, 95.0, 'inconclusive'),
    (95.7, 96.3, '95.7% (RP) and 96.3% (normal): the RP S-Mixer trails the normal one by 0.6 points, within the noise '
                 'of ±3.2 points on 300 validation images: no difference shown.'),
    (90.0, 97.0, 'trails the normal one by 7.0 points, beyond the noise of ±4.0 points on 300 validation images, in '
                 'one seed of a short run on this small task: a measurement, not a cause. Over 5 seeds and depths '
                 '4-20 on the 8x8 digits, the committed depth study (benchmarks/paper_experiments_results/depth/'
                 'report.md) measured the RP S-Mixer ahead at every depth.'),
    (96.0, 95.0, 'matched or beat the normal one here (+1.0 points), within the noise of ±3.4 points'),
    (99.0, 85.0, 'matched or beat the normal one here (+14.0 points), beyond the noise of ±4.3 points'),
])
def test_demo_concludes_only_what_it_measured(rp_acc, normal_acc, expected):
    """The accuracies, the gap and its noise; no cause (one seed measures none) and nothing the committed depth
    study contradicts (it measured RP ahead at every depth)."""
    from timm_pkmixer.experiments.demo import DemoResult, reading
    text = reading(DemoResult('s_mixer_rp_s64c64_32', 1, 4096, 0.5, rp_acc, 1.),
                   DemoResult('s_mixer_s64c64_32', 1, 4096, 0.5, normal_acc, 1.))
    assert expected in text
    assert not any(claim in text for claim in ('because', 'neighbours', 'catch up', 'usually trails', 'the paper'))
    assert ('inconclusive' in text) == (min(rp_acc, normal_acc) < 62.5)


def test_the_depth_study_the_demo_cites_measured_rp_ahead_at_every_depth():
    import csv

    from timm_pkmixer.experiments.demo import DEPTH_STUDY
    with open(ROOT / DEPTH_STUDY.replace('report.md', 'report.csv'), encoding='utf-8') as f:
        rows = {(r['num_blocks'], r['permutation']): r for r in csv.DictReader(f)}
    depths = sorted({int(d) for d, _ in rows})
    assert depths == [4, 8, 12, 16, 20] and {r['runs'] for r in rows.values()} == {'5'}
    assert all(float(rows[str(d), 'random']['top1_err_mean']) < float(rows[str(d), 'normal']['top1_err_mean'])
               for d in depths)


# ------------------------------------------------------------------------- 6. pkmixer models --update on a bad file

@pytest.mark.parametrize('content,message', [
    ('Tabelle für Modelle\n'.encode('latin-1'),
     '--update README.md: not UTF-8 text (byte 0xfc at offset 9); convert it to UTF-8 first'),
    (b'\xff\xfe# R\x00E\x00', '--update README.md: not UTF-8 text (byte 0xff at offset 0)'),
    (b'# README without the markers\n', 'README.md has no generated models table: put the lines'),
    (None, 'No such file or directory: README.md'),
])
def test_models_update_refuses_a_document_it_cannot_rewrite(files, cli, content, message):
    if content is not None:
        (files / 'README.md').write_bytes(content)
    code, out, err = cli('models', '--markdown', '--update', 'README.md')
    assert code == 2 and err.startswith(f'pkmixer models: error: {message}'), err
    assert out == '' and (content is None or (files / 'README.md').read_bytes() == content)


def test_readme_lists_every_command():
    import argparse
    import re

    from timm_pkmixer.cli import build_parser
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    readme = (ROOT / 'README.md').read_text(encoding='utf-8')
    paragraph = readme.split('`pkmixer --help` lists the commands:')[1].split('\n\n')[0]
    listed = set(re.findall(r'`([a-z0-9-]+)`', paragraph))
    assert {'analyze', 'train', 'models'} <= set(sub.choices) and set(sub.choices) <= listed, \
        sorted(set(sub.choices) - listed)
