"""PK-family Mixers: timm equivalence, RP properties, overrides, errors, timm's model interface; blocks that return
fresh tensors, forward inputs of the wrong shape refused, tracing with gradients on; empty batches through every
family; checkpoints of another seed or depth named as such."""
import os

import pytest
import timm
import torch
from safetensors.torch import save_file

from timm_pkmixer import PKMixer, expand_resolution
from timm_pkmixer.errors import CheckpointMismatchError, InputShapeError
from timm_pkmixer.layers import FixedPermutation, SkipLayer
from timm_pkmixer.layers.permutation import derive_permutation

from conftest import MODELS, RP, images, randomize_, run_python, small


def _perms(model):
    return [m for m in model.modules() if isinstance(m, FixedPermutation)]


def test_timm_mixer_weights_load_into_pk_mixer_s16(tmp_path):
    """The normal PK Mixer *is* timm's Mixer: same state dict, same logits (Mixer-S/16: B/16 is the same code at
    four times the size)."""
    ref = timm.create_model('mixer_s16_224').eval()
    with torch.no_grad():  # non-trivial biases and norms, so every parameter matters
        for p in ref.parameters():
            p.add_(torch.randn_like(p) * 0.02)
    path = tmp_path / 'mixer_s16_224.safetensors'
    save_file(ref.state_dict(), str(path))
    model = timm.create_model('pk_mixer_s16_224', pretrained=True, pretrained_cfg_overlay=dict(file=str(path))).eval()
    x = torch.randn(2, 3, 224, 224)
    with torch.no_grad():
        torch.testing.assert_close(model(x), ref(x), rtol=0, atol=1e-5)
        torch.testing.assert_close(model.forward_features(x), ref.forward_features(x), rtol=0, atol=1e-5)


def test_rp_mixer_b_w_shapes():
    model = timm.create_model('rp_mixer_b_w')
    assert isinstance(model, PKMixer)
    assert round(sum(p.numel() for p in model.parameters()) / 1e6, 1) == 31.1
    with torch.no_grad():
        feats = model.forward_features(torch.randn(1, 3, 224, 224))
    assert feats.shape == (1, 256, 588)
    blk = model.blocks[0]
    assert blk.mlp_tokens.fc1.out_features == 1170 and blk.mlp_channels.fc1.out_features == 2687  # γ = 4.57
    assert not isinstance(blk.skip, SkipLayer)  # S = S0 = 256
    assert len(_perms(model)) == 8 * 4


def test_every_rp_permutation_is_a_distinct_permutation():
    model = timm.create_model('s_mixer_rp_s128c128_32')  # S0 = 64 → S = 128: the first J1 has m0 = 64·128
    perms = _perms(model)
    assert len(perms) == 8 * 4
    assert perms[0].num == 64 * 128 and perms[1].num == 128 * 128
    seen = set()
    for p in perms:
        assert torch.equal(p.index.sort().values, torch.arange(p.num))
        assert torch.equal(p.index[p.inverse], torch.arange(p.num))
        seen.add(tuple(p.index.tolist()))
    assert len(seen) == len(perms)  # every PK layer has its own J1, J2


def test_same_seed_same_function_in_another_process(tmp_path):
    model = randomize_(timm.create_model('s_mixer_rp_s64c64_32', perm_seed=5)).eval()
    x = torch.randn(2, 3, 32, 32)
    save_file(model.state_dict(), str(tmp_path / 'w.safetensors'))
    save_file({'x': x}, str(tmp_path / 'x.safetensors'))
    code = f'''
import timm, torch
from safetensors.torch import load_file, save_file
m = timm.create_model("s_mixer_rp_s64c64_32", perm_seed=5).eval()
m.load_state_dict(load_file(r"{tmp_path / 'w.safetensors'}"))
idx = torch.cat([b for n, b in m.named_buffers() if n.endswith(".index")])
with torch.no_grad():
    y = m(load_file(r"{tmp_path / 'x.safetensors'}")["x"])
save_file({{"y": y, "idx": idx}}, r"{tmp_path / 'y.safetensors'}")
'''
    run_python(code)
    from safetensors.torch import load_file
    out = load_file(str(tmp_path / 'y.safetensors'))
    idx = torch.cat([b for n, b in model.named_buffers() if n.endswith('.index')])
    assert torch.equal(out['idx'], idx)
    with torch.no_grad():
        y = model(x)
    assert y.std() > 1e-3 and torch.equal(out['y'], y)


def test_other_seed_other_permutations_and_refused_weights():
    a = timm.create_model('s_mixer_rp_s64c64_32', perm_seed=0)
    b = timm.create_model('s_mixer_rp_s64c64_32', perm_seed=1)
    for pa, pb in zip(_perms(a), _perms(b)):
        assert not torch.equal(pa.index, pb.index)
    with pytest.raises(RuntimeError, match='another permutation seed'):
        b.load_state_dict(a.state_dict())


def test_rp_and_normal_with_identical_weights_differ():
    normal = timm.create_model('s_mixer_s64c64_32').eval()
    rp = timm.create_model('s_mixer_rp_s64c64_32').eval()
    missing, unexpected = rp.load_state_dict(normal.state_dict(), strict=False)
    assert not unexpected and all(k.endswith('.digest') for k in missing)
    for (n1, p1), (n2, p2) in zip(normal.named_parameters(), rp.named_parameters()):
        assert n1 == n2 and torch.equal(p1, p2)
    x = torch.randn(4, 3, 32, 32)
    with torch.no_grad():
        assert (normal.forward_features(x) - rp.forward_features(x)).abs().max() > 1e-2


def test_normal_checkpoint_into_rp_model_is_refused(tmp_path):
    path = tmp_path / 'normal.safetensors'
    save_file(timm.create_model('s_mixer_s64c64_32').state_dict(), str(path))
    with pytest.raises(ValueError, match='normal .*checkpoint.*Random-Permuted'):
        timm.create_model('s_mixer_rp_s64c64_32', pretrained=True, pretrained_cfg_overlay=dict(file=str(path)))
    path = tmp_path / 'rp.safetensors'
    save_file(timm.create_model('s_mixer_rp_s64c64_32').state_dict(), str(path))
    with pytest.raises(ValueError, match='Random-Permuted.*normal Mixer'):
        timm.create_model('s_mixer_s64c64_32', pretrained=True, pretrained_cfg_overlay=dict(file=str(path)))


def test_corrupted_permutation_in_checkpoint_is_refused(tmp_path):
    model = timm.create_model('s_mixer_rp_s64c64_32')
    sd = model.state_dict()
    key = 'blocks.2.mlp_channels.perm_out.digest'
    sd[key] = sd[key] ^ 1
    path = tmp_path / 'corrupt.safetensors'
    save_file(sd, str(path))
    with pytest.raises(RuntimeError, match='blocks.2.mlp_channels.perm_out.digest.*corrupted'):
        timm.create_model('s_mixer_rp_s64c64_32', pretrained=True, pretrained_cfg_overlay=dict(file=str(path)))
    sd = model.state_dict()
    broken = torch.from_numpy(derive_permutation(64 * 64, 0, 'blocks.1.mlp_tokens.perm_in'))
    broken[0] = broken[1]
    sd['blocks.1.mlp_tokens.perm_in.index'] = broken
    with pytest.raises(RuntimeError, match=r'blocks.1.mlp_tokens.perm_in.index is not a permutation of 0..4095'):
        model.load_state_dict(sd)


def test_rp_checkpoint_size_within_two_percent_of_normal(tmp_path):
    sizes = {}
    for name in ('pk_mixer_s16_224', 'rp_mixer_s16_224'):
        path = tmp_path / f'{name}.safetensors'
        save_file(timm.create_model(name).state_dict(), str(path))
        sizes[name] = os.path.getsize(path)
    assert sizes['rp_mixer_s16_224'] / sizes['pk_mixer_s16_224'] <= 1.02


def test_every_argument_can_be_overridden():
    with pytest.raises(TypeError):  # timm's own Mixer
        timm.create_model('mixer_s16_224', patch_size=8)
    model = timm.create_model('rp_mixer_s16_224', patch_size=8, img_size=64, num_blocks=2, embed_dim=96,
                              perm_seed=3, drop_path_rate=0.1, gamma=2.0)
    assert model.num_patches == 64 and model.num_tokens == 64 and len(model.blocks) == 2
    assert model.blocks[0].mlp_tokens.fc1.out_features == 128 and model.blocks[0].mlp_channels.fc1.out_features == 192
    assert all(p.seed == 3 for p in _perms(model))
    with torch.no_grad():
        assert model(torch.randn(1, 3, 64, 64)).shape == (1, 1000)
    timm_shape = timm.create_model('pk_mixer_s16_224', embed_dim=64, num_blocks=1, device='meta')
    assert timm_shape.blocks[0].mlp_tokens.fc1.out_features == 32  # timm's token hidden C/2 follows C


def test_skip_layer_when_tokens_differ_and_on_request():
    model = timm.create_model('pk_mixer_ss_w_32', num_tokens=40)
    assert isinstance(model.blocks[0].skip, SkipLayer) and model.blocks[0].skip.proj.weight.shape == (40, 64)
    assert not isinstance(model.blocks[1].skip, SkipLayer)
    with torch.no_grad():
        assert model.forward_features(torch.randn(2, 3, 32, 32)).shape == (2, 40, 487)
    assert isinstance(timm.create_model('s_mixer_s64c64_32').blocks[0].skip, SkipLayer)  # S = S0, selected
    assert not isinstance(timm.create_model('pk_mixer_ss_w_32').blocks[0].skip, SkipLayer)
    with pytest.raises(ValueError, match='skip_layer'):
        timm.create_model('pk_mixer_ss_w_32', num_tokens=40, skip_layer=False)


def test_skip_layer_is_ln_of_token_projection():
    layer = SkipLayer(6, 4, 5)
    x = torch.randn(2, 6, 5)
    ref = torch.nn.functional.layer_norm(torch.einsum('st,btc->bsc', layer.proj.weight, x), (5,),
                                         layer.norm.weight, layer.norm.bias, layer.norm.eps)
    torch.testing.assert_close(layer(x), ref)


@pytest.mark.parametrize('kwargs,match', [
    (dict(num_blocks=0), 'num_blocks'),
    (dict(embed_dim=-4), 'embed_dim'),
    (dict(num_tokens=0), 'num_tokens'),
    (dict(patch_size=5), 'patch_size 5 does not divide img_size 32'),
    (dict(img_size=0), 'img_size'),
    (dict(mlp_ratio=0.), 'mlp_ratio'),
    (dict(mlp_ratio=(4.0, -1.0)), 'mlp_ratio'),
    (dict(permutation='shuffle'), 'permutation'),
    (dict(block_type='conv'), 'block_type'),
    (dict(drop_path_rate=1.5), 'drop_path_rate'),
])
def test_bad_arguments_raise_value_error_naming_them(kwargs, match):
    with pytest.raises(ValueError, match=match):
        timm.create_model('rp_mixer_ss_w_32', **kwargs)


def test_wrong_image_size_is_a_clear_error():
    model = timm.create_model('rp_mixer_ss_w_32')
    with pytest.raises(AssertionError, match=r"Input height \(64\) doesn't match model \(32\)"):
        model(torch.randn(1, 3, 64, 64))


def test_model_interface():
    model = timm.create_model('rp_mixer_ss_w_32', num_classes=7).eval()
    x = torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        feats = model.forward_features(x)
        assert feats.shape == (2, 64, 487)
        assert model.forward_head(feats, pre_logits=True).shape == (2, model.head_hidden_size)
        torch.testing.assert_close(model(x), model.forward_head(feats))
        final, inter = model.forward_intermediates(x, output_fmt='NLC')
        torch.testing.assert_close(final, feats)
        assert len(inter) == 2 and inter[-1].shape == (2, 64, 487)
        nchw = model.forward_intermediates(x, indices=1, intermediates_only=True)
        assert nchw[0].shape == (2, 487, 8, 8)
    model.set_grad_checkpointing(True)
    model.train()
    y = model.forward_features(x)
    y.sum().backward()
    assert model.get_classifier().out_features == 7
    model.reset_classifier(0)
    assert model(x).shape == (2, 487)
    model.reset_classifier(0, '')
    assert model(x).shape == (2, 64, 487)
    assert model.group_matcher()['stem'] == r'^stem'
    assert model.in_chans == 3 and model.num_features == 487


def test_features_only_and_meta_device():
    fmodel = timm.create_model('rp_mixer_ss_w_32', features_only=True, out_indices=(0, 1))
    outs = fmodel(torch.randn(1, 3, 32, 32))
    assert [o.shape for o in outs] == [(1, 487, 8, 8)] * 2
    meta = timm.create_model('rp_mixer_b_w', device='meta')
    assert all(t.device.type == 'meta' for t in list(meta.parameters()) + list(meta.buffers()))
    bf16 = timm.create_model('s_mixer_rp_s64c64_32', dtype=torch.bfloat16)
    assert bf16.blocks[0].mlp_tokens.fc1.weight.dtype == torch.bfloat16
    assert bf16.blocks[0].mlp_tokens.perm_in.index.dtype == torch.int32  # indices keep their integer dtype


# ----------------------------------------------------------------------------------- blocks, forward inputs, tracing

def test_c_blocks_return_fresh_tensors_not_views():
    model = timm.create_model(RP, num_blocks=2)
    x = model.stem(torch.randn(2, 3, 32, 32, requires_grad=True))
    for block in model.blocks:
        x = block(x)
        assert x._base is None


@pytest.mark.parametrize('name,shape,match', [
    (RP, (3, 32, 32), r'expected a 4-D input \(B, 3, 32, 32\), got a 3-D tensor of shape \(3, 32, 32\)'),
    (RP, (1, 1, 3, 32, 32), r'expected a 4-D input \(B, 3, 32, 32\), got a 5-D tensor'),
    (RP, (2, 1, 32, 32), r"Input channels \(1\) don't match model \(3\): expected \(B, 3, 32, 32\), got "
                         r"\(2, 1, 32, 32\)\. timm's train.py, validate.py and inference.py build a 3-channel "
                         r"model unless told: pass --in-chans 1 to build it for 1-channel images"),
    (RP, (2, 3, 32, 16), r"Input width \(16\) doesn't match model \(32\): expected \(B, 3, 32, 32\)"),
    ('sw_mlp_o18_32', (2, 3, 64, 64), r"Input height \(64\) doesn't match model \(32\): expected \(B, 3, 32, 32\)"),
])
def test_f_forward_inputs(name, shape, match):
    kwargs = dict(width=64, num_blocks=1) if name.startswith('sw') else dict(num_blocks=1)
    model = timm.create_model(name, **kwargs)
    for call in (model, model.forward_features, lambda t: model.forward_intermediates(t, output_fmt='NLC')):
        with pytest.raises(InputShapeError, match=match):
            call(torch.randn(*shape))


def test_g_jit_trace_of_an_rp_model_with_gradients_on():
    model = randomize_(timm.create_model(RP, num_blocks=2)).eval()
    x = torch.randn(2, 3, 32, 32)
    traced = torch.jit.trace(model, x)  # grad mode on: used to fail with "Graphs differed across invocations"
    with torch.no_grad():
        assert torch.equal(traced(x), model(x))
    y = traced(x)
    y.sum().backward()
    assert model.blocks[0].mlp_tokens.fc1.weight.grad is not None


# ----------------------------------------------------------------------------------------------------- empty batches

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


# ------------------------------------------------------------------------------ checkpoints of another seed or depth

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
