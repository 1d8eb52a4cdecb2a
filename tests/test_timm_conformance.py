"""What timm's own suite does not cover: intermediates, torch.compile, ONNX, bf16 autocast, channels_last."""
import pytest
import timm
import torch

from conftest import randomize_

MIXERS = ['rp_mixer_ss_w_32', 'pk_mixer_ss_w_32', 's_mixer_rp_s64c64_32']


@pytest.mark.parametrize('name', MIXERS + ['sw_mlp_o18_32'])
@pytest.mark.parametrize('grad_checkpointing', [False, True])
def test_forward_intermediates_match_forward_features(name, grad_checkpointing):
    model = randomize_(timm.create_model(name, num_blocks=3) if 'sw_mlp' not in name
                       else timm.create_model(name, num_blocks=3, width=256, embed_dim=4)).eval()
    model.set_grad_checkpointing(grad_checkpointing)
    x = torch.randn(2, 3, 32, 32, requires_grad=grad_checkpointing)
    fmt = 'NLC' if 'mixer' in name else 'NCHW'
    final, inter = model.forward_intermediates(x, output_fmt=fmt)
    feats = model.forward_features(x)
    torch.testing.assert_close(final, feats, rtol=0, atol=0)
    assert len(inter) == 3
    # the last intermediate, normalised, is forward_features
    last = model.forward_intermediates(x, indices=[2], norm=True, output_fmt=fmt, intermediates_only=True)[0]
    torch.testing.assert_close(last, feats, rtol=0, atol=0)
    if grad_checkpointing:
        final.sum().backward()
        assert x.grad is not None and x.grad.abs().sum() > 0


@pytest.mark.parametrize('name', ['rp_mixer_ss_w_32', 'sw_mlp_o18_32'])
def test_prune_intermediate_layers(name):
    kw = dict(num_blocks=4) if 'mixer' in name else dict(num_blocks=4, width=256, embed_dim=4)
    model = randomize_(timm.create_model(name, **kw)).eval()
    x = torch.randn(2, 3, 32, 32)
    fmt = 'NLC' if 'mixer' in name else 'NCHW'
    expected = model.forward_intermediates(x, indices=[1], output_fmt=fmt, intermediates_only=True)
    kept = model.prune_intermediate_layers(indices=[1], prune_head=True)
    assert kept == [1] and len(model.blocks) == 2 and model.num_classes == 0
    got = model.forward_intermediates(x, indices=[1], output_fmt=fmt, intermediates_only=True)
    torch.testing.assert_close(got[0], expected[0], rtol=0, atol=0)


@pytest.mark.parametrize('name', ['rp_mixer_ss_w_32', 'pk_mixer_ss_w_32', 'sw_mlp_o18_32'])
def test_features_only_getter(name):
    kw = {} if 'mixer' in name else dict(width=256, embed_dim=4)
    base = randomize_(timm.create_model(name, **kw)).eval()
    feat = timm.create_model(name, features_only=True, out_indices=(-1,), **kw).eval()
    missing, unexpected = feat.model.load_state_dict(base.state_dict(), strict=False)
    assert not missing and set(unexpected) <= {'head.weight', 'head.bias', 'norm.weight', 'norm.bias'}
    x = torch.randn(2, 3, 32, 32)
    (out,) = feat(x)
    ref = base.forward_intermediates(x, indices=[len(base.blocks) - 1], intermediates_only=True)[0]
    assert feat.feature_info.channels() == [base.num_features]
    torch.testing.assert_close(out, ref, rtol=0, atol=0)


@pytest.mark.slow  # inductor compiles forward and backward: 12-33 s a model on this busy 2-core machine
@pytest.mark.parametrize('name,kw', [
    ('rp_mixer_ss_w_32', dict(num_blocks=1)),
    ('s_mixer_rp_s64c64_32', dict(num_blocks=2)),
    ('sw_mlp_o18_32', dict(num_blocks=2, width=128, embed_dim=4)),
])
def test_torch_compile_fullgraph_matches_eager(name, kw):
    torch._dynamo.reset()
    model = randomize_(timm.create_model(name, **kw))
    x = torch.randn(4, 3, 32, 32)
    compiled = torch.compile(model, fullgraph=True)  # fullgraph: any graph break is an error
    y = compiled(x)
    y.square().sum().backward()
    grads = {n: p.grad.clone() for n, p in model.named_parameters()}
    model.zero_grad()
    ref = model(x)
    ref.square().sum().backward()
    assert ref.std() > 1e-3
    torch.testing.assert_close(y, ref, rtol=1e-4, atol=1e-5)
    for n, p in model.named_parameters():
        torch.testing.assert_close(grads[n], p.grad, rtol=1e-4, atol=1e-5, msg=n)


@pytest.mark.slow  # torch.export of a 224 px model, then onnxruntime: 38 s on this busy 2-core machine
@pytest.mark.parametrize('name', ['rp_mixer_s16_224', 'pk_mixer_s16_224'])
def test_onnx_export_runs_in_onnxruntime(name, tmp_path):
    ort = pytest.importorskip('onnxruntime')
    model = randomize_(timm.create_model(name)).eval()
    x = torch.randn(2, 3, 224, 224)
    path = str(tmp_path / f'{name}.onnx')
    torch.onnx.export(model, (x,), path, dynamo=True, verbose=False)
    sess = ort.InferenceSession(path, providers=['CPUExecutionProvider'])
    (y,) = sess.run(None, {sess.get_inputs()[0].name: x.numpy()})
    with torch.no_grad():
        ref = model(x)
    assert ref.std() > 1e-3
    torch.testing.assert_close(torch.from_numpy(y), ref, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize('name', MIXERS + ['sw_mlp_o18_32'])
def test_bf16_autocast_and_channels_last(name):
    model = randomize_(timm.create_model(name))
    x = torch.randn(4, 3, 32, 32)
    with torch.autocast('cpu', dtype=torch.bfloat16):
        y = model(x)
    assert y.dtype == torch.bfloat16 and torch.isfinite(y.float()).all()
    y.float().square().sum().backward()
    assert all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)
    model.eval()
    with torch.no_grad():
        torch.testing.assert_close(model(x.to(memory_format=torch.channels_last)), model(x), rtol=1e-5, atol=1e-5)
