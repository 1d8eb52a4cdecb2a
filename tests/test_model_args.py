"""Every registered model keeps the arguments it was built with, resolved, in one record (``model.model_args``):
built with a non-default value of every constructor argument, it rebuilds from the record, and the record
survives a push (the Hub folder, reloaded with timm's ``local-dir:``) and an expansion (expanded, pushed,
reloaded). The constructor arguments are read from each model class's signature: a new argument without a
non-default value below fails `test_every_argument_has_non_default_values`, naming it. Bad arguments (wrong
types, values out of range, sizes that derive to nothing) are refused, naming the argument."""
import inspect
import math
from typing import Any, Dict, List

import pytest
import timm
import torch

from timm_pkmixer import PKMixer, SwMlp, expand_resolution
from timm_pkmixer.catalog import list_pkmixer_models
from timm_pkmixer.errors import ArgumentTypeError, InvalidArgumentError
from timm_pkmixer.models import ShallowMlp
from timm_pkmixer.models._common import ALTERNATIVE_ARGS, TRAINING_ONLY_ARGS, ModelArgs
from timm_pkmixer.publish.checkpoint_file import build_validated_model, read_checkpoint
from timm_pkmixer.publish.hub import write_hub_folder

from conftest import RP, randomize_

# Builds per model class, small: together they give every constructor argument a value other than its
# signature's default. Alternatives (mlp_ratio / gamma, norm_layer / norm_eps, omega / width) and the S-Mixer's
# block_type='fc' (no hidden widths) need builds of their own; tiles > 1 is a model expand_resolution refuses.
VARIANTS: Dict[type, List[Dict[str, Any]]] = {
    PKMixer: [
        dict(num_classes=7, img_size=(32, 48), in_chans=2, patch_size=8, num_blocks=2, embed_dim=24, num_tokens=32,
             block_type='mlp', mlp_ratio=(1.0, 2.0), token_hidden_dim=40, permutation=['random', 'normal'],
             perm_seed=3, skip_layer=True, norm_layer='rmsnorm', act_layer='relu', weight_init='timm', nlhb=True,
             drop_rate=0.1, proj_drop_rate=0.1, drop_path_rate=0.1, stem_norm=True, global_pool='', tiles=2),
        dict(num_classes=5, img_size=(32, 48), in_chans=1, patch_size=(8, 4), num_blocks=2, embed_dim=20,
             block_type='mlp', gamma=(2.0, 3.0), channel_hidden_dim=40, permutation=['normal', 'random'],
             perm_seed=4, skip_layer=True, norm_eps=1e-3, act_layer='silu', drop_path_rate=0.1),
        dict(num_classes=3, img_size=32, patch_size=8, num_blocks=2, embed_dim=16, num_tokens=36, block_type='fc',
             permutation='random', perm_seed=2, norm_eps=1e-4),
    ],
    SwMlp: [
        dict(num_classes=7, img_size=(16, 24), in_chans=2, patch_size=4, embed_dim=6, num_blocks=2, density=0.3,
             width=64, gamma=2.0, outer_act=False, mask_seed=3, norm_eps=1e-3, act_layer='relu', drop_rate=0.1),
        dict(num_classes=0, img_size=16, patch_size=(4, 8), num_blocks=2, density=0.4, omega=3000.0, global_pool=''),
    ],
    ShallowMlp: [
        dict(num_classes=0, img_size=(4, 8), in_chans=2, structure='kronecker', num_blocks=3, act_layer='gelu',
             drop_rate=0.1, global_pool=''),
        dict(num_classes=3, img_size=(2, 8), structure='monarch', num_blocks=1),
    ],
}
EXPANDABLE = (PKMixer,)
_NOT_ARGUMENTS = ('self', 'device', 'dtype')


def _parameters(cls: type) -> Dict[str, inspect.Parameter]:
    return {n: p for n, p in inspect.signature(cls.__init__).parameters.items() if n not in _NOT_ARGUMENTS}


def _model_classes() -> Dict[type, List[str]]:
    """The registry's models by class."""
    classes: Dict[type, List[str]] = {}
    for name in list_pkmixer_models():
        classes.setdefault(type(timm.create_model(name, device='meta')), []).append(name)
    return classes


MODEL_CLASSES = _model_classes()


def test_every_argument_has_non_default_values():
    assert set(MODEL_CLASSES) == set(VARIANTS), 'a model class without VARIANTS (or VARIANTS of no model)'
    for cls, variants in VARIANTS.items():
        params = _parameters(cls)
        covered = {k for v in variants for k, value in v.items() if value != params[k].default}
        assert not set(params) - covered, f'{cls.__name__}: no non-default value for {sorted(set(params) - covered)}'


def _resolves_the_request(record: ModelArgs, request: Dict[str, Any]) -> None:
    """Each requested value is in the record as given, or resolved into another argument (one per group)."""
    resolved_into = {'mlp_ratio': 'channel_hidden_dim', 'gamma': 'token_hidden_dim', 'omega': 'width'}
    for key, value in request.items():
        if key in resolved_into and record[key] is None:
            assert record[resolved_into[key]] is not None, key
        elif key in ('img_size', 'patch_size') and isinstance(value, int):
            assert record[key] == (value, value), key
        elif key == 'permutation' and isinstance(value, str):  # one kind per block, as data
            assert record[key] == (value,) * record['num_blocks'], key
        else:
            assert record[key] == (tuple(value) if isinstance(value, list) else value), key


def _push_and_reload(model: torch.nn.Module, name: str, request: Dict[str, Any], folder, **kwargs) -> torch.nn.Module:
    """The Hub folder of `model` (validated through a saved state dict), loaded back with timm."""
    path = folder.parent / f'{folder.name}.pth'
    torch.save(model.state_dict(), path)
    checked, _ = build_validated_model(name, read_checkpoint(str(path)), request)
    write_hub_folder(checked, read_checkpoint(str(path)), str(folder), 'my-org/model', **kwargs)
    return timm.create_model(f'local-dir:{folder}', pretrained=True).eval()


def _same_function(a: torch.nn.Module, b: torch.nn.Module, size) -> None:
    x = torch.randn(2, a.in_chans, *size, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        want = a(x)
        assert want.std() > 0 and torch.equal(b(x), want)


def _without_training_rates(record: ModelArgs, cls: type) -> ModelArgs:
    params = _parameters(cls)
    return record.replace(**{k: params[k].default for k in TRAINING_ONLY_ARGS if k in record})


@pytest.mark.parametrize('name', list_pkmixer_models())
def test_arguments_survive_push_and_expansion(name, tmp_path):
    cls = type(timm.create_model(name, device='meta'))
    for i, request in enumerate(VARIANTS[cls]):
        model = randomize_(timm.create_model(name, **request), std=0.05).eval()
        record = model.model_args
        assert set(record) == set(_parameters(cls)), name
        _resolves_the_request(record, request)
        rebuilt = type(model)(**record)
        assert rebuilt.model_args == record
        assert {k: v.shape for k, v in rebuilt.state_dict().items()} == {k: v.shape for k, v in
                                                                        model.state_dict().items()}

        reloaded = _push_and_reload(model, name, request, tmp_path / f'push{i}')
        assert reloaded.model_args == _without_training_rates(record, cls), (name, i)
        assert reloaded.describe() == model.describe()
        _same_function(model, reloaded, record['img_size'])

        if not isinstance(model, EXPANDABLE) or record['tiles'] > 1:
            continue
        expanded = expand_resolution(model, 2).eval()
        grown = dict(img_size=tuple(2 * s for s in record['img_size']), num_tokens=4 * record['num_tokens'], tiles=2)
        if record['token_hidden_dim'] is not None:
            grown['token_hidden_dim'] = 4 * record['token_hidden_dim']
        assert expanded.model_args == _without_training_rates(record, cls).replace(**grown)
        again = _push_and_reload(expanded, name, {**request, **grown}, tmp_path / f'expand{i}',
                                 expanded_from={'factor': 2})
        assert again.model_args == expanded.model_args, (name, i)
        _same_function(expanded, again, expanded.model_args['img_size'])


def test_a_registered_per_block_pattern_follows_num_blocks():
    model = timm.create_model('s_mixer_rp_first_s64c64_32', num_blocks=3, device='meta')
    assert model.model_args['permutation'] == ('random', 'normal', 'normal')
    with pytest.raises(ValueError, match='num_blocks must be'):
        timm.create_model('s_mixer_rp_first_s64c64_32', num_blocks=0, device='meta')


def test_the_record_follows_a_new_head_and_pruning():
    model = timm.create_model('s_mixer_rp_first_s64c64_32', device='meta')
    model.reset_classifier(3, '')
    assert (model.model_args['num_classes'], model.model_args['global_pool']) == (3, '')
    model.prune_intermediate_layers([2], prune_head=False)
    assert model.model_args['num_blocks'] == 3 and model.model_args['permutation'] == ('random', 'normal', 'normal')
    assert model.describe().depth == 3


def test_the_record_is_read_only_and_copied_whole():
    import copy
    model = timm.create_model('sw_mlp_o18_32', width=64, num_blocks=1)
    with pytest.raises(TypeError):
        model.model_args['width'] = 3
    with pytest.raises(AttributeError):
        model.model_args.width = 3
    assert copy.deepcopy(model).model_args == model.model_args  # timm's EMA copies the model
    assert model.model_args.to_json()['img_size'] == [32, 32]
    with pytest.raises(ValueError, match=r'no model arguments \[\'colour\'\]'):
        model.model_args.replace(colour=1)


@pytest.mark.parametrize('norm_layer, recorded', [
    (torch.nn.LayerNorm, (None, 1e-5)),                             # torch's LayerNorm: by its epsilon
    ('layernorm', ('layernorm', None)),                             # timm's name, kept
    (timm.layers.RmsNorm, ('rmsnorm', None)),                       # a class timm names
])
def test_layers_are_recorded_by_name(norm_layer, recorded):
    model = timm.create_model('s_mixer_s64c64_32', num_blocks=1, norm_layer=norm_layer, act_layer=torch.nn.ReLU,
                              device='meta')
    assert (model.model_args['norm_layer'], model.model_args['norm_eps']) == recorded
    assert model.model_args['act_layer'] == 'relu'
    assert model.model_args.to_json()  # JSON values


def test_a_layer_without_a_timm_name_cannot_be_exported():
    class Swish(torch.nn.SiLU):
        pass
    model = timm.create_model('s_mixer_s64c64_32', num_blocks=1, act_layer=Swish, device='meta')
    assert model.model_args['act_layer'] is Swish
    assert type(model)(**model.model_args, device='meta').model_args == model.model_args
    with pytest.raises(ValueError, match=r'act_layer=.*Swish.* cannot be written to config.json'):
        model.model_args.to_json()


def test_block_type_fc_drops_an_entry_points_hidden_widths():
    """pk_mixer_b_w's gamma=4.57 means nothing for block_type='fc'; asked for, it is an S-Mixer."""
    model = timm.create_model('pk_mixer_b_w', block_type='fc', device='meta')
    assert model.describe().family == 'S-Mixer' and model.model_args['token_hidden_dim'] is None
    with pytest.raises(ValueError, match="gamma needs block_type='mlp'"):
        timm.create_model('pk_mixer_b_w', block_type='fc', gamma=2.0, device='meta')


# A value for every alias of ALTERNATIVE_ARGS, given to a record of each family that has it
ALIASES = [
    ('pk_mixer_ss_w_32', dict(mlp_ratio=2.0)), ('pk_mixer_ss_w_32', dict(mlp_ratio=(1.0, 3.0))),
    ('pk_mixer_s16_224', dict(gamma=2.0)), ('pk_mixer_s16_224', dict(gamma=(1.5, 3.0))),
    ('pk_mixer_s16_224', dict(norm_layer='rmsnorm')), ('pk_mixer_ss_w_32', dict(norm_eps=1e-3)),
    ('sw_mlp_o18_32', dict(omega=2 ** 16)), ('sw_mlp_o18_32', dict(width=100)),
]


@pytest.mark.parametrize('name,change', ALIASES)
def test_replace_applies_every_alias(name, change):
    """``record.replace(alias=…)`` gives the record of the model built with it (the other spelling of its group
    and what the record resolved from it, e.g. explicit hidden widths, follow the change)."""
    model = timm.create_model(name, num_blocks=2, device='meta')
    if name == 'pk_mixer_ss_w_32' and 'norm_eps' in change:
        model = timm.create_model(name, num_blocks=2, norm_layer='rmsnorm', device='meta')  # from the other spelling
    replaced = model.model_args.replace(**change)
    assert replaced != model.model_args
    given = {k: v for k, v in model.model_args.items() if v is not None}
    for group in ALTERNATIVE_ARGS:  # the model as a caller builds it: the change and none of its alternatives
        if set(group) & set(change):
            for k in (*group, *model.model_args.RESOLVED_FROM.get(group, ())):
                given.pop(k, None)
    assert replaced == type(model)(**given, **change, device='meta').model_args


@pytest.mark.parametrize('mlp_ratio', [4.0, (1.0, 2.0)])
def test_timms_spellings_mean_what_they_mean_in_timm(mlp_ratio):
    """mlp_ratio and norm_layer are timm's spellings, kept for timm compatibility: with them a PK Mixer has the shapes
    (and LayerNorm epsilon) of timm's MlpMixer; gamma and norm_eps are the paper's spellings of the same things."""
    from functools import partial
    ours = timm.create_model('pk_mixer_s16_224', mlp_ratio=mlp_ratio, device='meta')
    theirs = timm.create_model('mixer_s16_224', mlp_ratio=mlp_ratio, device='meta')  # (its num_blocks is fixed)
    assert {k: v.shape for k, v in ours.state_dict().items()} == {k: v.shape for k, v in theirs.state_dict().items()}
    assert ours.blocks[0].norm1.eps == theirs.blocks[0].norm1.eps == 1e-6
    s, c = ours.num_tokens, ours.embed_dim
    record = ours.model_args
    gamma = (record.token_hidden_dim / s, record.channel_hidden_dim / c)
    assert timm.create_model('pk_mixer_s16_224', gamma=gamma, device='meta').model_args == record
    by_layer = timm.create_model('pk_mixer_s16_224', mlp_ratio=mlp_ratio, norm_eps=None,
                                 norm_layer=partial(torch.nn.LayerNorm, eps=1e-6), device='meta').model_args
    assert by_layer == record and (record.norm_layer, record.norm_eps) == (None, 1e-6)


def test_replace_drops_the_hidden_widths_of_an_s_mixer():
    record = timm.create_model('pk_mixer_ss_w_32', num_blocks=2, device='meta').model_args
    assert record.replace(block_type='fc').token_hidden_dim is None  # as block_type='fc' at an entry point


# ------------------------------------------------------------------------------------ bad arguments, refused by name

def build(name=RP, **kwargs):
    return timm.create_model(name, device='meta', **kwargs)


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
