"""docs/findings.md is what benchmarks/fashion_mnist/findings.py computes from the committed results, and its verdicts
follow the rules the page states: Welch intervals and p (checked against known t values), TOST for level claims,
'not shown at this scale' on curves still moving, 'outside the paper's range', 'not yet run'."""
import importlib.util
import json
import math
import re
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / 'benchmarks' / 'fashion_mnist' / 'findings.py'


@pytest.fixture(scope='module')
def findings():
    spec = importlib.util.spec_from_file_location('findings', SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_docs_hold_what_the_committed_results_give(findings, capsys):
    assert findings.main(['--check', str(ROOT / 'docs' / 'findings.md'),
                          '--check-coverage', str(ROOT / 'docs' / 'experiments.md')]) == 0, capsys.readouterr().err


def test_a_page_that_differs_is_named(findings, tmp_path, capsys):
    doc = tmp_path / 'findings.md'
    doc.write_text(findings.page().replace('±', '+/-', 1), encoding='utf-8')
    assert findings.main(['--check', str(doc)]) == 1
    assert capsys.readouterr().err.startswith(f'{doc}: its findings differ from the committed results')
    findings.main(['--write', str(doc)])
    assert findings.main(['--check', str(doc)]) == 0


# ------------------------------------------------------------------ Student's t
@pytest.mark.parametrize('df, q975, q95', [
    (1, 12.706204736174694, 6.313751514675037), (2, 4.302652729749462, 2.9199855803537242),
    (3.5, 2.9400886379827282, 2.2224334936496004), (4, 2.7764451051977934, 2.1318467863266495),
    (10, 2.228138851986274, 1.8124611228116756), (30, 2.0422724563012378, 1.697260886593957),
    (1000, 1.9623390808264083, 1.6463788172854643)])
def test_t_quantiles_are_the_tables(findings, df, q975, q95):
    """scipy.stats.t.ppf's values (the printed tables: 12.706, 4.303, 2.776, 2.228, 2.042 …)."""
    assert findings.t_quantile(0.975, df) == pytest.approx(q975, rel=1e-9)
    assert findings.t_quantile(0.95, df) == pytest.approx(q95, rel=1e-9)
    assert findings.t_quantile(0.025, df) == pytest.approx(-q975, rel=1e-9)


@pytest.mark.parametrize('t, df, p', [(2, 4, 0.11611652351681556), (1, 1, 0.5), (3.1, 2.7, 0.061281770530354274),
                                      (0.5, 10, 0.627893605742973), (10, 3, 0.0021283990584141503)])
def test_two_sided_t_p_values(findings, t, df, p):
    assert 2 * findings.t_sf(t, df) == pytest.approx(p, rel=1e-9)
    assert findings.t_sf(-t, df) == pytest.approx(1 - p / 2, rel=1e-9)


def test_the_incomplete_beta(findings):
    assert findings.betainc(3.0, 3.0, 0.5) == pytest.approx(0.5)
    assert findings.betainc(1.0, 1.0, 0.3) == pytest.approx(0.3)
    assert findings.betainc(2.0, 1.0, 0.4) == pytest.approx(0.16)   # x^a for b = 1
    assert findings.betainc(0.5, 0.5, 0.25) == pytest.approx(1 / 3)  # (2/π) asin √x


def test_welch(findings):
    a, b = findings.Sample([10.0, 11.0, 12.0]), findings.Sample([12.0, 13.0, 14.0])
    c = findings.compare(a, b)
    assert (c.diff, c.se, c.df) == (-2.0, pytest.approx(math.sqrt(2 / 3)), pytest.approx(4.0))
    lo, hi = c.interval()
    assert (lo, hi) == (pytest.approx(-2 - 2.7764451051977934 * math.sqrt(2 / 3)),
                        pytest.approx(-2 + 2.7764451051977934 * math.sqrt(2 / 3)))
    assert c.p == pytest.approx(2 * findings.t_sf(2 / math.sqrt(2 / 3), 4))
    unequal = findings.compare(findings.Sample([1.0, 2.0, 3.0, 4.0, 5.0]), findings.Sample([1.0, 1.1, 1.2]))
    v1, v2 = 2.5 / 5, 0.01 / 3
    assert unequal.df == pytest.approx((v1 + v2) ** 2 / (v1 ** 2 / 4 + v2 ** 2 / 2))
    one = findings.compare(findings.Sample([10.0]), b)
    assert math.isnan(one.se) and one.text() == '-3.00 (one seed: no interval)'
    assert findings.direction(one).word == findings.NO_DIFFERENCE


# ------------------------------------------------------------------ the rules on made-up arms
def _c(findings, a, b):
    return findings.compare(findings.Sample(a), findings.Sample(b))


def test_a_direction_agrees_disagrees_or_shows_nothing(findings):
    lower = _c(findings, [10.0, 10.1, 9.9], [12.0, 12.1, 11.9])
    assert findings.direction(lower, lower=True).word == findings.AGREES
    assert findings.direction(lower, lower=False).word == findings.DISAGREES
    overlapping = _c(findings, [10.0, 11.0, 12.0], [10.5, 11.5, 12.5])
    assert findings.direction(overlapping).word == findings.NO_DIFFERENCE
    # 2 SE is not the rule: a difference of 2.2 SE with 3 seeds an arm (df 4) is no difference shown
    c = findings.Comparison(-2.2, 1.0, 4.0)
    assert findings.direction(c).word == findings.NO_DIFFERENCE and 0.05 < c.p < 0.1


def test_a_level_claim_needs_an_equivalence_test(findings):
    level = _c(findings, [10.00, 10.05, 9.95], [10.02, 10.07, 9.97])
    assert findings.level(level).word == findings.AGREES
    assert findings.level(level).why.startswith('level within ±0.5 (TOST p')
    noisy = _c(findings, [10.0, 11.0, 12.0], [10.2, 11.2, 12.2])   # no difference, but no equivalence either
    assert findings.direction(noisy).word == findings.NO_DIFFERENCE
    assert findings.level(noisy).word == findings.NO_DIFFERENCE and 'not shown' in findings.level(noisy).why
    apart = _c(findings, [10.0, 10.1, 9.9], [12.0, 12.1, 11.9])
    assert findings.level(apart).word == findings.DISAGREES
    small = findings.Comparison(0.45, 0.1, 10.0)   # apart from 0, not from the margin
    assert findings.level(small).word == findings.INCONCLUSIVE
    assert findings.Comparison(0.0, 0.1, 10.0).tost_p(0.5) == pytest.approx(findings.t_sf(5.0, 10.0))


def test_match_or_beat(findings):
    assert findings.match_or_beat(findings.Comparison(-1.0, 0.1, 4)).why.startswith('beats it')
    assert findings.match_or_beat(findings.Comparison(0.05, 0.05, 8)).word == findings.AGREES   # level by TOST
    assert findings.match_or_beat(findings.Comparison(1.0, 0.1, 4)).word == findings.DISAGREES
    assert findings.match_or_beat(findings.Comparison(0.2, 0.3, 4)).word == findings.NO_DIFFERENCE


class FakeArm:
    """An arm from made-up error curves (one list per seed), with what the rows read of an arm."""

    def __init__(self, findings, curves, name='arm', **description):
        self.curves, self.name, self.epochs = curves, name, len(curves[0])
        last = findings.Sample([c[-1] for c in curves])
        self.values, self.n, self.mean, self.sd, self.spread = last.values, last.n, last.mean, last.sd, last.spread
        self.description = SimpleNamespace(**description)
        self.args = {}


def test_curves_still_moving_are_not_shown(findings):
    falling = FakeArm(findings, [[20, 18, 16, 14, 12.0], [20, 18, 16, 14, 12.1], [20, 18, 16, 14, 11.9]])
    flat = FakeArm(findings, [[20, 14, 14, 14, 14.0], [20, 14, 14, 14, 14.2], [20, 14, 14, 14, 13.8]])
    assert findings.flatness(falling).drift == pytest.approx(-2.0) and findings.flatness(falling).moving
    assert findings.flatness(flat).moving is False
    agrees = findings.Verdict(findings.AGREES, 'x')
    assert findings.at_scale(agrees, [flat, flat]) == agrees
    held = findings.at_scale(agrees, [flat, falling])
    assert held.word == findings.NOT_SHOWN and held.why.startswith('still improving (otherwise agrees')
    disagrees = findings.Verdict(findings.DISAGREES, 'x')
    assert findings.at_scale(disagrees, [falling]).word == findings.NOT_SHOWN   # whatever the sign
    rising = FakeArm(findings, [[10, 12, 14, 16, 18.0], [10, 12, 14, 16, 18.1], [10, 12, 14, 16, 17.9]])
    assert findings.at_scale(agrees, [rising]).why.startswith('still moving')
    short = FakeArm(findings, [[20, 12.0], [20, 12.1]])
    assert findings.flatness(short).moving is None
    assert findings.at_scale(agrees, [short]).why.startswith('curves too short to tell')
    assert findings.curves_text([('a', flat)]) == 'flat'
    assert findings.curves_text([('a', falling), ('b', flat)]) == 'still improving: a -2.00/ep. (SE 0.06)'


def test_an_arm_outside_the_papers_range_is_no_disagreement(findings):
    def sw(width, density, err):
        return FakeArm(findings, [[err + 0.01 * i] * 5 for i in (-1, 0, 1)], family='SW-MLP', width=width,
                       density=density)
    part, c = findings._width_part('SW-MLP', [sw(1440, 0.1264, 10.0), sw(4096, 1 / 64, 12.0)], check_range=True)
    assert c.diff > 0 and findings.direction(c).word == findings.DISAGREES
    assert part.verdict.word == findings.OUTSIDE and 'm = 4096 (p = 1/64) outside' in part.verdict.why
    inside, _ = findings._width_part('SW-MLP', [sw(540, 0.9, 12.0), sw(1619, 0.1, 10.0)], check_range=True)
    assert inside.verdict.word == findings.AGREES


def test_a_claims_word_from_its_parts(findings):
    A, D, N, S, OUT, M = (findings.AGREES, findings.DISAGREES, findings.NO_DIFFERENCE, findings.NOT_SHOWN,
                        findings.OUTSIDE, findings.MEASURED)
    assert findings.overall([A, A, OUT, M]) == A
    assert findings.overall([A, N]) == findings.IN_PART
    assert findings.overall([A, S, D]) == D
    assert findings.overall([S, N, OUT]) == S
    assert findings.overall([OUT]) == OUT and findings.overall([N, M]) == N


def test_fig6_the_centre_against_the_ends(findings):
    def arm(c, s, err):
        return FakeArm(findings, [[err + 0.01 * i] * 5 for i in (-1, 0, 1)], name=f'c{c}', family='S-Mixer',
                       permutation=('normal',), dim=c, num_tokens=s)
    lowest_in_the_middle = [arm(16, 173, 14.0), arm(48, 83, 12.0), arm(173, 16, 15.0)]
    parts = [p.verdict.word for p, _ in findings.fig6_parts(lowest_in_the_middle)]
    assert parts == [findings.AGREES, findings.AGREES]
    lowest_at_an_end = [arm(16, 173, 11.0), arm(48, 83, 12.0), arm(173, 16, 15.0)]
    assert findings.fig6_parts(lowest_at_an_end)[0][0].verdict.word == findings.DISAGREES


def test_the_sw_mlp_row_judges_inside_the_papers_widths_and_sets_the_s_mixer_beside(findings, monkeypatch):
    """(b2): the SW-MLP's width comparison uses only C.4 (ii)'s widths; the widest S-Mixer of the same sweep (fixed
    before the runs, not the best) is compared with the widest of them, lower error the paper's side."""
    def sw(m, err):
        return FakeArm(findings, [[err + 0.01 * i] * 5 for i in (-1, 0, 1)], name=f'sw{m}', family='SW-MLP',
                       permutation=None, width=m, density=2 ** 18 / m ** 2 / 8)

    def mixer(err):
        return FakeArm(findings, [[err + 0.01 * i] * 5 for i in (-1, 0, 1)], name='c64', family='S-Mixer',
                       permutation=('normal',), dim=64, num_tokens=64, width=4096)
    monkeypatch.setattr(findings, '_has', lambda folder, name='epochs.csv': True)
    for s_mixer_err, word in ((10.0, findings.AGREES), (14.0, findings.DISAGREES)):
        narrow = FakeArm(findings, [[9.0 + 0.01 * i] * 5 for i in (-1, 0, 1)], name='c16', family='S-Mixer',
                         permutation=('normal',), dim=16, num_tokens=173, width=2768)  # the best, not the widest
        group = {a.name: a for a in (sw(540, 13.0), sw(1619, 12.0), sw(4096, 11.0), mixer(s_mixer_err), narrow)}
        monkeypatch.setattr(findings, 'arms', lambda folder, group=group: group)
        f = findings.finding_fig5_sw()
        assert [p.name for p in f.parts] == ['SW-MLP: m = 1619 − m = 540',
                                             'S-Mixer C = 64, S = 64 (m = 4096) − SW-MLP m = 1619']
        assert [p.verdict.word for p in f.parts] == [findings.AGREES, word]
        assert f.parts[1].difference.startswith(f'{s_mixer_err - 12.0:+.2f} [')


def test_experiments_not_yet_run_say_so_and_make_up_no_number(findings, tmp_path, monkeypatch):
    monkeypatch.setattr(findings, 'HERE', tmp_path / 'fashion_mnist')
    every = findings.all_findings()
    assert {f.word for f in every} == {findings.NOT_RUN}
    assert all(f.number == '—' and not f.parts and f.sentence.startswith('Not yet run: ') for f in every)
    page = findings.render(every)
    assert '| a1 | RP S-Mixer matches or beats normal (S = C = 64, L = 8) | — | — | — | — | — | not yet run |' in page
    cells = findings.coverage_cells(every)
    assert cells['Fig. 6 (a–c)'] == 'e (`benchmarks/fashion_mnist/width_o18/`): not yet run'
    assert cells['Table S.3'].endswith('g2 (`benchmarks/speed/rp_cost/`): not yet run')


def test_the_module_constants_point_the_rows_at_their_folders(findings, tmp_path, monkeypatch):
    """A row reads the folder its constant names: the committed (a) results under another name."""
    monkeypatch.setattr(findings, 'HERE', tmp_path)
    shutil.copytree(SCRIPT.parent / 'rp_c4crop', tmp_path / 'elsewhere')
    findings.arms.cache_clear()
    monkeypatch.setattr(findings, 'FIG7_DIR', 'elsewhere')
    monkeypatch.setitem(findings.RAN_ON, 'elsewhere', 'somewhere')
    try:
        row = findings.finding_rp_s_mixer()
    finally:
        findings.arms.cache_clear()
    assert row.folder == 'fashion_mnist/elsewhere' and row.parts[0].difference.startswith('-0.19 [')


def test_the_coverage_column_is_added_once(findings):
    text = ('x\n\n| paper | command | test | committed |\n|---|---|---|---|\n| Fig. 5 | a | b | c |\n'
            '| Fig. 1 | a | b | c |\n')
    once = findings.with_coverage(text, {'Fig. 5': 'b1: agrees'})
    assert once.split('\n')[2:6] == [f'| paper | command | test | committed | {findings.COVERAGE_COLUMN} |',
                                     '|---|---|---|---|---|', '| Fig. 5 | a | b | c | b1: agrees |',
                                     '| Fig. 1 | a | b | c | none |']
    assert findings.with_coverage(once, {'Fig. 5': 'b1: agrees'}) == once


# ------------------------------------------------------------------ CKA and cost
def _cka(findings, **by_density):
    """{density: Sample} from keyword lists: p1=[…], p8=[…] for p = 1, 1/8 …"""
    return {1 / int(k[1:]): findings.Sample(v) for k, v in by_density.items()}


def test_cka_rows_group_seeds_by_density(findings):
    rows = [dict(density_b=d, mean_diagonal=v) for d, v in
            [('1', '0.40'), ('0.03125', '0.65'), ('1', '0.38'), ('0.03125', '0.67')]]
    cka = findings.cka_by_density(rows)
    assert sorted(cka) == [0.03125, 1.0]
    assert cka[1.0].values == [0.40, 0.38] and cka[0.03125].mean == pytest.approx(0.66)


def test_cka_parts(findings):
    inside = _cka(findings, p1=[0.40, 0.41, 0.39], p8=[0.40, 0.45, 0.35], p32=[0.70, 0.71, 0.69],
                  p1024=[0.60, 0.61, 0.59])
    parts = findings.cka_parts(inside, 1 / 32)
    assert [p.verdict.word for p in parts] == [findings.AGREES, findings.AGREES]
    assert parts[1].name == 'peak p = 1/32 − sparsest p = 1/1024'
    edge = findings.cka_parts(_cka(findings, p1=[0.40, 0.41, 0.39], p32=[0.60, 0.61, 0.59],
                                   p1024=[0.70, 0.71, 0.69]), 1 / 32)
    assert edge[1].verdict == (findings.NO_DIFFERENCE, 'no maximum inside the range seen')
    dense_best = findings.cka_parts(_cka(findings, p1=[0.80, 0.81, 0.79], p32=[0.60, 0.61, 0.59]), 1 / 32)
    assert [p.verdict.word for p in dense_best] == [findings.DISAGREES, findings.DISAGREES]


def test_densities_read_back_as_fractions(findings):
    assert [findings._density(p) for p in (1.0, 0.03125, 0.000976562, 0.1264)] == ['1', '1/32', '1/1024', '0.1264']


def _cost_json(path: Path, device: str, eager: list, compiled: list, per_epoch: tuple = ()) -> None:
    """An rp_cost.json with the given per-repetition RP / normal ratios per step (and per whole epoch)."""
    path.mkdir(parents=True)
    results = [dict(mode=mode, ratios=ratios, seconds_per_step=dict(normal=[0.1] * 3))
               for mode, ratios in (('eager', eager), ('compile', compiled))]
    for result, ratios in zip(results, per_epoch):
        result['epochs'] = dict(ratios=ratios)
    env = dict(device=device, **(dict(loader_workers=4) if per_epoch else {}))
    (path / 'rp_cost.json').write_text(json.dumps(dict(env=env, results=results)), encoding='utf-8')


def test_the_rp_cost_row_takes_its_word_from_the_gpu_per_epoch(findings, tmp_path, monkeypatch):
    """Table S.3 timed whole epochs on a GPU: a GPU's per-epoch ratios decide the word (its per-step ones when it
    has no epochs), each a t interval against the paper's ×1.054; the CPU's are listed, not judged."""
    monkeypatch.setattr(findings, 'HERE', tmp_path / 'fashion_mnist')
    _cost_json(tmp_path / 'speed' / 'rp_cost', 'cpu', [1.3, 1.31, 1.29], [0.97, 0.98, 0.96])
    cpu_only = findings.finding_rp_cost()
    assert cpu_only.word == findings.NOT_SHOWN and cpu_only.sentence.startswith('Measured on a CPU only')
    assert cpu_only.number == ('CPU, 1 thread, per step, eager: ×1.300 [1.275, 1.325]; CPU, 1 thread, per step, '
                               'compile: ×0.970 [0.945, 0.995] (not judged)')  # measured numbers, never '—'
    assert 'not CIFAR; one CPU thread, not a V100' in cpu_only.notes[0]  # only the machine that timed it
    assert 'no whole epoch timed' in cpu_only.notes[0] and 'loader' not in cpu_only.notes[0]
    _cost_json(tmp_path / 'speed' / 'rp_cost_gpu', 'NVIDIA H200', [1.7, 1.71, 1.69], [1.0, 1.01, 0.99])
    row = findings.finding_rp_cost()
    judged = {p.name: p.verdict.word for p in row.parts}
    assert judged == {'CPU, 1 thread, per step, eager': findings.MEASURED,
                      'CPU, 1 thread, per step, compile': findings.MEASURED,
                      'H200, per step, eager': findings.DISAGREES, 'H200, per step, compile': findings.AGREES}
    assert row.word == findings.DISAGREES
    shutil.rmtree(tmp_path / 'speed' / 'rp_cost_gpu')
    _cost_json(tmp_path / 'speed' / 'rp_cost_gpu', 'NVIDIA H200', [1.7, 1.71, 1.69], [1.0, 1.01, 0.99],
               per_epoch=([1.0, 1.01, 0.99], [0.93, 0.94, 0.92]))
    row = findings.finding_rp_cost()
    assert row.word == findings.AGREES and row.sentence == 'Judged on the GPU per epoch: eager agrees; compile agrees.'
    assert row.number == 'eager ×1.000 [0.975, 1.025]; compile ×0.930 [0.905, 0.955]'
    assert '--device cuda' in row.command and row.command.count('` and `') == 1
    assert 'one CPU thread and an H200, not a V100' in row.notes[0] and "timm's loader" in row.notes[0]


def test_the_cka_control_judges_what_training_adds_to_the_curves_shape(findings):
    """(d2) reads two features of each seed's CKA-by-density curve: the gap of 1/C over dense and the fall from the
    highest point to the sparsest density; a flat untrained curve has no gap, a trained one that dips has one."""
    untrained = {'m_seed0': {1.0: 0.87, 1 / 32: 0.87, 1 / 1024: 0.73},
                 'm_seed1': {1.0: 0.88, 1 / 32: 0.87, 1 / 1024: 0.70}}
    trained = {'m_seed0': {1.0: 0.39, 1 / 32: 0.65, 1 / 1024: 0.60},
               'm_seed1': {1.0: 0.41, 1 / 32: 0.68, 1 / 1024: 0.63}}
    gap0, fall0 = findings.cka_shape(untrained, 1 / 32)
    gap1, fall1 = findings.cka_shape(trained, 1 / 32)
    assert gap0.values == pytest.approx([0.0, -0.01]) and fall0.values == pytest.approx([0.14, 0.18])
    assert gap1.values == pytest.approx([0.26, 0.27]) and fall1.values == pytest.approx([0.05, 0.05])
    rows = [dict(model_a='m_seed0', density_b='0.03125', mean_diagonal='0.65'),
            dict(model_a='m_seed0', density_b='1', mean_diagonal='0.39')]
    assert findings.cka_by_seed(rows) == {'m_seed0': {1 / 32: 0.65, 1.0: 0.39}}


def test_rows_trained_with_the_old_crop_say_so(findings):
    """The experiments committed before the recipes cropped as C.4 (rkrr at train.py's default scale, zoom up to
    x3.5) carry a note saying so; an experiment without a random crop (Fig. 2(d)'s shallow MLPs) does not."""
    assert findings.trained_with_old_crop('fashion_mnist/rp') and findings.trained_with_old_crop('fashion_mnist/fig5')
    assert not findings.trained_with_old_crop('fashion_mnist/fig2d')
    assert not findings.trained_with_old_crop('fashion_mnist/no_such_folder')
    noted = {f.key for f in findings.all_findings() if findings.OLD_CROP_NOTE in f.notes}
    assert 'd1' in noted and not {'a1', 'a2', 'b1', 'c'} & noted  # (a) and (b1) were run again with C.4's crop
    rows = {f.key: f for f in findings.all_findings()}  # ... and cite the old crop's runs, with their numbers
    assert [n for n in rows['a1'].notes if 'crop of before' in n and '`rp/`' in n and 'RP − normal -0.23 [' in n]
    assert [n for n in rows['a2'].notes if 'crop of before' in n and '`rp/`' in n and 'RP − normal -0.80 [' in n]
    assert [n for n in rows['b1'].notes if 'crop of before' in n and '`fig5/`' in n and
            'normal: m = 4096 − m = 1440 -1.24 [' in n and "SW-MLP: m = 4096 − m = 1440 +0.83 [" in n]
    # ... and what their reruns on this CPU found, counted from their reruns/seed0.csv
    assert rows['a1'].notes[1].endswith('`rp/` rerun with the code of this page on this CPU (seed 0): 4 arms, the '
                                        'first 1 of 15 epochs: 3 within spread, 1 OUTSIDE spread; 1 arm, all 15 '
                                        'epochs: 1 OUTSIDE spread.')
    assert rows['b1'].notes[1].endswith('`fig5/` rerun with the code of this page on this CPU (seed 0): 5 arms, the '
                                        'first 1 of 10 epochs: 4 within spread, 1 OUTSIDE spread; 1 arm not rerun.')


def test_no_note_names_a_deviation_that_is_none(findings):
    """A deviation from the paper is named only where there is one: no note reads "5 seeds, not 5"."""
    for f in findings.all_findings():
        for note in f.notes:
            assert not re.search(r'\b(\d+) (seeds|epochs), not \1\b', note), (f.key, note)


def test_a2_is_judged_on_its_longest_runs_and_cites_the_shorter(findings):
    """(a2) reads the 40-epoch runs; the recipe's 15-epoch runs and the old crop's stay in its notes, with numbers."""
    a2 = {f.key: f for f in findings.all_findings()}['a2']
    assert a2.folder == 'fashion_mnist/rp_mixer_40ep' and a2.epochs == '40 / 600'
    assert [n for n in a2.notes if n.startswith("The same arms at the recipe's 15 epochs (`rp_mixer_c4crop/`, "
                                                "5 seeds): RP 12.80 ± 0.22, normal 13.35 ± 0.18; RP − normal "
                                                "-0.55 [-0.84, -0.25], p = 0.003; still improving")]
    assert a2.seeds == '5 / 5'  # D.7's five: no deviation to name
    assert [n for n in a2.notes if n.startswith('Deviations from D.7:') and 'seeds, not' not in n and
            '40 epochs, not 600' in n]


def test_each_row_says_what_made_its_runs_as_recorded(findings):
    """A row on committed runs carries what their pkmixer_env.json recorded: what all share once, then each commit
    with its count of runs (uncommitted changes said); runs made before the record counted as not recorded."""
    rows = {f.key: f for f in findings.all_findings()}
    prefix = 'What made the runs, as recorded (pkmixer_env.json): '
    cpu = 'torch 2.14.1+cu130, timm 1.0.31, cpu (AMD EPYC), 1 thread'
    assert prefix + f'8 runs not recorded; {cpu}; timm-pkmixer 828ea03 (4 runs).' in rows['a1'].notes
    assert prefix + f'{cpu}; timm-pkmixer fbce4b3 (1 run), 4c347db (1 run), 828ea03 (10 runs).' in rows['b1'].notes
    assert [n for n in rows['b2'].notes if n.startswith(prefix) and '3d3e99d with uncommitted changes (2 runs)' in n]
    assert prefix + '21 runs not recorded.' in rows['d1'].notes
    assert not [n for f in rows.values() if f.key.startswith('g') for n in f.notes if n.startswith(prefix)]


def test_a_committed_rerun_is_cited_in_its_row(findings):
    """An experiment's reruns/seed*.csv (rerun.py's output) reaches its row's notes as one sentence."""
    for f in findings.all_findings():
        note = findings.rerun_note(f.folder)
        if note:
            assert note in f.notes and note.startswith(('Rerun with the code of this page (rerun.py, seed ',
                                                        'Rebuilt with the code of this page'))


_RERUN_COLUMNS = ('arm,run,seed,epochs_compared,verdict,top1_err,committed_top1_err,spread_min,spread_max,'
                  'spread_seeds,first_differing_epoch,max_abs_top1_diff,env')


def _experiment(folder: Path, runs: dict) -> None:
    """A made-up committed experiment: epochs.csv with `runs` (name → epochs)."""
    folder.mkdir(parents=True)
    lines = ['run,seed,epoch,eval_top1'] + [f'{name},0,{e},80.0' for name, n in runs.items() for e in range(n)]
    (folder / 'epochs.csv').write_text('\n'.join(lines) + '\n')


def test_the_reruns_table_lists_every_experiment_each_arm_and_what_was_not_rerun(findings, tmp_path):
    _experiment(tmp_path / 'exp_a', {'runs/a_seed0': 10, 'runs/b_seed0': 10, 'runs/c_seed0': 10, 'runs/d_seed0': 10})
    (tmp_path / 'exp_a' / 'reruns').mkdir()
    (tmp_path / 'exp_a' / 'reruns' / 'seed0.csv').write_text(
        _RERUN_COLUMNS + '\n'
        'a,runs/a_seed0,0,2,exact,14.0,14.0,13.5,14.2,0 1,,0.0,same\n'
        'b,runs/b_seed0,0,2,exact,13.0,13.0,12.5,13.2,0 1,,0.0,same\n'
        'c,runs/c_seed0,0,10,OUTSIDE spread,15.004,14.0,13.5,14.2,0 1,3,1.0,not recorded (committed)\n'
        'd,runs/d_seed0,0,0,not rerun,,,,,0 1,,,\n')
    _experiment(tmp_path / 'exp_b', {'runs/a_seed0': 5})
    (tmp_path / 'weights').mkdir()  # not an experiment: not listed
    table = findings.rerun_table(tmp_path)
    assert table[2:] == [
        '| `exp_a/` | a | 0 | 2 of 10 | exact | 14.00 / 14.00 [13.50, 14.20] | same |',
        '| `exp_a/` | b | 0 | 2 of 10 | exact | 13.00 / 13.00 [12.50, 13.20] | same |',
        '| `exp_a/` | c | 0 | 10 of 10 | OUTSIDE spread | 15.00 / 14.00 [13.50, 14.20] | not recorded (committed) |',
        '| `exp_a/` | d | 0 | — | not rerun | — | — |',
        '| `exp_b/` | — | — | — | not rerun | — | — |']
    rows = findings.reruns(tmp_path / 'exp_a')
    assert findings._rerun_counts(rows, findings.committed_epochs(tmp_path / 'exp_a')) == (
        '2 arms, the first 2 of 10 epochs: 2 exact; 1 arm, all 10 epochs: 1 OUTSIDE spread; 1 arm not rerun')


def test_a_rebuilt_cka_is_compared_pair_by_pair_with_the_committed_one(findings, tmp_path):
    folder = tmp_path / 'untrained'
    (folder / 'reruns').mkdir(parents=True)
    head = 'model_a,model_b,mean_diagonal\n'
    (folder / 'cka_summary.csv').write_text(head + 'm0,s1_0,0.864815\nm0,s2_0,0.865887\nm1,s1_1,0.5\n')
    (folder / 'reruns' / 'seed0_cka_summary.csv').write_text(head + 'm0,s1_0,0.864815\nm0,s2_0,0.865887\n')
    assert findings.cka_rerun(folder) == (2, 2, 0.0)
    assert findings.rerun_table(tmp_path)[2:] == [
        '| `untrained/` | 2 CKA pairs rebuilt | — | untrained | exact | — | — |']
    (folder / 'reruns' / 'seed0_cka_summary.csv').write_text(head + 'm0,s1_0,0.864815\nm0,s2_0,0.865890\n')
    assert findings.rerun_table(tmp_path)[2] == (
        '| `untrained/` | 2 CKA pairs rebuilt | — | untrained | 1 of 2 pairs differ (largest 3e-06) | — | — |')
    (folder / 'reruns' / 'seed0_cka_summary.csv').write_text(head + 'm9,s1_9,0.1\n')
    with pytest.raises(ValueError, match=r"untrained: rerun pairs not in the committed cka_summary.csv: \[\('m9'"):
        findings.cka_rerun(folder)


def test_the_cost_rows_read_their_own_models_results(findings):
    """rp_cost.json holds the S-Mixer's and Table S.3's Mixer's timings side by side, at 1 and 2 threads: g1 reads
    the S-Mixer's alone, g2 Table S.3's alone, each at one CPU thread (the 2-thread runs are not judged or shown)."""
    results = [dict(mode='eager', ratios=[1.3, 1.2], model='s_mixer', threads=1),
               dict(mode='eager', ratios=[2.0, 2.1], model='s_mixer', threads=2),
               dict(mode='eager', ratios=[1.04, 1.03], model='table_s3', threads=1),
               dict(mode='compile', ratios=[0.9, 1.0])]  # a file older than the fields: the S-Mixer, one thread
    s_mixer = findings._cost_ratios(results, 'step', 's_mixer')
    assert {k: v.values for k, v in s_mixer.items()} == {(1, 'eager'): [1.3, 1.2], (1, 'compile'): [0.9, 1.0]}
    assert {k: v.values for k, v in findings._cost_ratios(results, 'step', 'table_s3').items()} == {
        (1, 'eager'): [1.04, 1.03]}


def _cka_untrained():
    spec = importlib.util.spec_from_file_location('cka_untrained', SCRIPT.parent / 'cka_untrained.py')
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_cka_untrained_builds_each_committed_run_as_train_py_seeds_it(tmp_path):
    """(d2)'s control: a committed SW-MLP run of fig2 rebuilt at initialisation is the model its recorded arguments
    give under train.py's seeding (a one-channel, ten-class SW-MLP of m = 1024 and its run's density), as a run
    folder that `pkmixer analyze cka` reads; another seed gives other weights."""
    import torch

    from timm_pkmixer.runs.epochs_csv import read_epochs_csv
    module = _cka_untrained()
    run = next(r for r in read_epochs_csv(SCRIPT.parent / 'fig2' / 'epochs.csv')
               if Path(r.name).name == 'sw_mlp_p0.03125_m1024_seed1')
    folder = module.build_initial(dict(run.args), tmp_path / 'a')
    state = torch.load(folder / 'last.pth.tar', map_location='cpu', weights_only=True)['state_dict']
    d = module.timm.create_model(run.args['model'], in_chans=1, num_classes=10,
                                 **run.args['model_kwargs']).describe()
    assert (d.width, d.density) == (1024, 0.03125) and state['head.weight'].shape == (10, 1024)
    again = module.build_initial(dict(run.args), tmp_path / 'b')
    state_b = torch.load(again / 'last.pth.tar', map_location='cpu', weights_only=True)['state_dict']
    assert all(torch.equal(state[k], state_b[k]) for k in state)
    other = module.build_initial({**run.args, 'seed': 2}, tmp_path / 'c')
    state_c = torch.load(other / 'last.pth.tar', map_location='cpu', weights_only=True)['state_dict']
    assert not all(torch.equal(state[k], state_c[k]) for k in state if state[k].is_floating_point())


def test_cka_untrained_refuses_a_seed_the_experiment_lacks():
    import subprocess
    import sys
    proc = subprocess.run([sys.executable, str(SCRIPT.parent / 'cka_untrained.py'), '--data-dir', 'nowhere',
                           '--out-dir', 'nowhere', '--seeds', '0', '7'], capture_output=True, text=True)
    assert proc.returncode == 2
    assert 'seeds [7] are not in ' in proc.stderr and '(its seeds: [0, 1, 2])' in proc.stderr
