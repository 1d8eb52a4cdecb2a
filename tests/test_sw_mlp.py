"""SW-MLP: Bernoulli(p) masks, exact zeros through AdamW, variance correction, widths of C.4 (ii)."""
import math

import pytest
import timm
import torch

from timm_pkmixer.layers import MaskedLinear


def test_realised_density_matches_p():
    for p in (0.1, 0.5, 0.9):
        layer = MaskedLinear(500, 400, density=p, seed=1, key='k')
        n = layer.mask.numel()
        assert abs(layer.mask.float().mean().item() - p) < 5 * math.sqrt(p * (1 - p) / n)


def test_masked_weights_stay_exactly_zero_under_adamw():
    model = timm.create_model('sw_mlp_o18_32', width=96, embed_dim=4, density=0.3)
    before = {n: m.weight.detach().clone() for n, m in model.named_modules() if isinstance(m, MaskedLinear)}
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.5, betas=(0.9, 0.99))
    for _ in range(5):
        loss = model(torch.randn(8, 3, 32, 32)).logsumexp(-1).mean() + sum((p ** 2).sum() for p in model.parameters())
        opt.zero_grad()
        loss.backward()
        opt.step()
    for name, module in model.named_modules():
        if isinstance(module, MaskedLinear):
            off = ~module.mask
            assert off.any() and torch.equal(module.weight[off], torch.zeros(int(off.sum())))
            assert not torch.equal(module.weight[module.mask], before[name][module.mask])  # kept entries trained


def test_initial_variance_corrected_for_p():
    p, fan_in = 0.25, 2000
    layer = MaskedLinear(fan_in, 1000, density=p, seed=0, key='v')
    kept = layer.weight[layer.mask]
    assert abs(kept.std().item() * math.sqrt(p * fan_in) - 1) < 0.02
    # the effective weight has the variance of a dense layer (the paper's 1/√p-scaled mask)
    assert abs(layer.weight.var().item() * fan_in - 1) < 0.03


def test_masks_are_deterministic_per_seed():
    a = MaskedLinear(64, 64, 0.5, seed=0, key='k')
    assert torch.equal(a.mask, MaskedLinear(64, 64, 0.5, seed=0, key='k').mask)
    assert not torch.equal(a.mask, MaskedLinear(64, 64, 0.5, seed=1, key='k').mask)


@pytest.mark.parametrize('p,width', [(0.9, 540), (0.7, 612), (0.5, 724), (0.3, 935), (0.1, 1619)])
def test_widths_of_c4_ii(p, width):
    model = timm.create_model('sw_mlp_o18_32', density=p, device='meta')
    assert model.width == width and len(model.blocks) == 8
    assert model.blocks[0].fc1.weight.shape == (width, width)


def test_nchw_features_and_head():
    model = timm.create_model('sw_mlp_o18_32', density=0.9).eval()
    x = torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        f = model.forward_features(x)
        assert f.shape == (2, 540, 1, 1)
        assert model(x).shape == (2, 10)
        model.reset_classifier(0, '')
        assert model(x).shape == (2, 540, 1, 1)


@pytest.mark.parametrize('density', [0, -0.1, 1.5])
def test_bad_density(density):
    with pytest.raises(ValueError, match='density p must be in'):
        timm.create_model('sw_mlp_o18_32', density=density, device='meta')


def _dense_block(block, x, outer_act):
    """A block by the formula, from its dense effective weights M ⊙ W: eq. S.17 (outer φ) or the Mixer block's
    form (C.1: no outer φ)."""
    phi = torch.nn.functional.gelu
    w1, w2 = block.fc1.weight * block.fc1.mask, block.fc2.weight * block.fc2.mask
    h = phi(torch.nn.functional.layer_norm(x, (x.shape[-1],), block.norm.weight, block.norm.bias, 1e-5) @ w1.T
            + block.fc1.bias)
    y = h @ w2.T + block.fc2.bias
    return x + (phi(y) if outer_act else y)


@pytest.mark.parametrize('outer_act', [True, False])
def test_the_mlp_block_with_and_without_the_outer_activation(outer_act):
    """outer_act=True: x + φ(M2⊙W2 φ(M1⊙W1 LN x)) (eq. S.17); False: x + M2⊙W2 φ(M1⊙W1 LN x), the MLP-Mixer block
    with its factors replaced by M ⊙ A (C.1). In the record, the description and config.json; the other form
    computes another function."""
    kwargs = dict(width=48, gamma=2.0, num_blocks=2, density=0.4, mask_seed=1)
    model = timm.create_model('sw_mlp_o18_32', outer_act=outer_act, **kwargs).eval()
    other = timm.create_model('sw_mlp_o18_32', outer_act=not outer_act, **kwargs).eval()
    other.load_state_dict(model.state_dict())
    for p in model.parameters():
        torch.nn.init.normal_(p, std=0.3)
    other.load_state_dict(model.state_dict())
    x = torch.randn(4, 48)
    with torch.no_grad():
        for block in model.blocks:
            want = _dense_block(block, x, outer_act)
            torch.testing.assert_close(block(x), want, rtol=1e-5, atol=1e-5)
        assert not torch.allclose(model.blocks[0](x), _dense_block(model.blocks[0], x, not outer_act), atol=1e-3)
        images = torch.randn(2, 3, 32, 32)
        assert not torch.allclose(model(images), other(images), atol=1e-4)
    assert model.model_args['outer_act'] is outer_act and model.model_args.to_json()['outer_act'] is outer_act
    assert model.describe().outer_act is outer_act
    assert type(model.blocks[0].act2).__name__ == ('GELU' if outer_act else 'Identity')


def test_outer_act_from_train_py_model_kwargs_and_its_refusals():
    import argparse

    from timm.utils import ParseKwargs
    parser = argparse.ArgumentParser()
    parser.add_argument('--model-kwargs', nargs='*', default={}, action=ParseKwargs)
    kwargs = parser.parse_args(['--model-kwargs', 'outer_act=False', 'gamma=2.0', 'width=32']).model_kwargs
    model = timm.create_model('sw_mlp_o18_32', num_blocks=1, **kwargs)
    assert model.model_args['outer_act'] is False and timm.create_model('sw_mlp_o18_32').model_args['outer_act']
    with pytest.raises(ValueError, match=r'outer_act=False needs gamma \(MLP blocks\): an FC block '
                                         r'x \+ φ\(\(M ⊙ W\) LN\(x\)\) has one φ'):
        timm.create_model('sw_mlp_o18_32', outer_act=False, device='meta')
    with pytest.raises(TypeError, match=r"outer_act must be True or False, got 'no' \(str\)"):
        timm.create_model('sw_mlp_o18_32', outer_act='no', gamma=2.0, device='meta')
