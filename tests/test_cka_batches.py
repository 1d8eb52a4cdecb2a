"""Mini-batch CKA over random batches (Nguyen et al. 2021): `random_batches`, `pkmixer analyze cka` on a
class-sorted image folder, the mean diagonal of non-square matrices, and the density figure's series."""
import csv

import numpy as np
import pytest
import timm
import torch
import yaml
from PIL import Image
from timm.data import create_dataset, create_transform

from timm_pkmixer.analysis import CkaMatrix, cka_matrix, random_batches
from timm_pkmixer.analysis import figures as figures_module
from timm_pkmixer.cli import main
from timm_pkmixer.errors import InvalidArgumentError

from conftest import keep_figures, randomize_

CLASSES, PER_CLASS = 4, 64
MIXER = dict(img_size=8, patch_size=2, num_blocks=1, num_tokens=16, embed_dim=16, gamma=2.0)
SW_MLP = dict(img_size=8, patch_size=2, embed_dim=16, num_blocks=2, width=256, gamma=2.0, density=0.25)


def _class_sorted_folder(root):
    """An ImageFolder of CLASSES classes whose images are one pattern per class plus small noise: the features
    of any model depend mostly on the class, and the folder (as every ImageFolder) is read sorted by class."""
    rng = np.random.default_rng(0)
    patterns = rng.integers(0, 256, (CLASSES, 8, 8, 3))
    for c in range(CLASSES):
        (root / 'validation' / str(c)).mkdir(parents=True)
        for i in range(PER_CLASS):
            image = np.clip(patterns[c] + rng.normal(0, 10, (8, 8, 3)), 0, 255).astype(np.uint8)
            Image.fromarray(image).save(root / 'validation' / str(c) / f'{i:03d}.png')


def _run_folder(path, model_name, model_kwargs, data_dir, seed):
    """A train.py run folder: args.yaml and last.pth.tar."""
    path.mkdir()
    torch.manual_seed(seed)
    model = randomize_(timm.create_model(model_name, num_classes=CLASSES, **model_kwargs))
    args = dict(model=model_name, model_kwargs=model_kwargs, num_classes=CLASSES, img_size=8, crop_pct=1.0,
                mean=[0.5] * 3, std=[0.5] * 3, data_dir=str(data_dir), val_split='validation', seed=seed)
    (path / 'args.yaml').write_text(yaml.safe_dump(args))
    torch.save({'state_dict': model.state_dict(), 'epoch': 3}, path / 'last.pth.tar')
    return model


def _cli_summary(capsys, tmp_path, out, *extra):
    code = main(['analyze', 'cka', str(tmp_path / 'mixer'), str(tmp_path / 'sw'), '--out-dir', str(tmp_path / out),
                 '--no-figures', *extra])
    err = capsys.readouterr().err
    assert code == 0, err
    with open(tmp_path / out / 'cka_summary.csv') as f:
        return next(csv.DictReader(f))


def test_random_batches_are_a_seeded_permutation():
    batches = random_batches(10, 4, seed=3)
    assert [len(b) for b in batches] == [4, 4]  # a last batch of 2 is dropped (unbiased HSIC needs 4)
    flat = sum(batches, [])
    assert len(set(flat)) == 8 and set(flat) <= set(range(10))
    assert flat == torch.randperm(10, generator=torch.Generator().manual_seed(3))[:8].tolist()
    assert random_batches(10, 4, seed=3) == batches and random_batches(10, 4, seed=4) != batches
    assert [len(b) for b in random_batches(100, 32, seed=0, num_samples=70)] == [32, 32, 6]
    assert sorted(sum(random_batches(9, 4, seed=0, num_samples=9), [])) != list(range(8))  # not sorted back
    with pytest.raises(InvalidArgumentError, match='batch_size must be at least 4'):
        random_batches(10, 3, seed=0)
    with pytest.raises(InvalidArgumentError, match='needs at least 4 examples, got 3'):
        random_batches(10, 4, seed=0, num_samples=3)


def test_cli_cka_on_a_class_sorted_folder_matches_the_full_batch(capsys, tmp_path):
    """Random mini-batches of 32 give the full-batch CKA to 0.01; the folder's own order (each batch of 32 one
    class) is far off — the error of reading an ImageFolder in order, which this test would catch."""
    _class_sorted_folder(tmp_path / 'data')
    mix = _run_folder(tmp_path / 'mixer', 'pk_mixer_ss8_32', MIXER, tmp_path / 'data', 0)
    sw = _run_folder(tmp_path / 'sw', 'sw_mlp_o18_32', SW_MLP, tmp_path / 'data', 1)
    n = CLASSES * PER_CLASS
    full = _cli_summary(capsys, tmp_path, 'full', '--batch-size', str(n))
    mini = _cli_summary(capsys, tmp_path, 'mini', '--batch-size', '32', '--batch-seed', '5')
    assert (full['batches'], full['examples'], mini['batches'], mini['examples']) == ('1', str(n), '8', str(n))
    assert (mini['batch_size'], mini['batch_seed']) == ('32', '5')
    full_cka, mini_cka = float(full['mean_diagonal']), float(mini['mean_diagonal'])
    assert abs(mini_cka - full_cka) < 0.01

    # the same models on the folder's own (class-sorted) order, through the library
    dataset = create_dataset('', root=str(tmp_path / 'data'), split='validation', is_training=False)
    dataset.transform = create_transform(input_size=(3, 8, 8), crop_pct=1.0, mean=(0.5,) * 3, std=(0.5,) * 3)
    in_order = torch.utils.data.DataLoader(dataset, batch_size=32, shuffle=False)
    assert [len(set(t.tolist())) for _, t in in_order] == [1] * 8  # each batch in order holds a single class
    sorted_cka = cka_matrix(mix, sw, in_order).mean_diagonal
    assert abs(sorted_cka - full_cka) > 0.3
    assert cka_matrix(mix, sw, [next(iter(torch.utils.data.DataLoader(dataset, batch_size=n)))]).mean_diagonal == \
        pytest.approx(full_cka, rel=1e-4)  # the CLI's full batch is the library's full batch


def test_mean_diagonal_refuses_a_non_square_matrix():
    square = CkaMatrix(np.array([[0.9, 0.1], [0.2, 0.7]]), ['a1', 'a2'], ['b1', 'b2'], examples=8, batches=2)
    assert square.square and square.mean_diagonal == pytest.approx(0.8)
    wide = CkaMatrix(np.array([[0.9, 0.1, 0.3], [0.2, 0.7, 0.5]]), ['a1', 'a2'], ['b1', 'b2', 'b3'], 8, 2)
    assert not wide.square
    with pytest.raises(InvalidArgumentError, match=r'mean_diagonal needs a square CKA matrix .* this one is 2 × 3'):
        _ = wide.mean_diagonal


def test_cli_cka_writes_no_diagonal_for_unequal_feature_counts(capsys, tmp_path):
    _class_sorted_folder(tmp_path / 'data')
    _run_folder(tmp_path / 'mixer', 'pk_mixer_ss8_32', MIXER, tmp_path / 'data', 0)  # 2 features
    _run_folder(tmp_path / 'sw', 'sw_mlp_o18_32', dict(SW_MLP, num_blocks=3), tmp_path / 'data', 1)  # 3 features
    row = _cli_summary(capsys, tmp_path, 'out', '--batch-size', '64', '--num-samples', '128')
    assert (row['rows'], row['cols'], row['mean_diagonal'], row['examples']) == ('2', '3', '', '128')
    assert 0 < float(row['mean_all']) < 1


def test_density_figure_labels_each_model_by_its_family(tmp_path, monkeypatch):
    made = keep_figures(monkeypatch, figures_module)
    figures_module.plot_cka_vs_density([1, 0.25, 0.0625, 0.0625], [0.6, 0.8, 0.7, 0.9], str(tmp_path / 'f.png'),
                                       'mixer', 0.0625, families=['SW-MLP', 'SW-MLP', 'SW-MLP', 'RP S-Mixer'])
    ax = made[0].axes[0]
    lines = {line.get_label(): line.get_xydata().tolist() for line in ax.get_lines()}
    assert lines['mixer vs SW-MLP'] == [[0.0625, 0.7], [0.25, 0.8], [1.0, 0.6]]
    assert lines['mixer vs RP S-Mixer'] == [[0.0625, 0.9]]
    assert (tmp_path / 'f.png').is_file()
    with pytest.raises(InvalidArgumentError, match='one entry per model B, got 2, 2 and 1'):
        figures_module.plot_cka_vs_density([1, 0.5], [0.6, 0.7], str(tmp_path / 'g.png'), 'mixer',
                                           families=['SW-MLP'])


def test_cli_refuses_a_negative_batch_seed(capsys):
    code = main(['analyze', 'cka', 'A', 'B', '--batch-seed', '-1', '--out-dir', 'X'])
    err = capsys.readouterr().err
    assert code == 2 and 'Traceback' not in err
    assert 'argument --batch-seed: batch-seed must be a non-negative integer, got -1' in err


def test_cli_cka_writes_summary_and_figures_for_unequal_feature_counts(capsys, tmp_path):
    """A (2 features) against a 3-block SW-MLP (no diagonal) and two 2-block ones: the command ends with exit 0,
    the summary, every heatmap and the density figure of the square pairs (it crashed drawing the first heatmap,
    whose title read the mean diagonal)."""
    pytest.importorskip('matplotlib')
    _class_sorted_folder(tmp_path / 'data')
    _run_folder(tmp_path / 'mixer', 'pk_mixer_ss8_32', MIXER, tmp_path / 'data', 0)
    _run_folder(tmp_path / 'sw3', 'sw_mlp_o18_32', dict(SW_MLP, num_blocks=3), tmp_path / 'data', 1)
    _run_folder(tmp_path / 'sw_dense', 'sw_mlp_o18_32', dict(SW_MLP, density=1.0), tmp_path / 'data', 2)
    _run_folder(tmp_path / 'sw', 'sw_mlp_o18_32', SW_MLP, tmp_path / 'data', 3)
    out = tmp_path / 'out'
    code = main(['analyze', 'cka', str(tmp_path / 'mixer'), str(tmp_path / 'sw3'), str(tmp_path / 'sw_dense'),
                 str(tmp_path / 'sw'), '--out-dir', str(out), '--batch-size', '64', '--num-samples', '128'])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    with open(out / 'cka_summary.csv') as f:
        rows = list(csv.DictReader(f))
    assert [(r['model_b'], r['rows'], r['cols'], r['mean_diagonal'] == '') for r in rows] == [
        ('sw3', '2', '3', True), ('sw_dense', '2', '2', False), ('sw', '2', '2', False)]
    assert all((out / f'cka_{name}.png').is_file() for name in ('sw3', 'sw_dense', 'sw'))
    assert (out / 'cka_vs_density.png').is_file()
    assert 'mixer vs sw3 (SW-MLP, p = 0.25): 2 × 3 features, no diagonal' in captured.out


def test_the_cka_heatmap_names_each_branch_and_its_colour_bar(tmp_path, monkeypatch):
    pytest.importorskip('matplotlib')
    made = keep_figures(monkeypatch, figures_module)
    result = CkaMatrix(np.array([[0.9, 0.1, 0.3], [0.2, 0.7, 0.5]]), ['blocks.0.mlp_tokens', 'blocks.0.mlp_channels'],
                       ['blocks.0', 'blocks.1', 'blocks.2'], examples=8, batches=2)
    figures_module.plot_cka_matrix(result, str(tmp_path / 'cka.png'), 'mixer', 'sw')
    heatmap, bar = made[0].axes
    assert [t.get_text() for t in heatmap.get_yticklabels()] == ['b0 token', 'b0 channel']
    assert [t.get_text() for t in heatmap.get_xticklabels()] == ['b0', 'b1', 'b2']
    assert (heatmap.get_xlabel(), heatmap.get_ylabel()) == ('sw: mixing branch (block, branch)',
                                                            'mixer: mixing branch (block, branch)')
    assert bar.get_ylabel() == 'linear CKA (mini-batch)'
    assert (tmp_path / 'cka.png').is_file()


def test_the_spectra_plot_labels_its_layer_axis(tmp_path, monkeypatch):
    pytest.importorskip('matplotlib')
    made = keep_figures(monkeypatch, figures_module)
    table = [dict(layer=f'blocks.0.mlp_{b}.fc1', sv_max=2.0, sv_max_init=1.5, edge_init=1.6)
             for b in ('tokens', 'channels')]
    figures_module.plot_layer_spectra(table, str(tmp_path / 's.png'), 'run')
    ax = made[0].axes[0]
    assert ax.get_xlabel() == 'mixing FC (block.branch.layer), from the input'
    assert [t.get_text() for t in ax.get_xticklabels()] == ['0.tokens.fc1', '0.channels.fc1']
