"""Figures of the analyses (matplotlib, the optional `plot` extra): Fig. 2(a)-(c), Fig. 4 (right), Fig. S.1 and the
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


def plot_cka_matrix(result: CkaMatrix, path: str, label_a: str, label_b: str) -> None:
    """Fig. 2(b)/(c): the CKA matrix, one feature per mixing branch from the input, each tick naming its block and
    branch ('b0 token', 'b0 channel'; an SW-MLP's 'b3') (rows: model A, columns: model B); its title gives the mean
    diagonal of a square matrix only (unequal feature counts pair no features)."""
    figure = require_matplotlib()(figsize=(4.6, 3.9))
    ax = figure.add_subplot()
    im = ax.imshow(result.matrix, vmin=0, vmax=1, cmap='magma', origin='lower')
    rows, cols = result.matrix.shape
    for i in range(rows):
        for j in range(cols):
            value = result.matrix[i, j]
            ax.text(j, i, f'{value:.2f}', ha='center', va='center', fontsize=7,
                    color='black' if value > 0.6 else 'white')
    ax.set_xticks(range(cols), [branch_label(n) for n in result.names_b], rotation=45, ha='right', fontsize=7)
    ax.set_yticks(range(rows), [branch_label(n) for n in result.names_a], fontsize=7)
    ax.set_xlabel(f'{label_b}: mixing branch (block, branch)')
    ax.set_ylabel(f'{label_a}: mixing branch (block, branch)')
    title = f'CKA, mean diagonal {result.mean_diagonal:.3f}' if result.square else \
        f'CKA, {rows} × {cols} features (no diagonal: unequal counts)'
    ax.set_title(title, fontsize=9)
    figure.colorbar(im, ax=ax, label='linear CKA (mini-batch)')
    figure.tight_layout()
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
