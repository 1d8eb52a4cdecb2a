"""The paper's width formulas, checked against the paper's own numbers; an absurd Ω refused by `pkmixer width`
and the library, naming it."""
import math

import pytest
import timm

from timm_pkmixer.description import describe_mixer
from timm_pkmixer.errors import ArgumentValueError
from timm_pkmixer.width import density, mixer_omega, optimal_width, sw_mlp_width, tokens_for_omega

C4_PAIRS = {  # (C, S) of App. C.4 (i)
    2 ** 18: [(16, 173), (32, 113), (48, 83), (83, 48), (113, 32), (173, 16)],
    2 ** 21: [(16, 504), (32, 346), (64, 226), (226, 64), (346, 32), (504, 16)],
    2 ** 27: [(128, 1386), (256, 904), (904, 256), (1386, 128)],
}


@pytest.mark.parametrize('omega', sorted(C4_PAIRS))
def test_c4_pairs_satisfy_s42(omega):
    for c, s in C4_PAIRS[omega]:
        assert abs(tokens_for_omega(c, omega) - s) < 1.0, (c, s)
        assert abs(mixer_omega(s, c) / omega - 1) < 0.02


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


# ------------------------------------------------------------------------------------------------------ absurd input

@pytest.mark.parametrize('argv,message', [
    (['width', '--omega', '1e300'], '--omega 1e+300 is too large: omega/gamma = 1e+300 exceeds 1e+200'),
    (['width', '--omega', '1e-300'], '--omega must be at least 1 (connections per layer), got 1e-300'),
    (['width', '--omega', '0.5', '--C', '3'], '--omega must be at least 1'),
    (['width', '--omega', '100', '--gamma', '1e300'], '--omega 100 is below gamma 1e+300'),
    (['width', '--omega', '1e250', '--patch', '4'], '--omega 1e+250 is too large'),
    (['width', '--S', '3', '--C', '4', '--omega', '1e-300'], '--omega must be at least 1'),
    (['plot', 'width', '--omega', '1e300', '--out', 'x.png'], '--omega 1e+300 is too large'),
])
def test_width_refuses_absurd_omega(files, cli, argv, message):
    pytest.importorskip('matplotlib')
    code, _, err = cli(*argv)
    assert code == 2 and message in err, err
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
