"""Loss and accuracy curves with min–max bands over seeds: the form of Figs. S.6, S.7 and S.8 (D.7).

Each figure of D.7 shows, per model, the mean over trials of a per-epoch metric and a shaded band from its minimum
to its maximum ("the shaded area … represents the range between the maximum and minimum values"). The arithmetic is
:func:`min_max_band` (no matplotlib); :func:`plot_curve_bands` draws one panel per metric (test loss, train loss,
test accuracy), normal models solid and RP models dashed, one colour per setting.
"""
import re
from pathlib import Path
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from ..analysis._matplotlib import require_matplotlib
from ..errors import InvalidArgumentError

__all__ = ['CURVE_METRICS', 'MARKED_POINTS', 'min_max_band', 'plot_curve_bands', 'integer_epochs', 'add_note',
           'curve_markers', 'single_epoch_note']

# summary.csv column → axis label, in the order of Fig. S.8's panels (left, right, lower)
CURVE_METRICS: Dict[str, str] = {'eval_loss': 'test loss', 'train_loss': 'train loss', 'eval_top1': 'test accuracy (%)'}


# a curve of at most this many epochs is drawn with a marker at every point: one point alone is otherwise
# invisible (a line needs two) and a few are hard to tell from a straight segment; past it markers crowd the line
MARKED_POINTS = 12
_MARKER_SIZE = 3


def curve_markers(points: int) -> Dict[str, object]:
    """The marker keywords of a curve of `points` epochs for ``ax.plot``: a small dot at each point up to
    :data:`MARKED_POINTS`, none past it."""
    return dict(marker='o', ms=_MARKER_SIZE) if points <= MARKED_POINTS else {}


def single_epoch_note(lengths: Sequence[int]) -> str:
    """The note (and warning) for curves of one epoch each (`lengths`: the points of every curve drawn): each is a
    single point; '' when any curve has two or more."""
    if lengths and max(lengths) == 1:
        return ('one epoch per run: each curve is a single point (dots); train 2 or more epochs (train.py --epochs) '
                'to see curves')
    return ''


def min_max_band(curves: Sequence[Sequence[float]]) -> Tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(epochs, mean, min, max) over the trials' curves, each of shape (n,), n the shortest curve's length (a trial
    that stopped early shortens the band rather than biasing its last epochs). Refuses no curves or an empty one."""
    if not curves or min(len(c) for c in curves) == 0:
        raise InvalidArgumentError('curves: need at least one non-empty curve per band')
    n = min(len(c) for c in curves)
    stacked = np.asarray([np.asarray(c[:n], dtype=float) for c in curves])  # (trials, n)
    return np.arange(n), stacked.mean(axis=0), stacked.min(axis=0), stacked.max(axis=0)


def integer_epochs(ax) -> None:
    """An epoch axis: ticks at whole epochs only (an axis of one epoch spans it ±0.5, so that its tick is it)."""
    ax.xaxis.get_major_locator().set_params(integer=True)
    lo, hi = ax.get_xlim()
    if hi - lo < 1:
        middle = round((lo + hi) / 2)
        ax.set_xlim(middle - 0.5, middle + 0.5)
        ax.set_xticks([middle])  # the integer locator falls back to fractions on a span this short


def add_note(fig, note: str) -> None:
    """A note under every panel of `fig`, left-aligned, small (the data, the seeds, what is left out); the
    constrained layout makes room for it."""
    if note:
        fig.supxlabel(note, x=0.01, ha='left', fontsize=7)


def plot_curve_bands(groups: Mapping[str, Sequence[Mapping[str, Sequence[float]]]], out: str,
                     metrics: Sequence[str] = tuple(CURVE_METRICS), random: Optional[Sequence[str]] = None,
                     title: str = '', note: str = '') -> Path:
    """Draw mean curves with min–max bands, one panel per metric, and save the figure to `out` (PNG).

    Args:
        groups: Label → the trials of one model, each a mapping of summary.csv column → per-epoch values (a report
            point's ``[r.curves for r in point.runs]``). A label ending in ``_normal``/``_random`` shares its colour
            with its counterpart.
        out: The PNG file to write.
        metrics: The columns to draw (default: test loss, train loss, test accuracy); a metric no trial has is
            skipped, and none at all is refused.
        random: Labels drawn dashed as RP models (default: the labels ending in ``_random``).
        title: The figure's title.
        note: Lines under the panels (:func:`add_note`): the data, the seeds, the runs left out; curves of one epoch
            each add :func:`single_epoch_note`. Curves of up to :data:`MARKED_POINTS` epochs mark every point.
    """
    present = [m for m in metrics if any(m in t for trials in groups.values() for t in trials)]
    if not present:
        raise InvalidArgumentError(f'metrics: none of {list(metrics)} is in the trials\' curves')
    random = set(random if random is not None else [g for g in groups if g.endswith('_random')])
    Figure = require_matplotlib()
    fig = Figure(figsize=(4.2 * len(present), 3.6), layout='constrained')
    axes = np.atleast_1d(fig.subplots(1, len(present)))
    colours: Dict[str, str] = {}
    lengths: List[int] = []
    for ax, metric in zip(axes, present):
        for label, trials in groups.items():
            curves: List[Sequence[float]] = [t[metric] for t in trials if metric in t and len(t[metric])]
            if not curves:
                continue
            epochs, mean, lo, hi = min_max_band(curves)
            colour = colours.setdefault(re.sub(r'_(normal|random)$', '', label), f'C{len(colours) % 10}')
            lengths.append(len(epochs))
            ax.plot(epochs, mean, color=colour, lw=1, ls='--' if label in random else '-',
                    label=f'{label} (n = {len(curves)})', **curve_markers(len(epochs)))
            ax.fill_between(epochs, lo, hi, color=colour, alpha=0.2, lw=0)
        ax.set_xlabel('epoch'), ax.set_ylabel(f'{CURVE_METRICS.get(metric, metric)}: mean, min–max')
        integer_epochs(ax)
    axes[0].legend(fontsize=6)
    if title:
        fig.suptitle(title, fontsize=10)
    add_note(fig, '\n'.join(n for n in (single_epoch_note(lengths), note) if n))
    path = Path(out)
    fig.savefig(path, dpi=100)
    return path
