"""Every bad input refused by name, by class (A: typed arguments, B: derived sizes, C: meta device and
materialisation, D: checkpoints, E: the command line, F: forward inputs, G: tracing). Each case asserts the
exception type and that the message names the argument or the fault."""
import math
import os

import pytest
import timm
import torch
from safetensors.torch import save_file

from timm_pkmixer.errors import (
    ArgumentTypeError,
    CheckpointError,
    CheckpointMismatchError,
    InputShapeError,
    InvalidArgumentError,
    NotMaterializedError,
)
from timm_pkmixer.layers import FixedPermutation, MaskedLinear

from conftest import randomize_

RP = 's_mixer_rp_s64c64_32'


def build(name=RP, **kwargs):
    return timm.create_model(name, device='meta', **kwargs)


# ---------------------------------------------------------------------------------------------- A. typed arguments

@pytest.mark.parametrize('name,kwargs,error,match', [
    (RP, dict(perm_seed=1.5), ArgumentTypeError, r'perm_seed must be an integer, got 1\.5 \(float\)'),
    (RP, dict(perm_seed=True), ArgumentTypeError, r'perm_seed must be an integer, got True \(bool\)'),
    (RP, dict(num_blocks=2.5), ArgumentTypeError, 'num_blocks must be an integer, got 2.5'),
    (RP, dict(num_blocks='4'), ArgumentTypeError, r"num_blocks must be an integer, got '4' \(str\)"),
    (RP, dict(embed_dim=0), InvalidArgumentError, 'embed_dim must be a positive integer, got 0'),
    (RP, dict(num_classes=-1), InvalidArgumentError, 'num_classes must be a non-negative integer, got -1'),
    (RP, dict(img_size=(32, 32, 3)), InvalidArgumentError, r'img_size must be one value or a pair .*got 3 values'),
    (RP, dict(patch_size=(4,)), InvalidArgumentError, r'patch_size must be one value or a pair .*got 1 values'),
    ('pk_mixer_ss_w_32', dict(gamma=math.inf), InvalidArgumentError, 'gamma must be a finite number, got inf'),
    ('pk_mixer_ss_w_32', dict(mlp_ratio=math.nan), InvalidArgumentError, 'mlp_ratio must be a finite number'),
    ('pk_mixer_ss_w_32', dict(mlp_ratio=(4.0, 'x')), ArgumentTypeError, r"mlp_ratio\[1\] must be a number"),
    (RP, dict(act_layer='gelux'), InvalidArgumentError, "act_layer 'gelux' is not an activation timm knows"),
    (RP, dict(skip_layer='no'), ArgumentTypeError, r"skip_layer must be True or False, got 'no' \(str\)"),
    (RP, dict(stem_norm=1), ArgumentTypeError, 'stem_norm must be True or False'),
    (RP, dict(drop_path_rate=1.0), InvalidArgumentError, r'drop_path_rate must be in \[0, 1\), got 1'),
    (RP, dict(drop_rate=-0.1), InvalidArgumentError, r'drop_rate must be in \[0, 1\), got -0.1'),
    (RP, dict(global_pool='max'), InvalidArgumentError, r"global_pool must be one of \('', 'avg'\), got 'max'"),
    (RP, dict(norm_eps=0.0), InvalidArgumentError, 'norm_eps must be positive, got 0'),
    ('sw_mlp_o18_32', dict(mask_seed=2.0), ArgumentTypeError, 'mask_seed must be an integer, got 2.0'),
    ('sw_mlp_o18_32', dict(density=math.nan), InvalidArgumentError, 'density p must be a finite number'),
    ('sw_mlp_o18_32', dict(width=64.0), ArgumentTypeError, 'width must be an integer, got 64.0'),
    ('sw_mlp_o18_32', dict(omega=2 ** 18, width=64), InvalidArgumentError, 'give omega .* or width .*, not both'),
])
def test_a_typed_arguments(name, kwargs, error, match):
    with pytest.raises(error, match=match):
        build(name, **kwargs)


# ---------------------------------------------------------------------------------------------- B. derived sizes

@pytest.mark.parametrize('name,kwargs,match', [
    ('pk_mixer_ss_w_32', dict(gamma=0.001), r'gamma=0\.001 gives a token-MLP hidden width of 0 for S=64, C=487'),
    ('pk_mixer_s16_224', dict(mlp_ratio=(0.001, 4.0)),
     r'mlp_ratio=\(0\.001, 4\.0\) gives a token-MLP hidden width of 0'),
    ('sw_mlp_o18_32', dict(density=1e-9), r'omega=262144 at density p=1e-09 gives an SW-MLP of width m = 16190'),
    ('sw_mlp_o18_32', dict(gamma=1e-6, width=8), r'gamma=1e-06 gives a hidden width of 0 for m=8'),
    (RP, dict(patch_size=5), 'patch_size 5 does not divide img_size 32'),
    (RP, dict(num_tokens=40, skip_layer=False), 'num_tokens=40 differs from the 64 patches: needs skip_layer=True'),
])
def test_b_derived_sizes(name, kwargs, match):
    with pytest.raises(InvalidArgumentError, match=match):
        build(name, **kwargs)


# ---------------------------------------------------------------------------------------------- C. meta device

def test_c_meta_then_load_with_assign_gives_the_models_permutations():
    ref = randomize_(timm.create_model(RP, perm_seed=3)).eval()
    meta = timm.create_model(RP, perm_seed=3, device='meta')
    meta.load_state_dict(ref.state_dict(), assign=True)
    for a, b in zip([m for m in meta.modules() if isinstance(m, FixedPermutation)],
                    [m for m in ref.modules() if isinstance(m, FixedPermutation)]):
        assert a.index.device.type == 'cpu' and torch.equal(a.index, b.index) and torch.equal(a.inverse, b.inverse)
    x = torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        assert torch.equal(meta.eval()(x), ref(x))


@pytest.mark.parametrize('name', [RP, 'sw_mlp_o18_32'])
def test_c_to_empty_without_init_is_refused_then_init_gives_the_structure(name):
    kwargs = dict(width=64, num_blocks=2) if name.startswith('sw') else {}
    model = timm.create_model(name, device='meta', **kwargs)
    model.to_empty(device='cpu')
    with pytest.raises(NotMaterializedError, match=r'were never computed.*Call model\.init_non_persistent_buffers\(\)'):
        model(torch.randn(1, 3, 32, 32))
    model.init_non_persistent_buffers()
    ref = timm.create_model(name, **kwargs)
    for a, b in zip(model.buffers(), ref.buffers()):
        if a.dtype in (torch.int32, torch.int64, torch.bool):
            assert torch.equal(a, b)
    masked = [m for m in model.modules() if isinstance(m, MaskedLinear)]
    assert all(m._materialized for m in masked)


def test_c_blocks_return_fresh_tensors_not_views():
    model = timm.create_model(RP, num_blocks=2)
    x = model.stem(torch.randn(2, 3, 32, 32, requires_grad=True))
    for block in model.blocks:
        x = block(x)
        assert x._base is None


# ---------------------------------------------------------------------------------------------- D. checkpoints

def test_d_another_seed_names_the_seed_and_the_flag():
    sd = timm.create_model(RP, perm_seed=3).state_dict()
    with pytest.raises(CheckpointMismatchError, match=r'made with another permutation seed, perm_seed=3\. Build the '
                                                      r'model with perm_seed=3 \(timm scripts: --model-kwargs '
                                                      r'perm_seed=3\)'):
        timm.create_model(RP).load_state_dict(sd)


def test_d_digests_cast_to_a_float_dtype_are_refused():
    sd = {k: v.half() for k, v in timm.create_model(RP).state_dict().items()}
    with pytest.raises(CheckpointMismatchError, match=r'digest has dtype torch\.float16, not int64: the state dict was '
                                                      r'cast to another dtype'):
        timm.create_model(RP).load_state_dict(sd)


@pytest.mark.parametrize('suffix', ['.safetensors', '.pth'])
def test_d_truncated_files_are_refused_naming_the_file(tmp_path, suffix):
    from timm_pkmixer.publish.hub import read_checkpoint
    sd = timm.create_model(RP).state_dict()
    path = tmp_path / f'w{suffix}'
    save_file(sd, str(path)) if suffix == '.safetensors' else torch.save(sd, path)
    path.write_bytes(path.read_bytes()[:len(path.read_bytes()) // 2])
    with pytest.raises(CheckpointError, match=f'{path.name}: cannot be read as a checkpoint, it is truncated or '
                                              f'corrupt'):
        read_checkpoint(str(path))
    path.write_bytes(b'not a checkpoint at all')
    with pytest.raises(CheckpointError, match='truncated or corrupt'):
        read_checkpoint(str(path))


def test_d_push_refuses_non_finite_weights(tmp_path):
    from timm_pkmixer.publish.hub import build_validated_model, read_checkpoint
    sd = timm.create_model(RP).state_dict()
    sd['blocks.3.norm1.weight'] = torch.full_like(sd['blocks.3.norm1.weight'], math.nan)
    save_file(sd, str(tmp_path / 'nan.safetensors'))
    with pytest.raises(CheckpointError, match=r'1 tensors hold NaN or infinite values \(first: '
                                              r'blocks\.3\.norm1\.weight\); refusing to publish them'):
        build_validated_model(RP, read_checkpoint(str(tmp_path / 'nan.safetensors')))


# ---------------------------------------------------------------------------------------------- E. command line

@pytest.fixture(scope='module')
def files(tmp_path_factory):
    root = tmp_path_factory.mktemp('cli')
    (root / 'broken.yaml').write_text('model: [rp_mixer_b_w\nlr: 0.1\n')
    (root / 'list.yaml').write_text('- a\n- b\n')
    save_file(timm.create_model(RP).state_dict(), str(root / 'w.safetensors'))
    (root / 'dir').mkdir()
    return root


CLI_CASES = [
    (['push', '{root}/missing.pt', '--model', RP, '--repo-id', 'a/b'], 'pkmixer push: error: no checkpoint file at'),
    (['push', '{root}/dir', '--model', RP, '--repo-id', 'a/b'], 'pkmixer push: error: the checkpoint is a directory'),
    (['push', '{root}/w.safetensors', '--model', 'nope', '--repo-id', 'a/b'], "'nope' is not a timm-pkmixer"),
    (['push', '{root}/w.safetensors', '--model', RP, '--repo-id', 'a/b', '--model-kwargs', 'perm_seed'],
     "argument --model-kwargs: expected key=value with a Python name as key, got 'perm_seed'"),
    (['push', '{root}/w.safetensors', '--model', RP, '--repo-id', 'a/b', '--model-kwargs', 'colour=3'],
     "s_mixer_rp_s64c64_32 has no argument 'colour'; it takes: "),
    (['push', '{root}/w.safetensors', '--model', RP, '--repo-id', 'a/b', '--model-kwargs', 'perm_seed=1.5'],
     r'perm_seed must be an integer, got 1.5'),
    (['train', '{root}/broken.yaml', '--train-py', '{tests}/mini_train_py.py'],
     'pkmixer train: error: {root}/broken.yaml: not a valid YAML recipe'),
    (['train', '{root}/broken.yaml', '--train-py', '{root}/none.py'], 'pkmixer train: error: no train.py at'),
    (['sweep', '{root}/broken.yaml', '--out-dir', '{root}/s'], 'broken.yaml: not a valid YAML recipe'),
    (['sweep', '{root}/list.yaml', '--out-dir', '{root}/s'], 'a recipe must be a YAML mapping'),
    (['sweep', '{root}/dir', '--out-dir', '{root}/s'], 'pkmixer sweep: error: a recipe must be a YAML file'),
    (['sweep', '{root}/nothing.yaml', '--out-dir', '{root}/s'], 'pkmixer sweep: error: '),
    (['train', 'x.yaml', '--global-batch', '0'], 'argument --global-batch: global batch must be a positive integer'),
    (['demo', '--epochs', '0'], 'argument --epochs: epochs must be a positive integer, got 0'),
    (['demo', '--model', 'resnet50'], "unknown model 'resnet50' (a timm model, but not one of timm-pkmixer)"),
    (['demo', '--data-dir', '{root}/none'], 'pkmixer demo: error: no such data folder'),
    (['width', '--omega', 'inf'], 'argument --omega: omega must be a finite number, got inf'),
    (['width', '--omega', 'x'], "argument --omega: expected a number, got 'x'"),
    (['width', '--model', 'nope'], "unknown model 'nope'"),
    (['models', 'zzz'], 'pkmixer models: error: no registered model matches'),
    (['plot', 'run', '{root}/dir', '--out', '{root}/x.png'], 'pkmixer plot run: error: '),
    (['nonsense'], "invalid choice: 'nonsense'"),
]


@pytest.mark.parametrize('argv,message', CLI_CASES)
def test_e_cli_user_errors(files, cli, argv, message):
    tests = os.path.dirname(os.path.abspath(__file__))
    argv = [a.format(root=files, tests=tests) for a in argv]
    code, _, err = cli(*argv)  # in this process: `cli` fails the test on a traceback
    assert code == 2, (argv, code, err)
    assert message.format(root=files) in err, (argv, err)
    assert [line for line in err.splitlines() if ': error: ' in line][0].startswith('pkmixer'), err


def test_e_train_options_before_or_after_the_recipe(tmp_path, cli, launch_env):
    """The same plan wherever `pkmixer train`'s own options stand. The plan prints the load average (the thread
    count follows it): both runs see the same one, so the comparison does not depend on the machine's load."""
    from test_launch import RECIPE, STUB_TRAIN_PY
    launch_env.delenv('OMP_NUM_THREADS', raising=False)
    launch_env.setattr(os, 'getloadavg', lambda: (1.5, 1.5, 1.5))
    (tmp_path / 'train.py').write_text(STUB_TRAIN_PY)
    (tmp_path / 'r.yaml').write_text(RECIPE)
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


# ---------------------------------------------------------------------------------------------- F. forward inputs

@pytest.mark.parametrize('name,shape,match', [
    (RP, (3, 32, 32), r'expected a 4-D input \(B, 3, 32, 32\), got a 3-D tensor of shape \(3, 32, 32\)'),
    (RP, (1, 1, 3, 32, 32), r'expected a 4-D input \(B, 3, 32, 32\), got a 5-D tensor'),
    (RP, (2, 1, 32, 32), r"Input channels \(1\) don't match model \(3\): expected \(B, 3, 32, 32\)"),
    (RP, (2, 3, 32, 16), r"Input width \(16\) doesn't match model \(32\): expected \(B, 3, 32, 32\)"),
    ('sw_mlp_o18_32', (2, 3, 64, 64), r"Input height \(64\) doesn't match model \(32\): expected \(B, 3, 32, 32\)"),
])
def test_f_forward_inputs(name, shape, match):
    kwargs = dict(width=64, num_blocks=1) if name.startswith('sw') else dict(num_blocks=1)
    model = timm.create_model(name, **kwargs)
    for call in (model, model.forward_features, lambda t: model.forward_intermediates(t, output_fmt='NLC')):
        with pytest.raises(InputShapeError, match=match):
            call(torch.randn(*shape))


# ---------------------------------------------------------------------------------------------- G. tracing

def test_g_jit_trace_of_an_rp_model_with_gradients_on():
    model = randomize_(timm.create_model(RP, num_blocks=2)).eval()
    x = torch.randn(2, 3, 32, 32)
    traced = torch.jit.trace(model, x)  # grad mode on: used to fail with "Graphs differed across invocations"
    with torch.no_grad():
        assert torch.equal(traced(x), model(x))
    y = traced(x)
    y.sum().backward()
    assert model.blocks[0].mlp_tokens.fc1.weight.grad is not None
