"""The paper's width formulas (timm_pkmixer.width), checked against the paper's own numbers, and `pkmixer width`
(analysis/width_table.py): the curve, the patch sweep, γ and Ω solved, the registered models' numbers; bad input
refused by the command and the library, naming it."""
import json
import math

import pytest
import timm

from timm_pkmixer.catalog import list_pkmixer_models, models_near_omega, summarize
from timm_pkmixer.description import describe_mixer
from timm_pkmixer.errors import ArgumentValueError
from timm_pkmixer.width import (
    density,
    gamma_for_omega,
    mixer_omega,
    optimal_width,
    patch_sweep,
    sw_mlp_width,
    tokens_for_omega,
    width_curve,
)

OMEGA_B = 290217984  # C.5: Ω of Mixer-B/16 with γ = 4

C4_PAIRS = {  # (C, S) of App. C.4 (i)
    2 ** 18: [(16, 173), (32, 113), (48, 83), (83, 48), (113, 32), (173, 16)],
    2 ** 21: [(16, 504), (32, 346), (64, 226), (226, 64), (346, 32), (504, 16)],
    2 ** 27: [(128, 1386), (256, 904), (904, 256), (1386, 128)],
}


@pytest.mark.parametrize('omega', sorted(C4_PAIRS))
def test_c4_pairs_satisfy_s42_and_are_the_mirrored_curve(omega, cli):
    pairs = C4_PAIRS[omega]
    for c, s in pairs:
        assert abs(tokens_for_omega(c, omega) - s) < 1.0, (c, s)
        assert abs(mixer_omega(s, c) / omega - 1) < 0.02
    dims = [c for c, s in pairs if c < s]
    assert [(pt.dim, pt.num_tokens) for pt in width_curve(omega, 1, dims, mirror=True)] == pairs
    code, out, _ = cli('width', '--omega', omega, '--C', *dims, '--mirror')  # and `pkmixer width` prints them
    assert code == 0 and [tuple(map(int, line.split()[1:3])) for line in out.splitlines()[3:]] == pairs


def test_imagenet_numbers():
    omega = 290217984
    assert mixer_omega(196, 768, 4) == omega            # C.5: Mixer-B/16 baseline
    assert abs(mixer_omega(256, 588, 4.57) / omega - 1) < 1e-3  # Mixer-B-W
    c_star, m_max = optimal_width(omega, 4)
    assert round(c_star) == 417 and math.isclose(m_max, c_star ** 2)
    assert round(tokens_for_omega(768, omega, 4)) == 196  # the P = 16 point of the sweep
    assert tokens_for_omega(c_star, omega, 4) == pytest.approx(c_star)


def test_width_peaks_at_c_equals_s():
    omega, gamma = 2 ** 21, 1
    widths = {c: c * tokens_for_omega(c, omega, gamma) for c in range(16, 600)}
    best = max(widths, key=widths.get)
    assert abs(best - optimal_width(omega, gamma)[0]) <= 1


def test_density_and_geometry_agree():
    g = describe_mixer(256, 588, 8, round(4.57 * 256), round(4.57 * 588))
    assert g.width == 150528
    gamma = 4.57
    assert g.density == pytest.approx(density(mixer_omega(256, 588, gamma), gamma, g.width))
    assert g.omega == pytest.approx(mixer_omega(256, 588, gamma), rel=1e-3)
    s = describe_mixer(64, 64, 8, None, None)
    assert s.omega == 2 ** 18 and s.density == pytest.approx(1 / 64)


def test_registered_models_carry_the_paper_geometry():
    assert timm.create_model('s_mixer_s64c64_32', device='meta').describe().omega == 2 ** 18
    assert timm.create_model('s_mixer_s128c128_32', device='meta').describe().omega == 2 ** 21
    assert timm.create_model('pk_mixer_b_w', device='meta').describe().width == 256 * 588


def test_sw_mlp_width():
    assert [sw_mlp_width(2 ** 18, 1 - f) for f in (0.1, 0.3, 0.5, 0.7, 0.9)] == [540, 612, 724, 935, 1619]


@pytest.mark.parametrize('call,match', [
    (lambda: mixer_omega(0, 5), 'S'), (lambda: mixer_omega(5, -1), 'C'), (lambda: mixer_omega(5, 5, 0), 'gamma'),
    (lambda: tokens_for_omega(5, -1), 'omega'), (lambda: sw_mlp_width(100, 1.2), 'density p'),
    (lambda: optimal_width(100, -2), 'gamma'),
])
def test_bad_values(call, match):
    with pytest.raises(ValueError, match=match):
        call()


# ------------------------------------------------------------------------------------ the curve, patches, models

def test_default_curve_is_symmetric_and_peaks_at_the_optimum():
    points = width_curve(2 ** 18)
    cs = [(pt.dim, pt.num_tokens) for pt in points]
    assert (64, 64) in cs and (16, 173) in cs and (173, 16) in cs and (32, 113) in cs
    assert sorted(cs) == sorted((s, c) for c, s in cs)
    assert max(points, key=lambda pt: pt.width).dim == 64 and max(pt.width for pt in points) == 4096


def test_patch_sweep_and_gamma():
    sweep = patch_sweep(OMEGA_B, 4, [7, 8, 14, 16, 28, 32])
    assert [pt.dim for pt in sweep] == [147, 192, 588, 768, 2352, 3072]  # C = 3P²
    b16 = sweep[3]
    assert (b16.patch, b16.num_tokens, b16.width, b16.omega) == (16, 196, 150528, OMEGA_B)
    for pt in sweep:  # S is the integer nearest the root of eq. S.44, so Ω is within one token step of the target
        assert abs(pt.omega / OMEGA_B - 1) < 0.025
    assert round(gamma_for_omega(256, 588, OMEGA_B), 2) == 4.57  # Mixer-B-W (C.3)
    assert mixer_omega(256, 588, gamma_for_omega(256, 588, OMEGA_B)) == pytest.approx(OMEGA_B)
    assert sweep[2].density == pytest.approx(describe_mixer(283, 588, 8, None, None).density)
    with pytest.raises(ValueError, match='patch size P'):
        patch_sweep(OMEGA_B, 4, [0])


def test_model_width_reads_the_models():
    bw = summarize('pk_mixer_b_w')
    model = timm.create_model('pk_mixer_b_w', device='meta')
    assert (bw.num_tokens, bw.dim, bw.width, bw.omega) == (256, 588, 150528, model.describe().omega)
    assert bw.params == sum(p.numel() for p in model.parameters()) and bw.family == 'MLP-Mixer'
    assert round(bw.gamma, 2) == 4.57
    sw = summarize('sw_mlp_o18_32')
    assert (sw.width, sw.density, sw.dim, sw.width_fraction) == (724, 0.5, None, None)
    for omega, members in ((2 ** 18, {'s_mixer_s64c64_32', 's_mixer_rp_s64c64_32'}),
                           (OMEGA_B, {'pk_mixer_b_w', 'rp_mixer_b_w'})):
        near = [m.name for m in models_near_omega(omega)]
        assert near == sorted(near) and members <= set(near)
        for name in list_pkmixer_models():  # exactly the registry's Mixers within 5 % of Ω
            d = timm.create_model(name, device='meta').describe()
            assert (name in near) == (d.dim is not None and abs(d.omega / omega - 1) <= 0.05), name
    with pytest.raises(ValueError, match="unknown model 'mixer_b16_224'"):
        summarize('mixer_b16_224')


# ---------------------------------------------------------------------------------------------- pkmixer width

def test_width_cli_optimum_and_table(cli):
    code, out, _ = cli('width', '--omega', str(OMEGA_B), '--gamma', '4')
    assert code == 0
    assert 'C* = S* = (Ω/γ)^(1/3) = 417.08' in out and 'max m = (Ω/γ)^(2/3) = 173957' in out
    rows = [line.split() for line in out.splitlines()[3:]]
    assert ['-', '417', '417', '173889'] == rows[len(rows) // 2][:4]

    code, out, _ = cli('width', '--omega', str(OMEGA_B), '--gamma', '4', '--json')
    report = json.loads(out)
    assert round(report['optimum']['C']) == 417 and report['optimum']['m'] == pytest.approx(417.0807 ** 2, rel=1e-5)


def test_width_cli_patch_sweep(cli):
    code, out, _ = cli('width', '--omega', str(OMEGA_B), '--gamma', '4', '--patch', '7', '8', '14', '16',
                           '28', '32', '--json')
    points = json.loads(out)['points']
    assert [(p['P'], p['C']) for p in points] == [(7, 147), (8, 192), (14, 588), (16, 768), (28, 2352), (32, 3072)]
    assert points[3]['S'] == 196 and points[3]['omega'] == OMEGA_B
    assert points == [dict(pt.as_dict(), width_fraction=pt.width / optimal_width(OMEGA_B, 4)[1])
                      for pt in patch_sweep(OMEGA_B, 4, [7, 8, 14, 16, 28, 32])]  # one implementation


def test_width_cli_solves_gamma_and_omega(cli):
    code, out, _ = cli('width', '--S', '256', '--C', '588', '--omega', str(OMEGA_B))
    assert code == 0 and 'γ = 4.56872 (solved from Ω, S, C by eq. 14)' in out
    code, out, _ = cli('width', '--S', '64', '--C', '64', '--json')
    report = json.loads(out)
    assert report['omega'] == 2 ** 18 and report['points'][0]['width_fraction'] == pytest.approx(1.0)


def test_width_cli_model(cli):
    code, out, _ = cli('width', '--model', 's_mixer_s64c64_32', 'sw_mlp_o18_32', '--json')
    a, b = json.loads(out)['models']
    n_params = sum(p.numel() for p in timm.create_model('s_mixer_s64c64_32', device='meta').parameters())
    assert (a['omega'], a['width'], a['density'], a['params']) == (2 ** 18, 4096, 1 / 64, n_params)
    assert a['width_fraction'] == pytest.approx(1.0)
    assert (b['omega'], b['width'], b['density']) == (0.5 * 724 ** 2, 724, 0.5)
    code, out, _ = cli('width', '--model', 'pk_mixer_b_w')
    assert 'Ω = 290293248 connections per layer (γ = 4.57 by eq. 14)' in out and 'm = S·C = 150528' in out


# ------------------------------------------------------------------------------------------------------ bad input

@pytest.mark.parametrize('argv,message', [
    (['width', '--S', '3'], '--S needs exactly one --C'),
    (['width', '--S', '3', '--C', '4', '--omega', '10', '--gamma', '2'], 'not both'),
    (['width', '--gamma', '4'], 'give --omega'),
    (['width', '--omega', '100', '--C', '4', '--patch', '2'], 'give --C or --patch, not both'),
    (['width', '--model', 'pk_mixer_b_w', '--omega', '5'], '--model cannot be combined'),
    (['width', '--model', 'nope'], "unknown model 'nope'"),
    (['width', '--omega', '-1'], 'omega must be positive'),
    (['width', '--omega', '1e300'], '--omega 1e+300 is too large: omega/gamma = 1e+300 exceeds 1e+200'),
    (['width', '--omega', '1e-300'], '--omega must be at least 1 (connections per layer), got 1e-300'),
    (['width', '--omega', '0.5', '--C', '3'], '--omega must be at least 1'),
    (['width', '--omega', '100', '--gamma', '1e300'], '--omega 100 is below gamma 1e+300'),
    (['width', '--omega', '1e250', '--patch', '4'], '--omega 1e+250 is too large'),
    (['width', '--S', '3', '--C', '4', '--omega', '1e-300'], '--omega must be at least 1'),
    (['plot', 'width', '--omega', '1e300', '--out', 'x.png'], '--omega 1e+300 is too large'),
])
def test_width_refuses_bad_input_naming_it(files, cli, argv, message):
    if argv[0] == 'plot':
        pytest.importorskip('matplotlib')
    code, out, err = cli(*argv)
    assert code == 2 and out == '' and message in err, err
    assert not (files / 'x.png').exists()


@pytest.mark.parametrize('call', [
    lambda w: w.optimal_width(1e300), lambda w: w.optimal_width(1e-300), lambda w: w.tokens_for_omega(8, 1e300),
    lambda w: w.width_curve(1e-300), lambda w: w.sw_mlp_width(1e300, 0.5),
])
def test_width_library_names_omega_without_flags(call):
    import timm_pkmixer.width as width
    with pytest.raises(ArgumentValueError) as e:
        call(width)
    assert e.value.argument == 'omega' and str(e.value).startswith('omega ') and '--' not in str(e.value)
