"""Figures of training runs (matplotlib, a dependency imported only here): the curves of timm train.py runs (`pkmixer
plot run`, Fig. S.6-S.8) and the figures of `pkmixer report`. Data functions need numpy only."""
import logging
import math
import numbers
import os
import re
from collections import OrderedDict
from typing import Dict, List, Optional, Sequence

import numpy as np

from ..analysis._matplotlib import require_matplotlib
from ..errors import InvalidArgumentError
from ..permutation_kinds import PERMUTATION_KINDS
from ..runs.run_folder import ARGS_YAML, RunFileError, read_args_yaml
from ..runs.run_folder import read_summary as read_run_summary
from .curve_figures import add_note, curve_markers, integer_epochs, plot_curve_bands, single_epoch_note

__all__ = ['read_summary', 'run_label', 'group_runs', 'plot_runs', 'square_channels', 'plot_report', 'dataset_of',
           'kind_style']

_logger = logging.getLogger(__name__)


def read_summary(path: str) -> Dict[str, np.ndarray]:
    """Columns of a timm train.py ``summary.csv`` (epoch, train_loss, eval_loss, eval_top1, ...) as float arrays in
    epoch order, read as the report reads it (:func:`.run_folder.read_summary`: the header again after ``--resume``,
    the last row written for an epoch wins). A file that is not such a CSV (binary, no epoch/train_loss
    header, no row) or has a faulty row (a value that is not a number, a wrong field count) is refused with an error
    naming the file and, for a row, its line and column."""
    summary = read_run_summary(path)
    if summary.faults:
        raise RunFileError(f'{path}, {summary.faults[0]}')
    if not summary.epochs:
        raise RunFileError(f'{path} is not a timm train.py summary.csv (needs epoch and train_loss columns and at '
                           f'least one row)')
    return {k: np.array(v) for k, v in summary.curves().items()}


def run_label(path: str) -> str:
    """Default label of a run: its folder name without a trailing ``-seed<N>`` / ``_seed<N>``, so that the seeds
    of one setting are averaged."""
    name = os.path.basename(os.path.dirname(os.path.abspath(path)))
    return re.sub(r'[-_]seed\d+$', '', name) or name


def group_runs(paths: Sequence[str], labels: Optional[Sequence[str]] = None) -> 'OrderedDict[str, Dict]':
    """Read runs and group them by label (default: `run_label`). Per group and column: mean, min and max over
    its runs, on the epochs all its runs have."""
    if labels is not None and len(labels) != len(paths):
        raise InvalidArgumentError(f'{len(labels)} labels for {len(paths)} runs: give one label per summary.csv')
    labels = labels or [run_label(p) for p in paths]
    runs: OrderedDict[str, List[Dict[str, np.ndarray]]] = OrderedDict()
    for path, label in zip(paths, labels):
        runs.setdefault(label, []).append(read_summary(path))
    groups = OrderedDict()
    for label, members in runs.items():
        n = min(len(r['epoch']) for r in members)
        keys = [k for k in members[0] if all(k in r for r in members)]
        stacked = {k: np.stack([r[k][:n] for r in members]) for k in keys}
        groups[label] = {'runs': len(members), 'epoch': stacked['epoch'][0],
                         **{k: dict(mean=v.mean(0), min=v.min(0), max=v.max(0)) for k, v in stacked.items()
                            if k != 'epoch'}}
    return groups


def dataset_of(args: Sequence[Dict]) -> str:
    """The data of train.py runs, from their arguments, for a figure: each run's ``dataset`` name, else its
    ``data_dir``'s last part (an ImageFolder); distinct ones joined; 'not recorded' without either."""
    names = []
    for a in args:
        name = str(a.get('dataset') or '') or os.path.basename(os.path.normpath(str(a.get('data_dir') or '')))
        if name and name != '.' and name not in names:
            names.append(name)
    return ', '.join(names) or 'not recorded'


def _span(counts) -> str:
    """'3', or '2–3' when the counts differ."""
    values = sorted(set(counts))
    return str(values[0]) if len(values) == 1 else f'{values[0]}–{values[-1]}'


def _caption(report, points, shown: str = '') -> str:
    """The note under every figure of a report: its data (the runs' arguments), the seeds per point (`shown`:
    what is drawn of them), and what the figure leaves out (:meth:`~.report.Report.omitted`)."""
    lines = [f'data: {dataset_of([r.args for p in points for r in p.runs])}; seeds per point: '
             f'{_span(len(p.runs) for p in points)}' + (f' ({shown})' if shown else '')]
    return '\n'.join(lines + ([report.omitted()] if report.omitted() else []))


def _run_args(summary_csv: str) -> Dict:
    """The args.yaml beside a summary.csv ({} when there is none or it cannot be read: a figure still draws)."""
    try:
        return read_args_yaml(os.path.join(os.path.dirname(os.path.abspath(summary_csv)), ARGS_YAML))
    except (RunFileError, OSError):
        return {}


def plot_runs(paths: Sequence[str], out: str, labels: Optional[Sequence[str]] = None) -> None:
    """Train (dashed) and validation (solid) loss and validation top-1 of timm train.py runs; runs with the same
    label are averaged, the band spans their min to max (as Fig. S.6-S.8). A note under the panels names the data
    (the runs' args.yaml) and the number of runs (seeds) of each curve. Curves of few epochs mark every point
    (`curve_markers`); one epoch per run is said in the note and logged as a warning."""
    Figure = require_matplotlib()
    groups = group_runs(paths, labels)
    has_top1 = all('eval_top1' in g for g in groups.values())
    fig = Figure(figsize=(10 if has_top1 else 5.5, 3.8), layout='constrained')
    axes = fig.subplots(1, 2 if has_top1 else 1, squeeze=False)[0]
    colors = ['tab:red', 'tab:orange', 'tab:blue', 'tab:green', 'tab:purple', 'tab:brown', 'tab:pink', 'tab:gray']
    for (label, g), color in zip(groups.items(), colors * len(groups)):
        ep = g['epoch']
        name = f'{label} (×{g["runs"]})' if g['runs'] > 1 else label
        for key, ls, ax, suffix in (('train_loss', '--', axes[0], 'train'), ('eval_loss', '-', axes[0], 'val'),
                                    ('eval_top1', '-', axes[-1] if has_top1 else None, None)):
            if key not in g or ax is None:
                continue
            s = g[key]
            ax.plot(ep, s['mean'], ls=ls, color=color, label=f'{name} {suffix}' if suffix else name,
                    **curve_markers(len(ep)))
            if g['runs'] > 1:
                ax.fill_between(ep, s['min'], s['max'], color=color, alpha=0.2, lw=0)
    losses = np.concatenate([g[k]['mean'] for g in groups.values() for k in ('train_loss', 'eval_loss') if k in g])
    losses = losses[np.isfinite(losses) & (losses > 0)]
    if losses.size and losses.max() / losses.min() > 10:  # log axis when the losses span over a decade
        axes[0].set_yscale('log')
    for ax in axes:
        integer_epochs(ax)
    one_epoch = single_epoch_note([len(g['epoch']) for g in groups.values()])
    if one_epoch:
        _logger.warning(f'{one_epoch} ({len(paths)} summary.csv files)')
    add_note(fig, '\n'.join(filter(None, [one_epoch, f'data: {dataset_of([_run_args(p) for p in paths])}; runs (seeds) '
                                                      f'per curve: {_span(g["runs"] for g in groups.values())}; '
                                                      f'bands: min–max over them'])))
    axes[0].set_xlabel('epoch'), axes[0].set_ylabel('loss'), axes[0].set_title('loss (dashed: train, solid: val)')
    axes[0].legend(fontsize=7)
    if has_top1:
        axes[1].set_xlabel('epoch'), axes[1].set_ylabel('val top-1 (%)'), axes[1].set_title('validation accuracy')
        axes[1].legend(fontsize=7)
    fig.savefig(out, dpi=100)


def _kind(point) -> str:
    """A point's permutation kind as the figures colour it: a kind of :data:`PERMUTATION_KINDS`, ``mixed`` (one
    per block) or ``SW-MLP``."""
    if point.description.family == 'SW-MLP':
        return 'SW-MLP'
    label = point.row()['permutation']
    return label if label in PERMUTATION_KINDS else 'mixed'


def _series(points, key):
    """Mean and sd of top-1 error per x value, for each permutation kind (:func:`_kind`) separately."""
    out: Dict[str, List[tuple]] = {}
    for p in points:
        row = p.row()
        out.setdefault(_kind(p), []).append((key(row), row['top1_err_mean'], row['top1_err_sd']))
    return {k: sorted(v) for k, v in out.items()}


_STYLE = {'normal': dict(color='tab:blue', marker='o', label='normal'),
          'random': dict(color='tab:red', marker='s', label='RP'),
          'mixed': dict(color='tab:purple', marker='^', label='mixed'),
          'SW-MLP': dict(color='tab:green', marker='D', label='SW-MLP')}
_OTHER_COLOURS = ('tab:orange', 'tab:brown', 'tab:pink', 'tab:olive', 'tab:cyan', 'tab:gray')


def kind_style(kind: str) -> Dict[str, str]:
    """The colour, marker and label of a permutation kind in every figure of the report: normal blue, RP red,
    mixed purple, SW-MLP green; another kind of :data:`PERMUTATION_KINDS` a colour of its own, by its place in it."""
    if kind in _STYLE:
        return _STYLE[kind]
    others = [k for k in PERMUTATION_KINDS if k not in _STYLE]
    colour = _OTHER_COLOURS[others.index(kind) % len(_OTHER_COLOURS)] if kind in others else 'tab:gray'
    return dict(color=colour, marker='v', label=kind)


def _errorbars(ax, series) -> None:
    """One error-bar series per label; a series with two points at one x (the two sides of C = S at one width m)
    gets markers only, since a line through it would zig-zag between them."""
    for label, values in series.items():
        xs, ys, sds = zip(*values)
        sds = [0 if math.isnan(s) else s for s in sds]
        ls = 'none' if len(set(xs)) < len(xs) else '-'
        ax.errorbar(xs, ys, yerr=sds, capsize=3, lw=1.2, ms=5, ls=ls, **kind_style(label))
    ax.set_ylabel('test error (%)')
    ax.legend(fontsize=8)
    _integer_axis(ax, [x for values in series.values() for x, _, _ in values])


def _label_ticks(ax, values) -> None:
    """Ticks at the plotted values, as plain numbers (a log axis otherwise labels only powers of ten)."""
    from matplotlib.ticker import NullFormatter
    ax.set_xticks(sorted(set(values)), [f'{v:g}' for v in sorted(set(values))])
    ax.xaxis.set_minor_formatter(NullFormatter())


def _integer_axis(ax, values) -> None:
    """The x axis of an integer factor (depth, channels, width, patch size): ticks at whole numbers only, at the
    plotted values on a log axis; a single value centred with its one tick (the default ticks of a lone point are
    fractions: 1.900, 1.925, …)."""
    from matplotlib.ticker import MaxNLocator
    values = sorted(set(values))
    if not values or not all(isinstance(v, numbers.Real) and float(v).is_integer() for v in values):
        return
    log = ax.get_xscale() == 'log'
    if len(values) == 1:
        ax.set_xlim(*((values[0] / 2, values[0] * 2) if log else (values[0] - 0.5, values[0] + 0.5)))
    if log or len(values) == 1:
        _label_ticks(ax, values)
    else:
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))


def square_channels(pairs: Sequence[tuple]) -> Optional[float]:
    """Where C = S along a fixed-Ω sweep of ``(S, C)`` pairs: C of a pair with S = C, else the geometric mean of
    √(S·C) of the two pairs nearest to it on either side (C just below S and C just above S); None when the sweep
    does not cross C = S."""
    if any(s == c for s, c in pairs):
        return float(next(c for s, c in pairs if s == c))
    below = [(s, c) for s, c in pairs if c < s]
    above = [(s, c) for s, c in pairs if c > s]
    if not below or not above:
        return None
    s0, c0 = max(below, key=lambda sc: sc[1])
    s1, c1 = min(above, key=lambda sc: sc[1])
    return math.sqrt(math.sqrt(s0 * c0) * math.sqrt(s1 * c1))


def plot_report(report, out_dir) -> List:
    """The figures of `pkmixer report`: its experiment's (none for a comparison or several experiments at once) and
    the eval-loss curves (D.7) and every metric's mean with its min–max band over the seeds (Figs. S.6–S.8,
    `curves_EXP.png`); returns the files. Logs a line per experiment drawn, and a warning where its runs have one
    epoch each (their curves are single points, marked, and the figures say so)."""
    from pathlib import Path
    Figure = require_matplotlib()
    out_dir = Path(out_dir)
    by_exp: Dict[str, list] = {}
    for p in report.points:
        by_exp.setdefault(p.experiment, []).append(p)
    written = []
    for exp, points in by_exp.items():
        _logger.info(f'drawing the figures of {exp} ({len(points)} points)')
        one_epoch = single_epoch_note([len(r.curves.get('eval_loss', ())) for p in points for r in p.runs])
        if one_epoch:
            _logger.warning(f'{exp}: {one_epoch}')
        if exp == 'width':
            fig = Figure(figsize=(10, 3.8), layout='constrained')
            ax_c, ax_m = fig.subplots(1, 2)
            mixers = [p for p in points if p.description.dim is not None]
            ax_c.set_xscale('log'), ax_c.set_xlabel('channels C (at fixed Ω)')
            _errorbars(ax_c, _series(mixers, lambda r: r['embed_dim']))
            c_square = square_channels([(p.description.num_tokens, p.description.dim) for p in mixers])
            if c_square is not None:
                ax_c.axvline(c_square, color='grey', ls='--', lw=0.8)
            ax_c.set_title('error against C (dashed: C = S)', fontsize=10)
            _errorbars(ax_m, _series(points, lambda r: r['width']))
            ax_m.set_xlabel('effective width m'), ax_m.set_title('error against m', fontsize=10)
        elif exp == 'depth':
            fig = Figure(figsize=(5.5, 3.8), layout='constrained')
            ax = fig.subplots()
            _errorbars(ax, _series(points, lambda r: r['num_blocks']))
            ax.set_xlabel('depth L (blocks)'), ax.set_title('error against depth (Fig. 7)', fontsize=10)
        elif exp == 'rp-block':
            fig = Figure(figsize=(6.5, 3.8), layout='constrained')
            ax = fig.subplots()
            rows = [p.row() for p in points]
            singles = sorted((r for r in rows if r['permutation'] not in PERMUTATION_KINDS),
                             key=lambda r: r['permutation'].index('R'))
            xs = [r['permutation'].index('R') for r in singles]
            ax.bar(xs, [r['top1_err_mean'] for r in singles],
                   yerr=[0 if math.isnan(r['top1_err_sd']) else r['top1_err_sd'] for r in singles], capsize=3,
                   color='tab:purple', alpha=0.8, label='block l alone random')
            for r in rows:
                if r['permutation'] in PERMUTATION_KINDS:
                    ax.axhline(r['top1_err_mean'], ls='--', **{k: v for k, v in kind_style(r['permutation']).items()
                                                                if k in ('color', 'label')})
            ax.set_xticks(xs), ax.set_xlabel('position l of the random block'), ax.set_ylabel('test error (%)')
            tops = [r['top1_err_mean'] + (0 if math.isnan(r['top1_err_sd']) else r['top1_err_sd']) for r in rows]
            ax.set_ylim(0, max(tops) * 1.15)  # bars from zero: their heights compare honestly
            ax.set_title('one RP block among normal ones (Fig. S.4)', fontsize=10)
            ax.legend(fontsize=8)
        elif exp == 'gamma':
            fig = Figure(figsize=(5.5, 3.8), layout='constrained')
            ax = fig.subplots()
            ax.set_xscale('log'), ax.set_xlabel('channels C at fixed m (γ from eq. S.46)')
            _errorbars(ax, _series(points, lambda r: r['embed_dim']))
            ax.set_title('error against C at fixed m (Fig. S.3)', fontsize=10)
        elif exp == 'patch':
            fig = Figure(figsize=(5.5, 3.8), layout='constrained')
            ax = fig.subplots()
            ax.set_xscale('log', base=2), ax.set_xlabel('patch size P'), ax.set_title('error against P (Fig. S.5)',
                                                                                    fontsize=10)
            _errorbars(ax, _series(points, lambda r: r['patch_size']))
        else:  # a comparison, a single group or several experiments at once: the eval-loss curves only
            fig = None
        if fig is not None:
            add_note(fig, _caption(report, points, 'error bars: sd over seeds'))
            path = out_dir / f'{exp}.png'
            fig.savefig(path, dpi=100)
            written.append(path)
        written.append(_plot_eval_loss(Figure, exp, points, out_dir, _caption(report, points, 'curves: their mean')))
        written.append(plot_curve_bands({p.point: [r.curves for r in p.runs] for p in points},
                                        str(out_dir / f'curves_{exp}.png'),
                                        title=f'{exp}: mean and min–max over seeds (Figs. S.6–S.8)',
                                        note=_caption(report, points)))
    return written


def _shades(colour: str, n: int) -> List[tuple]:
    """`n` shades of `colour`, darker to lighter (`colour` itself when n is 1): the settings of one kind."""
    from matplotlib.colors import to_rgb
    base = np.array(to_rgb(colour))
    return [tuple(base * 0.7 + (1 - base * 0.7) * 0.6 * i / (n - 1)) if n > 1 else tuple(base) for i in range(n)]


def _setting(point) -> str:
    """A point's name less its permutation kind: what its normal and RP models share (``L8_normal`` → ``L8``)."""
    return re.sub('_(' + '|'.join(PERMUTATION_KINDS) + ')$', '', point.point)


def _plot_eval_loss(Figure, exp, points, out_dir, note: str = ''):
    """Mean eval-loss curves per point, in the colour of its permutation kind (:func:`kind_style`: normal blue, RP
    red, as every figure of the report), a shade per setting, RP dashed (the overfitting comparison of D.7), every
    point marked on short curves (`curve_markers`); `note` under the panel, after the note of one-epoch curves."""
    fig = Figure(figsize=(6.5, 3.8), layout='constrained')
    ax = fig.subplots()
    settings: Dict[str, List[str]] = {}  # kind -> its settings, in order: one shade each
    for p in points:
        if _setting(p) not in settings.setdefault(_kind(p), []):
            settings[_kind(p)].append(_setting(p))
    means = []
    for p in points:
        curves = [r.curves['eval_loss'] for r in p.runs]
        n = min(len(c) for c in curves)
        mean = np.mean([c[:n] for c in curves], axis=0)
        means.append(mean)
        same_kind = settings[_kind(p)]
        colour = _shades(kind_style(_kind(p))['color'], len(same_kind))[same_kind.index(_setting(p))]
        ls = '-' if p.description.permutation_label == 'normal' else '--'  # the MLP-Mixer solid, the others dashed
        ax.plot(np.arange(n), mean, ls=ls, color=colour, lw=1, label=p.point, **curve_markers(n))
    finite = np.concatenate(means)
    finite = finite[np.isfinite(finite) & (finite > 0)]
    if finite.size and finite.max() / finite.min() > 10:
        ax.set_yscale('log')
    ax.set_xlabel('epoch'), ax.set_ylabel('eval loss (mean over seeds)')
    integer_epochs(ax)
    key = ', '.join(f"{kind_style(k)['color'].removeprefix('tab:')}{'' if k == 'normal' else ' dashed'}: "
                    f"{kind_style(k)['label']}" for k in settings)
    ax.set_title(f'{exp}: eval loss ({key})', fontsize=10)
    ax.legend(fontsize=6, ncol=2)
    add_note(fig, '\n'.join(filter(None, [single_epoch_note([len(m) for m in means]), note])))
    path = out_dir / f'eval_loss_{exp}.png'
    fig.savefig(path, dpi=100)
    return path
