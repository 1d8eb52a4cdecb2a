"""Models too large to build are refused before anything is allocated (`timm_pkmixer.sizes`), naming the
argument: the record's tensors counted arithmetically (the layers given by timm name built alone on the meta
device), no model built, and their bytes are exactly the real model's, for every registered model and for builds
that give every constructor argument another value."""
import pytest
import timm
import torch

from timm_pkmixer import PKMixer, SwMlp
from timm_pkmixer.errors import InvalidArgumentError, ModelTooLargeError
from timm_pkmixer.models import ShallowMlp
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
    """The bound is counted from the record, so it equals the real model's parameters and buffers, bytes for bytes;
    its arithmetic part holds the bulk. Real models on the CPU: the registered size up to 100 MB, two blocks of it
    above (the 224 px Mixers)."""
    small_enough = _registered_bytes(name) < 10 ** 8
    model = timm.create_model(name) if small_enough else timm.create_model(name, num_blocks=2)
    assert next(model.parameters()).device.type == 'cpu'
    actual = sum(t.numel() * t.element_size() for t in [*model.parameters(), *model.buffers()])
    record = model.model_args
    assert type(model).check_size(record, device='cpu') == actual
    assert type(model).check_size(record, device='meta', dtype=torch.bfloat16) == model_nbytes(
        type(model)(**record, device='meta', dtype=torch.bfloat16))
    pre = sum(t.nbytes for t in record.planned_tensors(4, {}))
    assert pre + sum(t.nbytes for t in record.layer_tensors(None)) == actual
    assert 0.9 * actual <= pre <= actual, (pre, actual)


def _variants():
    from test_model_args import VARIANTS
    extra = {PKMixer: [dict(act_layer='prelu', norm_layer='batchnorm1d', num_blocks=2, embed_dim=16, stem_norm=True,
                            permutation=['random', 'random'], num_tokens=20, img_size=32, patch_size=8)],
             SwMlp: [dict(act_layer='prelu', width=32, gamma=1.5, num_blocks=2)],
             ShallowMlp: [dict(act_layer='prelu', num_blocks=3, img_size=4, in_chans=1)]}
    return [(cls, kwargs) for cls, variants in VARIANTS.items() for kwargs in variants + extra[cls]]


@pytest.mark.parametrize('cls,kwargs', _variants(), ids=lambda v: v.__name__ if isinstance(v, type) else
                         ','.join(f'{k}={v[k]}' for k in sorted(v))[:60])
@pytest.mark.parametrize('dtype', [None, torch.bfloat16])
def test_c_the_size_bound_is_the_bytes_of_every_argument(cls, kwargs, dtype):
    """Every constructor argument at another value than its default (the builds of `test_model_args`), and layers
    given by name that hold tensors of their own (PReLU's weight, BatchNorm's running statistics): the counted
    bytes are the built model's."""
    model = cls(**kwargs, dtype=dtype)
    actual = sum(t.numel() * t.element_size() for t in [*model.parameters(), *model.buffers()])
    assert cls.check_size(model.model_args, device='cpu', dtype=dtype) == actual


def test_c_the_bound_refuses_one_byte_over_the_device(monkeypatch):
    """The bound is exact: a device one byte too small refuses the model, naming its largest tensor and the
    arguments that set it; one of the exact size builds it."""
    import timm_pkmixer.sizes as sizes
    exact = model_nbytes(timm.create_model('sw_mlp_o18_32', width=64, num_blocks=2, device='meta'))
    monkeypatch.setattr(sizes, 'device_memory', lambda device: (exact - 1, 'a small test device'))
    with pytest.raises(ModelTooLargeError, match=r'^width=64, embed_dim=48: the model would need 1\.04 MB .* of a '
                                                 r'small test device; the largest is in_proj\.weight \(64 × 3\.07e3, '
                                                 r'786 kB\)'):
        timm.create_model('sw_mlp_o18_32', width=64, num_blocks=2)
    monkeypatch.setattr(sizes, 'device_memory', lambda device: (exact, 'a small test device'))
    assert model_nbytes(timm.create_model('sw_mlp_o18_32', width=64, num_blocks=2)) == exact


def test_c_the_layers_given_by_name_are_counted_without_building_the_model(monkeypatch):
    """The bound builds no model (the constructor runs once per model) and counts a named norm layer by one
    instance on the meta device, which decides when the rest fits."""
    import timm_pkmixer.sizes as sizes
    calls = []
    init = PKMixer.__init__
    monkeypatch.setattr(PKMixer, '__init__', lambda self, *a, **k: calls.append(1) or init(self, *a, **k))
    kwargs = dict(num_blocks=2, embed_dim=16, norm_layer='batchnorm1d')
    exact = model_nbytes(timm.create_model('rp_mixer_ss8_32', device='meta', **kwargs))
    assert len(calls) == 1
    record = timm.create_model('rp_mixer_ss8_32', device='meta', **kwargs).model_args
    assert sum(t.nbytes for t in record.planned_tensors(4, {})) < exact - 1  # the rest fits: the norms decide
    monkeypatch.setattr(sizes, 'device_memory', lambda device: (exact - 1, 'a small test device'))
    with pytest.raises(ModelTooLargeError, match=r'the model would need 64\.8 kB .* more than the 64\.8 kB of a '
                                                 r'small test device; the largest is stem\.proj\.weight'):
        timm.create_model('rp_mixer_ss8_32', **kwargs)


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
