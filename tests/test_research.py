"""`pkmixer plot`, the effective weights of real layers and the width-trend benchmark (`pkmixer width`: in
test_width.py)."""
import csv
import json
import os
import subprocess
import sys

import numpy as np
import pytest
import timm
import torch
import torch.nn.functional as F
from PIL import Image

from timm_pkmixer.analysis import fig_s9_weights, paper_vec_order, pk_effective_weight
from timm_pkmixer.analysis.width_figures import width_curve_data
from timm_pkmixer.cli import main
from timm_pkmixer.layers import make_pk_mlp
from timm_pkmixer.reports.figures import group_runs, read_summary, run_label
from timm_pkmixer.width import optimal_width

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OMEGA_B = 290217984  # C.5: Ω of Mixer-B/16 with γ = 4


def run_cli(capsys, *argv):
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def png_size(path) -> tuple:
    with open(path, 'rb') as f:
        assert f.read(8) == b'\x89PNG\r\n\x1a\n'
    with Image.open(path) as img:
        assert img.format == 'PNG'
        return img.size


# ---------------------------------------------------------------------------------------------- effective weights

def _fc_model(permutation: str, size: int = 4):
    return timm.create_model('s_mixer_s64c64_32', num_tokens=size, embed_dim=6, num_blocks=2, permutation=permutation,
                             perm_seed=3)


def test_normal_token_and_channel_mixing_are_the_kronecker_products():
    s, c = 4, 6
    block = _fc_model('normal').blocks[1]
    w_tok, w_ch = block.mlp_tokens.fc1.weight, block.mlp_channels.fc1.weight
    assert torch.equal(pk_effective_weight(block.mlp_tokens, (s, c), (s, c)), torch.kron(torch.eye(c), w_tok))
    assert torch.equal(pk_effective_weight(block.mlp_channels, (s, c), (s, c)), torch.kron(w_ch, torch.eye(s)))
    # in this package's row-major layout the same maps are W ⊗ I_C and I_S ⊗ W
    assert torch.equal(pk_effective_weight(block.mlp_tokens, (s, c), (s, c), paper_order=False),
                       torch.kron(w_tok, torch.eye(c)))


def test_rp_effective_weight_is_eq19_and_is_what_the_layer_computes():
    s, c = 4, 6
    layer = _fc_model('random').blocks[1].mlp_tokens
    m = s * c
    p1 = torch.zeros(m, m)
    p1[torch.arange(m), layer.perm_in.index] = 1.
    p2 = torch.zeros(m, m)
    p2[torch.arange(m), layer.perm_out.index] = 1.
    dense = p2 @ torch.kron(torch.eye(c), layer.fc1.weight) @ p1  # J2 (I_C ⊗ W) J1, eq. 19
    w_eff = pk_effective_weight(layer, (s, c), (s, c), paper_order=False)
    assert torch.equal(w_eff, dense)
    torch.nn.init.normal_(layer.fc1.bias)
    x = torch.randn(3, s, c)
    b_eff = layer.perm_out(layer.fc1.bias.expand(1, c, s)).reshape(m)
    expected = F.gelu(x.reshape(3, m) @ w_eff.t() + b_eff)
    torch.testing.assert_close(layer(x).reshape(3, m), expected)
    # same singular values as the normal Mixer's I ⊗ W (§5.2)
    torch.testing.assert_close(torch.linalg.svdvals(w_eff), torch.linalg.svdvals(torch.kron(torch.eye(c),
                                                                                           layer.fc1.weight)))


def test_paper_vec_order_is_column_major():
    x = torch.arange(12.).reshape(3, 4)  # S = 3, C = 4
    assert torch.equal(x.reshape(-1)[paper_vec_order(3, 4)], x.t().reshape(-1))


def test_effective_weight_needs_one_fc():
    layer = make_pk_mlp('token', 4, 4, 6, hidden_features=16, permutation='random')
    with pytest.raises(ValueError, match='one-FC PK layer'):
        pk_effective_weight(layer, (4, 6), (4, 6))


def test_fig_s9_weights_structure():
    w = fig_s9_weights(8, seed=0)
    assert set(w) == {'sw_mlp', 'mixer', 'rp_mixer'} and all(v.shape == (64, 64) for v in w.values())
    np.testing.assert_array_equal(w['mixer'] != 0, np.kron(np.eye(8), np.ones((8, 8))) != 0)
    rp = w['rp_mixer'] != 0
    assert rp.sum() == 512 and (rp.sum(0) == 8).all() and (rp.sum(1) == 8).all()  # p = 1/S, scattered
    assert not np.array_equal(rp, w['mixer'] != 0)
    torch.manual_seed(0)
    sw = timm.create_model('sw_mlp_o18_32', width=64, density=1 / 8, num_blocks=1, mask_seed=0)
    np.testing.assert_array_equal(w['sw_mlp'] != 0, sw.blocks[0].fc1.mask.numpy())
    with pytest.raises(ValueError, match='size must be an integer >= 2'):
        fig_s9_weights(1)


# ---------------------------------------------------------------------------------------------- figures

def test_width_curve_data_peaks_at_the_optimum():
    data = width_curve_data(2 ** 21, 1.0)
    c_star, m_max = optimal_width(2 ** 21, 1.0)
    i = int(np.argmax(data['m']))
    assert abs(data['C'][i] / c_star - 1) < 0.02 and data['m'].max() <= m_max * (1 + 1e-12)
    assert int(np.argmin(data['p'])) == i
    np.testing.assert_allclose(data['S'] * data['C'], data['m'])
    assert data['S'].min() >= 1 - 1e-9  # clipped where S(C) = 1


def test_plot_weights_and_width(tmp_path, capsys):
    out = tmp_path / 'w.png'
    code, stdout, _ = run_cli(capsys, 'plot', 'weights', '--out', str(out))
    assert code == 0 and stdout.strip() == f'wrote {out}'
    w, h = png_size(out)
    assert 900 < w < 1000 and 300 < h < 380
    out = tmp_path / 'width.png'
    code, _, _ = run_cli(capsys, 'plot', 'width', '--omega', str(OMEGA_B), '--gamma', '4', '--patch', '7', '16',
                         '--out', str(out))
    assert code == 0 and png_size(out) == (720, 420)


def _write_run(path, train, val, top1):
    from timm.utils import update_summary
    os.makedirs(os.path.dirname(path), exist_ok=True)
    for epoch, (a, b, c) in enumerate(zip(train, val, top1)):
        update_summary(epoch, {'loss': a}, {'loss': b, 'top1': c, 'top5': 100.}, str(path), lr=1e-3,
                       write_header=epoch == 0)


def test_runs_are_read_and_grouped(tmp_path, capsys):
    a0, a1, b = (tmp_path / n / 'summary.csv' for n in ('rp-seed0', 'rp-seed1', 'normal'))
    _write_run(a0, [2., 1., .5], [2.1, 1.2, .9], [10., 50., 70.])
    _write_run(a1, [2.2, 1.2, .7, .6], [2.3, 1.4, 1.1, 1.], [12., 40., 60., 65.])
    _write_run(b, [2., .8], [2.2, 1.5], [20., 30.])
    assert list(read_summary(str(b))) == ['epoch', 'train_loss', 'eval_loss', 'eval_top1', 'eval_top5', 'lr']
    assert run_label(str(a1)) == 'rp' and run_label(str(b)) == 'normal'
    groups = group_runs([str(a0), str(a1), str(b)])
    assert list(groups) == ['rp', 'normal'] and groups['rp']['runs'] == 2
    np.testing.assert_array_equal(groups['rp']['epoch'], [0, 1, 2])  # the epochs both seeds have
    np.testing.assert_allclose(groups['rp']['eval_loss']['mean'], [2.2, 1.3, 1.0])
    np.testing.assert_allclose(groups['rp']['eval_top1']['min'], [10., 40., 60.])
    np.testing.assert_allclose(groups['rp']['train_loss']['max'], [2.2, 1.2, .7])
    out = tmp_path / 'runs.png'
    code, _, _ = run_cli(capsys, 'plot', 'run', str(a0), str(a1), str(b), '--out', str(out))
    assert code == 0 and png_size(out) == (1000, 380)
    code, _, err = run_cli(capsys, 'plot', 'run', str(a0), str(b), '--label', 'x', '--out', str(out))
    assert code == 2 and err.startswith('pkmixer plot run: error: ') and '1 labels for 2 runs' in err
    bad = tmp_path / 'bad.csv'
    bad.write_text('a,b\n1,2\n')
    code, _, err = run_cli(capsys, 'plot', 'run', str(bad), '--out', str(out))
    assert code == 2 and 'is not a timm train.py summary.csv' in err


def test_plot_without_matplotlib_says_what_to_install(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, 'matplotlib.figure', None)
    code, _, err = run_cli(capsys, 'plot', 'weights', '--out', str(tmp_path / 'x.png'))
    assert code == 2 and "pip install matplotlib (or, in a checkout of timm-pkmixer, pip install '.[plot]')" in err
    assert 'timm-pkmixer[plot]' not in err and not (tmp_path / 'x.png').exists()  # not on PyPI: no such requirement


# ---------------------------------------------------------------------------------------------- benchmark

def test_width_trend_benchmark_smoke(tmp_path):
    pytest.importorskip('sklearn')
    out = tmp_path / 'trend'
    proc = subprocess.run(
        [sys.executable, os.path.join(ROOT, 'benchmarks', 'digits', 'width_trend.py'), '--dims', '8', '16',
         '--seeds', '1', '--epochs', '1', '--depth', '1', '--workers', '1', '--keep-runs', '--out', str(out)],
        capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    with open(out / 'runs.csv') as f:
        rows = f.read().splitlines()
    assert rows[0].startswith('family,C,S,m,seed,params,train_loss,train_err,test_loss,test_err')
    pairs = [['8', '87'], ['16', '56'], ['56', '16'], ['87', '8']]  # C = 8, 16 and their mirrors at Ω = 2^15
    assert sorted(r.split(',')[0:3] for r in rows[1:]) == sorted([f, *p] for f in ('S-Mixer', 'RP S-Mixer')
                                                                 for p in pairs)
    table = (out / 'table.md').read_text().splitlines()
    assert table[2].startswith('| family | C | S | m = S·C |')
    assert [line.split(' | ')[1:4] for line in table[4:12]] == [[c, s, str(int(c) * int(s))] for c, s in pairs] * 2
    assert [line.split(' | ')[0] for line in table[17:21]] == ['| (8, 87)', '| (16, 56)', '| (56, 16)', '| (87, 8)']
    assert png_size(out / 'width_trend.png') == (1080, 342)
    summary = read_summary(str(out / 'runs' / 'rp-smixer-c8-s87-seed0' / 'summary.csv'))  # kept by --keep-runs
    assert list(summary) == ['epoch', 'train_loss', 'eval_loss', 'eval_top1', 'lr'] and len(summary['epoch']) == 1
    with open(out / 'epochs.csv') as f:  # every run's epochs, merged, long form
        epochs = list(csv.DictReader(f))
    assert len(epochs) == 8 and {e['epoch'] for e in epochs} == {'0'}
    merged = next(e for e in epochs if e['run'] == 'rp-smixer-c8-s87-seed0')
    assert float(merged['eval_loss']) == summary['eval_loss'][0]
    meta = json.loads((out / 'meta.json').read_text())
    assert meta['pairs'] == [[int(c), int(s)] for c, s in pairs] and meta['runs'] == 8 and meta['wall_seconds'] > 0


def test_square_channels_marks_where_c_equals_s():
    from timm_pkmixer.reports.figures import square_channels
    assert square_channels([(16, 64), (32, 32), (64, 16)]) == 32.0
    # the width sweep of benchmarks/digits/paper_experiments.py: C = S lies between (S, C) = (83, 48) and (48, 83)
    pairs = [(16, 173), (32, 113), (48, 83), (83, 48), (113, 32), (173, 16)]
    assert square_channels(pairs) == pytest.approx((48 * 83) ** 0.5)
    # an asymmetric pair of neighbours: the geometric mean of their √(S·C)
    assert square_channels([(40, 90), (100, 30)]) == pytest.approx(((40 * 90) ** 0.5 * (100 * 30) ** 0.5) ** 0.5)
    assert square_channels([(16, 173), (32, 113)]) is None  # all on one side of C = S
