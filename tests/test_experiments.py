"""The paper's experiments as sweeps (points checked against the paper), packaged recipes by name, `pkmixer report`
against hand-computed numbers, and a tiny end-to-end sweep → train → report."""
import csv
import math
import os
import statistics
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from timm_pkmixer.catalog import summarize
from timm_pkmixer.cli import main as pkmixer
from timm_pkmixer.recipes import check_recipe_keys, list_recipes, load_recipe, recipe_root, resolve_recipe
from timm_pkmixer.report import build_report, write_report
from timm_pkmixer.sweep import experiment_points, gamma_points, write_sweep

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent


def train_py_dests():
    lines = (ROOT / 'train_recipes' / 'train_py_args.txt').read_text().splitlines()
    return {line.split(':')[0] for line in lines if line and not line.startswith('#')}


# ---------------------------------------------------------------------------------------------- packaged recipes

def test_recipes_are_listed_by_name_with_dataset_model_and_section(capsys):
    recipes = {r.name: r for r in list_recipes()}
    assert len(recipes) == 26 and 'imagenet/rp_mixer_b_w' in recipes and 'stl10/s_mixer_fig7' in recipes
    r = recipes['cifar100/s_mixer_fig7']
    assert (r.dataset, r.model, r.section) == ('cifar100', 's_mixer_s128c128_32',
                                               'C.6, Fig. 7 (depth); D.5, Fig. S.4 (one RP block)')
    assert all(r.section for r in recipes.values())  # every recipe names its place in the paper
    assert resolve_recipe('imagenet/rp_mixer_b_w') == recipe_root() / 'imagenet' / 'rp_mixer_b_w.yaml'
    assert resolve_recipe('imagenet/rp_mixer_b_w.yaml') == resolve_recipe('imagenet/rp_mixer_b_w')
    with pytest.raises(FileNotFoundError, match='Did you mean imagenet/rp_mixer_b_w'):
        resolve_recipe('rp_mixer_b_w')
    assert pkmixer(['recipes', 'fig7']) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ['name', 'dataset', 'model', 'paper'] and len(lines) == 4


def test_fig7_recipes_say_which_d5_setting_they_follow():
    for ds in ('cifar10', 'cifar100', 'stl10'):
        text = resolve_recipe(f'{ds}/s_mixer_fig7').read_text()
        assert 'follows the caption (S = C = 128' in text
        cfg = load_recipe(resolve_recipe(f'{ds}/s_mixer_fig7'))
        check_recipe_keys(cfg, train_py_dests(), ds)
        assert (cfg['opt'], cfg['lr'], cfg['batch_size'], cfg['epochs']) == ('nesterov', 0.02, 128, 200)  # C.4


# ---------------------------------------------------------------------------------------------- experiment points

def base(name):
    return load_recipe(resolve_recipe(name))


def test_width_points_add_the_sw_mlp_arm_of_fig5():
    points = experiment_points(base('cifar10/s_mixer_fig5'), 'width')
    sw = [p for p in points if p.model == 'sw_mlp_o18_32']
    assert [summarize(p.model, **p.model_kwargs).width for p in sw] == [540, 612, 724, 935, 1619]  # C.4 (ii)
    assert [1 - p.model_kwargs['density'] for p in sw] == pytest.approx([0.1, 0.3, 0.5, 0.7, 0.9])
    mixers = [(p.model_kwargs['embed_dim'], p.model_kwargs['num_tokens']) for p in points if p.model != 'sw_mlp_o18_32']
    assert mixers[:6] == [(16, 173), (32, 113), (48, 83), (83, 48), (113, 32), (173, 16)]  # C.4 (i), Ω = 2^18
    assert not [p for p in experiment_points(base('cifar10/s_mixer_fig5'), 'width', omega=2 ** 21)
                if p.model.startswith('sw_')]  # the SW-MLP arm is Ω = 2^18's


def test_depth_points_are_fig7():
    points = experiment_points(base('cifar10/s_mixer_fig7'), 'depth')
    assert [(p.model_kwargs['num_blocks'], p.model_kwargs['permutation']) for p in points] == \
        [(L, perm) for perm in ('random', 'normal') for L in (4, 8, 12, 16, 20)]
    s = summarize(points[0].model, **points[0].model_kwargs)
    assert (s.num_tokens, s.dim, s.family) == (128, 128, 'RP S-Mixer')  # S = C = 128 (C.6)


def test_rp_block_points_are_fig_s4():
    points = experiment_points(base('cifar10/s_mixer_fig7'), 'rp-block')
    patterns = [summarize(p.model, **p.model_kwargs).permutation_label for p in points]
    assert patterns == ['normal', 'random'] + ['N' * b + 'R' + 'N' * (7 - b) for b in range(8)]
    text = experiment_points(base('cifar10/s_mixer_fig7'), 'rp-block',
                             model_kwargs=dict(num_tokens=64, embed_dim=64, num_blocks=4))  # D.5's text setting
    assert len(text) == 6 and summarize(text[3].model, **text[3].model_kwargs).permutation_label == 'NRNN'


def test_gamma_points_are_eq_s46():
    pts = gamma_points(2 ** 20, 4096)
    assert [p['C'] for p in pts] == [8, 16, 32, 64, 128, 256, 512]
    for p in pts:
        assert p['S'] * p['C'] == 4096
        assert p['gamma'] == pytest.approx(2 * 2 ** 20 / (4096 * (p['C'] + 4096 / p['C'])))
    assert max(pts, key=lambda p: p['gamma'])['C'] == 64 and max(p['gamma'] for p in pts) == pytest.approx(4.0)
    points = experiment_points(base('cifar10/pk_mixer_ss_w_32'), 'gamma', permutations=('normal',))
    for p in points:
        s = summarize(p.model, **p.model_kwargs)
        assert s.width == 4096 and s.omega == pytest.approx(2 ** 20, rel=2e-3)  # fixed m, fixed Ω
    with pytest.raises(ValueError, match='has no hidden layer'):
        experiment_points(base('cifar10/s_mixer_fig7'), 'gamma')


def test_patch_points_are_fig_s5():
    cifar = experiment_points(base('cifar10/s_mixer_fig7'), 'patch', permutations=('normal',))
    assert [p.model_kwargs['patch_size'] for p in cifar] == [1, 2, 4, 8, 16, 32]
    assert all(p.recipe == dict(lr=0.1, img_size=32) for p in cifar)  # D.6: lr 0.1
    s = summarize(cifar[0].model, **cifar[0].model_kwargs)
    assert (s.num_tokens, s.dim, s.depth) == (64, 64, 4)
    stl = experiment_points(base('stl10/s_mixer_fig7'), 'patch', permutations=('normal',))
    assert [p.model_kwargs['patch_size'] for p in stl] == [1, 3, 6, 10, 18, 30] and stl[0].recipe['img_size'] == 90


@pytest.mark.parametrize('recipe,experiment,count', [
    ('cifar10/s_mixer_fig7', 'depth', 10), ('cifar10/s_mixer_fig7', 'rp-block', 10),
    ('cifar10/pk_mixer_ss_w_32', 'gamma', 14), ('cifar10/s_mixer_fig7', 'patch', 12),
    ('cifar10/s_mixer_fig5', 'width', 17)])
def test_every_written_recipe_is_valid_and_names_its_point(tmp_path, recipe, experiment, count):
    paths = write_sweep(recipe, str(tmp_path), seeds=(0, 3), experiment=experiment)
    assert len(paths) == 2 * count
    dests = train_py_dests()
    for path in paths:
        cfg = yaml.safe_load(path.read_text())
        check_recipe_keys(cfg, dests, path.name)
        assert cfg['experiment'] == path.stem and path.stem.endswith(f"_seed{cfg['seed']}")
        kw = cfg['model_kwargs']
        if summarize(cfg['model'], **kw).has_random_structure:
            assert kw.get('perm_seed', kw.get('mask_seed')) == cfg['seed']


# ---------------------------------------------------------------------------------------------- the report

def fake_run(root, name, seed, top1, eval_loss, epochs=3, done=None, **model_kwargs):
    """A run folder as train.py writes it, with made-up numbers."""
    from timm.utils import update_summary
    out = root / f'{name}_seed{seed}'
    out.mkdir(parents=True)
    args = dict(model='s_mixer_s64c64_32', model_kwargs=dict(num_blocks=2, **model_kwargs), seed=seed,
                experiment=f'{name}_seed{seed}', epochs=epochs, cooldown_epochs=0, lr=0.02, output=str(root))
    (out / 'args.yaml').write_text(yaml.safe_dump(args))
    for epoch in range(epochs if done is None else done):
        update_summary(epoch, {'loss': 1.0}, {'loss': eval_loss[epoch], 'top1': top1[epoch], 'top5': 100.},
                       filename=str(out / 'summary.csv'), lr=0.01, write_header=epoch == 0)
    return out


def test_report_means_sds_unfinished_and_disagreeing_runs(tmp_path):
    runs = tmp_path / 'runs'
    fake_run(runs, 'depth_L2_normal', 0, [50, 80, 90], [1.0, 0.5, 0.40], permutation='normal')
    fake_run(runs, 'depth_L2_normal', 1, [50, 85, 80], [1.0, 0.5, 0.50], permutation='normal')
    fake_run(runs, 'depth_L2_normal', 2, [50, 90, 94], [1.0, 0.5, 0.30], permutation='normal')
    fake_run(runs, 'depth_L2_random', 0, [40, 70, 75], [1.0, 0.6, 0.6], permutation='random', perm_seed=0)
    fake_run(runs, 'depth_L2_random', 1, [40, 70, 73], [1.0, 0.6, 0.7], permutation='random', perm_seed=1)
    fake_run(runs, 'depth_L2_random', 2, [40, 70, 0], [1.0, 0.6, 0.7], done=2, permutation='random', perm_seed=2)
    odd = fake_run(runs, 'depth_L2_random', 3, [40, 70, 60], [1.0, 0.6, 0.9], permutation='random', perm_seed=3)
    args = yaml.safe_load((odd / 'args.yaml').read_text())
    (odd / 'args.yaml').write_text(yaml.safe_dump(dict(args, lr=0.1)))  # another learning rate

    report = build_report([str(runs)])
    assert [r.name for r in report.unfinished] == ['depth_L2_random_seed2']
    assert len(report.conflicts) == 1 and 'disagree on lr' in report.conflicts[0]
    rows = {(r['point'], r['runs']): r for r in report.rows()}
    normal = rows[('depth_L2_normal', 3)]
    errs = [10., 20., 6.]
    assert normal['top1_err_mean'] == pytest.approx(statistics.fmean(errs))       # 12
    assert normal['top1_err_sd'] == pytest.approx(statistics.stdev(errs))         # n − 1: 7.2111
    assert normal['best_top1_err_mean'] == pytest.approx((10 + 15 + 6) / 3)
    assert normal['eval_loss_mean'] == pytest.approx(0.4)
    assert (normal['permutation'], normal['num_blocks'], normal['width'], normal['seeds']) == \
        ('normal', 2, 4096, '0 1 2')
    random_ok = rows[('depth_L2_random', 2)]
    assert random_ok['top1_err_mean'] == pytest.approx(26.) and random_ok['top1_err_sd'] == pytest.approx(math.sqrt(2))
    assert random_ok['note'].startswith('runs disagree on lr')
    assert rows[('depth_L2_random', 1)]['top1_err_mean'] == pytest.approx(40.)  # the lr=0.1 run alone

    files = write_report(report, str(tmp_path / 'out'))
    with open(tmp_path / 'out' / 'report.csv') as f:
        table = list(csv.DictReader(f))
    assert list(table[0])[:12] == ['experiment', 'point', 'model', 'num_blocks', 'num_tokens', 'embed_dim', 'width',
                                   'permutation', 'density', 'omega', 'gamma', 'patch_size']
    assert {'seeds', 'top1_err_mean', 'top1_err_sd', 'best_top1_err_mean', 'eval_loss_mean'} <= set(table[0])
    md = (tmp_path / 'out' / 'report.md').read_text()
    assert '## Unfinished runs (not averaged)' in md and 'depth_L2_random_seed2`: 2 of 3 epochs' in md
    assert {f.name for f in files} >= {'report.csv', 'report.md', 'depth.png', 'eval_loss_depth.png'}


def test_report_refuses_folders_without_runs(tmp_path):
    assert pkmixer(['report', str(tmp_path), '--out-dir', str(tmp_path / 'o')]) == 2


# ---------------------------------------------------------------------------------------------- end to end

def _digits(root):
    pytest.importorskip('sklearn')
    from timm_pkmixer.datasets import write_digits_image_folder
    counts = write_digits_image_folder(str(root))
    assert sum(counts['train'].values()) + sum(counts['validation'].values()) == 1797
    return root


def test_sweep_train_report_end_to_end(tmp_path):
    """sweep (rp-block, 2 blocks) → `pkmixer train` for every recipe → report, on the 8×8 digits. Uses timm's
    real train.py when TIMM_TRAIN_PY is set, the stand-in otherwise (CI has no train.py)."""
    data = _digits(tmp_path / 'digits')
    train_py = os.environ.get('TIMM_TRAIN_PY') or str(TESTS / 'mini_train_py.py')
    recipe = tmp_path / 'digits.yaml'
    recipe.write_text(yaml.safe_dump(dict(
        model='s_mixer_s64c64_32', model_kwargs=dict(img_size=8, patch_size=2, num_tokens=16, embed_dim=16),
        data_dir=str(data), num_classes=10, img_size=8, batch_size=128, opt='adamw', lr=0.01, weight_decay=0.05,
        epochs=2, warmup_epochs=0, device='cpu', workers=0, output=str(tmp_path / 'runs'))))
    env = dict(os.environ, OMP_NUM_THREADS='1', TIMM_TRAIN_PY=train_py)
    cli = [sys.executable, '-m', 'timm_pkmixer']
    proc = subprocess.run([*cli, 'sweep', str(recipe), '--experiment', 'rp-block', '--seeds', '0', '1',
                           '--model-kwargs', 'num_blocks=2', '--out-dir', str(tmp_path / 'sweep')],
                          capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr
    recipes = sorted((tmp_path / 'sweep').glob('*.yaml'))
    assert [p.stem for p in recipes] == sorted(f'rpblock_{p}_seed{s}' for p in ('b0', 'b1', 'normal', 'random')
                                               for s in (0, 1))
    for path in recipes:
        proc = subprocess.run([*cli, 'train', str(path)], capture_output=True, text=True, env=env, timeout=600)
        assert proc.returncode == 0, proc.stderr
    proc = subprocess.run([*cli, 'report', str(tmp_path / 'runs'), '--out-dir', str(tmp_path / 'report')],
                          capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr
    with open(tmp_path / 'report' / 'report.csv') as f:
        rows = {r['point']: r for r in csv.DictReader(f)}
    assert set(rows) == {'rpblock_b0', 'rpblock_b1', 'rpblock_normal', 'rpblock_random'}
    assert [rows[p]['permutation'] for p in ('rpblock_b0', 'rpblock_b1', 'rpblock_normal', 'rpblock_random')] == \
        ['RN', 'NR', 'normal', 'random']
    for row in rows.values():
        assert row['runs'] == '2' and row['seeds'] == '0 1' and 0 <= float(row['top1_err_mean']) < 90
    assert (tmp_path / 'report' / 'rp-block.png').stat().st_size > 1000


def test_mlp_mixer_width_points_are_d2():
    points = experiment_points(base('cifar10/pk_mixer_ss_w_32'), 'width')
    mixers = [p for p in points if p.model != 'sw_mlp_o18_32']
    assert [p.model_kwargs['embed_dim'] for p in mixers[:7]] == [16, 32, 48, 64, 83, 113, 173]  # D.2
    from timm_pkmixer.width import tokens_for_omega
    for p in mixers:
        s = summarize(p.model, **p.model_kwargs)
        assert s.num_tokens == round(tokens_for_omega(s.dim, 2 ** 18, 4.0))  # eq. 14 at γ = 4, nearest integer S
        assert (s.gamma_tokens, s.gamma_channels) == (pytest.approx(4, rel=0.02), 4)
    sw = [summarize(p.model, **p.model_kwargs) for p in points if p.model == 'sw_mlp_o18_32']
    assert [s.width for s in sw] == [round(math.sqrt(2 ** 18 / (4 * p))) for p in (0.9, 0.7, 0.5, 0.3, 0.1)]
    assert all(s.hidden == 4 * s.width for s in sw)  # MLP blocks of the same γ
    fig4 = experiment_points(base('cifar10/pk_mixer_ss_w_32'), 'width', permutations=('normal',), omega=2 ** 19,
                             gamma=2.0, dims=[4, 8, 12, 16, 20, 24, 28, 32, 36, 40, 44, 48, 64])
    assert [p.model_kwargs['num_tokens'] for p in fig4[:13]] == [360, 252, 203, 173, 152, 136, 124, 113, 104, 96, 89,
                                                                   83, 64]  # C.2, Fig. 4 (left)
