"""The structure of the package: the permutation seam, per-block permutations, one self-description, structure
checks owned by the layers, arguments that mean what they mean in timm, the CLI's error convention,
and the meta device (load with assign, to_empty then init_non_persistent_buffers, to meta and back: the derived
structure recomputed, never left invalid)."""
import functools
import math
import os
import subprocess
import sys

import pytest
import timm
import torch
import torch.nn as nn
from safetensors.torch import save_file
from timm.utils import ParseKwargs

import timm_pkmixer.models.pk_mixer as pk_mixer_module
import timm_pkmixer.models.sw_mlp as sw_mlp_module
from timm_pkmixer import CheckpointMismatchError, InvalidArgumentError, ModelDescription
from timm_pkmixer.catalog import list_pkmixer_models, summarize
from timm_pkmixer.errors import NotMaterializedError
from timm_pkmixer.layers import DerivedStructure, FixedPermutation, IdentityPermutation, MaskedLinear, Transpose
from timm_pkmixer.layers.gather import GATHER_TABLE, permute, tuned_choices, use_gather_backend

from conftest import MODELS, RP, images, randomize_, small

TESTS = os.path.dirname(os.path.abspath(__file__))
MIXED = ['random'] + ['normal'] * 7


# ---------------------------------------------------------------------------------------------- 1. the seam

@pytest.mark.parametrize('make', [
    lambda: IdentityPermutation(),
    lambda: Transpose(),
    lambda: FixedPermutation(30, (5, 6), seed=1, key='k').double(),
])
def test_every_permutation_has_one_interface_residual_included(make):
    perm = make()
    x = torch.randn(2, 6, 5, dtype=torch.float64)
    y = perm(x)
    r = torch.randn_like(y)
    torch.testing.assert_close(perm(x, r), r + y, rtol=0, atol=0)
    assert perm(x, r)._base is None  # the sum is a fresh tensor, never a view


def test_a_backend_from_a_new_file_is_one_table_entry(monkeypatch):
    monkeypatch.syspath_prepend(TESTS)
    import example_gather_backend as ext
    model = randomize_(timm.create_model('s_mixer_rp_s64c64_32', num_blocks=2)).eval()
    x = torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        ref = model(x)
        ext.CALLS.clear()
        with use_gather_backend('example_gather_backend:take_gather', 'cpu', modes=('eager',)):
            got = model(x)
    assert len(ext.CALLS) == 2 * 4  # every permutation of the 2 blocks went through it
    assert torch.equal(got, ref)
    assert GATHER_TABLE[('cpu', 'eager')] == 'tuned'  # the table is restored


def test_a_backend_function_without_an_import_path_is_one_table_entry_for_a_block():
    """use_gather_backend takes the function itself (a script loaded from a file has no import path): every
    permutation goes through it inside the block, the table and its name are restored after."""
    calls = []

    def counting_gather(x, index, inverse, out_shape):
        calls.append(tuple(x.shape))
        return x.reshape(x.shape[0], index.shape[0]).index_select(1, index).reshape(x.shape[0], *out_shape)
    model = randomize_(timm.create_model('s_mixer_rp_s64c64_32', num_blocks=2)).eval()
    x = torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        ref = model(x)
        with use_gather_backend(counting_gather, 'cpu', modes=('eager',)):
            assert GATHER_TABLE[('cpu', 'eager')].endswith(':test_a_backend_function_without_an_import_path_is_one_'
                                                           'table_entry_for_a_block.<locals>.counting_gather')
            got = model(x)
    assert len(calls) == 2 * 4 and torch.equal(got, ref)
    assert GATHER_TABLE[('cpu', 'eager')] == 'tuned'


def test_tuned_backend_picks_per_case_and_thread_count():
    perm = FixedPermutation(4096, (64, 64), seed=0, key='t')
    old = torch.get_num_threads()
    try:
        for threads in (1, 2):
            torch.set_num_threads(threads)
            x = torch.randn(8, 4096)
            with use_gather_backend('tuned', 'cpu', modes=('eager',)):
                assert torch.equal(permute(x, perm.index, perm.inverse, [64, 64]).reshape(8, -1),
                                   x[:, perm.index.long()])
            assert tuned_choices()[(x.device, torch.float32, 8, 4096, threads)] in ('index_select', 'gather')
    finally:
        torch.set_num_threads(old)


def test_export_uses_a_plain_gather_and_compile_the_opaque_op_on_cpu():
    layer = FixedPermutation(24, (4, 6), seed=2, key='e')
    exported = torch.export.export(layer, (torch.randn(3, 6, 4),))
    targets = {str(n.target) for n in exported.graph.nodes if n.op == 'call_function'}
    assert any('index_select' in t for t in targets) and not any('timm_pkmixer' in t for t in targets)
    assert GATHER_TABLE[('cpu', 'compile')] == 'opaque'


def test_use_gather_backend_refuses_unknown_modes():
    with pytest.raises(ValueError, match="mode must be one of"):
        with use_gather_backend('index_select', modes=('jit',)):
            pass


# ------------------------------------------------------------------------------------ 2. per-block permutation

def test_all_random_list_is_exactly_the_rp_model():
    rp = randomize_(timm.create_model('s_mixer_rp_s64c64_32', perm_seed=4)).eval()
    listed = timm.create_model('s_mixer_s64c64_32', permutation=['random'] * 8, perm_seed=4).eval()
    assert list(listed.state_dict()) == list(rp.state_dict())
    listed.load_state_dict(rp.state_dict(), strict=True)
    x = torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        assert torch.equal(listed(x), rp(x))


def test_mixed_model_checks_permutations_block_by_block():
    mixed = timm.create_model('s_mixer_rp_first_s64c64_32')
    assert [blk.mlp_tokens.permutation for blk in mixed.blocks] == MIXED
    assert sum(isinstance(m, FixedPermutation) for m in mixed.modules()) == 4
    normal = timm.create_model('s_mixer_s64c64_32').state_dict()
    with pytest.raises(CheckpointMismatchError, match=r'no permutation digests for blocks \[0\].*Random-Permuted in '
                                                      r"those blocks \(permutation='RNNNNNNN'\)"):
        mixed.load_state_dict(normal)
    rp = timm.create_model('s_mixer_rp_s64c64_32').state_dict()
    with pytest.raises(CheckpointMismatchError, match=r'holds permutations of a Random-Permuted Mixer for blocks '
                                                      r'\[1, 2, 3, 4, 5, 6, 7\], but the model is a normal Mixer'):
        mixed.load_state_dict(rp)
    mixed.load_state_dict(timm.create_model('s_mixer_s64c64_32', permutation=MIXED).state_dict())


def test_permutation_per_block_through_train_py_model_kwargs():
    import argparse
    parser = argparse.ArgumentParser()
    parser.add_argument('--model-kwargs', nargs='*', default={}, action=ParseKwargs)
    kwargs = parser.parse_args(['--model-kwargs', "permutation=['random','normal','normal','normal']",
                                'num_blocks=4']).model_kwargs
    model = timm.create_model('s_mixer_s64c64_32', **kwargs)
    assert model.describe().permutation_label == 'RNNN' and model.describe().random_blocks == (0,)


@pytest.mark.parametrize('permutation,match', [
    (['random'] * 3, 'permutation lists 3 entries for num_blocks=8'),
    (['random'] * 7 + ['shuffled'], r"permutation\[7\] must be one of \('normal', 'random'\)"),
    ({'random': 1}, 'permutation must be one of'),
])
def test_bad_permutation_patterns(permutation, match):
    with pytest.raises((InvalidArgumentError, TypeError), match=match):
        timm.create_model('s_mixer_s64c64_32', permutation=permutation, device='meta')


def test_mixed_family_in_catalog_and_card():
    d = timm.create_model('s_mixer_rp_first_s64c64_32', device='meta').describe()
    assert (d.family, d.family_tag, d.permutation_label, d.perm_seed) == ('Mixed RP S-Mixer', 'mixed-rp-s-mixer',
                                                                         'RNNNNNNN', 0)
    assert 's_mixer_rp_first_s64c64_32' in list_pkmixer_models()
    row = summarize('s_mixer_rp_first_s64c64_32').row()
    assert row['family'] == 'Mixed RP S-Mixer' and row['permutation'] == 'RNNNNNNN'
    from timm_pkmixer.publish.model_card import build_model_card
    card = build_model_card('s_mixer_rp_first_s64c64_32', 'org/x', {'perm_seed': 0}, 'apache-2.0', [])
    assert 'mixed-rp-s-mixer' in card['tags']
    assert card['details']['Architecture']['permutation per block'] == 'RNNNNNNN (R: random, N: normal)'


# ---------------------------------------------------------------------------------------------- 3. one self-description

def test_every_model_describes_itself():
    for name in list_pkmixer_models():
        model = timm.create_model(name, device='meta')
        d = model.describe()
        assert isinstance(d, ModelDescription), name
        assert d.depth == len(model.blocks) and d.width > 0 and 0 < d.density <= 1 and d.omega > 0, name
        if d.num_tokens is not None:
            assert d.width == d.num_tokens * d.dim and len(d.permutation) == d.depth
            assert d.omega == pytest.approx(d.gamma * (d.dim * d.num_tokens ** 2 + d.dim ** 2 * d.num_tokens) / 2)
        else:
            assert d.omega == pytest.approx(d.density * d.gamma * d.width ** 2)
        assert d.has_random_structure == any(hasattr(m, 'digest_name') for m in model.modules())


# ---------------------------------------------------------------------------------------------- 4. structure checks

def test_sw_mlp_masks_are_derived_and_stored_as_digests(tmp_path):
    model = timm.create_model('sw_mlp_o18_32', width=128, num_blocks=2, mask_seed=3)
    sd = model.state_dict()
    masks = {n: m for n, m in model.named_modules() if isinstance(m, MaskedLinear)}
    assert not any(k.endswith('.mask') for k in sd) and all(f'{n}.mask_digest' in sd for n in masks)
    with_masks = dict(sd, **{f'{n}.mask': m.mask for n, m in masks.items()})  # the old format, masks stored
    save_file(sd, str(tmp_path / 'new.safetensors'))
    save_file(with_masks, str(tmp_path / 'old.safetensors'))
    mask_bytes = sum(m.mask.numel() for m in masks.values())
    saved = os.path.getsize(tmp_path / 'old.safetensors') - os.path.getsize(tmp_path / 'new.safetensors')
    assert mask_bytes <= saved < mask_bytes + 1024  # the checkpoint shrinks by the mask bytes
    # the old format still loads (each mask checked), a wrong explicit mask does not
    other = timm.create_model('sw_mlp_o18_32', width=128, num_blocks=2, mask_seed=3)
    other.load_state_dict({k: v for k, v in with_masks.items() if not k.endswith('mask_digest')})
    bad = dict(with_masks)
    bad['blocks.1.fc1.mask'] = ~bad['blocks.1.fc1.mask']
    with pytest.raises(CheckpointMismatchError, match=r"blocks\.1\.fc1\.mask does not match this model's mask"):
        other.load_state_dict(bad)


def test_another_mask_seed_is_refused_naming_it(tmp_path):
    sd = timm.create_model('sw_mlp_o18_32', width=64, num_blocks=1, mask_seed=5).state_dict()
    model = timm.create_model('sw_mlp_o18_32', width=64, num_blocks=1)
    with pytest.raises(CheckpointMismatchError, match=r'masks \(first: in_proj\.mask_digest\) differ from those of '
                                                      r'mask_seed=0: .*made with another mask seed, mask_seed=5'):
        model.load_state_dict(sd)


def test_one_error_type_on_every_loading_path(tmp_path):
    """The same user error (another perm_seed) through load_state_dict and through timm's pretrained loading."""
    sd = timm.create_model('s_mixer_rp_s64c64_32', perm_seed=3).state_dict()
    save_file(sd, str(tmp_path / 'w.safetensors'))
    errors = []
    for load in (lambda: timm.create_model('s_mixer_rp_s64c64_32').load_state_dict(sd),
                 lambda: timm.create_model('s_mixer_rp_s64c64_32', pretrained=True,
                                           pretrained_cfg_overlay=dict(file=str(tmp_path / 'w.safetensors')))):
        with pytest.raises(CheckpointMismatchError) as info:
            load()
        errors.append(info.value)
    assert all(isinstance(e, ValueError) and isinstance(e, RuntimeError) for e in errors)
    for e in errors:
        assert '32 of 32 permutation digests (first: blocks.0.mlp_tokens.perm_in.digest) differ from those of ' \
               'perm_seed=0' in str(e) and '--model-kwargs perm_seed=3' in str(e)


# ---------------------------------------------------------------------------------------------- 6. timm's arguments

@pytest.mark.parametrize('mlp_ratio', [4.0, (0.5, 4.0), (1.0, 2.0), 0.5])
def test_mlp_ratio_means_what_it_means_in_timm(mlp_ratio):
    ours = timm.create_model('pk_mixer_b16_224', mlp_ratio=mlp_ratio, device='meta')
    theirs = timm.create_model('mixer_b16_224', mlp_ratio=mlp_ratio, device='meta')
    assert {k: v.shape for k, v in ours.state_dict().items()} == {k: v.shape for k, v in theirs.state_dict().items()}


def test_gamma_is_the_papers_expansion():
    model = timm.create_model('pk_mixer_b16_224', gamma=4.0, device='meta')
    assert (model.blocks[0].mlp_tokens.fc1.out_features, model.blocks[0].mlp_channels.fc1.out_features) == (784, 3072)
    bw = timm.create_model('rp_mixer_b_w', device='meta')
    record = bw.model_args
    assert (record.token_hidden_dim, record.channel_hidden_dim) == (round(4.57 * 256), round(4.57 * 588))
    assert bw.blocks[3].mlp_channels.fc1.out_features == record.channel_hidden_dim
    # a caller's mlp_ratio replaces the entry point's default gamma
    assert timm.create_model('rp_mixer_b_w', mlp_ratio=(0.5, 4.0), device='meta').model_args.token_hidden_dim == 294
    with pytest.raises(InvalidArgumentError, match='give mlp_ratio .* or gamma .*, not both'):
        timm.create_model('rp_mixer_b_w', mlp_ratio=4.0, gamma=4.0, device='meta')
    with pytest.raises(InvalidArgumentError, match="gamma needs block_type='mlp'"):
        timm.create_model('s_mixer_s64c64_32', gamma=2.0, device='meta')


def _entry_point_args(name):
    """The model_args an entry point passes to its builder (spied, then built for real)."""
    seen = {}
    module = pk_mixer_module if hasattr(pk_mixer_module, name) else sw_mlp_module
    builder = '_create_pk_mixer' if module is pk_mixer_module else '_create_sw_mlp'
    real = getattr(module, builder)

    def spy(variant, pretrained, model_args, **kwargs):
        seen.update(model_args)
        return real(variant, pretrained, model_args, **kwargs)
    original = getattr(module, builder)
    setattr(module, builder, spy)
    try:
        getattr(module, name)(device='meta')
    finally:
        setattr(module, builder, original)
    return seen


@pytest.mark.parametrize('name', ['pk_mixer_s16_224', 'rp_mixer_b_w', 'pk_mixer_ss8_32', 's_mixer_rp_first_s64c64_32',
                                  'sw_mlp_o18_32'])
def test_passing_the_defaults_explicitly_builds_the_same_model(name):
    args = _entry_point_args(name)
    assert args
    torch.manual_seed(0)
    a = timm.create_model(name)
    torch.manual_seed(0)
    b = timm.create_model(name, **args)
    assert a.describe() == b.describe()
    sa, sb = a.state_dict(), b.state_dict()
    assert list(sa) == list(sb) and all(torch.equal(sa[k], sb[k]) for k in sa)


def test_norm_layer_and_nlhb_as_in_timm():
    model = timm.create_model('pk_mixer_s16_224', norm_layer=functools.partial(nn.LayerNorm, eps=1e-3),
                              num_classes=10, nlhb=True, device='meta')
    assert model.norm.eps == 1e-3 and model.blocks[0].norm1.eps == 1e-3
    real = timm.create_model('pk_mixer_ss_w_32', num_classes=10, nlhb=True)
    assert torch.allclose(real.head.bias, torch.full((10,), -math.log(10)))
    with pytest.raises(InvalidArgumentError, match='give norm_layer .* or norm_eps .*, not both'):
        timm.create_model('pk_mixer_s16_224', norm_layer='layernorm', norm_eps=1e-5, device='meta')


# ---------------------------------------------------------------------------------------------- 7. the CLI

def _pkmixer(*argv):
    return subprocess.run([sys.executable, '-m', 'timm_pkmixer', *argv], capture_output=True, text=True, timeout=300)


def test_cli_user_errors_exit_2_without_traceback(tmp_path):
    for argv, message in ((['push', str(tmp_path / 'none.pt'), '--model', 'rp_mixer_b_w', '--repo-id', 'a/b'],
                           'pkmixer push: error: no checkpoint file at'),
                          (['width', '--omega', '0'], 'omega must be positive, got 0'),
                          (['models', 'no_such_model'], "pkmixer models: error: no registered model matches"),
                          (['plot', 'run', str(tmp_path), '--out', str(tmp_path / 'x.png')],
                           'pkmixer plot run: error: ')):
        proc = _pkmixer(*argv)
        assert proc.returncode == 2, (argv, proc.stderr)
        assert message in proc.stderr and 'Traceback' not in proc.stderr, (argv, proc.stderr)


def test_bare_pkmixer_prints_help_and_version_works():
    proc = _pkmixer()
    assert proc.returncode == 0 and proc.stdout.startswith('usage: pkmixer') and 'models' in proc.stdout
    import timm_pkmixer
    assert _pkmixer('--version').stdout.strip() == f'pkmixer {timm_pkmixer.__version__}'


def test_unexpected_errors_keep_their_traceback(monkeypatch):
    from timm_pkmixer import catalog
    from timm_pkmixer.cli import main

    def broken(*args, **kwargs):
        raise KeyError('a bug')
    monkeypatch.setattr(catalog, 'summarize', broken)  # the command imports it from the catalog when it runs
    with pytest.raises(KeyError, match='a bug'):
        main(['models'])


# ------------------------------------------------------------------------------- the meta device and materialisation

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


def test_f_a_model_on_meta_runs_shape_only_without_refusing():
    model = small(RP).to('meta')  # nothing is computed on meta: no NotMaterializedError there
    assert model(torch.empty(2, 3, 32, 32, device='meta')).shape == (2, 10)
    assert all(isinstance(m, FixedPermutation) and not m._materialized for m in _derived(model))
