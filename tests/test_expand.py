"""Fine-tuning at a higher resolution: the expanded model computes, on every tile of a tiled image, exactly the
original model's tokens (each family, K = 2 and 3), reloads from its folder in a fresh interpreter, and refuses
what cannot be expanded."""
import json
import subprocess
import sys

import pytest
import timm
import torch
from safetensors.torch import load_file, save_file

from timm_pkmixer import CheckpointMismatchError, InvalidArgumentError, expand_resolution
from timm_pkmixer.cli import main as pkmixer
from timm_pkmixer.errors import ModelTooLargeError
from timm_pkmixer.layers import FixedPermutation
from timm_pkmixer.models.expand import expanded_model_args, tile_images, tile_tokens

from conftest import command_messages, randomize_, run_python, small

FAMILIES = {
    'normal MLP-Mixer': ('pk_mixer_s16_224', dict(num_blocks=2, embed_dim=64)),
    'RP MLP-Mixer': ('rp_mixer_ss_w_32', dict(num_blocks=2, embed_dim=48)),
    'S-Mixer with skip layer': ('s_mixer_s64c64_32', dict(num_blocks=2, num_tokens=40)),
    'RP S-Mixer': ('s_mixer_rp_s64c64_32', dict(num_blocks=2, perm_seed=5)),
    'per-block pattern': ('s_mixer_s64c64_32', dict(num_blocks=3, permutation=['normal', 'random', 'normal'])),
}


def tiled_error(model, expanded, factor, batch=2):
    """Largest relative difference between each tile's tokens in the expanded model and the original's."""
    size = model.img_size
    images = torch.randn(factor * factor, batch, 3, *size, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        tiles = tile_tokens(expanded.forward_features(tile_images(images, factor)), factor)
        errors = []
        for k, got in enumerate(tiles):
            want = model.forward_features(images[k])
            errors.append(((got - want).abs().max() / want.abs().max()).item())
    return max(errors)


@pytest.mark.parametrize('family', list(FAMILIES))
def test_every_tile_gets_exactly_the_original_tokens(family):
    name, kwargs = FAMILIES[family]
    model = randomize_(timm.create_model(name, **kwargs), std=0.05).eval()
    expanded = expand_resolution(model, 2).eval()
    assert expanded.img_size == tuple(2 * s for s in model.img_size) and expanded.tiles == 2
    assert tiled_error(model, expanded, 2) <= 1e-5
    # the global pool averages the tiles: the logits are the mean of the tiles' pooled features through the head
    assert expanded.num_tokens == 4 * model.num_tokens


def test_three_by_three_tiles():
    model = randomize_(timm.create_model('s_mixer_rp_s64c64_32', num_blocks=2), std=0.05).eval()
    expanded = expand_resolution(model, 3).eval()
    assert expanded.img_size == (96, 96) and tiled_error(model, expanded, 3) <= 1e-5


def test_timm_mixer_weights_expanded():
    """timm's own Mixer weights (timm's MlpMixer with mixer_s16_224's shapes, 2 blocks, randomised) through
    pk_mixer_s16_224, expanded."""
    from timm.models.mlp_mixer import MlpMixer
    ref = randomize_(MlpMixer(patch_size=16, num_blocks=2, embed_dim=512), std=0.05)
    model = timm.create_model('pk_mixer_s16_224', num_blocks=2)
    model.load_state_dict(ref.state_dict())
    expanded = expand_resolution(model.eval(), 2).eval()
    assert tiled_error(model, expanded, 2, batch=1) <= 1e-5


def test_token_mlp_growth_is_app_c():
    """Normal Mixer: token-MLP input K²·S and hidden K²·D_S (App. C); the channel MLP is unchanged."""
    model = timm.create_model('pk_mixer_b16_224', num_blocks=1)
    expanded = expand_resolution(model, 2)
    fc1, fc2 = expanded.blocks[0].mlp_tokens.fc1, expanded.blocks[0].mlp_tokens.fc2
    assert (fc1.in_features, fc1.out_features, fc2.out_features) == (4 * 196, 4 * 384, 4 * 196)
    assert expanded.blocks[0].mlp_channels.fc1.weight.shape == model.blocks[0].mlp_channels.fc1.weight.shape
    w = fc1.weight.detach()  # block-diagonal: the pre-trained W1 on the diagonal, zeros elsewhere
    assert torch.equal(w[384:768, 196:392], model.blocks[0].mlp_tokens.fc1.weight) and not w[:384, 196:].any()


def test_lifted_permutations_reload_exactly_and_another_seed_is_refused(tmp_path):
    model = randomize_(timm.create_model('s_mixer_rp_s64c64_32', num_blocks=2, perm_seed=3)).eval()
    expanded = expand_resolution(model, 2).eval()
    args = expanded_model_args(model, 2)
    again = timm.create_model('s_mixer_rp_s64c64_32', **args).eval()
    again.load_state_dict(expanded.state_dict(), strict=True)  # the same lifted digests
    x = torch.randn(2, 3, 64, 64)
    with torch.no_grad():
        assert torch.equal(again(x), expanded(x))
    perm = expanded.blocks[1].mlp_channels.perm_in
    base = model.blocks[1].mlp_channels.perm_in.index.long()
    assert torch.equal(perm.index.long()[:4096], base) and torch.equal(perm.index.long()[4096:8192], base + 4096)
    other = timm.create_model('s_mixer_rp_s64c64_32', **dict(args, perm_seed=4))
    with pytest.raises(CheckpointMismatchError, match='perm_seed=3'):
        other.load_state_dict(expanded.state_dict())


@pytest.mark.parametrize('make,factor,match', [
    (lambda: timm.create_model('s_mixer_s64c64_32'), 1, r'factor must be an integer ≥ 2'),
    (lambda: timm.create_model('s_mixer_s64c64_32'), 2.0, r'factor must be an integer, got 2\.0'),
    (lambda: timm.create_model('s_mixer_s64c64_32'), True, 'factor must be an integer'),
    (lambda: timm.create_model('sw_mlp_o18_32', width=64, num_blocks=1), 2, 'the SW-MLP cannot be expanded'),
    (lambda: expand_resolution(timm.create_model('s_mixer_s64c64_32', num_blocks=1), 2), 2, 'already expanded'),
    (lambda: torch.nn.Linear(2, 2), 2, 'takes a timm-pkmixer Mixer'),
])
def test_refusals(make, factor, match):
    with pytest.raises((InvalidArgumentError, TypeError), match=match):
        expand_resolution(make(), factor)


def test_a_grid_that_does_not_tile_is_refused():
    with pytest.raises(InvalidArgumentError, match=r'tiles=3 does not divide the 8 × 8 patch grid'):
        timm.create_model('s_mixer_s64c64_32', tiles=3)


def test_expand_command_writes_a_folder_timm_reloads_in_a_fresh_interpreter(tmp_path):
    model = randomize_(timm.create_model('s_mixer_rp_s64c64_32', num_blocks=2, perm_seed=2, num_classes=4)).eval()
    save_file(model.state_dict(), str(tmp_path / 'w.safetensors'))
    out = tmp_path / 'expanded'
    proc = subprocess.run([sys.executable, '-m', 'timm_pkmixer', 'expand', str(tmp_path / 'w.safetensors'),
                           '--model', 's_mixer_rp_s64c64_32', '--model-kwargs', 'num_blocks=2', 'perm_seed=2',
                           'num_classes=4', '--factor', '2', '--out-dir', str(out)], capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in out.iterdir()) == ['README.md', 'config.json', 'model.safetensors']
    cfg = json.loads((out / 'config.json').read_text())
    assert cfg['model_args']['tiles'] == 2 and cfg['pretrained_cfg']['input_size'] == [3, 64, 64]
    card = (out / 'README.md').read_text()
    assert '- **Expanded from:**' in card and 'every token-mixing weight W becomes I_4 ⊗ W' in card
    images = torch.randn(4, 2, 3, 32, 32)
    save_file({'x': tile_images(images, 2)}, str(tmp_path / 'x.safetensors'))
    run_python(f'''
import timm, torch
from safetensors.torch import load_file, save_file
m = timm.create_model("local-dir:{out}", pretrained=True).eval()
x = load_file("{tmp_path / 'x.safetensors'}")["x"]
with torch.no_grad():
    save_file({{"y": m.forward_features(x)}}, "{tmp_path / 'y.safetensors'}")
''', env_extra={'TIMM_PKMIXER_AUTOLOAD': '1'})
    tiles = tile_tokens(load_file(str(tmp_path / 'y.safetensors'))['y'], 2)
    with torch.no_grad():
        for k, got in enumerate(tiles):
            want = model.forward_features(images[k])
            assert ((got - want).abs().max() / want.abs().max()).item() <= 1e-5
    assert sum(isinstance(m, FixedPermutation) for m in model.modules()) == 8


@pytest.mark.parametrize('name,factor', [('s_mixer_rp_s64c64_32', 2), ('pk_mixer_ss8_32', 3)])
def test_the_expanded_models_data_config_has_its_own_input_size(name, factor):
    """timm's preprocessing reads the model's pretrained_cfg: the expanded model's says the grown size (and any test
    size), or train.py / validate.py would feed it images of the original size."""
    model = timm.create_model(name, num_blocks=2, embed_dim=16,
                              pretrained_cfg_overlay=dict(test_input_size=(3, 40, 40)))
    expanded = expand_resolution(model, factor)
    data = timm.data.resolve_data_config({}, model=expanded)
    assert data['input_size'] == (3, 32 * factor, 32 * factor)
    assert expanded.pretrained_cfg['test_input_size'] == (3, 40 * factor, 40 * factor)
    assert timm.data.resolve_data_config({}, model=expanded, use_test_size=True)['input_size'] == \
        (3, 40 * factor, 40 * factor)
    assert model.pretrained_cfg['input_size'] == (3, 32, 32)  # the original is not changed
    assert expanded(torch.randn(1, *data['input_size'])).shape == (1, 10)


# ----------------------------------------------------------------------------------------------- factors past memory

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
    err = command_messages(capsys.readouterr().err)
    assert status == 2
    assert err.startswith('pkmixer expand: error: factor=1000000 ') and 'Traceback' not in err
    assert not (tmp_path / 'out').exists()


@pytest.mark.parametrize('in_axis', [0, 1])
@pytest.mark.parametrize('out_axis', [0, 1])
def test_a_lifted_permutation_moves_each_tile_by_the_tiles_permutation(in_axis, out_axis):
    """Tiling.lift against its definition, element by element: tile k's output (a, b) takes tile k's input
    perm[a·q2 + b], each tile placed along its layout's tile axis; a permutation of the whole."""
    from timm_pkmixer.layers.permutation import Tiling
    tiles, (r1, r2), (q1, q2) = 4, (3, 5), (5, 3)
    perm = torch.randperm(r1 * r2, generator=torch.Generator().manual_seed(0))
    tiling = Tiling(tiles, (r1, r2), in_axis, (q1, q2), out_axis)

    def flat(k, a, b, shape, axis):  # position of tile k's (a, b) in the expanded layout
        rows, cols = shape
        return (k * rows + a) * cols + b if axis == 0 else a * tiles * cols + k * cols + b

    expected = torch.empty(tiles * r1 * r2, dtype=torch.long)
    for k in range(tiles):
        for o in range(q1 * q2):
            p = int(perm[o])
            expected[flat(k, o // q2, o % q2, (q1, q2), out_axis)] = flat(k, p // r2, p % r2, (r1, r2), in_axis)
    lifted = tiling.lift(perm)
    assert lifted.dtype == torch.long and torch.equal(lifted, expected)
    assert torch.equal(lifted.sort().values, torch.arange(tiles * r1 * r2))
