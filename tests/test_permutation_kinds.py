"""A new permutation kind is one file plus one entry of PERMUTATION_KINDS: tests/example_permutation_kind.py defines
'reverse' outside the package, the fixture registers it by import path, and the model suite's core checks pass on a
model built with it (shapes, forward and backward, describe(), a state-dict round trip, the checkpoint check against
the other kinds, the size bound, the expansion, timm's create_model, the CLI's and the sweep's choices)."""
import contextlib
import dataclasses
import io
import os

import pytest
import timm
import torch
from safetensors.torch import save_file

from timm_pkmixer import CheckpointMismatchError, InvalidArgumentError, expand_resolution
from timm_pkmixer.permutation_kinds import PERMUTATION_KINDS, PermutationKind
from timm_pkmixer.sizes import model_nbytes

from conftest import randomize_

TESTS = os.path.dirname(os.path.abspath(__file__))
MODEL = 's_mixer_s64c64_32'
REVERSE = PermutationKind(label='V', family_prefix='Reversed ', seeded=False, fused=False,
                          implementation='example_permutation_kind:ReversePermutations', name_prefix='rev')


@pytest.fixture
def reverse(monkeypatch):
    """The new kind, registered for one test: the file on the path, one table entry."""
    monkeypatch.syspath_prepend(TESTS)
    monkeypatch.setitem(PERMUTATION_KINDS, 'reverse', REVERSE)
    import example_permutation_kind
    return example_permutation_kind


def _model(permutation='reverse', **kwargs):
    return randomize_(timm.create_model(MODEL, num_blocks=2, permutation=permutation, **kwargs), std=0.05).eval()


def test_the_new_kind_builds_through_timm_and_runs_forward_and_backward(reverse):
    model = timm.create_model(MODEL, num_blocks=2, permutation='reverse')
    layer = model.blocks[0].mlp_tokens
    assert isinstance(layer.perm_in, reverse.Reversal) and isinstance(layer.perm_out, reverse.Reversal)
    assert layer.permutation == 'reverse' and not layer.fused_residual  # the table's 'fused': the layer adds
    assert torch.equal(layer.perm_in.index.long(), torch.arange(64 * 64 - 1, -1, -1))
    x = torch.randn(3, 3, 32, 32)
    assert model.forward_features(x).shape == (3, 64, 64) and model(x).shape == (3, 10)
    model(x).sum().backward()
    assert all(p.grad is not None for p in model.parameters())
    # reversing differs from the normal Mixer's transposes and identities: same weights, another function
    normal = timm.create_model(MODEL, num_blocks=2)
    normal.load_state_dict({k: v for k, v in model.state_dict().items() if not k.endswith('.digest')})
    with torch.no_grad():
        assert (normal.forward_features(x) - model.forward_features(x)).abs().max() > 1e-3


def test_fused_or_not_the_skip_connection_is_the_same(reverse, monkeypatch):
    model = _model()
    x = torch.randn(2, 3, 32, 32)
    monkeypatch.setitem(PERMUTATION_KINDS, 'reverse', dataclasses.replace(REVERSE, fused=True))
    fused = timm.create_model(MODEL, num_blocks=2, permutation='reverse').eval()
    fused.load_state_dict(model.state_dict())
    assert fused.blocks[0].mlp_tokens.fused_residual
    with torch.no_grad():
        torch.testing.assert_close(fused(x), model(x), rtol=1e-6, atol=1e-6)


def test_the_new_kind_describes_itself_from_the_table(reverse):
    d = timm.create_model(MODEL, num_blocks=2, permutation='reverse', device='meta').describe()
    assert (d.family, d.permutation_label, d.perm_seed, d.random_blocks, d.has_random_structure) == \
        ('Reversed S-Mixer', 'reverse', None, (), False)
    d = timm.create_model(MODEL, num_blocks=3, permutation=['reverse', 'random', 'normal'], device='meta').describe()
    assert (d.family, d.family_tag, d.permutation_label, d.perm_seed, d.random_blocks) == \
        ('Mixed RP Reversed S-Mixer', 'mixed-rp-reversed-s-mixer', 'VRN', 0, (1,))
    from timm_pkmixer.publish.model_card import build_model_card
    card = build_model_card(MODEL, 'org/x', {'num_blocks': 2, 'permutation': ['reverse', 'normal']}, 'mit', [])
    assert card['details']['Architecture']['permutation per block'] == 'VN (V: reverse, N: normal)'
    assert 'permutation seed' not in card['details']['Architecture']


def test_state_dict_round_trip_and_the_record_rebuilds_it(reverse, tmp_path):
    model = _model()
    path = tmp_path / 'reverse.safetensors'
    save_file(model.state_dict(), str(path))
    loaded = timm.create_model(MODEL, num_blocks=2, permutation='reverse', pretrained=True,
                               pretrained_cfg_overlay=dict(file=str(path), num_classes=10)).eval()
    rebuilt = type(model)(**model.model_args).eval()
    rebuilt.load_state_dict(model.state_dict(), strict=True)
    x = torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        assert torch.equal(loaded(x), model(x)) and torch.equal(rebuilt(x), model(x))
    assert model.model_args['permutation'] == ('reverse', 'reverse')


def test_the_checkpoint_check_refuses_the_other_kinds(reverse):
    ours = _model().state_dict()
    with pytest.raises(CheckpointMismatchError, match=r"no permutation digests for blocks \[0, 1\].*"
                                                      r"\(permutation='reverse'\)"):
        _model().load_state_dict(timm.create_model(MODEL, num_blocks=2).state_dict())
    with pytest.raises(CheckpointMismatchError, match=r'blocks\.0\.mlp_tokens\.perm_in\.digest: permutation digest'):
        _model().load_state_dict(timm.create_model(MODEL, num_blocks=2, permutation='random').state_dict())
    with pytest.raises(CheckpointMismatchError, match=r'holds permutations .* for blocks \[0, 1\], but the model is '
                                                      r'a normal Mixer'):
        _model('normal').load_state_dict(ours)
    with pytest.raises(CheckpointMismatchError, match=r'blocks\.0\.mlp_tokens\.perm_in\.digest: permutation digest'):
        _model('random').load_state_dict(ours)


def test_the_size_bound_counts_the_new_kinds_tensors(reverse):
    model = timm.create_model(MODEL, num_blocks=3, permutation=['reverse', 'normal', 'reverse'], num_tokens=40)
    actual = model_nbytes(model)
    assert type(model).check_size(model.model_args, device='cpu') == actual
    plan = model.model_args.planned_tensors(4, {})
    perms = [t for name, t in model.named_buffers() if '.perm_' in name]
    assert len(perms) == 2 * 2 * 2 * 3  # 2 reversed blocks, 2 mixings, J1 and J2: index, inverse, digest
    assert sum(t.nbytes for t in plan if '.perm_' in t.name) == sum(t.nbytes for t in perms)
    assert sum(t.nbytes for t in plan) == actual  # GELU holds no tensor


def test_expansion_lifts_the_new_kind_tile_by_tile(reverse):
    from test_expand import tiled_error
    model = _model(num_tokens=40)
    expanded = expand_resolution(model, 2).eval()
    assert expanded.model_args['permutation'] == ('reverse', 'reverse') and tiled_error(model, expanded, 2) <= 1e-5


def test_choices_come_from_the_table(reverse):
    with pytest.raises(InvalidArgumentError, match=r"permutation\[1\] must be one of \('normal', 'random', "
                                                   r"'reverse'\), got 'shuffled'"):
        timm.create_model(MODEL, num_blocks=2, permutation=['reverse', 'shuffled'], device='meta')
    from timm_pkmixer.cli import main
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(['sweep', '--help']) == 0
    assert '{normal,random,reverse}' in out.getvalue()
    from timm_pkmixer.sweeps.sweep_planners import _perm
    assert _perm('reverse') == ({'permutation': 'reverse'}, '') and _perm('random')[1] == 'perm_seed'


def test_without_the_entry_the_kind_is_refused():
    assert 'reverse' not in PERMUTATION_KINDS  # the fixture's entry is gone with its test
    with pytest.raises(InvalidArgumentError, match=r"permutation must be one of \('normal', 'random'\), got 'reverse'"):
        timm.create_model(MODEL, permutation='reverse', device='meta')


def test_the_walkthrough_states_the_counts_of_this_example():
    """docs/ARCHITECTURE.md's walkthrough quotes the example's size and this file's tests: kept true here."""
    text = ' '.join(open(os.path.join(TESTS, '..', 'docs', 'ARCHITECTURE.md'), encoding='utf-8').read().split())
    with open(os.path.join(TESTS, 'example_permutation_kind.py'), encoding='utf-8') as f:
        lines = len(f.read().splitlines())
    tests = sum(name.startswith('test_') for name in globals())
    assert f'`tests/example_permutation_kind.py` ({lines} lines' in text
    assert f'`tests/test_permutation_kinds.py` ({tests} tests' in text
