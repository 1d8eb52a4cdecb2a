"""Verdicts as an instrument (timm_pkmixer/reports/verdicts.py, sweeps/claims.py): the statistics are scipy's, the
rules give the word they say on made-up sweeps of every claim kind, the flatness rule survives the three weak spots
of the rule it replaced, and `pkmixer report` / `pkmixer status` say the verdict."""
import json
import math
import statistics
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from timm_pkmixer.cli import main as pkmixer
from timm_pkmixer.errors import InvalidArgumentError
from timm_pkmixer.reports.report import build_report, write_report
from timm_pkmixer.reports.verdicts import (
    AGREES,
    DISAGREES,
    INCONCLUSIVE,
    MEASURED,
    NO_DIFFERENCE,
    NOT_SHOWN,
    Arm,
    Estimate,
    Sample,
    contrast,
    design_se,
    flatness,
    gap_trend,
    judge,
    minimum_detectable_effect,
    pooled_sd,
    trend,
    welch,
)
from timm_pkmixer.sweeps.claims import Claim, parse_claim
from timm_pkmixer.sweeps.sweep_tables import FIGURES

from test_report import run_folder

ROOT = Path(__file__).resolve().parent.parent
RP, NORMAL = {'permutation': 'random'}, {'permutation': 'normal'}


# ---------------------------------------------------------------------------------------------- the statistics
def test_welch_is_scipys_ttest_ind_with_its_interval():
    a, b = Sample([12.1, 12.4, 11.9, 12.3]), Sample([13.0, 12.6, 13.4])
    e = welch(a, b)
    ref = stats.ttest_ind(a.values, b.values, equal_var=False)
    lo, hi = ref.confidence_interval(0.95)
    assert e.value == pytest.approx(a.mean - b.mean, abs=1e-12)
    assert e.p == pytest.approx(ref.pvalue, rel=1e-10)
    assert e.interval() == pytest.approx((lo, hi), rel=1e-10)
    assert e.df == pytest.approx(ref.df, rel=1e-12)
    # a contrast of weights (1, −1) is the same Welch estimate
    c = contrast([(1.0, a), (-1.0, b)])
    assert (c.value, c.se, c.df) == pytest.approx((e.value, e.se, e.df), rel=1e-12)


def test_trend_is_linregress_and_the_gap_trend_the_interaction():
    xs, ys = [1, 1, 2, 2, 3, 3], [5.0, 5.2, 4.1, 4.4, 3.2, 3.0]
    e, ref = trend(xs, ys), stats.linregress(xs, ys)
    assert (e.value, e.se, e.df) == pytest.approx((ref.slope, ref.stderr, 4.0), rel=1e-12)
    # the gap's slope is the difference of the two arms' own slopes, its se the interaction's of one fit
    xa, ya = [1, 1, 2, 2, 3, 3], [6.0, 6.1, 5.0, 5.3, 4.9, 4.6]
    g = gap_trend(xs + xa, ys + ya, [False] * 6 + [True] * 6)
    assert g.value == pytest.approx(stats.linregress(xa, ya).slope - ref.slope, abs=1e-12)
    X = np.column_stack([np.ones(12), xs + xa, [0] * 6 + [1] * 6, [0] * 6 + xa])
    resid = np.array(ys + ya) - X @ np.linalg.lstsq(X, np.array(ys + ya), rcond=None)[0]
    se = math.sqrt(resid @ resid / 8 * np.linalg.inv(X.T @ X)[3, 3])
    assert (g.se, g.df) == pytest.approx((se, 8.0), rel=1e-10)


def test_tost_is_the_larger_one_sided_p():
    e = Estimate(0.1, 0.15, 6.0)
    assert e.tost_p(0.5) == pytest.approx(max(stats.t.sf((0.1 + 0.5) / 0.15, 6), stats.t.sf((0.5 - 0.1) / 0.15, 6)))


def test_the_minimum_detectable_effect_has_the_power_it_says():
    se, df = 0.127, 6.0
    mde = minimum_detectable_effect(se, df)
    crit = stats.t.ppf(0.975, df)
    power = stats.nct.sf(crit, df, mde / se) + stats.nct.cdf(-crit, df, mde / se)
    assert power == pytest.approx(0.8, abs=1e-9)
    # the pre-registered Fig. 6 design: SD 0.18, 3 seeds an arm, weights (1, −½, −½): 0.43 points
    assert minimum_detectable_effect(design_se([(1, 3), (-0.5, 3), (-0.5, 3)], 0.18), 6) == pytest.approx(0.429,
                                                                                                            abs=5e-4)
    # with many degrees of freedom it is the normal approximation (z 0.975 + z 0.8) · se
    assert minimum_detectable_effect(1.0, 1e7) == pytest.approx(stats.norm.ppf(0.975) + stats.norm.ppf(0.8), rel=1e-4)
    assert math.isnan(minimum_detectable_effect(0.0, 6))
    # one degree of freedom (one arm of two seeds, the others of one: a design part-way through its runs): the
    # bracket reaches effects where scipy's nct.cdf of the far tail is NaN; the MDE is still found, with its power
    mde = minimum_detectable_effect(0.05, 1.0)
    crit = stats.t.ppf(0.975, 1.0)
    assert stats.nct.sf(crit, 1.0, mde / 0.05) == pytest.approx(0.8, abs=1e-6) and mde == pytest.approx(0.817, abs=1e-3)


def test_the_pooled_sd_ignores_single_seeds_and_is_not_zero_for_one_agreeing_arm():
    sd, df = pooled_sd([Sample([1.0, 1.0, 1.0]), Sample([2.0, 2.2, 1.8]), Sample([5.0])])
    assert df == 4 and sd == pytest.approx(math.sqrt((0 + 2 * 0.04) / 4))
    assert pooled_sd([Sample([3.0])]) == (pytest.approx(float('nan'), nan_ok=True), 0.0)


# ---------------------------------------------------------------------------------------------- the flatness rule
T = 24  # third quarter: epochs 13–18 (1-based)


def _arm(curve, seeds=3, spread=0.1, final=13.0):
    """An arm whose runs follow `curve(e)` (extra error at 0-based epoch e) and end at final ± spread."""
    finals = [final + spread * (i - (seeds - 1) / 2) for i in range(seeds)]
    return Arm('x', finals, [[f + curve(e) for e in range(T)] for f in finals], list(range(T)), T)


def _cosine_lr(e):
    return 0.5 * (1 + math.cos(math.pi * e / T))


def test_flat_falling_and_identical_seeds_made_up_curves():
    flat = _arm(lambda e: 0.0)
    falling = _arm(lambda e: 0.5 * (T - 1 - e))
    assert flatness(flat, 0.1).moving is False
    f = flatness(falling, 0.1)
    assert f.moving is True and f.slope == pytest.approx(-0.5) and f.window == (13, 18) and f.points == 6
    # one arm's seeds agree exactly: the scale is pooled over the claim's arms, so its curve is still judged
    same = _arm(lambda e: 0.02 * (T - 1 - e), spread=0.0)
    scale, _ = pooled_sd([same, _arm(lambda e: 0.0, spread=0.2)])
    assert scale > 0 and flatness(same, scale).moving is False
    # every seed of every arm agrees: nothing to judge the curve by
    assert flatness(same, 0.0).moving is None and 'every seed agrees' in flatness(same, 0.0).why_not_told()
    assert 'one seed an arm' in flatness(same, math.nan).why_not_told()


def test_a_cosine_annealed_curve_still_falling_before_the_annealing_reads_moving():
    """The error falls in proportion to the learning rate left (a model far from converged): its last three epochs
    barely move because the cosine's lr is ~0 there, which the old rule read as flat; the third quarter does not."""
    total = sum(_cosine_lr(e) for e in range(T))
    annealed = _arm(lambda e: 6.0 * sum(_cosine_lr(k) for k in range(e + 1, T)) / total)
    mean = [statistics.fmean(v) for v in zip(*annealed.curves)]
    old_drift = abs(mean[-1] - mean[-4]) / 3
    assert old_drift < 0.1 / math.sqrt(3)            # the old rule: drift below the last epoch's SE → "flat"
    assert flatness(annealed, 0.1).moving is True    # the new one: still improving
    # a curve that levelled off before the annealing and only settles in the last quarter reads flat
    settled = _arm(lambda e: 0.0 if e < 3 * T // 4 else 0.3 * (T - 1 - e) / (T // 4))
    assert flatness(settled, 0.1).moving is False


def test_more_seeds_do_not_make_a_curve_move():
    curve = lambda e: 0.05 * (T - 1 - e)  # noqa: E731 — 0.05 points an epoch, under the seeds' spread
    few, many = _arm(curve, seeds=2, spread=0.2), _arm(curve, seeds=20, spread=0.2)
    assert flatness(few, pooled_sd([few])[0]).moving is False
    assert flatness(many, pooled_sd([many])[0]).moving is False


def test_too_short_a_schedule_cannot_be_told():
    short = Arm('x', [1.0, 1.1], [[1.0] * 8, [1.1] * 8], list(range(8)), 8)  # third quarter: epochs 5–6
    f = flatness(short, 0.1)
    assert f.moving is None and f.points == 2 and 'too few to tell' in f.why_not_told()


# ---------------------------------------------------------------------------------------------- made-up sweeps
EPOCHS = 12  # third quarter: epochs 7–9


def _runs(root, name, finals, curve=None, **model_kwargs):
    """Runs of one arm ending at `finals` (% error), following `curve` (extra error at 0-based epoch e)."""
    curve = curve or (lambda e: 0.0)
    for seed, final in enumerate(finals):
        top1 = [100. - (final + curve(e)) for e in range(EPOCHS)]
        run_folder(root, f'{name}_seed{seed}', seed=seed, top1=top1, epochs=EPOCHS, model_kwargs=model_kwargs)


def _verdict(root, claim):
    report = build_report([str(root)], claims=[parse_claim(claim)])
    return judge(report.claims[0], report.points)


def _direction(**kw):
    return dict(name='rp-lower', kind='direction', a=RP, b=NORMAL, expect='lower', says='RP ends lower', **kw)


@pytest.mark.parametrize('rp,normal,word', [
    ([12.0, 12.1, 11.9], [13.0, 13.1, 12.9], AGREES),
    ([13.0, 13.1, 12.9], [12.0, 12.1, 11.9], DISAGREES),
    ([12.0, 12.4, 11.6], [12.1, 12.5, 11.7], NO_DIFFERENCE),
])
def test_a_direction_claim_agrees_disagrees_or_shows_no_difference_with_its_mde(tmp_path, rp, normal, word):
    _runs(tmp_path, 'rp', rp, permutation='random')
    _runs(tmp_path, 'normal', normal, permutation='normal')
    v = _verdict(tmp_path, _direction())
    (c,) = v.comparisons
    assert v.word == word == c.verdict.word
    e = welch(Sample(rp), Sample(normal))
    assert c.estimate.value == pytest.approx(e.value) and c.estimate.p == pytest.approx(e.p)
    sd, df = pooled_sd([Sample(rp), Sample(normal)])
    mde = minimum_detectable_effect(design_se([(1, 3), (-1, 3)], sd), df)
    assert c.mde == pytest.approx(mde)
    assert (f'the design could have detected {mde:.2f} at 80 % power' in v.sentence()) == (word == NO_DIFFERENCE)
    assert c.curves_text() == 'flat'


@pytest.mark.parametrize('rp,word,why', [
    ([12.02, 12.07, 11.97], AGREES, 'level within ±0.5 (TOST p < 0.001)'),
    ([12.45, 12.6, 12.3], INCONCLUSIVE, 'apart, but not beyond ±0.5; level not shown'),
    ([13.0, 13.05, 12.95], DISAGREES, 'apart beyond the ±0.5 margin'),
])
def test_a_level_claim_by_tost(tmp_path, rp, word, why):
    _runs(tmp_path, 'rp', rp, permutation='random')
    _runs(tmp_path, 'normal', [12.0, 12.05, 11.95], permutation='normal')
    v = _verdict(tmp_path, dict(name='level', kind='level', a=RP, b=NORMAL, says='level'))
    (c,) = v.comparisons
    assert c.verdict.word == word and why in c.verdict.why
    assert c.tost_p == pytest.approx(c.estimate.tost_p(0.5))


def test_curves_still_falling_are_not_shown_at_this_scale(tmp_path):
    falling = lambda e: 0.4 * (EPOCHS - 1 - e)  # noqa: E731
    _runs(tmp_path, 'rp', [12.0, 12.1, 11.9], falling, permutation='random')
    _runs(tmp_path, 'normal', [13.0, 13.1, 12.9], falling, permutation='normal')
    v = _verdict(tmp_path, _direction())
    (c,) = v.comparisons
    assert v.word == NOT_SHOWN
    assert c.verdict.why.startswith('still improving (otherwise agrees: ')
    assert 'still improving: -0.40/ep. over epochs 7–9 (seed SD 0.10)' in c.curves_text()
    assert v.sentence().endswith('not shown at this scale: the curves were still falling.')


def test_identical_seeds_in_one_arm_are_judged_in_both_none(tmp_path):
    _runs(tmp_path, 'rp', [12.0, 12.0, 12.0], permutation='random')
    _runs(tmp_path, 'normal', [13.0, 13.1, 12.9], permutation='normal')
    assert _verdict(tmp_path, _direction()).word == AGREES
    other = tmp_path / 'both'
    _runs(other, 'rp', [12.0, 12.0, 12.0], permutation='random')
    _runs(other, 'normal', [13.0, 13.0, 13.0], permutation='normal')
    (c,) = _verdict(other, _direction()).comparisons
    assert c.verdict.word == INCONCLUSIVE and 'no spread between seeds: no interval' in c.verdict.why


def _width(root, finals_by_c, permutation='normal'):
    """S-Mixers at C.4's Ω = 2^18 pairs (C, S): (16, 173), (64, 64), (173, 16)."""
    for (c, s), finals in zip(((16, 173), (64, 64), (173, 16)), finals_by_c):
        _runs(root, f'w_c{c}_{permutation}', finals, num_tokens=s, embed_dim=c, permutation=permutation)


FIG6 = {c.name: c.as_dict() for c in FIGURES['fig6-stl10'].claims}


@pytest.mark.parametrize('centre,word', [(12.5, AGREES), (13.6, DISAGREES)])
def test_a_shape_claim_both_ways(tmp_path, centre, word):
    ends = ([13.2, 13.3, 13.1], [13.0, 13.1, 12.9])
    _width(tmp_path, (ends[0], [centre - 0.1, centre, centre + 0.1], ends[1]))
    v = _verdict(tmp_path, FIG6['lowest-near-c-equals-s'])
    (c,) = v.comparisons
    assert v.word == word
    assert c.label == 'normal: err(C = 64) − mean(err(C = 16), err(C = 173))'
    assert c.estimate.value == pytest.approx(centre - (13.2 + 13.0) / 2)
    ref = contrast([(1, Sample([centre - 0.1, centre, centre + 0.1])), (-0.5, Sample(ends[0])),
                    (-0.5, Sample(ends[1]))])
    assert (c.estimate.se, c.estimate.df) == pytest.approx((ref.se, ref.df))


def test_a_trend_judged_and_one_only_measured(tmp_path):
    _width(tmp_path, ([13.0, 13.1, 12.9], [13.4, 13.5, 13.3], [13.8, 13.9, 13.7]))
    rises = dict(FIG6['no-trend-over-c'], name='rises', expect='rises')
    v = _verdict(tmp_path, rises)
    (c,) = v.comparisons
    xs = [math.log2(c_) for c_ in (16, 16, 16, 64, 64, 64, 173, 173, 173)]
    ys = [13.0, 13.1, 12.9, 13.4, 13.5, 13.3, 13.8, 13.9, 13.7]
    assert c.estimate.value == pytest.approx(stats.linregress(xs, ys).slope)
    assert v.word == AGREES and c.label == 'normal: slope of the error per doubling of C'
    measured = _verdict(tmp_path, FIG6['no-trend-over-c'])
    assert measured.word == MEASURED and measured.comparisons[0].verdict.why.startswith('the paper predicts no trend')
    assert measured.sentence().endswith('measured, not judged.')


def test_a_claim_judged_at_the_deepest_and_the_gap_trend(tmp_path):
    for L, gap in ((2, 1.0), (4, 0.0)):
        _runs(tmp_path, f'n{L}', [13.0, 13.1, 12.9], num_blocks=L, permutation='normal')
        _runs(tmp_path, f'r{L}', [13.0 + gap, 13.1 + gap, 12.9 + gap], num_blocks=L, permutation='random')
    claims = {c.name: c.as_dict() for c in FIGURES['fig7'].claims}
    deep = _verdict(tmp_path, claims['rp-matches-or-beats-normal-when-deep'])
    assert [c.label for c in deep.comparisons] == ['L = 2: RP − normal', 'L = 4: RP − normal']
    assert deep.comparisons[0].verdict == (MEASURED, 'judged at num_blocks largest, not here')
    assert deep.comparisons[1].verdict.word == AGREES and deep.word == AGREES  # level by TOST at L = 4
    gap = _verdict(tmp_path, claims['rp-gap-shrinks-with-depth'])
    assert gap.comparisons[0].estimate.value == pytest.approx(-0.5)  # 1.0 points at L = 2, 0 at L = 4
    assert gap.word == AGREES


def test_a_claim_whose_arms_are_missing_is_not_yet_run_and_an_ambiguous_one_cannot_be_judged(tmp_path):
    _runs(tmp_path, 'normal', [13.0, 13.1], permutation='normal')
    missing = _verdict(tmp_path, _direction())
    assert missing.word == 'not yet run' and 'no arms of the report give a and b' in missing.sentence()
    _runs(tmp_path, 'normal4', [13.0, 13.1], permutation='normal', num_blocks=4)
    with pytest.raises(InvalidArgumentError, match=r"claim 'rp-lower': 2 arms match \{'permutation': 'normal'\}"):
        _verdict(tmp_path, dict(_direction(), a={'num_blocks': 4}))


# ---------------------------------------------------------------------------------------------- claims as data
@pytest.mark.parametrize('data,message', [
    ('{', 'a claim must be a JSON object'),
    (dict(kind='direction'), 'a claim needs a name'),
    (dict(name='x', kind='nope', says='s'), "claim 'x': kind must be one of direction, level"),
    (dict(name='x', kind='direction', says='s', a=RP), "claim 'x': a direction claim needs b"),
    (dict(name='x', kind='direction', says='s', a=RP, b=NORMAL, expect='down'),
     "claim 'x': expect of a direction claim must be lower or higher, got 'down'"),
    (dict(name='x', kind='direction', says='s', a={'colour': 'red'}, b=NORMAL, expect='lower'),
     "claim 'x': a: 'colour' is not a feature of an arm"),
    (dict(name='x', kind='trend', says='s', factor='permutation', expect='falls'),
     "claim 'x': factor must be a numeric feature"),
    (dict(name='x', kind='level', says='s', a=RP, b=NORMAL, margin=0), "claim 'x': margin must be a positive"),
    (dict(name='x', kind='level', says='s', a=RP, b=NORMAL, typo=1), "claim 'x': unknown key 'typo'"),
])
def test_a_malformed_claim_is_refused_by_name(data, message):
    with pytest.raises(InvalidArgumentError, match=message.replace('(', r'\(').replace(')', r'\)')):
        parse_claim(json.dumps(data) if isinstance(data, dict) else data)


def test_every_packaged_figure_claim_round_trips_and_the_listed_figures_declare_one():
    for fig in FIGURES.values():
        for claim in fig.claims:
            assert parse_claim(claim.as_dict()) == claim
    for key in ('fig2d', 'fig5', 'fig6-cifar10', 'fig6-cifar100', 'fig6-stl10', 'fig6d', 'fig7', 'figS4', 'figS8'):
        assert FIGURES[key].claims, key
    assert isinstance(FIGURES['fig6-stl10'].claims[0], Claim)


def test_the_sweep_writes_its_figures_claims_and_the_users_before_the_runs(tmp_path, capsys):
    mine = dict(name='mine', kind='direction', a={'embed_dim': 16}, b={'embed_dim': 173}, expect='lower', says='s')
    assert pkmixer(['sweep', 'fashion_mnist/s_mixer_fig6', '--dims', '16', '64', '173', '--permutation', 'normal',
                    '--model-kwargs', 'num_blocks=8', '--seeds', '0', '--out-dir', str(tmp_path / 'sw'),
                    '--claim', json.dumps(mine)]) == 0
    record = json.loads((tmp_path / 'sw' / 'sweep.json').read_text())
    names = [c['name'] for c in record['sweeps'][0]['claims']]
    assert names == ['lowest-near-c-equals-s', 'no-trend-over-c', 'mine']
    explained = (tmp_path / 'sw' / 'SWEEP.md').read_text()
    assert '- **lowest-near-c-equals-s** (lowest_at, Fig. 6, §4.2, eq. 15)' in explained
    # a name the figure already uses is refused before anything is written
    clash = dict(mine, name='no-trend-over-c')
    assert pkmixer(['sweep', 'fashion_mnist/s_mixer_fig6', '--dims', '16', '64', '173', '--seeds', '0',
                    '--out-dir', str(tmp_path / 'sw2'), '--claim', json.dumps(clash)]) == 2
    assert "--claim: 'no-trend-over-c' is already declared by fig6-stl10: give yours another name" in \
        capsys.readouterr().err
    assert not (tmp_path / 'sw2').exists()


# ---------------------------------------------------------------------------------------------- the report, status
def test_the_report_writes_the_verdict_first_and_verdict_json(tmp_path, capsys):
    _runs(tmp_path / 'runs', 'rp', [12.0, 12.1, 11.9], permutation='random')
    _runs(tmp_path / 'runs', 'normal', [13.0, 13.1, 12.9], permutation='normal')
    assert pkmixer(['report', str(tmp_path / 'runs'), '--out-dir', str(tmp_path / 'out'), '--no-figures',
                    '--claim', json.dumps(_direction())]) == 0
    out = capsys.readouterr().out
    assert 'verdict: agrees — rp-lower: RP − normal -1.00 [-1.23, -0.77], p < 0.001: agrees.' in out
    md = (tmp_path / 'out' / 'report.md').read_text()
    assert md.index('## Verdict') < md.index('## Runs')
    assert '| rp-lower | RP − normal | RP 12.00 ± 0.10; normal 13.00 ± 0.10 | -1.00 [-1.23, -0.77], p < 0.001 |' in md
    assert 'Claims: 1 given to the report (declared after the runs).' in md
    record = json.loads((tmp_path / 'out' / 'verdict.json').read_text())
    (claim,) = record['claims']
    assert claim['word'] == AGREES and claim['comparisons'][0]['ci_low'] == pytest.approx(-1.2267, abs=1e-4)
    assert record['scipy'] == __import__('scipy').__version__ and 'judged with scipy' in md
    # the same claim in a sweep.json beside the epochs.csv is read back from it, as declared before the runs
    (tmp_path / 'out' / 'sweep.json').write_text(json.dumps({'sweeps': [{'claims': [_direction()]}]}))
    report = build_report([str(tmp_path / 'out' / 'epochs.csv')])
    assert [c.name for c in report.claims] == ['rp-lower']
    assert report.claims_declared == ['`sweep.json` of `out/` (written by `pkmixer sweep`, before the runs)']


def test_a_report_without_a_claim_says_how_to_declare_one(tmp_path):
    _runs(tmp_path / 'runs', 'normal', [13.0, 13.1], permutation='normal')
    write_report(build_report([str(tmp_path / 'runs')]), str(tmp_path / 'out'), figures=False)
    md = (tmp_path / 'out' / 'report.md').read_text()
    assert 'No claim is declared for these runs, so nothing is judged.' in md and '--claim JSON' in md
    assert json.loads((tmp_path / 'out' / 'verdict.json').read_text())['claims'] == []


def test_the_report_of_width_o18_states_the_fig6_contrast_and_trend(tmp_path, capsys):
    claims = [json.dumps(c) for c in FIG6.values()]
    assert pkmixer(['report', str(ROOT / 'benchmarks/fashion_mnist/width_o18/epochs.csv'), '--no-figures',
                    '--out-dir', str(tmp_path), *[x for c in claims for x in ('--claim', c)]]) == 0
    out = capsys.readouterr().out
    assert ('lowest-near-c-equals-s: normal: err(C = 64) − mean(err(C = 16), err(C = 173)) +0.06 [-0.16, +0.28], '
            'p = 0.35 (the design could have detected 0.31 at 80 % power)') in out
    assert 'no-trend-over-c: normal: slope of the error per doubling of C +0.13 [+0.03, +0.23], p = 0.01' in out


def test_no_hand_written_distribution_function_is_left():
    """The t quantile and p come from scipy: no incomplete beta, no bisection of a t tail, anywhere."""
    hits = []
    for path in list(ROOT.glob('timm_pkmixer/**/*.py')) + list(ROOT.glob('benchmarks/**/*.py')):
        text = path.read_text(encoding='utf-8')
        for name in ('def betainc', 'def t_sf', 'def t_quantile', '_beta_fraction', 'def normal_cdf', 'def erf'):
            if name in text:
                hits.append(f'{path.relative_to(ROOT)}: {name}')
    assert hits == []


def _doc_commands(marker: str) -> str:
    """The shell command of docs/research_tools.md's "Claims and verdicts" section that starts with `marker`, its
    continuation lines joined as the shell joins them."""
    import re
    text = (ROOT / 'docs' / 'research_tools.md').read_text(encoding='utf-8')
    section = text.split('## Claims and verdicts', 1)[1].split('\n## ', 1)[0]
    start = section.index(marker)
    command = section[start:section.index("}'", start) + 2]
    return re.sub(r'\\\n\s*', ' ', command)


def test_the_docs_loop_runs_as_written_and_its_verdict_is_the_reports(tmp_path, capsys, monkeypatch):
    import shlex
    monkeypatch.chdir(tmp_path)
    sweep = shlex.split(_doc_commands('pkmixer sweep fashion_mnist/s_mixer_fig7'))
    assert pkmixer(sweep[1:]) == 0
    record = json.loads((tmp_path / 'fm_fig7' / 'sweep.json').read_text())
    assert [c['name'] for c in record['sweeps'][0]['claims']] == ['rp-matches-or-beats-normal-when-deep',
                                                                   'rp-gap-shrinks-with-depth', 'rp-wins-at-8']
    report = shlex.split(_doc_commands('pkmixer report benchmarks/fashion_mnist/fig2d/epochs.csv').replace(
        'benchmarks/', str(ROOT / 'benchmarks') + '/').replace('OUT', str(tmp_path / 'out')))
    capsys.readouterr()
    assert pkmixer(report[1:] + ['--no-figures']) == 0
    out = capsys.readouterr().out
    doc = (ROOT / 'docs' / 'research_tools.md').read_text(encoding='utf-8')
    verdict = next(line for line in out.splitlines() if line.startswith('verdict: '))
    assert verdict in doc
    md = (tmp_path / 'out' / 'report.md').read_text()
    row = next(line for line in md.splitlines() if line.startswith('| kron-not-worse |'))
    assert row in doc


def test_status_says_the_verdict_of_a_finished_reported_sweep(tmp_path):
    import os
    from types import SimpleNamespace

    from timm_pkmixer.cli.status import verdict_lines
    folder = tmp_path / 'sweep'
    runs = [folder / 'runs' / n for n in ('a', 'b')]
    for r in runs:
        r.mkdir(parents=True)
        (r / 'summary.csv').write_text('epoch\n0\n')
    statuses = [SimpleNamespace(state='finished', run_dir=str(runs[0])), SimpleNamespace(state='running',
                                                                                          run_dir=str(runs[1]))]
    assert verdict_lines(folder, statuses) == []  # hand-written recipes: no sweep.json, nothing declared
    (folder / 'sweep.json').write_text(json.dumps({'sweeps': [{'claims': [_direction()]}]}))
    assert verdict_lines(folder, statuses) == [
        f'verdict: 1 claim declared (rp-lower): judged by `pkmixer report {folder}` once every run has finished '
        '(1 of 2 have)']
    statuses[1].state = 'finished'
    judges = [f'verdict: every run has finished: `pkmixer report {folder}` judges the 1 claim declared (rp-lower)']
    assert verdict_lines(folder, statuses) == judges
    (folder / 'report').mkdir()
    (folder / 'report' / 'verdict.json').write_text(json.dumps({'claims': [{'word': 'agrees', 'sentence': 's.'}]}))
    assert verdict_lines(folder, statuses) == ['verdict: agrees — s.']
    later = (folder / 'report' / 'verdict.json').stat().st_mtime + 10
    os.utime(runs[1] / 'summary.csv', (later, later))  # a run written after the report: the report is old
    assert verdict_lines(folder, statuses) == judges
