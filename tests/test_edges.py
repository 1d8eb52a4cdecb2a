"""Edges a user can reach, by class (issue 22): A. empty batches, B. the meta device and to_empty, C. sizes past
the device's memory, D. check_replicas' arguments, E. timm's own loaders on bad files, F. messages that must
point the right way. Families are read from the registry, so a model added to it is tested here too. Every
refusal asserts the exception type and that the message names the argument or the fault."""
import inspect

import pytest
import timm
import torch
from safetensors.torch import save_file
from timm.models import load_checkpoint

from timm_pkmixer import expand_resolution
from timm_pkmixer.catalog import list_pkmixer_models
from timm_pkmixer.cli import main as pkmixer
from timm_pkmixer.distributed import check_replicas
from timm_pkmixer.errors import (
    ArgumentTypeError,
    CheckpointMismatchError,
    InvalidArgumentError,
    ModelTooLargeError,
    NotMaterializedError,
)
from timm_pkmixer.layers import DerivedStructure, FixedPermutation
from timm_pkmixer.layers.gather import permute, use_gather_backend
from timm_pkmixer.sizes import device_memory, model_nbytes

from conftest import randomize_

MODELS = list_pkmixer_models()
RP = 's_mixer_rp_s64c64_32'


def small(name: str, **kwargs) -> torch.nn.Module:
    """`name` at a small size: 2 blocks and C = 16, where its class takes those arguments (a registered per-block
    permutation list keeps its depth)."""
    params = inspect.signature(type(timm.create_model(name, device='meta')).__init__).parameters
    size = {k: v for k, v in dict(num_blocks=2, embed_dim=16).items() if k in params}
    try:
        return timm.create_model(name, **size, **kwargs)
    except InvalidArgumentError as e:  # a registered per-block permutation list of its own depth keeps it
        assert 'permutation lists' in str(e), e
        size.pop('num_blocks')
        return timm.create_model(name, **size, **kwargs)


def images(model: torch.nn.Module, batch: int) -> torch.Tensor:
    return torch.randn(batch, model.in_chans, *model.img_size)


def test_the_registry_covers_every_family():
    families = {small(name).describe().family for name in MODELS}
    assert {'MLP-Mixer', 'RP MLP-Mixer', 'S-Mixer', 'RP S-Mixer', 'Mixed RP S-Mixer', 'SW-MLP', 'Shallow Monarch',
            'Shallow Kronecker'} <= families


# ---------------------------------------------------------------------------------------------- A. empty batch

def _extra_models():
    """Families beyond the registry's: a per-block MLP-Mixer pattern and an expanded (tiled) RP model."""
    mixed = timm.create_model('rp_mixer_ss8_32', embed_dim=16, permutation=['random', 'normal'])
    expanded = expand_resolution(timm.create_model('s_mixer_rp_s64c64_32', num_blocks=2, embed_dim=16), 2)
    return {'mixed_mlp_mixer': mixed, 'expanded_rp_s_mixer': expanded}


@pytest.mark.parametrize('name', MODELS + list(_extra_models()))
def test_a_empty_batch_forward_and_backward(name):
    model = _extra_models()[name] if name not in MODELS else small(name)
    model.train()
    x = images(model, 0).requires_grad_()
    y = model(x)
    assert y.shape == (0, model.num_classes)
    y.sum().backward()
    assert x.grad.shape == x.shape
    grads = [p.grad for p in model.parameters() if p.requires_grad]
    assert all(g is not None and not g.any() for g in grads)  # zero gradients, none missing
    grid = getattr(model, 'num_tokens', None) in (None, getattr(model, 'num_patches', None))
    with torch.no_grad():  # NCHW where the tokens are the patch grid (and the SW-MLP's 1×1 map)
        final, inter = model.forward_intermediates(images(model, 0), indices=1, output_fmt='NCHW' if grid else 'NLC')
    assert final.shape[0] == 0 and inter[0].shape[0] == 0 and inter[0].dim() == (4 if grid else 3)


@pytest.mark.parametrize('backend', ['index_select', 'gather', 'tuned', 'plain', 'opaque'])
def test_a_empty_batch_through_every_gather_backend(backend):
    index = torch.randperm(12)
    inverse = torch.argsort(index)
    x = torch.randn(0, 12, requires_grad=True)
    with use_gather_backend(backend):
        y = permute(x, index, inverse, [3, 4])
        assert y.shape == (0, 3, 4)
        y.sum().backward()
    assert x.grad.shape == (0, 12)


# ---------------------------------------------------------------------------------------------- B. meta, to_empty

def _derived(model):
    return [m for m in model.modules() if isinstance(m, DerivedStructure)]


@pytest.mark.parametrize('name', MODELS)
def test_b_meta_then_to_empty_refuses_until_recomputed_then_gives_the_same_function(name):
    ref = randomize_(small(name)).eval()
    model = small(name).eval()
    model.to('meta')
    model.to_empty(device='cpu')
    x = images(model, 2)
    if _derived(model):
        with pytest.raises(NotMaterializedError, match=r'were never computed.*to_empty\(\).*'
                                                       r'Call model\.init_non_persistent_buffers\(\)'):
            model(x)
    model.init_non_persistent_buffers()
    model.load_state_dict(ref.state_dict())
    with torch.no_grad():
        assert torch.equal(model(x), ref(x))
    for a, b in zip(model.buffers(), ref.buffers()):
        assert torch.equal(a, b)


@pytest.mark.parametrize('name', [RP, 'sw_mlp_o18_32', 'rp_mixer_ss8_32'])
def test_b_to_empty_on_a_real_device_also_refuses(name):
    model = small(name)
    model.to_empty(device='cpu')
    with pytest.raises(NotMaterializedError, match=r'init_non_persistent_buffers\(\)'):
        model(images(model, 1))


@pytest.mark.parametrize('name', [RP, 'sw_mlp_o18_32'])
def test_b_moves_between_real_devices_and_dtypes_keep_the_structure(name):
    model = small(name).eval()
    x = images(model, 2)
    with torch.no_grad():
        ref = model(x)
        model.to('cpu').double().float()
        assert torch.equal(model(x), ref)
    assert all(m._materialized for m in _derived(model))


def test_b_meta_then_load_with_assign_after_to_meta():
    ref = randomize_(small(RP)).eval()
    model = small(RP).eval().to('meta')
    model.load_state_dict(ref.state_dict(), assign=True)
    x = images(model, 2)
    with torch.no_grad():
        assert torch.equal(model(x), ref(x))


@pytest.mark.parametrize('name', [RP, 'sw_mlp_o18_32', 'rp_mixer_ss8_32'])
@pytest.mark.parametrize('assign', [False, True])
def test_b_to_meta_and_back_then_loading_a_checkpoint_recomputes_the_structure(name, assign):
    """model.to('meta'), to_empty() back onto the CPU, then a checkpoint: the checkpoint holds only digests, so the
    derived buffers (uninitialised memory after to_empty) are recomputed from the seed, never left invalid."""
    ref = randomize_(small(name)).eval()
    model = small(name).eval().to('meta')
    model.to_empty(device='cpu')
    model.load_state_dict(ref.state_dict(), assign=assign)
    x = images(model, 2)
    with torch.no_grad():
        assert torch.equal(model(x), ref(x))
    for (key, a), b in zip(model.named_buffers(), ref.buffers()):
        assert torch.equal(a, b), key
    assert all(m._materialized for m in _derived(model))


# ---------------------------------------------------------------------------------------------- C. absurd sizes

RAM = device_memory(torch.device('cpu'))[0]


@pytest.mark.parametrize('name,kwargs,names', [
    ('pk_mixer_s16_224', dict(embed_dim=10 ** 9), ['embed_dim=1000000000']),
    ('pk_mixer_ss8_32', dict(gamma=1e300), ['gamma=1e+300']),
    ('pk_mixer_ss8_32', dict(gamma=1e308), ['gamma=1e+308']),   # γ·S is past any float
    ('pk_mixer_ss8_32', dict(gamma=(1, 1e307)), ['gamma=(1, 1e+307)']),
    ('pk_mixer_ss8_32', dict(mlp_ratio=1e300), ['mlp_ratio=1e+300']),
    ('pk_mixer_ss8_32', dict(token_hidden_dim=10 ** 12), ['token_hidden_dim=1000000000000']),
    ('pk_mixer_ss8_32', dict(num_classes=10 ** 12), ['num_classes=1000000000000']),
    ('pk_mixer_s16_224', dict(num_tokens=10 ** 7), ['num_tokens=10000000']),
    ('rp_mixer_s16_224', dict(embed_dim=10 ** 6), ['embed_dim=1000000']),
    ('s_mixer_s64c64_32', dict(embed_dim=10 ** 8, device='meta'), ['embed_dim=100000000', 'meta device']),
    ('sw_mlp_o18_32', dict(width=500000), ['width=500000']),
    ('sw_mlp_o18_32', dict(width=64, gamma=1e300), ['gamma=1e+300']),
    ('sw_mlp_o18_32', dict(width=64, gamma=1e307), ['gamma=1e+307']),
])
def test_c_absurd_sizes_are_refused_before_allocating(name, kwargs, names):
    with pytest.raises(ModelTooLargeError) as info:
        timm.create_model(name, **kwargs)
    message = str(info.value)
    assert isinstance(info.value, (InvalidArgumentError, MemoryError))
    for n in names:
        assert n in message, message
    assert 'would need' in message and 'Refused before allocating' in message


@pytest.mark.parametrize('name,factor,needs', [
    ('s_mixer_s64c64_32', 64, '4.95 TB'),        # the token FC alone: 262144² weights per block
    ('s_mixer_s64c64_32', 10 ** 6, 'bytes'),     # was "Storage size calculation overflowed"
    ('rp_mixer_ss8_32', 1000, 'PB'),
    ('pk_mixer_ss_w_32', 200, 'TB'),
])
def test_c_expansions_past_memory_are_refused_naming_the_factor(name, factor, needs):
    model = small(name) if factor != 64 else timm.create_model(name)
    with pytest.raises(ModelTooLargeError, match=rf'^factor={factor} .*the expanded model would need .*{needs}.*'
                                                 r'Use a smaller factor'):
        expand_resolution(model, factor)


def test_c_cli_expand_with_a_huge_factor_exits_2_without_traceback(tmp_path, capsys):
    ckpt = tmp_path / 'm.safetensors'
    save_file(timm.create_model('s_mixer_s64c64_32', num_blocks=2).state_dict(), str(ckpt))
    status = pkmixer(['expand', str(ckpt), '--model', 's_mixer_s64c64_32', '--model-kwargs', 'num_blocks=2',
                      '--factor', '1000000', '--out-dir', str(tmp_path / 'out')])
    err = capsys.readouterr().err
    assert status == 2
    assert err.startswith('pkmixer expand: error: factor=1000000 ') and 'Traceback' not in err
    assert not (tmp_path / 'out').exists()


def _registered_bytes(name: str) -> int:
    return model_nbytes(timm.create_model(name, device='meta'))


@pytest.mark.parametrize('name', MODELS)
def test_c_the_size_bound_is_the_bytes_of_every_registered_model(name):
    """The bound is read from the record (a meta-device build), so it equals the real model's parameters and
    buffers, bytes for bytes; the arithmetic pre-check before it is a lower bound holding the bulk. Real models on
    the CPU: the registered size up to 100 MB, two blocks of it above (the 224 px Mixers)."""
    small_enough = _registered_bytes(name) < 10 ** 8
    model = timm.create_model(name) if small_enough else timm.create_model(name, num_blocks=2)
    assert next(model.parameters()).device.type == 'cpu'
    actual = sum(t.numel() * t.element_size() for t in [*model.parameters(), *model.buffers()])
    record = model.model_args
    assert type(model).check_size(record, device='cpu') == actual
    assert type(model).check_size(record, device='meta', dtype=torch.bfloat16) == model_nbytes(
        type(model)(**record, device='meta', dtype=torch.bfloat16))
    pre = sum(t.nbytes for t in record.planned_tensors(4, {}))
    assert 0.9 * actual <= pre <= actual, (pre, actual)


def test_c_the_meta_build_refuses_what_the_pre_check_lets_through(monkeypatch):
    """Between the pre-check's lower bound and the exact bytes, the meta build decides, naming the largest tensor."""
    import timm_pkmixer.sizes as sizes
    model = timm.create_model('sw_mlp_o18_32', width=64, num_blocks=2, device='meta')
    exact = model_nbytes(model)
    pre = sum(t.nbytes for t in model.model_args.planned_tensors(4, {}))
    assert pre < exact
    monkeypatch.setattr(sizes, 'device_memory', lambda device: (exact - 1, 'a small test device'))
    with pytest.raises(ModelTooLargeError, match=r'^width=64, embed_dim=48: the model would need 1\.04 MB .* of a '
                                                 r'small test device; the largest is in_proj\.weight \(64 × 3\.07e3, '
                                                 r'786 kB\)'):
        timm.create_model('sw_mlp_o18_32', width=64, num_blocks=2)
    monkeypatch.setattr(sizes, 'device_memory', lambda device: (exact, 'a small test device'))
    assert model_nbytes(timm.create_model('sw_mlp_o18_32', width=64, num_blocks=2)) == exact


def test_c_a_meta_model_of_2_to_the_40_elements_is_built_and_measured():
    """The meta device holds no memory: a layer of 2^40 weights is measured (1 PiB is its bound), and refused for
    the CPU."""
    model = timm.create_model('s_mixer_s64c64_32', num_blocks=1, embed_dim=2 ** 20, device='meta')
    assert model.blocks[0].mlp_channels.fc1.weight.numel() == 2 ** 40
    assert type(model).check_size(model.model_args, device='meta') == model_nbytes(model)
    with pytest.raises(ModelTooLargeError, match=r'^embed_dim=1048576: the model would need 4\.4 TB'):
        type(model).check_size(model.model_args, device='cpu')


@pytest.mark.parametrize('name', [n for n in MODELS if n.startswith('shallow_')])
def test_c_shallow_sizes_refused(name):
    with pytest.raises(ModelTooLargeError, match=r'img_size=\(65536, 65536\), in_chans=1 \(n = 4294967296\)'):
        timm.create_model(name, img_size=65536)  # Monarch: 2 × 65536³ weights a layer; Kronecker: a 2^32-wide head


# ---------------------------------------------------------------------------------------------- D. check_replicas

@pytest.mark.parametrize('model,group,timeout,error,match', [
    (None, None, 300, ArgumentTypeError, r'model must be the torch\.nn\.Module .*got NoneType'),
    ('rp_mixer_b_w', None, 300, ArgumentTypeError, r'model must be the torch\.nn\.Module .*got str'),
    ('state_dict', None, 300, ArgumentTypeError, r'model must be .*got OrderedDict \(a state dict\? pass the model'),
    ([1, 2], None, 300, ArgumentTypeError, r'model must be .*got list'),
    ('model', 'not a group', 300, ArgumentTypeError, r"group must be a torch\.distributed\.ProcessGroup .*"
                                                     r"got 'not a group' \(str\)"),
    ('model', 3, 300, ArgumentTypeError, r'group must be a torch\.distributed\.ProcessGroup .*got 3 \(int\)'),
    ('model', None, -1, InvalidArgumentError, 'timeout must be positive, got -1'),
    ('model', None, '5', ArgumentTypeError, r"timeout must be a number, got '5' \(str\)"),
])
def test_d_check_replicas_refuses_bad_arguments_by_name(model, group, timeout, error, match):
    rp = small(RP)
    if model in ('state_dict', 'model'):
        model = rp.state_dict() if model == 'state_dict' else rp
    with pytest.raises(error, match=match):
        check_replicas(model, group=group, timeout=timeout)


# ---------------------------------------------------------------------------------------------- E. timm's loaders

NAME, KW = 's_mixer_rp_s64c64_32', dict(num_blocks=2, embed_dim=16)


def _files(tmp_path):
    good = timm.create_model(NAME, **KW).state_dict()
    save_file(good, str(tmp_path / 'good.safetensors'))
    torch.save(good, tmp_path / 'good.pth')
    raw_st, raw_pth = (tmp_path / 'good.safetensors').read_bytes(), (tmp_path / 'good.pth').read_bytes()
    files = {
        'empty.safetensors': b'', 'empty.pth': b'',
        'truncated.safetensors': raw_st[:len(raw_st) // 2], 'truncated.pth': raw_pth[:len(raw_pth) // 2],
        'text.pth': b'hello\n', 'text.safetensors': b'hello\n',
    }
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
    save_file({}, str(tmp_path / 'no_tensors.safetensors'))
    torch.save({'foo': torch.zeros(1)}, tmp_path / 'foreign.pth')
    torch.save(timm.create_model(NAME, **dict(KW, num_blocks=3)).state_dict(), tmp_path / 'deeper.pth')
    torch.save(timm.create_model(NAME, **dict(KW, perm_seed=5)).state_dict(), tmp_path / 'seed5.pth')


def _load(loader, path):
    if loader == 'pretrained':
        return timm.create_model(NAME, pretrained=True, pretrained_cfg_overlay=dict(file=str(path)), **KW)
    return load_checkpoint(timm.create_model(NAME, **KW), str(path))


# what timm's reader (timm.models.load_state_dict) raises before any code of this package runs
TIMM_FAILS_FIRST = {
    'empty.safetensors': 'SafetensorError', 'truncated.safetensors': 'SafetensorError',
    'text.safetensors': 'SafetensorError', 'empty.pth': 'EOFError', 'truncated.pth': 'OSError',
    'text.pth': 'KeyError',
}


@pytest.mark.parametrize('loader', ['pretrained', 'load_checkpoint'])
def test_e_timm_loaders_on_bad_files(tmp_path, loader):
    _files(tmp_path)
    for name, raw in TIMM_FAILS_FIRST.items():  # documented: timm's own reader fails, our code is not reached
        with pytest.raises(Exception) as info:
            _load(loader, tmp_path / name)
        assert type(info.value).__name__ == raw, (name, info.value)
    ours = {
        'no_tensors.safetensors': 'the checkpoint holds no tensors at all',
        'foreign.pth': r'unexpected keys \(foo\)',
        'deeper.pth': 'the checkpoint has 3 blocks, the model 2',
        'seed5.pth': 'made with another permutation seed, perm_seed=5',
    }
    for name, fault in ours.items():
        with pytest.raises(CheckpointMismatchError, match=fault) as info:
            _load(loader, tmp_path / name)
        # timm's pretrained path names the file; load_checkpoint hands load_state_dict the tensors alone
        assert str(info.value).startswith(f'{tmp_path / name}: ') == (loader == 'pretrained'), str(info.value)


# ---------------------------------------------------------------------------------------------- F. messages

@pytest.mark.parametrize('name,kwargs,seed_arg', [
    (RP, dict(perm_seed=3), 'perm_seed'),
    ('rp_mixer_ss8_32', dict(perm_seed=7), 'perm_seed'),
    ('sw_mlp_o18_32', dict(mask_seed=2), 'mask_seed'),
])
def test_f_identified_seed_is_not_called_another_architecture(name, kwargs, seed_arg):
    ckpt = small(name, **kwargs).state_dict()
    with pytest.raises(CheckpointMismatchError) as info:
        small(name).load_state_dict(ckpt)
    message = str(info.value)
    value = kwargs[seed_arg]
    assert f'another {"mask" if seed_arg == "mask_seed" else "permutation"} seed, {seed_arg}={value}' in message
    assert f'Build the model with {seed_arg}={value}' in message
    assert 'another architecture' not in message and 'other model arguments' not in message


@pytest.mark.parametrize('name,kwargs,meaning', [
    ('pk_mixer_ss8_32', dict(gamma=(1.0, 2.0, 3.0)), '(tokens, channels)'),
    ('pk_mixer_ss8_32', dict(mlp_ratio=[0.5, 4.0, 1.0]), '(tokens, channels)'),
    ('pk_mixer_ss8_32', dict(gamma=()), '(tokens, channels)'),
    ('pk_mixer_ss8_32', dict(img_size=(32, 32, 3)), '(height, width)'),
    ('pk_mixer_ss8_32', dict(patch_size=(8,)), '(height, width)'),
])
def test_f_pair_errors_name_what_the_pair_means(name, kwargs, meaning):
    arg = next(iter(kwargs))
    with pytest.raises(InvalidArgumentError) as info:
        timm.create_model(name, device='meta', **kwargs)
    message = str(info.value)
    assert message.startswith(f'{arg} must be one value or a pair {meaning}'), message
    if meaning != '(height, width)':
        assert 'height' not in message


@pytest.mark.parametrize('name,ckpt_blocks,model_blocks', [
    (RP, 3, 2), (RP, 2, 3), ('rp_mixer_ss8_32', 4, 2), ('sw_mlp_o18_32', 3, 2), ('s_mixer_s64c64_32', 1, 2),
])
def test_f_another_depth_is_reported_as_a_depth_mismatch(name, ckpt_blocks, model_blocks):
    kw = dict(embed_dim=16) if not name.startswith('sw') else dict(width=32)
    ckpt = timm.create_model(name, num_blocks=ckpt_blocks, **kw).state_dict()
    with pytest.raises(CheckpointMismatchError) as info:
        timm.create_model(name, num_blocks=model_blocks, **kw).load_state_dict(ckpt)
    message = str(info.value)
    assert (f'the checkpoint has {ckpt_blocks} blocks, the model {model_blocks} (num_blocks={model_blocks}): '
            f'build the model with num_blocks={ckpt_blocks}') in message
    assert 'normal Mixer there' not in message and 'normal (non-RP) Mixer checkpoint there' not in message


def test_f_strict_false_ignores_a_deeper_checkpoints_extra_blocks():
    ckpt = timm.create_model(RP, num_blocks=3, embed_dim=16).state_dict()
    model = timm.create_model(RP, num_blocks=2, embed_dim=16)
    result = model.load_state_dict(ckpt, strict=False)
    assert result.unexpected_keys and all(k.startswith('blocks.2.') for k in result.unexpected_keys)
    assert torch.equal(model.blocks[1].mlp_tokens.fc1.weight, ckpt['blocks.1.mlp_tokens.fc1.weight'])


def test_f_a_model_on_meta_runs_shape_only_without_refusing():
    model = small(RP).to('meta')  # nothing is computed on meta: no NotMaterializedError there
    assert model(torch.empty(2, 3, 32, 32, device='meta')).shape == (2, 10)
    assert all(isinstance(m, FixedPermutation) and not m._materialized for m in _derived(model))
