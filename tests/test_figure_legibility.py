"""Figures that show what they hold: one-epoch runs (what everyone tries first) drawn as visible points and said to be
one point per run; the CKA heatmap legible at any size, every text inside the figure, no two cell values overlapping."""
import itertools

import numpy as np
import pytest

import timm_pkmixer.analysis.figures as analysis_figures
from timm_pkmixer.analysis.compare import CkaMatrix
from timm_pkmixer.reports.curve_figures import MARKED_POINTS, curve_markers, plot_curve_bands, single_epoch_note
from timm_pkmixer.reports.report import build_report, write_report

from conftest import keep_figures
from test_report import run_folder

pytest.importorskip('matplotlib')

ONE_EPOCH = 'one epoch per run: each curve is a single point (dots)'


@pytest.fixture
def figures_drawn(monkeypatch):
    import timm_pkmixer.reports.curve_figures as curve_figures
    import timm_pkmixer.reports.figures as figures
    return keep_figures(monkeypatch, figures, curve_figures, analysis_figures)


def _curves(fig):
    """The data lines of every panel with an epoch axis (not the error bars' or the reference lines')."""
    return [line for ax in fig.axes if ax.get_xlabel() == 'epoch' for line in ax.get_lines()]


def _notes(fig):
    return '\n'.join(t.get_text() for t in fig.texts)


def test_the_marker_threshold():
    assert curve_markers(1)['marker'] == 'o' and curve_markers(MARKED_POINTS) == curve_markers(1)
    assert curve_markers(MARKED_POINTS + 1) == {}
    assert single_epoch_note([1, 1]).startswith(ONE_EPOCH) and single_epoch_note([1, 2]) == single_epoch_note([]) == ''


def test_a_one_epoch_report_draws_every_point_and_says_it_has_one_per_run(tmp_path, figures_drawn, logged):
    """Two depths, two seeds, one epoch each: every curve is one visible dot (a line without markers drew nothing),
    the curve figures say one point per run under their panels, and the report logs a warning."""
    for depth in (2, 4):
        for seed in (0, 1):
            run_folder(tmp_path / 'runs', f'd{depth}_seed{seed}', seed, top1=(50. + seed,), loss=[1.5], epochs=1,
                       model_kwargs=dict(num_blocks=depth))
    report = build_report([str(tmp_path / 'runs')])
    assert report.experiment == 'depth'
    write_report(report, str(tmp_path / 'out'))
    eval_loss, bands = [fig for fig in figures_drawn if _curves(fig)]
    for fig in (eval_loss, bands):
        lines = _curves(fig)
        assert lines and all(len(line.get_xdata()) == 1 and line.get_marker() == 'o' for line in lines)
        assert ONE_EPOCH in _notes(fig)
    assert f'depth: {single_epoch_note([1])}' in logged()


def test_long_runs_draw_plain_lines_and_no_one_epoch_note(tmp_path, figures_drawn):
    n = MARKED_POINTS + 1
    rng = np.random.default_rng(0)
    trials = [dict(eval_loss=list(rng.random(n)), train_loss=list(rng.random(n))) for _ in range(2)]
    plot_curve_bands({'a_normal': trials, 'a_random': trials}, str(tmp_path / 'b.png'), note='data: x')
    [fig] = figures_drawn
    assert all(line.get_marker() in ('None', None, '') for line in _curves(fig))
    assert _notes(fig) == 'data: x'
    short = [dict(eval_loss=[1., .9, .8])]
    plot_curve_bands({'s': short}, str(tmp_path / 's.png'))
    assert all(line.get_marker() == 'o' for line in _curves(figures_drawn[-1]))  # 3 epochs: every point marked
    assert ONE_EPOCH not in _notes(figures_drawn[-1])


def test_plot_run_of_one_epoch_runs_marks_the_points_and_warns(tmp_path, figures_drawn, logged):
    from timm_pkmixer.reports.figures import plot_runs
    paths = [str(run_folder(tmp_path, f'a_seed{s}', s, top1=(40.,), epochs=1) / 'summary.csv') for s in (0, 1)]
    plot_runs(paths, str(tmp_path / 'r.png'))
    [fig] = figures_drawn
    lines = _curves(fig)
    assert len(lines) == 3 and all(line.get_marker() == 'o' for line in lines)  # train, val loss; top-1
    assert _notes(fig).startswith(ONE_EPOCH)
    assert any(line.startswith(ONE_EPOCH) and line.endswith('(2 summary.csv files)') for line in logged())


def _branches(n):
    return [f'blocks.{i // 2}.mlp_{"tokens" if i % 2 == 0 else "channels"}' for i in range(n)]


def _drawn(fig):
    """`fig` drawn by Agg (as savefig draws it): its renderer."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    return canvas.get_renderer()


@pytest.mark.parametrize('n, values', [(3, True), (16, True), (48, False)])
def test_the_cka_heatmap_keeps_every_text_inside_and_no_cell_value_overlaps(tmp_path, figures_drawn, n, values):
    """16 × 16 (an 8-block Mixer's branches) used to print overlapping values in every cell in a 4.6 in figure and
    cut a run-named y label; now the figure grows with the matrix, values shrink to fit their cells or (48 × 48)
    are dropped with the title saying so, and the labels wrap to stay inside the figure."""
    matrix = np.random.default_rng(n).random((n, n))
    result = CkaMatrix(matrix, _branches(n), _branches(n), examples=8, batches=2)
    analysis_figures.plot_cka_matrix(result, str(tmp_path / 'cka.png'), 'depth_L8_normal_seed0_of_the_fig7_sweep',
                                     'depth_L8_random_seed1_of_the_fig7_sweep')
    fig = figures_drawn[-1]
    renderer = _drawn(fig)
    frame = fig.bbox
    tight = fig.get_tightbbox(renderer).transformed(fig.dpi_scale_trans)  # inches → display units
    assert frame.x0 - 1 <= tight.x0 and tight.x1 <= frame.x1 + 1 and frame.y0 - 1 <= tight.y0 and \
        tight.y1 <= frame.y1 + 1
    texts = [t for t in fig.findobj(lambda a: hasattr(a, 'get_text') and hasattr(a, 'get_window_extent'))
             if t.get_visible() and t.get_text()]
    for t in texts:
        box = t.get_window_extent(renderer)
        assert frame.x0 - 1 <= box.x0 and box.x1 <= frame.x1 + 1 and frame.y0 - 1 <= box.y0 and \
            box.y1 <= frame.y1 + 1, t.get_text()
    heatmap = fig.axes[0]
    cells = heatmap.texts
    assert len(cells) == (n * n if values else 0)
    assert ('too small to print' in heatmap.get_title()) == (not values)
    if values:
        assert min(c.get_fontsize() for c in cells) >= 5
        boxes = [c.get_window_extent(renderer) for c in cells]
        assert not any(a.overlaps(b) for a, b in itertools.combinations(boxes, 2))
        cell_w = heatmap.get_window_extent(renderer).width / n
        assert max(b.width for b in boxes) < cell_w  # each value within its own cell
    rows = [t.get_window_extent(renderer) for t in heatmap.get_yticklabels() if t.get_text()]
    assert rows and not any(a.overlaps(b) for a, b in itertools.combinations(rows, 2))
    # the column labels are turned 45°: two of them, d apart along the axis, clear each other when d·sin 45° is at
    # least a line's height (their upright boxes overlap whatever d is)
    columns = [t for t in heatmap.get_xticklabels() if t.get_text()]
    spacing = np.diff(sorted(heatmap.transData.transform([(x, 0) for x in heatmap.get_xticks()])[:, 0]))
    height = max(t.get_fontsize() for t in columns) * fig.dpi / 72
    assert spacing.min() * np.sin(np.pi / 4) >= height


def test_a_plain_install_brings_matplotlib_and_the_plot_extra_still_names_it():
    """The quick start (`pip install .`, then `pkmixer demo` / `report`) draws the report's figures: matplotlib is a
    dependency; `'.[plot]'`, in older instructions, still installs."""
    tomllib = pytest.importorskip('tomllib')
    from pathlib import Path
    project = tomllib.loads((Path(__file__).resolve().parents[1] / 'pyproject.toml').read_text())['project']
    assert any(d.replace(' ', '').startswith('matplotlib>=') for d in project['dependencies'])
    assert project['optional-dependencies']['plot'] == ['matplotlib>=3.6']


# ------------------------------------------------------------------------- integer factors, a colour per kind

def _report_figures(tmp_path, depths, experiment='depth', **more):
    """The report's figures of normal and RP S-Mixers at `depths`, two seeds each: {title: figure}."""
    for depth in depths:
        for model, kind in (('s_mixer_s64c64_32', 'normal'), ('s_mixer_rp_s64c64_32', 'random')):
            for seed in (0, 1):
                run_folder(tmp_path / 'runs', f'L{depth}_{kind}_seed{seed}', seed, model=model, top1=(50., 60. + seed),
                           loss=[1.5, 1.2], epochs=2, model_kwargs=dict(num_blocks=depth, **more))
    write_report(build_report([str(tmp_path / 'runs')], experiment=experiment), str(tmp_path / 'out'))


def _ticks(ax):
    """The x ticks inside the axis, as drawn: (value, label)."""
    _drawn(ax.figure)
    lo, hi = sorted(ax.get_xlim())
    return [(x, t.get_text()) for x, t in zip(ax.get_xticks(), ax.get_xticklabels()) if lo <= x <= hi]


@pytest.mark.parametrize('depths,ticks', [((2,), [(2, '2')]), ((2, 3), [(2, '2'), (3, '3')])])
def test_an_integer_factor_has_integer_ticks_even_with_one_value(tmp_path, figures_drawn, depths, ticks):
    """One depth drew ticks at 1.900, 1.925, … 2.100; two close ones at 2.0, 2.2, …"""
    _report_figures(tmp_path, depths)
    [depth] = [ax for fig in figures_drawn for ax in fig.axes if ax.get_xlabel() == 'depth L (blocks)']
    assert [(x, label.replace('\N{MINUS SIGN}', '-')) for x, label in _ticks(depth)] == ticks


def test_a_log_axis_of_one_value_ticks_at_it(tmp_path, figures_drawn):
    _report_figures(tmp_path, (2,), experiment='gamma')
    [channels] = [ax for fig in figures_drawn for ax in fig.axes if ax.get_xlabel().startswith('channels C')]
    assert _ticks(channels) == [(64, '64')]  # s_mixer_s64c64_32's C (no tick before: a log axis ticks at powers of ten)


def test_each_permutation_kind_has_its_colour_in_every_figure(tmp_path, figures_drawn):
    """normal and RP used to share one colour per setting in the eval-loss figure, told apart by dashes only (and
    the RP of a lone setting was orange there, red in depth.png): now blue and red everywhere, a shade per setting."""
    from matplotlib.colors import to_rgb
    _report_figures(tmp_path, (2, 4))
    by_title = {ax.get_title(): ax for fig in figures_drawn for ax in fig.axes}
    depth = by_title['error against depth (Fig. 7)']
    errorbars = {c.get_label(): to_rgb(c.lines[0].get_color()) for c in depth.containers}
    assert errorbars == {'normal': to_rgb('tab:blue'), 'RP': to_rgb('tab:red')}
    [eval_loss] = [ax for title, ax in by_title.items() if title.startswith('depth: eval loss')]
    assert eval_loss.get_title() == 'depth: eval loss (blue: normal, red dashed: RP)'
    lines = {line.get_label(): (to_rgb(line.get_color()), line.get_linestyle()) for line in eval_loss.get_lines()}
    assert set(lines) == {'L2_normal', 'L2_random', 'L4_normal', 'L4_random'}
    colours = {label: colour for label, (colour, _) in lines.items()}
    assert colours['L2_normal'] == tuple(0.7 * c for c in to_rgb('tab:blue'))  # the darker shade: the first setting
    assert len(set(colours.values())) == 4  # each setting of each kind its own shade
    for label, (colour, style) in lines.items():
        red, _, blue = colour
        assert (blue > red, style) == ((True, '-') if label.endswith('normal') else (False, '--')), label
