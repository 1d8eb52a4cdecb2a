"""Every sweep point as the paper builds it, checked on the models the generated recipes build (timm.create_model of
the recipe's model and model_kwargs, on the meta device): A.2.4's skip layer, Fig. 4 (left)'s paired SW-MLPs,
Fig. S.2's Ω, Figs. S.1, S.7, S.8; the disagreements of the paper's text with its tables, each one option away; and
`--explain` refusing exactly what writing refuses, for every packaged recipe and experiment."""
import json
import math

import pytest
import timm
import yaml

from timm_pkmixer.cli import main as pkmixer
from timm_pkmixer.errors import InvalidArgumentError
from timm_pkmixer.layers import SkipLayer
from timm_pkmixer.sweeps.recipes import list_recipes, load_recipe, resolve_recipe
from timm_pkmixer.sweeps.sweep_plan import plan_sweep
from timm_pkmixer.sweeps.sweep_render import explain
from timm_pkmixer.sweeps.sweep_tables import CIFAR_SWEEP_PAIRS, EXPERIMENTS, FIGS6_DIMS, FIGURES
from timm_pkmixer.sweeps.sweep_write import write_sweep


def built(tmp_path, recipe, **options):
    """(recipe dict, model built from its model + model_kwargs) for every recipe the sweep writes (seed 0)."""
    out = []
    for path in write_sweep(recipe, str(tmp_path / 'sweep'), seeds=(0,), **options):
        cfg = yaml.safe_load(path.read_text())
        out.append((cfg, timm.create_model(cfg['model'], device='meta', **cfg['model_kwargs'])))
    return out


def mixers(models):
    return [(cfg, m) for cfg, m in models if m.describe().family != 'SW-MLP']


def sw_mlps(models):
    return [(cfg, m) for cfg, m in models if m.describe().family == 'SW-MLP']


# ---------------------------------------------------------------------------------------------- A.2.4: skip layer

# (recipe, figure, options, the S = S0 point the audit found without a skip layer: (C, S) or P)
VARIES_S = [
    ('cifar10/mixer_fig2_fig4', 'fig4', {}, (64, 64)),
    ('cifar10/s_mixer_fig5', 'fig5', {}, None),
    ('cifar10/s_mixer_fig6', 'fig6-cifar10', {}, None),
    ('cifar10/s_mixer_fig5', 'figS2-cifar10', {}, (64, 64)),
    ('cifar10/s_mixer_fig5', 'figS3', {}, (64, 64)),
    ('cifar10/s_mixer_fig5', 'figS6', {}, (64, 64)),
    ('cifar10/s_mixer_fig5', 'figS7', {}, (64, 64)),
    ('cifar10/s_mixer_fig5', 'figS8', {}, (64, 64)),
    ('imagenet/pk_mixer_b_w', 'fig6d', {}, (768, 196)),  # P = 16
]


@pytest.mark.parametrize('recipe,figure,options,square', VARIES_S, ids=[v[1] for v in VARIES_S])
def test_every_point_of_a_sweep_that_varies_s_has_the_skip_layer(tmp_path, recipe, figure, options, square):
    models = mixers(built(tmp_path, recipe, figure=figure, permutations=('normal',), **options))
    assert models
    for cfg, model in models:
        assert isinstance(model.blocks[0].skip, SkipLayer), cfg['experiment']  # A.2.4, S = S0 included
        assert not any(isinstance(b.skip, SkipLayer) for b in model.blocks[1:])
        assert cfg['model_kwargs']['skip_layer'] is True
    if square:
        at_s0 = [m for _, m in models if (m.describe().dim, m.describe().num_tokens) == square]
        assert len(at_s0) == 1 and at_s0[0].describe().num_tokens == at_s0[0].stem.num_patches  # S = S0 is swept


# ---------------------------------------------------------------------------------------------- Fig. 4 (left)

def test_fig4_pairs_an_sw_mlp_with_each_mixer_at_its_width_and_has_no_rp_arm(tmp_path):
    plan = plan_sweep('cifar10/mixer_fig2_fig4')
    assert plan.figure.key == 'fig4' and plan.seeds == [0, 1, 2, 3] and plan.differs == []  # C.2: four seeds
    base = load_recipe(resolve_recipe('cifar10/mixer_fig2_fig4'))
    assert (base['batch_size'], base['epochs'], base['lr'], base['aa'], base['opt'], base['sched']) == \
        (128, 600, 0.01, 'original', 'adamw', 'cosine')  # C.1
    models = built(tmp_path, 'cifar10/mixer_fig2_fig4')
    mix = [m.describe() for _, m in mixers(models)]
    assert [(d.dim, d.num_tokens) for d in mix] == list(zip(
        (4, 8, 12, 16, 20, 24, 28, 32, 36, 40, 44, 48, 64),
        (360, 252, 203, 173, 152, 136, 124, 113, 104, 96, 89, 83, 64)))  # C.2, as printed
    assert {d.permutation_label for d in mix} == {'normal'}  # Fig. 4 has no RP Mixers
    for d in mix:
        assert (d.depth, d.gamma_tokens, d.gamma_channels) == (3, pytest.approx(2, rel=0.02), 2)  # C.1: L = 3, γ = 2
    assert {cfg['model_kwargs']['patch_size'] for cfg, _ in mixers(models)} == {4}
    sw = [m.describe() for _, m in sw_mlps(models)]
    assert [d.width for d in sw] == [d.num_tokens * d.dim for d in mix]  # m = S·C: C.2's same (C, S)
    for d in sw:
        assert (d.depth, d.gamma, d.hidden) == (6, 2.0, 2 * d.width)  # C.1: 6 blocks; C.2: the same γ
        assert d.omega == pytest.approx(2 ** 19, rel=1e-9)  # C.2: the same Ω; p = Ω/(γm²)
    assert [round(1 / d.density) for d in sw][-1] == 64  # at C = S = 64: p = 1/64, Fig. 2's pairing
    with_rp = plan_sweep('cifar10/mixer_fig2_fig4', permutations=('random', 'normal'))
    assert len([p for p in with_rp.points if p.model_kwargs.get('permutation') == 'random']) == 13  # asked for
    assert len([p for p in with_rp.points if p.model.startswith('sw_')]) == 13  # one SW-MLP per (C, S), not per perm
    with pytest.raises(InvalidArgumentError, match=r'omega does not apply .* \(C.2 prints its S for Ω = 2\^19\)'):
        plan_sweep('cifar10/mixer_fig2_fig4', omega=2 ** 18)


# ---------------------------------------------------------------------------------------------- Fig. S.2, S.1, S.7, S.8

def test_fig_s2_is_at_d2_omega_where_its_c_are_the_symmetric_pairs(tmp_path):
    models = built(tmp_path, 'cifar10/s_mixer_fig5', figure='figS2-cifar10', permutations=('normal',))
    mix = [m.describe() for _, m in mixers(models)]
    assert [(d.dim, d.num_tokens) for d in mix] == [(16, 173), (32, 113), (48, 83), (64, 64), (83, 48), (113, 32),
                                                    (173, 16)]  # C.4's pairs, symmetric about C = S = 64
    for d in mix:
        assert d.omega == pytest.approx(2 ** 20, rel=0.02) and d.gamma == pytest.approx(4, rel=0.01)
    sw = [m.describe() for _, m in sw_mlps(models)]
    assert [d.width for d in sw] == [round(math.sqrt(2 ** 20 / (4 * p))) for p in (0.9, 0.7, 0.5, 0.3, 0.1)]
    assert all(d.hidden == 4 * d.width for d in sw)
    other = plan_sweep('cifar10/s_mixer_fig5', figure='figS2-cifar10', omega=2 ** 18, permutations=('normal',))
    assert [p.coords['S'] for p in other.points[:3]] == [83, 50, 34]  # D.2's other Ω, one option away


def test_fig_s1_left_is_sw_mlps_at_omega_2_16(tmp_path):
    plan = plan_sweep('cifar10/s_mixer_fig5', figure='figS1')
    assert plan.seeds == [0, 1, 2, 3, 4]  # the caption's five trials
    models = built(tmp_path, 'cifar10/s_mixer_fig5', figure='figS1')
    sw = [m.describe() for _, m in models]
    assert len(sw) == 9 and {d.family for d in sw} == {'SW-MLP'}
    assert [d.width for d in sw] == [round(256 * 2 ** (n / 2)) for n in range(9)]  # m = √(Ω/p), p = 2^-n
    assert all(d.omega == pytest.approx(2 ** 16, rel=0.01) and d.depth == 8 for d in sw)
    gamma_src = next(s for s in plan.settings if s.name == 'γ').source
    assert gamma_src.startswith('ours: the caption sets γ "according to (Golubeva et al., 2021)"')
    with pytest.raises(InvalidArgumentError, match='permutations does not apply'):
        plan_sweep('cifar10/s_mixer_fig5', figure='figS1', permutations=('normal',))


@pytest.mark.parametrize('figure,dims,training', [
    ('figS7', FIGS6_DIMS, dict(opt='nesterov', lr=0.1, batch_size=256, epochs=600, aa='original')),
    ('figS8', (64,), dict(opt='adamw', lr=0.01, batch_size=256, epochs=600, aa='original')),
])
def test_fig_s7_s8_are_their_captions(tmp_path, figure, dims, training):
    plan = plan_sweep('cifar10/s_mixer_fig5', figure=figure)
    assert plan.seeds == [0, 1, 2, 3, 4] and plan.differs == []  # five trials
    models = built(tmp_path, 'cifar10/s_mixer_fig5', figure=figure)
    assert len(models) == 2 * len(dims)  # normal and RP
    for cfg, model in models:
        d = model.describe()
        assert d.block_type == 'mlp' and d.gamma == pytest.approx(4, rel=0.01)
        assert {k: cfg[k] for k in training} == training
    got = sorted({(m.describe().dim, m.describe().num_tokens) for _, m in models})
    s6 = sorted((p.coords['C'], p.coords['S']) for p in plan_sweep('cifar10/s_mixer_fig5', figure='figS6').points)
    assert set(got) <= set(s6)  # Fig. S.6's (C, S), at γ = 4 (Ω/γ = 2^18)
    assert [c for c, _ in got] == sorted(dims)


# ---------------------------------------------------------------------------------------------- disagreements

def _base_recipe(key):
    """The figure's recipe on the paper's own dataset (fig6-stl10: stl10/s_mixer_fig6, not the Fashion-MNIST
    recipe that runs the same points at CPU scale, whose epochs and lr the sweep rightly flags)."""
    bases = [info for info in list_recipes() if key in info.figures]
    return next((info.name for info in bases if info.name.split('/')[0] in key.split('-')), bases[0].name)


DISAGREEMENTS = [(f.key, d.key, r.name) for f in FIGURES.values() for d in f.disagreements for r in d.readings[1:]]


@pytest.mark.parametrize('figure,key,name', DISAGREEMENTS, ids=[f'{f}-{k}' for f, k, _ in DISAGREEMENTS])
def test_every_disagreement_is_flagged_and_its_other_reading_is_one_option_away(figure, key, name):
    recipe = _base_recipe(figure)
    default = plan_sweep(recipe, figure=figure)
    text = explain(default)
    d = next(d for d in FIGURES[figure].disagreements if d.key == key)
    row = next(line for line in text.splitlines() if line.startswith(f'| reading {key} |'))
    assert 'DISAGREEMENT' in row and all(r.source in row for r in d.readings)  # both readings, both sources
    assert f'--reading {key}={name}' in text
    other = plan_sweep(recipe, figure=figure, readings={key: name})
    assert other.readings[key] == name and default.readings[key] == d.readings[0].name
    assert [(p.name, p.model_kwargs, p.recipe) for p in other.points] != \
        [(p.name, p.model_kwargs, p.recipe) for p in default.points]  # the reading changes the sweep
    assert other.differs == []  # the other reading's settings are expected, not flagged as the recipe's fault


def test_fig6_readings_change_what_is_built(tmp_path):
    table = mixers(built(tmp_path / 'a', 'cifar10/s_mixer_fig6', permutations=('normal',)))
    text = mixers(built(tmp_path / 'b', 'cifar10/s_mixer_fig6', permutations=('normal',),
                        readings={'omega': 'text', 'training': 'text', 'hard-aug': 'autoaugment'}))
    assert [(m.describe().dim, m.describe().num_tokens) for _, m in table] == list(CIFAR_SWEEP_PAIRS[2 ** 21])
    assert [(m.describe().dim, m.describe().num_tokens) for _, m in text] == list(CIFAR_SWEEP_PAIRS[2 ** 18])
    assert {(c['opt'], c['lr'], c['batch_size'], c['epochs'], c.get('aa')) for c, _ in table} == \
        {('adamw', 0.02, 1024, 2000, None)}  # Table S.2
    assert {(c['opt'], c['lr'], c['batch_size'], c['epochs'], c['momentum'], c['aa']) for c, _ in text} == \
        {('nesterov', 0.1, 128, 200, 0.9, 'original')}  # C.5's text, and the "hard aug." column read as AutoAugment


def test_fig_s4_text_reading_builds_d5_models(tmp_path):
    models = built(tmp_path, 'cifar10/s_mixer_fig7', figure='figS4', readings={'geometry': 'text'})
    assert len(models) == 6
    assert {(m.describe().num_tokens, m.describe().dim, m.describe().depth) for _, m in models} == {(64, 64, 4)}


def test_sw_block_reading_c1_sets_outer_act_false_on_the_sw_mlps_only(tmp_path):
    models = built(tmp_path / 'built', 'cifar10/mixer_fig2_fig4', readings={'sw-block': 'c1'})
    assert [m.model_args['outer_act'] for _, m in sw_mlps(models)] == [False] * 13
    paths = write_sweep('cifar10/mixer_fig2_fig4', str(tmp_path / 'w'), seeds=(0,), readings={'sw-block': 'c1'})
    cfgs = [yaml.safe_load(p.read_text()) for p in paths]
    assert [c['model_kwargs'].get('outer_act') for c in cfgs if c['model'].startswith('sw_')] == [False] * 13
    assert not [c for c in cfgs if not c['model'].startswith('sw_') and 'outer_act' in c['model_kwargs']]
    default = write_sweep('cifar10/mixer_fig2_fig4', str(tmp_path / 'd'), seeds=(0,))
    assert not [p for p in default if 'outer_act' in yaml.safe_load(p.read_text())['model_kwargs']]  # eq. S.17


@pytest.mark.parametrize('argv,message', [
    (['--reading', 'omega=text'], "--reading: fig5 has no disagreement 'omega' (it has: none)"),
    (['--figure', 'fig6-cifar10', '--reading', 'omega=paper'],
     "--reading['omega'] must be one of ('table', 'text'), got 'paper'"),
    (['--figure', 'fig6-cifar10', '--reading', 'omega'], "--reading: 'omega' is not KEY=NAME"),
    (['--figure', 'fig6-cifar10', '--reading', 'omega:text'],
     "--reading: 'omega:text' is not KEY=NAME (e.g. --reading omega=text)"),  # the real syntax, not '--omega=text'
    (['--figure', 'fig6-cifar10', '--reading', 'omega=text', 'omega=table'], "--reading: 'omega' given twice"),
])
def test_sweep_refuses_a_reading_that_does_not_exist(tmp_path, capsys, argv, message):
    assert pkmixer(['sweep', 'cifar10/s_mixer_fig5', '--out-dir', str(tmp_path / 'o'), *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and '--omega' not in err  # no flag that does not exist is suggested
    assert not (tmp_path / 'o').exists()


# ---------------------------------------------------------------------------------------------- explain = write

def _outcome(call, *args, **kwargs):
    try:
        call(*args, **kwargs)
    except Exception as e:  # noqa: BLE001 - the type and message are what is compared
        return f'{type(e).__name__}: {e}'
    return 'ok'


@pytest.mark.parametrize('recipe', [info.name for info in list_recipes()])
def test_explain_succeeds_exactly_when_writing_does_with_the_same_message(tmp_path, recipe):
    outcomes = {}
    for experiment in EXPERIMENTS:
        explained = _outcome(lambda *a, **k: explain(plan_sweep(*a, **k)), recipe, experiment, seeds=[0])
        written = _outcome(write_sweep, recipe, str(tmp_path / experiment), experiment=experiment, seeds=[0])
        assert explained == written, (recipe, experiment)
        assert (tmp_path / experiment).exists() == (written == 'ok')  # a refused sweep writes nothing
        outcomes[experiment] = written
    if recipe == 'mnist/shallow_kron_28':  # a shallow MLP has seeds (Fig. 2 (d)) only: the others refused alike
        assert {e for e, o in outcomes.items() if o == 'ok'} == {'seeds'}
    if recipe == 'cifar10/s_mixer_fig7':
        assert outcomes['depth'] == outcomes['rp-block'] == outcomes['patch'] == 'ok'


# ---------------------------------------------------------------------------------------------- chosen points

def test_seeds_experiment_trains_the_base_model_as_it_is(tmp_path):
    shallow = built(tmp_path / 'a', 'fashion_mnist/shallow_kron_28', experiment='seeds')
    assert [(cfg['experiment'], cfg['model'], cfg['model_kwargs']) for cfg, _ in shallow] == \
        [('shallow_kron_28_seed0', 'shallow_kron_28', {})]
    pair = built(tmp_path / 'b', 'fashion_mnist/mixer_fig2_fig4', experiment='seeds')
    got = {cfg['experiment']: (m.describe().num_tokens, m.describe().dim, m.describe().depth, m.describe().gamma,
                                m.describe().permutation_label, cfg['model_kwargs'].get('perm_seed'))
           for cfg, m in pair}
    assert got == {'mixer_s32c32_L3_random_seed0': (32, 32, 3, 2.0, 'random', 0),  # named by what is built
                   'mixer_s32c32_L3_normal_seed0': (32, 32, 3, 2.0, 'normal', None)}
    with pytest.raises(InvalidArgumentError, match=r'permutations: shallow_kron_28 \(Shallow Kronecker\) has no '
                                                   'permutation to choose'):
        plan_sweep('fashion_mnist/shallow_kron_28', 'seeds', permutations=('random',))


def test_density_experiment_builds_fig2s_sw_mlps_at_the_mixers_width(tmp_path):
    models = built(tmp_path, 'cifar10/mixer_fig2_fig4', experiment='density', densities=(1.0, 0.25))
    (cfg, mixer), = mixers(models)
    d = mixer.describe()
    assert (d.num_tokens, d.dim, d.depth, d.gamma, d.permutation_label) == (64, 64, 3, 2.0, 'normal')  # C.1
    sw = [m.describe() for _, m in sw_mlps(models)]
    assert [(s.width, s.hidden, s.depth, s.density) for s in sw] == [(4096, 8192, 6, 1.0), (4096, 8192, 6, 0.25)]
    assert all(not m.model_args.outer_act for _, m in sw_mlps(models))  # C.1's block by default (no outer φ)
    text = explain(plan_sweep('cifar10/mixer_fig2_fig4', 'density', densities=(1.0, 0.25)))
    assert '| densities | 1.0 0.25 | given (densities) |' in text  # an option given is a setting of the sweep


def test_depths_densities_and_dims_choose_the_points():
    depth = plan_sweep('fashion_mnist/s_mixer_fig7', 'depth', depths=(8,))
    assert [(p.name, p.coords['L']) for p in depth.points] == [('depth_L8_random', 8), ('depth_L8_normal', 8)]
    fig5 = plan_sweep('cifar10/s_mixer_fig5', permutations=('normal',), dims=(4, 64), densities=(0.5,))
    assert [(p.coords['C'], p.coords['S']) for p in fig5.points if 'C' in p.coords] == [(4, 360), (64, 64)]
    assert [(p.coords['density'], p.coords['width']) for p in fig5.points if 'C' not in p.coords] == [(0.5, 724)]
    at21 = plan_sweep('cifar10/s_mixer_fig5', permutations=('normal',), dims=(64,), omega=2 ** 21)
    assert [(p.coords['C'], p.coords['S']) for p in at21.points] == [(64, 226)]  # eq. S.42; no SW arm at 2^21


@pytest.mark.parametrize('recipe,options,message', [
    ('cifar10/s_mixer_fig5', dict(depths=(8,)), r'depths does not apply to the fig5 width experiment \(L is chosen '
                                                r'by depths in the depth experiment \(Fig. 7\) only\)'),
    ('cifar10/s_mixer_fig7', dict(experiment='depth', densities=(0.5,)), 'densities does not apply to the depth '
                                                                         'experiment'),
    ('cifar10/s_mixer_fig5', dict(densities=(0.5, 0.0)), r'densities must be distinct numbers in \(0, 1\], got '
                                                         r'\[0.5, 0.0\]'),
    ('cifar10/s_mixer_fig7', dict(experiment='depth', depths=(8, 8)), r'depths must be distinct positive integers, '
                                                                      r'got \[8, 8\]'),
    ('cifar10/s_mixer_fig5', dict(omega=2 ** 20), 'give dims to choose C at this Ω'),
    ('cifar10/mixer_fig2_fig4', dict(figure='fig4', densities=(0.5,)), 'its SW-MLPs are paired with its Mixers'),
])
def test_point_options_that_do_not_apply_are_refused_by_name(recipe, options, message):
    with pytest.raises(InvalidArgumentError, match=message):
        plan_sweep(recipe, **options)


# ------------------------------------------------------------------------------ a record names what is built

def _setting(plan, name):
    return next(s for s in plan.settings if s.name == name)


def test_explain_names_the_model_a_shrunk_sweep_builds():
    """Fig. 7's row 'S = C | 128' becomes the value built when the model arguments shrink it, and says by what; a
    given option (depths) replaces its row too; rows nothing changed stay the paper's."""
    paper = plan_sweep('cifar10/s_mixer_fig7', experiment='depth', seeds=[0], permutations=['normal'], depths=[4])
    assert (_setting(paper, 'S = C').value, _setting(paper, 'S = C').source) == (128, 'C.6')
    shrunk = plan_sweep('cifar10/s_mixer_fig7', experiment='depth', seeds=[0], permutations=['normal'], depths=[4],
                        model_kwargs=dict(num_tokens=64, embed_dim=64))
    row = _setting(shrunk, 'S = C')
    assert row.value == '64'
    assert row.source == ('CHANGED by given model_kwargs num_tokens=64, given model_kwargs embed_dim=64, in place of '
                          '128 (C.6)')
    assert (_setting(shrunk, 'L').value, _setting(shrunk, 'L').source) == ('4', 'CHANGED by given depths, in place of '
                                                                               '4, 8, 12, 16, 20 (C.6)')
    assert (_setting(shrunk, 'P').value, _setting(shrunk, 'P').source) == (4, 'C.4')
    text = explain(shrunk)
    assert '| S = C | 64 | CHANGED by given model_kwargs num_tokens=64' in text and '| S = C | 128 |' not in text


def test_a_base_recipe_of_another_size_is_named_as_built(tmp_path):
    recipe = tmp_path / 'small.yaml'
    recipe.write_text('# figure: fig7\n' + yaml.safe_dump(dict(model='s_mixer_s128c128_32', num_classes=10,
                                                                model_kwargs=dict(num_tokens=32, embed_dim=32))))
    plan = plan_sweep(str(recipe), experiment='depth', seeds=[0], permutations=['normal'], depths=[2])
    assert (_setting(plan, 'S = C').value, _setting(plan, 'S = C').source) == (
        '32', "CHANGED by the base recipe's model, in place of 128 (C.6)")


def test_sweep_md_and_json_state_what_a_reading_changed(tmp_path):
    """Fig. 6 (CIFAR-10) read as its text: Ω = 2^18 and C.4's pairs at it, and C.5's training, each row saying which
    reading set it and what it replaces, in SWEEP.md and sweep.json alike."""
    write_sweep('cifar10/s_mixer_fig6', str(tmp_path / 's'), seeds=(0,), permutations=('normal',),
                readings={'omega': 'text', 'training': 'text'})
    rows = {r['setting']: r for r in json.loads((tmp_path / 's' / 'sweep.json').read_text())['sweeps'][0]['settings']}
    assert (rows['Ω']['value'], rows['Ω']['source']) == (
        '262144', 'CHANGED by reading omega=text, in place of 2097152 (Table S.2)')
    assert rows['(C, S) pairs']['value'] == ', '.join(f'({c}, {s})' for c, s in CIFAR_SWEEP_PAIRS[2 ** 18])
    assert rows['(C, S) pairs']['source'].startswith('CHANGED by reading omega=text, in place of CIFAR_SWEEP_PAIRS')
    assert (rows['opt']['value'], rows['opt']['source']) == (
        'nesterov', "reading training=text: C.5 text: C.4's Nesterov SGD; replaces 'adamw' (Table S.2)")
    assert rows['epochs']['source'] == 'reading training=text: C.5 text; replaces 2000 (Table S.2)'
    md = (tmp_path / 's' / 'SWEEP.md').read_text()
    assert '| Ω | 262144 | CHANGED by reading omega=text, in place of 2097152 (Table S.2) |' in md
    assert '| lr | 0.1 | reading training=text: C.5 text; replaces 0.02 (Table S.2) |' in md


def test_a_reading_or_option_that_moves_points_rewrites_their_rows():
    s6 = plan_sweep('cifar10/s_mixer_fig5', figure='figS6', seeds=[0], permutations=['normal'],
                    readings={'c114': 'pairs'})
    assert (_setting(s6, 'C').value, _setting(s6, 'C').source) == (
        '16, 32, 64, 113, 173', 'CHANGED by reading c114=pairs, in place of 16, 32, 64, 114, 173 (Fig. S.6 caption)')
    fig5 = plan_sweep('cifar10/s_mixer_fig5', seeds=[0], permutations=['normal'], omega=2 ** 21)
    assert (_setting(fig5, 'Ω').value, _setting(fig5, 'SW-MLP Ω').value) == ('2097152', 'none: no such point')
    assert _setting(fig5, 'SW-MLP Ω').source.startswith('CHANGED by given omega, in place of 262144')


@pytest.mark.parametrize('argv,message', [
    (['cifar10/s_mixer_fig7', '--experiment', 'depth', '--model-kwargs', 'num_blocks=0'],
     "--model-kwargs num_blocks=0: no point of this depth sweep is built with it (each point sets its own "
     "num_blocks)"),
    (['cifar10/s_mixer_fig7', '--experiment', 'depth', '--model-kwargs', 'num_blocks=8'],
     "--model-kwargs num_blocks=8: no point of this depth sweep is built with it"),  # L = 8 is a point: still unused
    (['cifar10/s_mixer_fig5', '--figure', 'figS1', '--model-kwargs', 'num_blocks=2'],
     "--model-kwargs num_blocks=2: no point of this width sweep is built with it"),  # SW-MLPs only
])
@pytest.mark.parametrize('explain_only', [True, False], ids=['explain', 'write'])
def test_explain_and_write_refuse_a_model_argument_no_point_is_built_with(tmp_path, capsys, argv, message,
                                                                          explain_only):
    out = ['--explain'] if explain_only else ['--out-dir', str(tmp_path / 'o')]
    assert pkmixer(['sweep', *argv, '--seeds', '0', *out]) == 2
    captured = capsys.readouterr()
    assert f'pkmixer sweep: error: {message}' in captured.err and captured.out == ''
    assert not (tmp_path / 'o').exists()


def test_explain_builds_each_point_with_the_recipes_num_classes_and_in_chans(tmp_path, capsys):
    """train.py builds the model with the recipe's num_classes and in_chans: a point that cannot be built so is
    refused by --explain as by writing."""
    for key, value in (('num_classes', -1), ('in_chans', 0)):
        recipe = tmp_path / f'{key}.yaml'
        recipe.write_text('# figure: fig7\n' + yaml.safe_dump({'model': 's_mixer_s64c64_32', key: value}))
        for out in (['--explain'], ['--out-dir', str(tmp_path / key)]):
            assert pkmixer(['sweep', str(recipe), '--experiment', 'depth', '--depths', '2', '--seeds', '0',
                            '--permutation', 'normal', *out]) == 2
            err = capsys.readouterr().err
            assert f'point depth_L2_normal (s_mixer_s64c64_32): {key} must be' in err, err


# ---------------------------------------------------------------------------------------------- W&B project names

WANDB_NAMES = ['pk', 'timm-pkmixer fig 7', 'a' * 128, 'a' * 129, 'team/proj', 'a:b', 'a#b', 'a?b', 'a%b', 'a\\b',
               'a\nb', '']


@pytest.mark.parametrize('name', WANDB_NAMES, ids=range(len(WANDB_NAMES)))
def test_wandb_project_names_follow_wandbs_own_rule(name):
    """check_wandb_project takes exactly the names W&B's own validator takes (its artifacts' validate_project_name,
    which wandb.init's settings agree with but for line breaks, which it lets through to the server)."""
    from timm_pkmixer.sweeps.sweep_write import check_wandb_project
    validators = pytest.importorskip('wandb.sdk.artifacts._validators')
    try:
        validators.validate_project_name(name)
        wandb_takes = True
    except ValueError:
        wandb_takes = False
    try:
        check_wandb_project(name)
        we_take = True
    except InvalidArgumentError:
        we_take = False
    assert we_take == wandb_takes


@pytest.mark.parametrize('name,message', [
    ('team/proj', "--wandb-project 'team/proj' holds '/' (W&B takes a project name of 1 to 128 characters without any "
                  "of / \\\\ # ? % : \\r \\n; a team or user is W&B's entity, set by WANDB_ENTITY, not part of the "
                  "project)"),
    ('a:b', "--wandb-project 'a:b' holds ':'"),
    ('x' * 129, '--wandb-project has 129 characters (W&B takes a project name of 1 to 128 characters'),
    ('', "--wandb-project must be a non-empty string"),
])
@pytest.mark.parametrize('explain_only', [True, False], ids=['explain', 'write'])
def test_sweep_refuses_a_wandb_project_wandb_would_refuse(tmp_path, capsys, name, message, explain_only):
    out = ['--explain'] if explain_only else ['--out-dir', str(tmp_path / 'o')]
    assert pkmixer(['sweep', 'cifar10/s_mixer_fig7', '--experiment', 'depth', '--log-wandb', '--wandb-project', name,
                    *out]) == 2
    captured = capsys.readouterr()
    assert captured.err.startswith(f'pkmixer sweep: error: {message}') and captured.err.count('\n') == 1
    assert captured.out == '' and not (tmp_path / 'o').exists()
    with pytest.raises(InvalidArgumentError, match=r'^wandb_project '):
        write_sweep('cifar10/s_mixer_fig7', str(tmp_path / 'lib'), log_wandb=True, wandb_project=name)


def test_fig_s4_explain_names_the_s_and_l_built_against_its_caption():
    """Fig. S.4's rows 'S = C' and 'L' hold the caption's 128 and 8; the Fashion-MNIST recipe's S = C = 64 model and
    the text reading's S = C = 64, L = 4 are marked CHANGED, each by what changed it."""
    cifar = plan_sweep('cifar10/s_mixer_fig7', experiment='rp-block', seeds=[0])
    assert (_setting(cifar, 'S = C').value, _setting(cifar, 'S = C').source) == (128, 'Fig. S.4 caption')
    fm = plan_sweep('fashion_mnist/s_mixer_fig7', experiment='rp-block', seeds=[0])
    assert (_setting(fm, 'S = C').value, _setting(fm, 'S = C').source) == (
        '64', "CHANGED by the base recipe's model, in place of 128 (Fig. S.4 caption)")
    assert _setting(fm, 'L').value == 8
    text = plan_sweep('fashion_mnist/s_mixer_fig7', experiment='rp-block', seeds=[0], readings={'geometry': 'text'})
    assert (_setting(text, 'L').value, _setting(text, 'L').source) == (
        '4', "CHANGED by reading geometry=text, in place of 8 (the registered S-Mixer's: the caption gives no L)")
