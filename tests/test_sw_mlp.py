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
