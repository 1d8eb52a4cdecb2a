"""Figures of the analyses (matplotlib, imported only to draw): Fig. 2(a)-(c), Fig. 4 (right), Fig. S.1 and the
spectra of trained models. Each function draws one PNG from computed data and returns nothing."""
import re
from typing import Dict, List, Optional, Sequence

import numpy as np

from ..errors import InvalidArgumentError
from ._matplotlib import require_matplotlib
from .compare import CkaMatrix

__all__ = ['branch_label', 'plot_cka_matrix', 'plot_cka_vs_density', 'plot_fig4', 'plot_fig_s1', 'plot_layer_spectra']


def branch_label(name: str) -> str:
    """A mixing branch for a tick: which block and which branch ('blocks.0.mlp_tokens' → 'b0 token',
    'blocks.0.mlp_channels' → 'b0 channel', an SW-MLP's 'blocks.3' → 'b3'); another name is kept."""
    m = re.fullmatch(r'blocks\.(\d+)(?:\.mlp_(token|channel)s)?', name)
    if m is None:
        return name
    return f'b{m.group(1)}' + (f' {m.group(2)}' if m.group(2) else '')


# the CKA heatmap: each cell this many inches while the figure stays under _CKA_MAX_SIDE a side (smaller past it)
_CKA_CELL_IN, _CKA_MAX_SIDE = 0.3, 10.0
_CKA_VALUE_FONT = (5.0, 7.0)     # a cell's value is printed at the largest size in this range that fits the cell,
_CKA_TICK_FONT = (4.0, 7.0)      # and not at all below it; the same for the tick labels (every k-th below it)


def _text_width(text: str, fontsize: float) -> float:
    """Width in points of `text` at `fontsize` (matplotlib's own glyph outlines: no renderer needed)."""
    from matplotlib.textpath import TextPath
    return TextPath((0, 0), text, size=fontsize).get_extents().width


def _wrap(text: str, length_pt: float, fontsize: float) -> str:
    """`text` broken into lines no longer than `length_pt` points at `fontsize` (an axis label kept inside its
    figure: a long run name would run past the figure's edge and be cut)."""
    import textwrap
    chars = max(12, int(length_pt / (_text_width('n', fontsize) or fontsize * 0.6)))
    return textwrap.fill(text, chars, break_long_words=True, break_on_hyphens=False)


def plot_cka_matrix(result: CkaMatrix, path: str, label_a: str, label_b: str) -> None:
    """Fig. 2(b)/(c): the CKA matrix, one feature per mixing branch from the input, each tick naming its block and
    branch ('b0 token', 'b0 channel'; an SW-MLP's 'b3') (rows: model A, columns: model B); its title gives the mean
    diagonal of a square matrix only (unequal feature counts pair no features).

    The figure grows with the matrix (:data:`_CKA_CELL_IN` a cell, up to :data:`_CKA_MAX_SIDE`); each cell prints its
    value at the largest font size that fits the cell (:data:`_CKA_VALUE_FONT`), and none where even the smallest
    would overlap its neighbours (the title then says the values are the colours'); tick labels shrink the same way,
    every k-th kept where they would overlap; the axis labels wrap to stay inside the figure."""
    rows, cols = result.matrix.shape
    width = min(_CKA_MAX_SIDE, max(4.6, 3.0 + _CKA_CELL_IN * cols))
    height = min(_CKA_MAX_SIDE, max(3.9, 2.4 + _CKA_CELL_IN * rows))
    figure = require_matplotlib()(figsize=(width, height), layout='constrained')
    ax = figure.add_subplot()
    im = ax.imshow(result.matrix, vmin=0, vmax=1, cmap='magma', origin='lower')
    figure.colorbar(im, ax=ax, label='linear CKA (mini-batch)')
    # the cell's size as drawn: the heatmap's area at the figure's size, less the room its labels and the colour bar
    # take (estimated here as the margins below, then measured once the layout has run)
    cell_pt = 72 * min((width - 2.4) / cols, (height - 1.9) / rows)
    tick_font = min(_CKA_TICK_FONT[1], cell_pt / 1.3)
    stride = 1 if tick_font >= _CKA_TICK_FONT[0] else int(np.ceil(_CKA_TICK_FONT[0] / tick_font))
    tick_font = max(tick_font, _CKA_TICK_FONT[0])
    ax.set_xticks(range(0, cols, stride), [branch_label(n) for n in result.names_b[::stride]], rotation=45,
                  ha='right', fontsize=tick_font)
    ax.set_yticks(range(0, rows, stride), [branch_label(n) for n in result.names_a[::stride]], fontsize=tick_font)
    ax.set_xlabel(_wrap(f'{label_b}: mixing branch (block, branch)', 72 * (width - 1.6), 10))
    ax.set_ylabel(_wrap(f'{label_a}: mixing branch (block, branch)', 72 * (height - 1.6), 10))
    figure.draw_without_rendering()  # runs the constrained layout: the heatmap's size is now the drawn one
    box = ax.get_window_extent()
    cell_pt = 72 / figure.dpi * min(box.width / cols, box.height / rows)
    value_font = min(_CKA_VALUE_FONT[1], 0.85 * cell_pt / (_text_width('0.00', 1.0) or 0.6 * 4),
                     cell_pt / 1.4)
    values = value_font >= _CKA_VALUE_FONT[0]
    if values:
        for i in range(rows):
            for j in range(cols):
                value = result.matrix[i, j]
                ax.text(j, i, f'{value:.2f}', ha='center', va='center', fontsize=value_font,
                        color='black' if value > 0.6 else 'white')
    title = f'CKA, mean diagonal {result.mean_diagonal:.3f}' if result.square else \
        f'CKA, {rows} × {cols} features (no diagonal: unequal counts)'
    ax.set_title(title if values else f'{title}\n(values by colour: {rows} × {cols} cells, too small to print)',
                 fontsize=9)
    figure.savefig(path, dpi=130)


def plot_cka_vs_density(densities: Sequence[float], means: Sequence[float], path: str, label_a: str,
                        mixer_density: Optional[float] = None, families: Optional[Sequence[str]] = None) -> None:
    """Fig. 2(a): mean diagonal CKA against model B's density p (log scale), with the Mixer's own p. `families`
    (each B's ``describe().family``, default all 'SW-MLP') gives one labelled series per family, so that a
    Mixer passed for comparison is not drawn as an SW-MLP."""
    if families is None:
        families = ['SW-MLP'] * len(densities)
    if not len(densities) == len(means) == len(families):
        raise InvalidArgumentError(f'densities, means and families must have one entry per model B, got '
                                   f'{len(densities)}, {len(means)} and {len(families)}')
    figure = require_matplotlib()(figsize=(4.6, 3.4))
    ax = figure.add_subplot()
    d, m, f = np.asarray(densities, dtype=float), np.asarray(means, dtype=float), np.asarray(families)
    for k, family in enumerate(dict.fromkeys(families)):
        keep = f == family
        order = np.argsort(d[keep])
        ax.plot(d[keep][order], m[keep][order], 'os^vD'[k % 5] + '-', label=f'{label_a} vs {family}')
    if mixer_density is not None:
        ax.axvline(mixer_density, color='gray', ls='--', label=f"Mixer's p = {mixer_density:.3g}")
    ax.set_xscale('log', base=2)
    ax.set_xlabel('density p of model B')
    ax.set_ylabel('mean diagonal CKA')
    ax.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=130)


def plot_fig4(rows: List[Dict[str, float]], gamma: float, path: str) -> None:
    """Fig. 4 (right): largest singular value against the width γm — SW-MLP's M ⊙ A (mean ± sd), c_γ, the
    sparse edge √L+, and the Mixers' token and channel W."""
    figure = require_matplotlib()(figsize=(5.2, 3.8))
    ax = figure.add_subplot()
    width = np.array([gamma * r['m'] for r in rows])
    ax.errorbar(width, [r['sv_max_mean'] for r in rows], yerr=[r['sv_max_sd'] for r in rows], fmt='o-',
                color='tab:blue', label='SW-MLP M ⊙ A')
    ax.plot(width, [r['sqrt_L_plus'] for r in rows], ':', color='tab:blue', label='√L+ (eq. 17)')
    ax.axhline(rows[0]['c_gamma'], color='tab:red', label=f'c_γ = 1 + √γ = {rows[0]["c_gamma"]:.3f}')
    ax.plot(width, [r['mixer_token_sv_max_mean'] for r in rows], 's--', color='tab:green', ms=4,
            label='Mixer token W (γS × S)')
    ax.plot(width, [r['mixer_channel_sv_max_mean'] for r in rows], '^--', color='tab:olive', ms=4,
            label='Mixer channel W (γC × C)')
    ax.set_xlabel('width γm')
    ax.set_ylabel('largest singular value')
    ax.legend(fontsize=7)
    figure.tight_layout()
    figure.savefig(path, dpi=130)


def plot_fig_s1(rows: List[Dict[str, float]], values: np.ndarray, a_kept: float, path: str) -> None:
    """Fig. S.1 (center, right): the singular values λ at one a (histogram), the largest λ against a."""
    figure = require_matplotlib()(figsize=(8.4, 3.4))
    left, right = figure.subplots(1, 2)
    if values.size:
        left.hist(values, bins=80, density=True, color='tab:blue')
        left.set_yscale('log')
    left.set_xlabel('λ')
    left.set_title(f'a = {a_kept:g}, Ω = 10³ ({rows[0]["trials"]} trials)', fontsize=9)
    right.errorbar([r['a'] for r in rows], [r['sv_max_mean'] for r in rows], yerr=[r['sv_max_sd'] for r in rows],
                   fmt='o-')
    right.set_xlabel('a  (m = Ω^((1+a)/2), p = Ω^(−a))')
    right.set_ylabel('largest λ')
    figure.tight_layout()
    figure.savefig(path, dpi=130)


def plot_layer_spectra(table: List[Dict[str, float]], path: str, title: str) -> None:
    """Largest singular value of every mixing FC of a trained model, at initialisation, and the edge
    predicted for its initialisation."""
    figure = require_matplotlib()(figsize=(max(5., 0.45 * len(table) + 2), 3.8))
    ax = figure.add_subplot()
    x = np.arange(len(table))
    ax.plot(x, [r['sv_max'] for r in table], 'o-', label='trained')
    ax.plot(x, [r['sv_max_init'] for r in table], 's-', label='initialisation')
    ax.plot(x, [r['edge_init'] for r in table], '_', ms=14, mew=2, color='tab:red', label='edge of the init')
    ax.set_xticks(x, [r['layer'].replace('blocks.', '').replace('mlp_', '') for r in table], rotation=60,
                  ha='right', fontsize=7)
    ax.set_xlabel('mixing FC (block.branch.layer), from the input')
    ax.set_ylabel('largest singular value')
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=130)
