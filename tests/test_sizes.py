"""Models too large to build are refused before anything is allocated (`timm_pkmixer.sizes`), naming the
argument: an arithmetic pre-check (a lower bound), then a meta-device build whose bytes are exactly the real
model's, for every registered model."""
import pytest
import timm
import torch

from timm_pkmixer.errors import InvalidArgumentError, ModelTooLargeError
from timm_pkmixer.sizes import model_nbytes

from conftest import MODELS


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
