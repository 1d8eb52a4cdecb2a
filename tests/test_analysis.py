"""`timm_pkmixer.analysis` (CKA, effective spectra, the random matrices of Fig. 4 and Fig. S.1) and
`pkmixer analyze`."""
import csv
import itertools
import math

import numpy as np
import pytest
import timm
import torch
import torch.nn.functional as F
from PIL import Image

from timm_pkmixer.analysis import (
    HsicAccumulator,
    c_gamma,
    capture_branches,
    cka_matrix,
    effective_singular_values,
    fig4_spectra,
    fig_s1_spectra,
    hsic_biased,
    hsic_unbiased,
    init_edge,
    linear_cka,
    mixing_branches,
    pk_effective_weight,
    sparse_edge,
    spectra_table,
    top_singular_value,
)
from timm_pkmixer.analysis.spectra import _normalised_singular_values, sparse_bernoulli
from timm_pkmixer.cli import main
from timm_pkmixer.errors import InvalidArgumentError

from conftest import randomize_

SMALL = dict(img_size=8, patch_size=2, num_classes=10)


def mixer(name='pk_mixer_ss8_32', blocks=3, size=16, **kwargs):
    kwargs = dict(SMALL, num_blocks=blocks, num_tokens=size, embed_dim=size, **kwargs)
    if name.startswith(('pk_', 'rp_')):
        kwargs.setdefault('gamma', 2.0)
    return randomize_(timm.create_model(name, **kwargs))


def sw_mlp(blocks=6, density=0.25, width=256):
    return randomize_(timm.create_model('sw_mlp_o18_32', **SMALL, embed_dim=16, num_blocks=blocks, width=width,
                                        gamma=2.0, density=density))


# ------------------------------------------------------------------------------------------- CKA references

def reference_cka_biased(x: np.ndarray, y: np.ndarray) -> float:
    """Kornblith et al.'s feature-space form: ‖YcᵀXc‖²_F / (‖XcᵀXc‖_F ‖YcᵀYc‖_F)."""
    x, y = x - x.mean(0), y - y.mean(0)
    return np.linalg.norm(y.T @ x) ** 2 / (np.linalg.norm(x.T @ x) * np.linalg.norm(y.T @ y))


def reference_hsic_unbiased(k: np.ndarray, g: np.ndarray) -> float:
    """Song et al. (2012): HSIC = E[k l] + E[k] E[l'] − 2 E[k l''], each term as a U-statistic over distinct
    index tuples (pairs, 4-tuples, triples)."""
    n = k.shape[0]
    pairs = list(itertools.permutations(range(n), 2))
    t1 = sum(k[i, j] * g[i, j] for i, j in pairs) / len(pairs)
    quads = list(itertools.permutations(range(n), 4))
    t2 = sum(k[i, j] * g[q, r] for i, j, q, r in quads) / len(quads)
    triples = list(itertools.permutations(range(n), 3))
    t3 = sum(k[i, j] * g[i, q] for i, j, q in triples) / len(triples)
    return t1 + t2 - 2 * t3


def test_biased_cka_equals_the_feature_space_formula():
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(40, 12, generator=gen, dtype=torch.float64)
    y = x @ torch.randn(12, 30, generator=gen, dtype=torch.float64) + torch.randn(40, 30, generator=gen,
                                                                                  dtype=torch.float64)
    value = linear_cka(x, y)
    assert value == pytest.approx(reference_cka_biased(x.numpy(), y.numpy()), rel=1e-12)
    assert 0.3 < value < 0.99


def test_unbiased_hsic_equals_the_u_statistic():
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(7, 5, generator=gen, dtype=torch.float64)
    y = torch.randn(7, 3, generator=gen, dtype=torch.float64) + x[:, :3]
    k, g = x @ x.T, y @ y.T
    assert float(hsic_unbiased(k, g)) == pytest.approx(reference_hsic_unbiased(k.numpy(), g.numpy()), rel=1e-10)
    ref = reference_hsic_unbiased
    expected = ref(k.numpy(), g.numpy()) / math.sqrt(ref(k.numpy(), k.numpy()) * ref(g.numpy(), g.numpy()))
    assert linear_cka(x, y, unbiased=True) == pytest.approx(expected, rel=1e-10)
    # the biased HSIC is tr(KHLH)/(n−1)², a different estimator
    h = np.eye(7) - 1 / 7
    assert float(hsic_biased(k, g)) == pytest.approx(np.trace(k.numpy() @ h @ g.numpy() @ h) / 36, rel=1e-12)


@pytest.mark.parametrize('unbiased', [False, True])
def test_cka_invariances(unbiased):
    gen = torch.Generator().manual_seed(2)
    x = torch.randn(30, 10, generator=gen, dtype=torch.float64)
    y = torch.tanh(x @ torch.randn(10, 8, generator=gen, dtype=torch.float64))
    q, _ = torch.linalg.qr(torch.randn(10, 10, generator=gen, dtype=torch.float64))
    base = linear_cka(x, y, unbiased)
    assert linear_cka(x, x, unbiased) == pytest.approx(1.0, abs=1e-12)
    assert linear_cka(x @ q, y, unbiased) == pytest.approx(base, rel=1e-10)       # orthogonal rotation
    assert linear_cka(3.7 * x, 0.2 * y, unbiased) == pytest.approx(base, rel=1e-10)  # isotropic scale
    assert linear_cka(x[:, :4] @ torch.randn(4, 4, generator=gen, dtype=torch.float64), y, unbiased) != \
        pytest.approx(base, rel=1e-3)  # not invariant to an arbitrary linear map


def test_minibatch_cka_sums_hsic_over_batches():
    gen = torch.Generator().manual_seed(3)
    batches = [(torch.randn(6, 4, generator=gen, dtype=torch.float64),) for _ in range(2)]
    batches = [(x, x[:, :2] + 0.8 * torch.randn(6, 2, generator=gen, dtype=torch.float64)) for (x,) in batches]
    acc = HsicAccumulator(1, 1)
    for x, y in batches:
        acc.update((x @ x.T,), (y @ y.T,))
    ref = reference_hsic_unbiased
    grams = [(x.numpy() @ x.numpy().T, y.numpy() @ y.numpy().T) for x, y in batches]
    expected = sum(ref(k, g) for k, g in grams) / math.sqrt(sum(ref(k, k) for k, _ in grams) *
                                                            sum(ref(g, g) for _, g in grams))
    assert float(acc.cka()[0, 0]) == pytest.approx(expected, rel=1e-10)
    per_batch_mean = np.mean([linear_cka(x, y, unbiased=True) for x, y in batches])
    assert float(acc.cka()[0, 0]) != pytest.approx(per_batch_mean, rel=1e-3)


def test_cka_refuses_bad_features():
    with pytest.raises(InvalidArgumentError, match='same examples'):
        linear_cka(torch.randn(5, 3), torch.randn(6, 3))
    with pytest.raises(InvalidArgumentError, match=r'shape \(n, d\)'):
        linear_cka(torch.randn(5), torch.randn(5))
    with pytest.raises(InvalidArgumentError, match='at least 4 examples'):
        linear_cka(torch.randn(3, 2), torch.randn(3, 2), unbiased=True)


# ------------------------------------------------------------------------------------ features, cka_matrix

FAMILIES = {
    'mlp_mixer': lambda: mixer(),
    'rp_mixer': lambda: mixer(permutation='random'),
    's_mixer': lambda: mixer('s_mixer_s64c64_32', skip_layer=False),
    'rp_s_mixer': lambda: mixer('s_mixer_rp_s64c64_32', skip_layer=False),
    'sw_mlp': lambda: sw_mlp(),
    'sw_mlp_fc': lambda: randomize_(timm.create_model('sw_mlp_o18_32', **SMALL, embed_dim=16, num_blocks=6,
                                                      width=256, density=0.25)),
}


@pytest.mark.parametrize('family', list(FAMILIES))
def test_captured_branches_are_what_each_block_adds(family):
    model = FAMILIES[family]().eval()
    x = torch.randn(5, 3, 8, 8)
    with torch.no_grad():
        expected = model(x)
        with capture_branches(model) as store:
            out = model(x)
    assert torch.equal(out, expected)  # hooks only observe
    assert not any(m._forward_hooks or m._forward_pre_hooks for m in model.modules())  # removed on exit
    names = [n for n, _ in mixing_branches(model)]
    assert list(store) == names and len(names) == 6
    with torch.no_grad():
        h = model.stem(x)
        if family.startswith('sw'):
            h = h.flatten(1)
            for i, blk in enumerate(model.blocks):
                y = blk(h)
                torch.testing.assert_close(store[f'blocks.{i}'], y - h, rtol=1e-5, atol=1e-5)
                h = y
        else:
            for i, blk in enumerate(model.blocks):
                tokens = blk.mlp_tokens(blk.norm1(h))  # the PK layer without a residual: the branch alone
                assert torch.equal(store[f'blocks.{i}.mlp_tokens'], tokens)
                u = blk.skip(h) + tokens
                channels = blk.mlp_channels(blk.norm2(u))
                assert torch.equal(store[f'blocks.{i}.mlp_channels'], channels)
                torch.testing.assert_close(blk(h), u + channels)  # the block adds exactly these branches
                h = u + channels
        features = model.norm(h) if not family.startswith('sw') else model.norm(h)[:, :, None, None]
        torch.testing.assert_close(model.forward_head(features), expected)


def test_cka_matrix_shapes_of_c1_and_unit_diagonal():
    mix, sw = mixer(), sw_mlp()
    batches = [torch.randn(16, 3, 8, 8) for _ in range(2)]
    same = cka_matrix(mix, mix, batches)
    assert same.matrix.shape == (6, 6) and same.examples == 32 and same.batches == 2
    np.testing.assert_allclose(np.diagonal(same.matrix), 1.0, rtol=1e-12)
    np.testing.assert_allclose(same.matrix, same.matrix.T, rtol=1e-10)
    assert same.names_a[:2] == ['blocks.0.mlp_tokens', 'blocks.0.mlp_channels']
    cross = cka_matrix(mix, sw, [(b, torch.zeros(16)) for b in batches])
    assert cross.matrix.shape == (6, 6) and cross.names_b == [f'blocks.{i}' for i in range(6)]
    assert np.all(np.abs(cross.matrix) < 1) and cross.mean_diagonal == pytest.approx(np.trace(cross.matrix) / 6)
    # the same examples through model B's own transform (here: identical) give the same matrix
    again = cka_matrix(mix, sw, batches, batches_b=[b.clone() for b in batches])
    np.testing.assert_allclose(again.matrix, cross.matrix, rtol=1e-10)
    assert mix.training and sw.training  # modes restored


def test_cka_matrix_refuses_models_without_mixing_blocks():
    with pytest.raises(InvalidArgumentError, match='no mixing blocks'):
        cka_matrix(torch.nn.Linear(3, 3), mixer(), [torch.randn(4, 3, 8, 8)])


# ------------------------------------------------------------------------------------------ spectra

def dense_fc(module, fc: str, in_shape) -> torch.Tensor:
    """The dense effective matrix of one FC of a PK layer, from the layer's own J1 / fc / J2 (rows, columns in
    some fixed order: singular values do not depend on it)."""
    with torch.no_grad():
        if fc == 'fc1':
            m = in_shape[0] * in_shape[1]
            basis = torch.eye(m, dtype=torch.float64).reshape(m, *in_shape)
            return F.linear(module.perm_in(basis), module.fc1.weight.double()).reshape(m, -1).T
        n1 = in_shape
        hidden = module.fc2.in_features
        m = n1 * hidden
        basis = torch.eye(m, dtype=torch.float64).reshape(m, n1, hidden)
        return module.perm_out(F.linear(basis, module.fc2.weight.double())).reshape(m, -1).T


def assert_same_multiset(a, b):
    np.testing.assert_allclose(np.sort(np.asarray(a)), np.sort(np.asarray(b)), rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize('name', ['s_mixer_s64c64_32', 's_mixer_rp_s64c64_32'])
def test_s_mixer_spectra_equal_the_dense_effective_matrices(name):
    s, c = 6, 5
    model = randomize_(timm.create_model(name, **SMALL, num_blocks=2, num_tokens=s, embed_dim=c)).double()
    values = effective_singular_values(model)
    for kind in ('mlp_tokens', 'mlp_channels'):
        dense = pk_effective_weight(getattr(model.blocks[1], kind), (s, c), (s, c))  # eq. 19, (m, m)
        got = values[f'blocks.1.{kind}.fc1']
        assert got.shape == (s * c,)
        assert_same_multiset(got, torch.linalg.svdvals(dense).numpy())
    w = model.blocks[1].mlp_tokens.fc1.weight.detach()
    small = effective_singular_values(model, repeat=False)['blocks.1.mlp_tokens.fc1']
    assert_same_multiset(small, torch.linalg.svdvals(w).numpy())  # W's own, once each
    # block 0 maps the 16 patches to S = 6 tokens: C copies of a 6 × 16 W
    assert values['blocks.0.mlp_tokens.fc1'].shape == (c * s,)


@pytest.mark.parametrize('permutation', ['normal', 'random'])
def test_mlp_mixer_spectra_equal_the_dense_effective_matrices(permutation):
    s, c = 6, 5
    model = randomize_(timm.create_model('pk_mixer_ss8_32', **SMALL, num_blocks=2, num_tokens=s, embed_dim=c,
                                         gamma=2.0, permutation=permutation)).double()
    values = effective_singular_values(model)
    assert list(values)[:4] == ['blocks.0.mlp_tokens.fc1', 'blocks.0.mlp_tokens.fc2', 'blocks.0.mlp_channels.fc1',
                                'blocks.0.mlp_channels.fc2']
    blk = model.blocks[1]
    for kind, n1 in (('mlp_tokens', c), ('mlp_channels', s)):
        layer = getattr(blk, kind)
        fc1 = dense_fc(layer, 'fc1', (s, c))
        assert fc1.shape == (2 * s * c, s * c)  # γm × m
        assert_same_multiset(values[f'blocks.1.{kind}.fc1'], torch.linalg.svdvals(fc1).numpy())
        fc2 = dense_fc(layer, 'fc2', n1)
        assert fc2.shape == (s * c, 2 * s * c)
        assert_same_multiset(values[f'blocks.1.{kind}.fc2'], torch.linalg.svdvals(fc2).numpy())


def test_sw_mlp_spectra_are_those_of_the_masked_weights():
    model = sw_mlp(blocks=2, density=0.1, width=64)
    values = effective_singular_values(model)
    assert list(values) == ['blocks.0.fc1', 'blocks.0.fc2', 'blocks.1.fc1', 'blocks.1.fc2']
    fc = model.blocks[1].fc2
    assert_same_multiset(values['blocks.1.fc2'], torch.linalg.svdvals((fc.weight * fc.mask).detach().double()).numpy())
    with pytest.raises(InvalidArgumentError, match='no mixing FCs'):
        effective_singular_values(torch.nn.Sequential(torch.nn.Linear(2, 2)))


def test_edges():
    assert c_gamma(2) == pytest.approx(1 + math.sqrt(2))
    assert sparse_edge(2, 1.0, 100) == pytest.approx(c_gamma(2))  # dense: the MP edge
    p, m = 1 / 64, 4096
    assert sparse_edge(2, p, m) ** 2 == pytest.approx(c_gamma(2) ** 2 * (1 + 3 * math.sqrt(2) * (1 - p) / (p * m)))
    # the paper's init N(0, 1/fan_in): fc1 (γn × n) → c_γ, fc2 (n × γn) → 1 + 1/√γ, masked 1/√p·N(0, 1/m) → √L+
    assert init_edge(200, 100, 0.1) == pytest.approx(c_gamma(2))
    assert init_edge(100, 200, 1 / math.sqrt(200)) == pytest.approx(1 + 1 / math.sqrt(2))
    assert init_edge(2 * m, m, 1 / math.sqrt(m), p) == pytest.approx(sparse_edge(2, p, m))


def test_top_singular_value_lanczos_agrees_with_a_full_svd():
    rng = np.random.default_rng(0)
    z = sparse_bernoulli(400, 0.05, rng)[:, :300]
    assert top_singular_value(z) == pytest.approx(np.linalg.svd(z.toarray(), compute_uv=False)[0], rel=1e-9)
    dense = rng.standard_normal((20, 10))
    assert top_singular_value(torch.from_numpy(dense)) == pytest.approx(np.linalg.norm(dense, 2), rel=1e-12)


def test_fig4_rows_small_omega():
    rows = fig4_spectra(omega=2 ** 12, gamma=2.0, dims=[4, 8], tokens=[16, 8], trials=2)
    assert [(r['C'], r['S'], r['m']) for r in rows] == [(4, 16, 64), (8, 8, 64)]
    assert rows[0]['p'] == pytest.approx(2 ** 12 / (2 * 64 ** 2))
    assert rows[0]['c_gamma'] == pytest.approx(1 + math.sqrt(2))
    assert all(1.5 < r['sv_max_mean'] < 4 and r['trials'] == 2 for r in rows)
    with pytest.raises(InvalidArgumentError, match='p = '):
        fig4_spectra(omega=2 ** 19, dims=[4], tokens=[16], trials=1)


def test_fig_s1_normalised_spectrum_equals_a_dense_eigendecomposition():
    rng = np.random.default_rng(1)
    z = sparse_bernoulli(60, 0.03, rng)
    q = (z @ z.T).toarray()
    eig = np.linalg.eigvalsh(q / np.mean(np.diag(q)))  # Q = ZZᵀ over its mean diagonal, all 60 rows
    assert_same_multiset(_normalised_singular_values(z) ** 2, eig)
    rows, kept = fig_s1_spectra([0.0, 1.0], omega=100, trials=3, keep_values_at=1.0)
    assert [(r['m'], r['p']) for r in rows] == [(10, 1.0), (100, pytest.approx(0.01))]
    assert kept.shape == (300,)
    assert rows[1]['sv_max_mean'] > rows[0]['sv_max_mean']  # sparser: a larger top singular value


def test_spectra_table_of_a_fresh_model_sits_at_its_edge():
    torch.manual_seed(0)
    model = timm.create_model('pk_mixer_ss8_32', **SMALL, num_blocks=1, num_tokens=64, embed_dim=64, gamma=2.0)
    table = spectra_table(model, model)
    row = next(r for r in table if r['layer'] == 'blocks.0.mlp_channels.fc1')
    assert (row['rows'], row['cols'], row['copies'], row['density']) == (128, 64, 64, 1.0)
    assert row['sv_max'] == row['sv_max_init']
    assert row['edge_init'] == pytest.approx(c_gamma(2), rel=0.02)  # the init's deviation is 1/√64 up to sampling
    assert abs(row['sv_max'] / row['edge_init'] - 1) < 0.1


# -------------------------------------------------------------------------------------------------- CLI

def run_cli(capsys, *argv):
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.mark.parametrize('argv,message', [
    (['analyze'], 'pkmixer analyze: error: give a subcommand: cka, spectra or cost'),
    (['analyze', 'spectra', '--a', '1', '--out-dir', 'X'], 'pkmixer analyze spectra: error: --a needs --fig-s1'),
    (['analyze', 'spectra', 'RUN', '--fig-s1', '--out-dir', 'X'],
     'pkmixer analyze spectra: error: RUN folders take no --fig-s1'),
    (['analyze', 'spectra', '--fig-s1', '--gamma', '2', '--out-dir', 'X'],
     'pkmixer analyze spectra: error: --fig-s1 takes --omega, --a and --trials'),
    (['analyze', 'spectra', '--C', '4', '8', '--S', '10', '--out-dir', 'X'],
     'pkmixer analyze spectra: error: --S gives 1 values for 2 values of --C'),
    (['analyze', 'cka', 'no_such_run', 'other', '--out-dir', 'X'],
     'pkmixer analyze cka: error: no run folder or checkpoint: no_such_run'),
    (['analyze', 'cka', 'A', 'B', '--batch-size', '2', '--out-dir', 'X'],
     'pkmixer analyze cka: error: --batch-size must be at least 4'),
])
def test_cli_errors(capsys, tmp_path, monkeypatch, argv, message):
    monkeypatch.chdir(tmp_path)
    code, out, err = run_cli(capsys, *argv)
    assert code == 2 and err.startswith(message) and 'Traceback' not in err


def test_cli_argparse_errors(capsys):
    code, _, err = run_cli(capsys, 'analyze', 'spectra', '--fig-s1', '--a', '-1', '--out-dir', 'X')
    assert code == 2 and 'argument --a: a must be >= 0' in err


def _digits_folder(root, n=6):
    rng = np.random.default_rng(0)
    for split in ('validation',):
        for label in ('0', '1'):
            (root / split / label).mkdir(parents=True)
            for i in range(n):
                Image.fromarray(rng.integers(0, 255, (8, 8, 3), dtype=np.uint8)).save(root / split / label / f'{i}.png')


def test_cli_cka_and_spectra_on_checkpoints(capsys, tmp_path):
    _digits_folder(tmp_path / 'data')
    kwargs = ['--model-kwargs', 'img_size=8', 'patch_size=2', 'num_blocks=3', 'num_tokens=16', 'embed_dim=16',
              'gamma=2.0', 'num_classes=10']
    for seed in (0, 1):
        torch.manual_seed(seed)
        torch.save(randomize_(timm.create_model('pk_mixer_ss8_32', **SMALL, num_blocks=3, num_tokens=16,
                                                embed_dim=16, gamma=2.0)).state_dict(), tmp_path / f'm{seed}.pth')
    code, out, err = run_cli(capsys, 'analyze', 'cka', str(tmp_path / 'm0.pth'), str(tmp_path / 'm0.pth'),
                             str(tmp_path / 'm1.pth'), '--model', 'pk_mixer_ss8_32', *kwargs,
                             '--data-dir', str(tmp_path / 'data'), '--batch-size', '5', '--out-dir',
                             str(tmp_path / 'cka'))
    assert code == 0, err
    with open(tmp_path / 'cka' / 'cka_summary.csv') as f:
        summary = list(csv.DictReader(f))
    assert [r['model_b'] for r in summary] == ['m0', 'm1']
    assert float(summary[0]['mean_diagonal']) == pytest.approx(1.0, abs=1e-5)
    assert summary[0]['examples'] == '10' and summary[0]['batches'] == '2'  # 12 images: 5, 5; a batch of 2 is dropped
    with open(tmp_path / 'cka' / 'cka_m1.csv') as f:
        rows = list(csv.reader(f))
    assert rows[0] == ['feature_a', 'blocks.0.mlp_tokens', 'blocks.0.mlp_channels', 'blocks.1.mlp_tokens',
                       'blocks.1.mlp_channels', 'blocks.2.mlp_tokens', 'blocks.2.mlp_channels'] and len(rows) == 7
    assert (tmp_path / 'cka' / 'cka_m1.png').is_file() and (tmp_path / 'cka' / 'cka_vs_density.png').is_file()

    code, out, err = run_cli(capsys, 'analyze', 'spectra', str(tmp_path / 'm1.pth'), '--model', 'pk_mixer_ss8_32',
                             *kwargs, '--out-dir', str(tmp_path / 'spectra'), '--no-figures')
    assert code == 0, err
    with open(tmp_path / 'spectra' / 'spectra_m1.csv') as f:
        table = list(csv.DictReader(f))
    assert len(table) == 12 and table[0]['layer'] == 'blocks.0.mlp_tokens.fc1' and table[0]['copies'] == '16'


@pytest.mark.slow  # singular values of 2 × 4 trials of 256-wide matrices, by two sources: 25 s here
def test_fig4_sampled_and_layer_sources_agree():
    """The direct sparse draw and the package's MaskedLinear are the same distribution (m = 256, p = 1/8)."""
    sampled = fig4_spectra(omega=2 ** 14, dims=[8], tokens=[32], trials=4)[0]
    layer = fig4_spectra(omega=2 ** 14, dims=[8], tokens=[32], trials=4, source='layer')[0]
    assert sampled['p'] == layer['p'] == pytest.approx(1 / 8)
    assert abs(sampled['sv_max_mean'] - layer['sv_max_mean']) < 0.1
    assert sampled['mixer_token_sv_max_mean'] == layer['mixer_token_sv_max_mean']  # the same Mixers


def _run_folder(path, model_name, model_kwargs, data_dir, seed):
    """A train.py run folder: args.yaml and last.pth.tar (a train.py checkpoint dict)."""
    import yaml
    path.mkdir()
    torch.manual_seed(seed)
    model = randomize_(timm.create_model(model_name, num_classes=10, **model_kwargs))
    args = dict(model=model_name, model_kwargs=model_kwargs, num_classes=10, img_size=8, crop_pct=1.0,
                mean=[0.5] * 3, std=[0.5] * 3, data_dir=str(data_dir), val_split='validation', seed=seed)
    (path / 'args.yaml').write_text(yaml.safe_dump(args))
    torch.save({'state_dict': model.state_dict(), 'epoch': 3}, path / 'last.pth.tar')
    return model


def test_cli_cka_on_run_folders_reads_their_data_and_transform(capsys, tmp_path):
    _digits_folder(tmp_path / 'data')
    mix = _run_folder(tmp_path / 'mixer', 'pk_mixer_ss8_32', dict(img_size=8, patch_size=2, num_blocks=3,
                      num_tokens=16, embed_dim=16, gamma=2.0), tmp_path / 'data', 0)
    sw = _run_folder(tmp_path / 'sw', 'sw_mlp_o18_32', dict(img_size=8, patch_size=2, embed_dim=16, num_blocks=6,
                     width=256, gamma=2.0, density=0.25), tmp_path / 'data', 1)
    code, out, err = run_cli(capsys, 'analyze', 'cka', str(tmp_path / 'mixer'), str(tmp_path / 'sw'),
                             '--batch-size', '12', '--out-dir', str(tmp_path / 'out'), '--no-figures')
    assert code == 0, err
    assert 'mixer vs sw (SW-MLP, p = 0.25): mean diagonal CKA' in out
    # the same value from the library on the same images, normalised as the runs were (mean = std = 0.5)
    images = [np.asarray(Image.open(tmp_path / 'data' / 'validation' / c / f'{i}.png'), dtype=np.float32)
              for c in ('0', '1') for i in range(6)]
    x = (torch.from_numpy(np.stack(images)).permute(0, 3, 1, 2) / 255 - 0.5) / 0.5
    expected = cka_matrix(mix, sw, [x])
    with open(tmp_path / 'out' / 'cka_summary.csv') as f:
        row = next(csv.DictReader(f))
    assert float(row['mean_diagonal']) == pytest.approx(expected.mean_diagonal, rel=1e-4)
    assert not (tmp_path / 'out' / 'cka_sw.png').exists()
