"""Min–max bands over trials (Figs. S.6–S.8): the arithmetic exactly, and the figure drawn from a report's runs."""
import numpy as np
import pytest

from timm_pkmixer.errors import InvalidArgumentError
from timm_pkmixer.reports.curve_figures import min_max_band, plot_curve_bands


def test_min_max_band_is_mean_min_and_max_per_epoch_over_the_shortest_trial():
    epochs, mean, lo, hi = min_max_band([[1., 4., 2.], [3., 0., 8., 9.], [2., 2., 5.]])
    assert epochs.tolist() == [0, 1, 2]  # the 4-epoch trial is cut to the others' length
    assert mean.tolist() == [2., 2., 5.] and lo.tolist() == [1., 0., 2.] and hi.tolist() == [3., 4., 8.]
    assert [a.shape for a in min_max_band([[0.5]])] == [(1,)] * 4


@pytest.mark.parametrize('curves', [[], [[]], [[1., 2.], []]])
def test_min_max_band_refuses_no_curve(curves):
    with pytest.raises(InvalidArgumentError, match='curves: need at least one non-empty curve'):
        min_max_band(curves)


def test_plot_curve_bands_draws_each_metric_and_refuses_absent_ones(tmp_path):
    pytest.importorskip('matplotlib')
    rng = np.random.default_rng(0)
    trials = lambda: [dict(eval_loss=list(rng.random(5)), train_loss=list(rng.random(5))) for _ in range(3)]  # noqa
    path = plot_curve_bands({'c64_normal': trials(), 'c64_random': trials()}, str(tmp_path / 'bands.png'),
                            title='Fig. S.8 form')
    assert path == tmp_path / 'bands.png' and path.read_bytes()[:8] == b'\x89PNG\r\n\x1a\n'
    from PIL import Image
    assert Image.open(path).size == (840, 360)  # two panels (eval_top1 absent: skipped) of 4.2 × 3.6 in at 100 dpi
    with pytest.raises(InvalidArgumentError, match=r"metrics: none of \['eval_top5'\]"):
        plot_curve_bands({'a': trials()}, str(tmp_path / 'x.png'), metrics=('eval_top5',))


def test_an_axis_of_one_epoch_ticks_at_that_epoch_only():
    """A one-epoch run's panel: its x ticks are whole epochs (the epoch itself), not -0.04 … 0.04."""
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt

    from timm_pkmixer.reports.curve_figures import integer_epochs
    fig, ax = plt.subplots()
    ax.plot([3], [0.5], marker='o')
    integer_epochs(ax)
    fig.canvas.draw()
    lo, hi = ax.get_xlim()
    shown = [x for x in ax.get_xticks() if lo <= x <= hi]
    plt.close(fig)
    assert (lo, hi) == (2.5, 3.5) and shown == [3.0]
