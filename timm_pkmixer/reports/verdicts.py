"""Verdicts: a sweep's declared claims (:mod:`timm_pkmixer.sweeps.claims`) judged on its runs, by rules fixed
before the runs, on scipy's statistics.

**Samples.** An arm is one group of runs the report averages (a :class:`~timm_pkmixer.reports.report.Point`); its
sample is each run's metric at the last scheduled epoch (``top1_err`` = 100 − ``eval_top1``, or ``eval_loss``).

**Estimates** (:class:`Estimate`: a value, its standard error and degrees of freedom, the 95 % interval and the
two-sided p from Student's t, ``scipy.stats``):

* a difference of two arms' means by Welch (``scipy.stats.ttest_ind(equal_var=False)``, its
  ``confidence_interval``);
* a contrast Σ wᵢ·meanᵢ: standard error √Σ wᵢ²sᵢ²/nᵢ, Welch–Satterthwaite degrees of freedom;
* a trend: the least-squares slope over a numeric factor, every run a point (``scipy.stats.linregress``); the trend
  of a gap a − b is the factor × arm interaction of one least-squares fit over both arms' runs;
* TOST for "level within ±margin": the larger of the two one-sided p values (the same t; statsmodels' ``ttost_ind``
  computes the same for two arms, but not for a contrast, and would be a dependency for one function).

**Power.** Beside every comparison, the minimum detectable effect (:func:`minimum_detectable_effect`): the smallest
true effect the design finds at 80 % power with a two-sided 5 % test, from the non-central t, with the standard
error the design would have at the seeds' standard deviation pooled over the claim's arms (so that an arm whose
seeds happen to agree does not make the design look sharper than it is).

**Flat curves** (:func:`flatness`): a verdict is drawn only on curves that had levelled off. An arm's curve is
*still moving* when the least-squares slope of its mean curve over the **third quarter** of the schedule (the epochs
after T/2 up to 3T/4) exceeds, per epoch, the seeds' standard deviation of the final metric **pooled over the
claim's arms**. The rule it replaces compared the drift of the last three epochs with the last epoch's standard
error; that one read "moving" whenever one arm's seeds happened to agree (SE 0), read more curves moving as seeds
were added (the SE shrinks as 1/√n), and read "flat" at the end of any cosine schedule, whose learning rate — and so
whose drift — goes to 0 whatever the convergence. The pooled SD is the spread a comparison already carries, does not
shrink with n and is 0 only when every seed of every arm agrees; the third quarter is the last stretch before the
annealing quarter (lr from 50 % to 15 % of its peak under a cosine): a curve still falling there by more than the
seeds differ had not levelled off at that learning rate. Tested on made-up curves: flat, falling, cosine-annealed,
identical seeds (tests/test_verdicts.py). Fewer than 3 epochs in the window, or no seed spread, cannot be told.

**Words** (:data:`WORDS`), per comparison, by the claim's kind:

* a *direction* (also a contrast, a shape, a trend): **agrees** when the 95 % interval excludes 0 on the paper's
  side, **disagrees** when it excludes 0 on the other, else **no difference shown** (with the MDE beside it);
* *level*: **agrees** only by TOST at 5 % within ±margin (the 90 % interval inside it), **disagrees** when the 95 %
  interval lies beyond the margin, **inconclusive** when it excludes 0 but not the margin, else **no difference
  shown**;
* *match or beat*: **agrees** when it beats (a direction) or is level (TOST), **disagrees** when it trails beyond
  the 95 % interval, else **no difference shown**;
* whatever the rule gives, on curves still moving (or that cannot be told flat) the word is **not shown at this
  scale** (the rule's word kept: "otherwise agrees"); a part not judged (a trend the paper predicts none of, the
  other depths of a claim judged at the deepest) is **measured**. A claim of several comparisons **agrees** when
  every judged one agrees, **agrees in part** when some do, **disagrees** when any does.
"""
import math
import statistics
import warnings
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, NamedTuple, Optional, Sequence, Tuple

import numpy as np
import scipy
from scipy import optimize, stats

from ..errors import InvalidArgumentError
from ..sweeps.claims import Claim, matches

__all__ = ['ALPHA', 'POWER', 'AGREES', 'DISAGREES', 'IN_PART', 'NO_DIFFERENCE', 'INCONCLUSIVE', 'NOT_SHOWN',
           'OUTSIDE', 'NOT_RUN', 'MEASURED', 'WORDS', 'Sample', 'Arm', 'Estimate', 'welch', 'contrast', 'trend',
           'gap_trend', 'minimum_detectable_effect', 'pooled_sd', 'design_se', 'Flatness', 'flatness', 'Verdict',
           'direction', 'level', 'match_or_beat', 'at_scale', 'overall', 'p_text', 'Comparison', 'ClaimVerdict',
           'judge', 'judge_points', 'point_features', 'scipy_version', 'CANNOT', 'HOW_TO_DECLARE', 'verdict_markdown',
           'verdict_record']

ALPHA = 0.05     # two-sided 95 % intervals; TOST at 5 %
POWER = 0.8      # the power at which the minimum detectable effect is stated
AGREES, DISAGREES, IN_PART = 'agrees', 'disagrees', 'agrees in part'
NO_DIFFERENCE, INCONCLUSIVE = 'no difference shown', 'inconclusive'
NOT_SHOWN, OUTSIDE, NOT_RUN, MEASURED = 'not shown at this scale', "outside the paper's range", 'not yet run', ''
CANNOT = 'cannot be judged'   # a claim whose selectors do not pick one arm each (the message says which)
WORDS = (AGREES, DISAGREES, IN_PART, NO_DIFFERENCE, INCONCLUSIVE, NOT_SHOWN, OUTSIDE, NOT_RUN, MEASURED, CANNOT)
RULES_DOC = 'docs/research_tools.md, "Claims and verdicts"'
HOW_TO_DECLARE = ("No claim is declared for these runs, so nothing is judged. Declare what a sweep exists to show "
                  "before its runs: `pkmixer sweep RECIPE … --claim JSON` (a packaged figure's sweep declares the "
                  "paper's claims itself), or judge one now with `pkmixer report DIR --claim JSON` (said to be "
                  f"declared after the runs). The kinds and their keys: {RULES_DOC}.")


def scipy_version() -> str:
    return scipy.__version__


def p_text(p: float, name: str = 'p') -> str:
    """``p = 0.04``, ``p = 0.003``, ``p < 0.001``."""
    if math.isnan(p):
        return f'{name}: none'
    return f'{name} < 0.001' if p < 0.001 else f'{name} = {p:.3f}' if p < 0.01 else f'{name} = {p:.2f}'


# ------------------------------------------------------------------------------------------- samples and arms
class Sample:
    """One quantity measured over seeds: its values, mean, sample standard deviation (n − 1) and count."""

    def __init__(self, values: Sequence[float]) -> None:
        self.values = [float(v) for v in values]

    @property
    def n(self) -> int:
        return len(self.values)

    @property
    def mean(self) -> float:
        return statistics.fmean(self.values)

    @property
    def sd(self) -> float:
        return statistics.stdev(self.values) if self.n > 1 else math.nan

    def spread(self, digits: int = 2) -> str:
        """``13.20 ± 0.05`` (mean ± sd), or the mean alone with one seed."""
        return f'{self.mean:.{digits}f}' + (f' ± {self.sd:.{digits}f}' if self.n > 1 else '')


class Arm(Sample):
    """The final metric of one group of runs, with each run's curve over the epochs every run has.

    `curves[i][j]` is run i's metric at `epochs[j]` (train.py's 0-based epoch numbers); `scheduled` is the number
    of epochs train.py runs (T)."""

    def __init__(self, label: str, values: Sequence[float], curves: Sequence[Sequence[float]],
                 epochs: Sequence[int], scheduled: int, features: Optional[Mapping[str, Any]] = None) -> None:
        super().__init__(values)
        self.label = label
        self.curves = [list(map(float, c)) for c in curves]
        self.epochs = list(epochs)
        self.scheduled = scheduled
        self.features = dict(features or {})


def _metric(row: Mapping[str, float], metric: str) -> float:
    return 100. - row['eval_top1'] if metric == 'top1_err' else row.get('eval_loss', math.nan)


def point_features(point: Any) -> Dict[str, Any]:
    """The features a claim's selectors read (:data:`~timm_pkmixer.sweeps.claims.FEATURES`) of a report's point."""
    row = point.row()
    return dict(point=point.point, model=point.runs[0].model, family=point.description.family,
                num_blocks=row['num_blocks'], num_tokens=_or_none(row['num_tokens']),
                embed_dim=_or_none(row['embed_dim']), width=row['width'], permutation=row['permutation'],
                density=row['density'], omega=row['omega'], gamma=row['gamma'], patch_size=_or_none(row['patch_size']))


def _or_none(value: Any) -> Any:
    return None if value == '' else value


def arm_of_point(point: Any, metric: str = 'top1_err', label: Optional[str] = None) -> Arm:
    """An :class:`Arm` of a report's point: each run's `metric` at its last scheduled epoch, and its curve."""
    runs = point.runs
    common = sorted(set.intersection(*(set(e for e, row in r.epochs.items() if 'eval_top1' in row) for r in runs)))
    return Arm(label or point.point, [_metric(r.epochs[r.last_epoch], metric) for r in runs],
               [[_metric(r.epochs[e], metric) for e in common] for r in runs], common, runs[0].scheduled,
               point_features(point))


# ------------------------------------------------------------------------------------------- estimates
@dataclass(frozen=True)
class Estimate:
    """An estimated effect (a difference, a contrast, a slope) with its standard error and degrees of freedom; the
    interval and p come from Student's t (``scipy.stats.t``). `se` is nan where there is no interval (one seed in an
    arm) and 0 where every seed of every arm agrees."""
    value: float
    se: float
    df: float

    @property
    def defined(self) -> bool:
        return not math.isnan(self.se) and self.se > 0 and not math.isnan(self.df)

    def interval(self, level: float = 1 - ALPHA) -> Tuple[float, float]:
        if not self.defined:
            return math.nan, math.nan
        half = float(stats.t.ppf(1 - (1 - level) / 2, self.df)) * self.se
        return self.value - half, self.value + half

    @property
    def p(self) -> float:
        """Two-sided p of the effect against 0."""
        if not self.defined:
            return math.nan
        return float(min(1.0, 2 * stats.t.sf(abs(self.value) / self.se, self.df)))

    def tost_p(self, margin: float) -> float:
        """TOST: the larger of the two one-sided p values against |effect| ≥ margin."""
        if not self.defined:
            return math.nan
        return float(max(stats.t.sf((self.value + margin) / self.se, self.df),
                         stats.t.sf((margin - self.value) / self.se, self.df)))

    def text(self, digits: int = 2) -> str:
        """``-0.23 [-0.47, +0.01], p = 0.06``."""
        if math.isnan(self.se):
            return f'{self.value:+.{digits}f} (one seed: no interval)'
        if not self.defined:
            return f'{self.value:+.{digits}f} (no spread between seeds: no interval)'
        lo, hi = self.interval()
        return f'{self.value:+.{digits}f} [{lo:+.{digits}f}, {hi:+.{digits}f}], {p_text(self.p)}'


def welch(a: Sample, b: Sample) -> Estimate:
    """mean(a) − mean(b) by Welch's t-test (``scipy.stats.ttest_ind(equal_var=False)``)."""
    diff = a.mean - b.mean
    if a.n < 2 or b.n < 2:
        return Estimate(diff, math.nan, math.nan)
    var = a.sd ** 2 / a.n + b.sd ** 2 / b.n
    if var == 0:
        return Estimate(diff, 0.0, math.nan)
    with warnings.catch_warnings():  # one arm's seeds all equal: scipy warns of precision, its df is still exact
        warnings.simplefilter('ignore', RuntimeWarning)
        result = stats.ttest_ind(a.values, b.values, equal_var=False)
    return Estimate(diff, math.sqrt(var), float(result.df))


def contrast(terms: Sequence[Tuple[float, Sample]]) -> Estimate:
    """Σ wᵢ·meanᵢ, its standard error √Σ wᵢ²sᵢ²/nᵢ and Welch–Satterthwaite df (Σvᵢ)² / Σ vᵢ²/(nᵢ − 1)."""
    value = sum(w * s.mean for w, s in terms)
    if any(s.n < 2 for _, s in terms):
        return Estimate(value, math.nan, math.nan)
    parts = [(w * w * s.sd ** 2 / s.n, s.n - 1) for w, s in terms]
    var = sum(v for v, _ in parts)
    if var == 0:
        return Estimate(value, 0.0, math.nan)
    return Estimate(value, math.sqrt(var), var * var / sum(v * v / k for v, k in parts))


def trend(xs: Sequence[float], ys: Sequence[float]) -> Estimate:
    """The least-squares slope of ys on xs (``scipy.stats.linregress``), with n − 2 degrees of freedom."""
    if len(set(xs)) < 2:
        return Estimate(math.nan, math.nan, math.nan)
    fit = stats.linregress(xs, ys)
    if len(xs) < 3:  # a line through two points: a slope, no interval
        return Estimate(float(fit.slope), math.nan, math.nan)
    return Estimate(float(fit.slope), float(fit.stderr), len(xs) - 2.0)


def _design(xs: Sequence[float], in_a: Sequence[bool]) -> np.ndarray:
    x, g = np.asarray(xs, float), np.asarray(in_a, float)
    return np.column_stack([np.ones_like(x), x, g, x * g])


def gap_trend(xs: Sequence[float], ys: Sequence[float], in_a: Sequence[bool]) -> Estimate:
    """The slope over xs of the gap a − b: the interaction coefficient of y = β0 + β1·x + β2·[a] + β3·x·[a], one
    least-squares fit over both arms' runs (n − 4 degrees of freedom)."""
    design = _design(xs, in_a)
    if len(xs) < 5 or np.linalg.matrix_rank(design) < 4:
        return Estimate(math.nan, math.nan, math.nan)
    y = np.asarray(ys, float)
    coef, *_ = np.linalg.lstsq(design, y, rcond=None)
    df = len(xs) - 4.0
    sigma2 = float(np.sum((y - design @ coef) ** 2)) / df
    cov = sigma2 * np.linalg.inv(design.T @ design)
    return Estimate(float(coef[3]), math.sqrt(max(float(cov[3, 3]), 0.0)), df)


def _power(effect: float, se: float, df: float, alpha: float) -> float:
    crit = stats.t.ppf(1 - alpha / 2, df)
    nc = effect / se
    # the far tail as the upper tail of −t: scipy's nct.cdf(−crit, df, nc) is NaN for large nc at small df
    return float(stats.nct.sf(crit, df, nc) + stats.nct.sf(crit, df, -nc))


def minimum_detectable_effect(se: float, df: float, power: float = POWER, alpha: float = ALPHA) -> float:
    """The smallest |effect| a two-sided t test at `alpha` finds with probability `power`, for an estimate of
    standard error `se` on `df` degrees of freedom (the non-central t, ``scipy.stats.nct``); nan when undefined."""
    if not (se > 0 and df > 0) or math.isinf(se):
        return math.nan
    hi = se
    while _power(hi, se, df, alpha) < power:
        hi *= 2
    return float(optimize.brentq(lambda e: _power(e, se, df, alpha) - power, 0.0, hi, xtol=1e-12 * hi))


def pooled_sd(samples: Sequence[Sample]) -> Tuple[float, float]:
    """(the seeds' standard deviation pooled over the samples of two or more values, its degrees of freedom Σ(nᵢ − 1));
    (nan, 0) when no sample has two values."""
    parts = [(s.n - 1, s.sd ** 2) for s in samples if s.n > 1]
    df = sum(k for k, _ in parts)
    if not df:
        return math.nan, 0.0
    return math.sqrt(sum(k * v for k, v in parts) / df), float(df)


def design_se(weights: Sequence[Tuple[float, int]], sd: float) -> float:
    """The standard error of Σ wᵢ·meanᵢ at a common standard deviation `sd`, for (wᵢ, nᵢ) pairs."""
    return sd * math.sqrt(sum(w * w / n for w, n in weights))


# ------------------------------------------------------------------------------------------- flat curves
class Flatness(NamedTuple):
    """An arm's third-quarter slope (per epoch) against the pooled seed SD of the claim's arms."""
    slope: float
    scale: float
    window: Tuple[int, int]     # the first and last epoch of the window, 1-based as people count
    points: int                 # epochs in the window the arm has

    @property
    def moving(self) -> Optional[bool]:
        """True while |slope| > scale; None where it cannot be told (too few epochs, no seed spread)."""
        if self.points < 3 or math.isnan(self.scale) or self.scale == 0 or math.isnan(self.slope):
            return None
        return abs(self.slope) > self.scale

    def why_not_told(self) -> str:
        if self.points < 3:
            return f'{self.points} epoch{"" if self.points == 1 else "s"} in the third quarter: too few to tell'
        if math.isnan(self.scale):
            return 'one seed an arm: no spread to judge the curve by'
        return 'every seed agrees: no spread to judge the curve by'

    def text(self, label: str = '', digits: int = 2) -> str:
        head = f'{label} ' if label else ''
        if self.moving is None:
            return head + self.why_not_told()
        word = 'flat' if not self.moving else 'still improving' if self.slope < 0 else 'still moving (rising)'
        return f'{head}{word}: {self.slope:+.{digits}f}/ep. over epochs {self.window[0]}–{self.window[1]} (seed SD ' \
               f'{self.scale:.{digits}f})'


def third_quarter(scheduled: int) -> Tuple[int, int]:
    """The 1-based epochs e with T/2 < e ≤ 3T/4 of a T-epoch schedule, as (first, last)."""
    return scheduled // 2 + 1, (3 * scheduled) // 4


def flatness(arm: Arm, scale: float) -> Flatness:
    """The least-squares slope of `arm`'s mean curve over the third quarter of its schedule, against `scale`."""
    first, last = third_quarter(arm.scheduled)
    picked = [(e + 1, statistics.fmean(v)) for e, v in zip(arm.epochs, zip(*arm.curves)) if first <= e + 1 <= last]
    if len(picked) < 3:
        return Flatness(math.nan, scale, (first, last), len(picked))
    fit = stats.linregress([e for e, _ in picked], [m for _, m in picked])
    return Flatness(float(fit.slope), scale, (first, last), len(picked))


# ------------------------------------------------------------------------------------------- the rules
class Verdict(NamedTuple):
    """A word of :data:`WORDS` and why, short."""
    word: str
    why: str


_NO_ESTIMATE = ('too few runs or factor values to estimate it', 'one seed in an arm: no interval',
                'no spread between seeds: no interval')


def _no_interval(e: Estimate) -> Optional[Verdict]:
    """Why no interval can be drawn (:data:`INCONCLUSIVE`), or None."""
    if math.isnan(e.value):
        return Verdict(INCONCLUSIVE, _NO_ESTIMATE[0])
    if math.isnan(e.se):
        return Verdict(INCONCLUSIVE, _NO_ESTIMATE[1])
    if not e.defined:
        return Verdict(INCONCLUSIVE, _NO_ESTIMATE[2])
    return None


def direction(e: Estimate, negative: bool = True) -> Verdict:
    """The paper says the effect is below 0 (`negative`) or above it."""
    if (v := _no_interval(e)) is not None:
        return v
    lo, hi = e.interval()
    if (hi < 0) if negative else (lo > 0):
        return Verdict(AGREES, "the 95 % interval excludes 0 on the paper's side")
    if (lo > 0) if negative else (hi < 0):
        return Verdict(DISAGREES, 'the 95 % interval excludes 0 against the paper')
    return Verdict(NO_DIFFERENCE, 'the 95 % interval holds 0')


def level(e: Estimate, margin: float) -> Verdict:
    """The paper says the two arms are level: TOST within ±margin."""
    if (v := _no_interval(e)) is not None:
        return v
    tost = e.tost_p(margin)
    if tost < ALPHA:
        return Verdict(AGREES, f'level within ±{margin:g} ({p_text(tost, "TOST p")})')
    lo, hi = e.interval()
    if lo > margin or hi < -margin:
        return Verdict(DISAGREES, f'apart beyond the ±{margin:g} margin ({p_text(tost, "TOST p")})')
    if lo > 0 or hi < 0:
        return Verdict(INCONCLUSIVE, f'apart, but not beyond ±{margin:g}; level not shown ({p_text(tost, "TOST p")})')
    return Verdict(NO_DIFFERENCE, f'the 95 % interval holds 0; level within ±{margin:g} not shown '
                                  f'({p_text(tost, "TOST p")})')


def match_or_beat(e: Estimate, margin: float) -> Verdict:
    """The paper says the first arm is lower than or level with the second (e = first − second)."""
    beats = direction(e, negative=True)
    if beats.word in (AGREES, INCONCLUSIVE):
        return Verdict(beats.word, ('beats it: ' if beats.word == AGREES else '') + beats.why)
    even = level(e, margin)
    if even.word == AGREES:
        return even
    if beats.word == DISAGREES:
        return Verdict(DISAGREES, f'trails it: {beats.why} ({p_text(e.tost_p(margin), "TOST p")})')
    return Verdict(NO_DIFFERENCE, even.why)


def at_scale(verdict: Verdict, flats: Sequence[Flatness]) -> Verdict:
    """A verdict on arms whose curves still move, or cannot be told flat, is not shown at this scale (one with no
    interval at all stays inconclusive: the curves would not change that)."""
    if verdict.word in (OUTSIDE, NOT_RUN, MEASURED) or verdict.why in _NO_ESTIMATE:
        return verdict
    otherwise = f'otherwise {verdict.word}: {verdict.why}'
    moving = [f for f in flats if f.moving]
    if moving:
        rising = all(f.slope > 0 for f in moving)
        return Verdict(NOT_SHOWN, f'{"still moving" if rising else "still improving"} ({otherwise})')
    untold = [f for f in flats if f.moving is None]
    if untold:
        return Verdict(NOT_SHOWN, f'{untold[0].why_not_told()} ({otherwise})')
    return verdict


def overall(words: Sequence[str]) -> str:
    """A claim's one word from its comparisons' (measured and out-of-range parts do not count)."""
    judged = [w for w in words if w not in (MEASURED, OUTSIDE, NOT_RUN)]
    if not judged:
        return OUTSIDE if OUTSIDE in words else MEASURED if MEASURED in words else NOT_RUN
    if DISAGREES in judged:
        return DISAGREES
    if all(w == AGREES for w in judged):
        return AGREES
    if AGREES in judged:
        return IN_PART
    for word in (NOT_SHOWN, INCONCLUSIVE):
        if word in judged:
            return word
    return NO_DIFFERENCE


# ------------------------------------------------------------------------------------------- judging a claim
@dataclass
class Comparison:
    """One judged (or measured) comparison of a claim: one row of the verdict table."""
    label: str                      # 'L = 8: RP − normal'
    arms: List[Arm]
    arms_text: str                  # 'RP 13.01 ± 0.24; normal 13.20 ± 0.05'
    estimate: Estimate
    verdict: Verdict
    mde: float
    flats: List[Tuple[str, Flatness]]
    tost_p: float = math.nan        # where the claim's kind uses TOST (level, match or beat)
    unit: str = ''                  # ' per doubling of C' for a trend (said after the MDE)
    digits: int = 2                 # 2 for points of error, 4 for a loss

    def curves_text(self) -> str:
        """'flat', or each arm that moves (or cannot be told) with its slope."""
        if self.flats and all(f.moving is False for _, f in self.flats):
            return 'flat'
        said = [f.text(label, self.digits) for label, f in self.flats if f.moving is not False]
        return '; '.join(dict.fromkeys(said)) or '—'

    def as_dict(self) -> Dict[str, Any]:
        lo, hi = self.estimate.interval()
        return dict(comparison=self.label, arms=self.arms_text, estimate=_num(self.estimate.value),
                    se=_num(self.estimate.se), df=_num(self.estimate.df), ci_low=_num(lo), ci_high=_num(hi),
                    p=_num(self.estimate.p), tost_p=_num(self.tost_p), mde=_num(self.mde), unit=self.unit,
                    curves=self.curves_text(), word=self.verdict.word or 'measured', why=self.verdict.why,
                    flat={label: dict(slope=_num(f.slope), scale=_num(f.scale), window=list(f.window),
                                      moving=f.moving) for label, f in self.flats})


def _num(x: float) -> Optional[float]:
    return None if x is None or math.isnan(x) or math.isinf(x) else float(x)


@dataclass
class ClaimVerdict:
    """A claim and its comparisons, with its one word and one plain sentence."""
    claim: Claim
    comparisons: List[Comparison] = field(default_factory=list)
    word: str = NOT_RUN
    why_not_run: str = ''

    def sentence(self) -> str:
        """One plain sentence: the claim, its numbers, its word, and what the design could have detected."""
        if self.word in (NOT_RUN, CANNOT):
            return f'{self.claim.name}: {self.word} ({self.why_not_run}).'
        parts = []
        for c in self.comparisons:
            said = f'{c.label} {c.estimate.text(c.digits)}'
            if not math.isnan(c.mde) and (c.verdict.word == NO_DIFFERENCE or 'otherwise no difference' in
                                          c.verdict.why):
                said += f' (the design could have detected {c.mde:.{c.digits}f}{c.unit} at 80 % power)'
            parts.append(said)
        tail = self.word or 'measured, not judged'
        if self.word == NOT_SHOWN:
            reasons = ' '.join(c.verdict.why for c in self.comparisons)
            tail = ('not shown at this scale: the curves were still ' +
                    ('falling' if 'still improving' in reasons else 'moving') if 'still' in reasons else
                    'not shown at this scale: whether the curves had levelled off cannot be told')
        return f'{self.claim.name}: {"; ".join(parts)}: {tail}.'

    def as_dict(self) -> Dict[str, Any]:
        return dict(claim=self.claim.as_dict(), word=self.word or 'measured', sentence=self.sentence(),
                    comparisons=[c.as_dict() for c in self.comparisons])

    def rows(self) -> List[List[str]]:
        """The verdict table's rows of this claim (a claim not judged: one row saying why)."""
        if not self.comparisons:
            return [[self.claim.name, '—', '—', '—', '—', '—', '—', f'{self.word}: {self.why_not_run}']]
        out = []
        for c in self.comparisons:
            mde = '' if math.isnan(c.mde) else f'{c.mde:.{c.digits}f}{c.unit}'
            out.append([self.claim.name, c.label, c.arms_text, c.estimate.text(c.digits),
                        '' if math.isnan(c.tost_p) else p_text(c.tost_p, 'p').replace('p ', '', 1).lstrip('= '),
                        mde, c.curves_text(), f'{c.verdict.word or "measured"}: {c.verdict.why}'])
        return out


_SHORT = dict(num_blocks='L', num_tokens='S', embed_dim='C', width='m', density='p', omega='Ω', gamma='γ',
              patch_size='P')


def _value_text(key: str, value: Any) -> str:
    if key == 'permutation':
        return {'random': 'RP', 'normal': 'normal', '-': ''}.get(value, str(value))
    if key in ('model', 'point', 'family'):
        return str(value).strip('*_')
    return f'{_SHORT.get(key, key)} = {value:g}' if isinstance(value, (int, float)) else f'{key} = {value}'


def _selector_label(selector: Mapping[str, Any]) -> str:
    return ', '.join(_value_text(k, v) for k, v in selector.items())


def _group_label(claim: Claim, key: Tuple[Any, ...]) -> str:
    """'L = 8', 'S-Mixer, normal', 'RP S-Mixer' (a permutation its family already names is said once)."""
    said = [t for w, v in zip(claim.within, key) if v is not None and (t := _value_text(w, v))]
    return ', '.join(t for t in said if not any(t != o and t in o.split() for o in said))


def _one(claim: Claim, selector: Mapping[str, Any], group: Sequence[Tuple[Any, Dict[str, Any]]]) -> Optional[Any]:
    found = [p for p, f in group if matches(selector, f)]
    if len(found) > 1:
        raise InvalidArgumentError(f'claim {claim.name!r}: {len(found)} arms match {dict(selector)} '
                                   f'({", ".join(p.point for p in found)}): name one (e.g. with within or select)')
    return found[0] if found else None


def _groups(claim: Claim, points: Sequence[Any]) -> Dict[Tuple[Any, ...], List[Tuple[Any, Dict[str, Any]]]]:
    groups: Dict[Tuple[Any, ...], List[Tuple[Any, Dict[str, Any]]]] = {}
    for point in points:
        features = point_features(point)
        if matches(claim.select, features):
            groups.setdefault(tuple(features.get(w) for w in claim.within), []).append((point, features))
    return groups


def _judged_group(claim: Claim, keys: Sequence[Tuple[Any, ...]]) -> Optional[Tuple[Any, ...]]:
    """The one group a within claim with `at` judges (None: all are judged)."""
    if claim.kind == 'lowest_at' or claim.at is None or not keys:
        return None
    values = [k[0] for k in keys if isinstance(k[0], (int, float))]
    if claim.at in ('largest', 'smallest'):
        pick = max(values) if claim.at == 'largest' else min(values)
    else:
        pick = claim.at
    return next((k for k in keys if k[0] == pick), ('(none)',))


class _Raw(NamedTuple):
    label: str
    arms: List[Tuple[str, Any]]           # (label, point)
    estimate_of: Any                      # callable(List[Arm]) -> Estimate
    weights: Optional[List[float]]        # contrast weights (None for a trend)
    trend_x: Optional[List[float]] = None  # per arm, for a trend's MDE
    in_a: Optional[List[bool]] = None


def _factor_x(claim: Claim, value: float) -> float:
    return math.log2(value) if claim.scale == 'log2' else float(value)


def _raw_comparisons(claim: Claim, key: Tuple[Any, ...], group: List[Tuple[Any, Dict[str, Any]]]) -> List[_Raw]:
    head = _group_label(claim, key)
    prefix = f'{head}: ' if head else ''
    if claim.kind in ('direction', 'level', 'match_or_beat'):
        a, b = _one(claim, claim.a, group), _one(claim, claim.b, group)
        if a is None or b is None:
            return []
        la, lb = _selector_label(claim.a), _selector_label(claim.b)
        return [_Raw(f'{prefix}{la} − {lb}', [(la, a), (lb, b)], lambda arms: welch(arms[0], arms[1]), [1.0, -1.0])]
    if claim.kind == 'contrast':
        found = [(w, s, _one(claim, s, group)) for w, s in claim.terms]
        if any(p is None for _, _, p in found):
            return []
        label = ' '.join(f'{"+" if w > 0 else "−"} {abs(w):g}·err({_selector_label(s)})' for w, s, _ in found)
        return [_Raw(prefix + label.lstrip('+ '), [(_selector_label(s), p) for _, s, p in found],
                     lambda arms, ws=[w for w, _, _ in found]: contrast(list(zip(ws, arms))),
                     [w for w, _, _ in found])]
    numeric = [(p, f) for p, f in group if isinstance(f.get(claim.factor), (int, float))]
    if claim.kind == 'lowest_at':
        return _lowest_at(claim, prefix, numeric)
    return _trend(claim, prefix, numeric)


def _lowest_at(claim: Claim, prefix: str, numeric: List[Tuple[Any, Dict[str, Any]]]) -> List[_Raw]:
    short = _SHORT.get(claim.factor, claim.factor)
    if len({f[claim.factor] for _, f in numeric}) < 3:
        return []
    if claim.at == 'balanced':
        off = {id(p): abs(math.log(f['embed_dim'] / f['num_tokens'])) for p, f in numeric
               if f.get('embed_dim') and f.get('num_tokens')}
        if not off:
            return []
        best = min(off.values())
        centre = [(p, f) for p, f in numeric if id(p) in off and math.isclose(off[id(p)], best, abs_tol=1e-9)]
    else:
        centre = [(p, f) for p, f in numeric if math.isclose(f[claim.factor], claim.at, rel_tol=1e-6)]
    lo, hi = min(f[claim.factor] for _, f in numeric), max(f[claim.factor] for _, f in numeric)
    ends = [next((p, f) for p, f in numeric if f[claim.factor] == v) for v in (lo, hi)]
    if not centre or any(p is q for p, _ in centre for q, _ in ends):
        return []
    at = ' + '.join(f'{short} = {f[claim.factor]:g}' for _, f in centre)
    label = (f'{prefix}err({at}) − mean(err({short} = {lo:g}), err({short} = {hi:g}))')
    weights = [1.0 / len(centre)] * len(centre) + [-0.5, -0.5]
    arms = [(f'{short} = {f[claim.factor]:g}', p) for p, f in centre + ends]
    return [_Raw(label, arms, lambda xs, ws=weights: contrast(list(zip(ws, xs))), weights)]


def _trend(claim: Claim, prefix: str, numeric: List[Tuple[Any, Dict[str, Any]]]) -> List[_Raw]:
    short = _SHORT.get(claim.factor, claim.factor)
    per = f' per doubling of {short}' if claim.scale == 'log2' else f' per unit of {short}'
    if claim.gap is None:
        if len({f[claim.factor] for _, f in numeric}) < 2:
            return []
        ordered = sorted(numeric, key=lambda pf: pf[1][claim.factor])
        xs = [_factor_x(claim, f[claim.factor]) for _, f in ordered]

        def estimate(arms: List[Arm], xs: List[float] = xs) -> Estimate:
            return trend([x for x, a in zip(xs, arms) for _ in a.values], [v for a in arms for v in a.values])
        return [_Raw(f'{prefix}slope of the error{per}', [(f'{short} = {f[claim.factor]:g}', p) for p, f in ordered],
                     estimate, None, xs)]
    sides = [(p, f, matches(claim.gap[0], f)) for p, f in numeric if matches(claim.gap[0], f) or
             matches(claim.gap[1], f)]
    values = {f[claim.factor] for p, f, is_a in sides if is_a} & {f[claim.factor] for p, f, is_a in sides if not is_a}
    sides = sorted([s for s in sides if s[1][claim.factor] in values], key=lambda s: (s[1][claim.factor], not s[2]))
    if len(values) < 2:
        return []
    xs, in_a = [_factor_x(claim, f[claim.factor]) for _, f, _ in sides], [a for _, _, a in sides]
    la, lb = _selector_label(claim.gap[0]), _selector_label(claim.gap[1])

    def estimate_gap(arms: List[Arm], xs: List[float] = xs, in_a: List[bool] = in_a) -> Estimate:
        return gap_trend([x for x, a in zip(xs, arms) for _ in a.values], [v for a in arms for v in a.values],
                         [g for g, a in zip(in_a, arms) for _ in a.values])
    labels = [f'{la if a else lb} {short} = {f[claim.factor]:g}' for _, f, a in sides]
    return [_Raw(f'{prefix}slope of {la} − {lb}{per}', list(zip(labels, [p for p, _, _ in sides])), estimate_gap,
                 None, xs, in_a)]


def _design_mde(raw: _Raw, arms: List[Arm], sd: float, df: float) -> float:
    """The minimum detectable effect of the comparison's design at the pooled seed SD."""
    if math.isnan(sd) or sd == 0:
        return math.nan
    if raw.weights is not None:
        return minimum_detectable_effect(design_se([(w, a.n) for w, a in zip(raw.weights, arms)], sd), df)
    xs = [x for x, a in zip(raw.trend_x, arms) for _ in a.values]
    if raw.in_a is None:
        sxx = sum((x - statistics.fmean(xs)) ** 2 for x in xs)
        return minimum_detectable_effect(sd / math.sqrt(sxx), df) if sxx else math.nan
    design = _design(xs, [g for g, a in zip(raw.in_a, arms) for _ in a.values])
    return minimum_detectable_effect(sd * math.sqrt(float(np.linalg.inv(design.T @ design)[3, 3])), df)


def _rule(claim: Claim, estimate: Estimate) -> Verdict:
    if claim.kind == 'direction':
        return direction(estimate, negative=claim.expect == 'lower')
    if claim.kind == 'level':
        return level(estimate, claim.margin)
    if claim.kind == 'match_or_beat':
        return match_or_beat(estimate, claim.margin)
    if claim.kind == 'trend':
        if claim.expect == 'none':
            return Verdict(MEASURED, 'the paper predicts no trend: measured, not judged')
        return direction(estimate, negative=claim.expect == 'falls')
    return direction(estimate, negative=claim.expect == 'negative')  # contrast, lowest_at


def judge(claim: Claim, points: Sequence[Any]) -> ClaimVerdict:
    """The verdict of `claim` on a report's points (see the module docstring for the rules).

    Raises:
        InvalidArgumentError: a selector of the claim matches several arms of one comparison.
    """
    groups = _groups(claim, points)
    judged_key = _judged_group(claim, list(groups))
    raws = [(key, raw) for key, group in groups.items() for raw in _raw_comparisons(claim, key, group)]
    if not raws:
        wanted = {'direction': 'a and b', 'level': 'a and b', 'match_or_beat': 'a and b', 'contrast': 'every term',
                  'lowest_at': f'three values of {claim.factor} or more, the centre inside the range',
                  'trend': f'two values of {claim.factor} or more'}[claim.kind]
        return ClaimVerdict(claim, why_not_run=f'no arms of the report give {wanted}'
                                               f'{" within " + ", ".join(claim.within) if claim.within else ""}')
    built = [(key, raw, [arm_of_point(p, claim.metric, label) for label, p in raw.arms]) for key, raw in raws]
    every = {a.features.get('point'): a for _, _, arms in built for a in arms}  # each arm once
    sd, df = pooled_sd(list(every.values()))
    out = ClaimVerdict(claim)
    for key, raw, arms in built:
        estimate = raw.estimate_of(arms)
        rule = _rule(claim, estimate)
        if judged_key is not None and key != judged_key:
            rule = Verdict(MEASURED, f'judged at {claim.within[0]} {claim.at}, not here')
        flats = [(a.label, flatness(a, sd)) for a in arms]
        short = _SHORT.get(claim.factor or '', claim.factor)
        unit = ((f' per doubling of {short}' if claim.scale == 'log2' else f' per unit of {short}')
                if claim.kind == 'trend' else '')
        tost = estimate.tost_p(claim.margin) if claim.kind in ('level', 'match_or_beat') else math.nan
        out.comparisons.append(Comparison(raw.label, arms, '; '.join(f'{a.label} {a.spread()}' for a in arms),
                                          estimate, at_scale(rule, [f for _, f in flats]),
                                          _design_mde(raw, arms, sd, df), flats, tost, unit,
                                          2 if claim.metric == 'top1_err' else 4))
    out.word = overall([c.verdict.word for c in out.comparisons])
    return out


def judge_points(claims: Sequence[Claim], points: Sequence[Any]) -> List[ClaimVerdict]:
    """Every claim judged on the same points; a claim whose selectors name several arms at once reads
    :data:`CANNOT` with the reason, the others are judged."""
    out = []
    for claim in claims:
        try:
            out.append(judge(claim, points))
        except InvalidArgumentError as e:
            out.append(ClaimVerdict(claim, word=CANNOT, why_not_run=str(e)))
    return out


_TABLE = ('claim', 'comparison', 'arms (mean ± sd)', 'estimate [95 %], p', 'TOST p', 'MDE (80 %)', 'curves',
          'verdict')


def verdict_markdown(verdicts: Sequence[ClaimVerdict], declared: Sequence[str]) -> List[str]:
    """The Verdict section of report.md: one plain sentence per claim, then the table, then where the claims were
    declared and what judged them."""
    from ..markdown import markdown_table
    lines = ['## Verdict', '']
    if not verdicts:
        return lines + [HOW_TO_DECLARE]
    lines += [f'- **{v.word or "measured"}** — {v.sentence()}' for v in verdicts]
    lines += ['', markdown_table(_TABLE, [r for v in verdicts for r in v.rows()]), '',
              f'Claims: {"; ".join(declared)}. Each claim\'s words and source: verdict.json. The rules (Welch\'s '
              f'interval and p, TOST within the claim\'s margin, the minimum detectable effect at '
              f'{POWER * 100:.0f} % power, the third-quarter rule for flat curves): {RULES_DOC}; judged with scipy '
              f'{scipy_version()}.']
    return lines


def verdict_record(verdicts: Sequence[ClaimVerdict], declared: Sequence[str], runs: Sequence[str]) -> Dict[str, Any]:
    """verdict.json: every claim with its comparisons (numbers in full), where the claims were declared, the runs
    judged (the averaged runs' names) and what judged them."""
    return dict(claims=[v.as_dict() for v in verdicts], declared=list(declared), runs=sorted(runs),
                scipy=scipy_version(), alpha=ALPHA, power=POWER, rules=RULES_DOC,
                note='' if verdicts else HOW_TO_DECLARE)
