"""Figures of the width analysis (matplotlib, imported only to draw): Fig. S.9 (effective weights) and Fig. 3
(m and p against C at fixed Ω, with the registered models). Data functions need numpy only."""
import dataclasses
import math
from collections import OrderedDict
from typing import Dict, List, Optional, Sequence

import numpy as np

from ..catalog import ModelSummary
from ..width import WidthPoint, optimal_width, tokens_for_omega
from ._matplotlib import require_matplotlib

__all__ = ['width_curve_data', 'plot_weights', 'plot_width']


def width_curve_data(omega: float, gamma: float = 1.0, c_min: Optional[float] = None, c_max: Optional[float] = None,
                     num: int = 400) -> Dict[str, np.ndarray]:
    """The continuous fixed-Ω curve: C (log-spaced), S(C), m = S·C and p = Ω/(γm²) (eq. 13-14), each (num,).
    C spans [c_min, c_max] (default C*/20 to 20·C*) clipped to [1, C at which S = 1]."""
    c_star = optimal_width(omega, gamma)[0]
    c_top = (math.sqrt(1 + 8 * omega / gamma) - 1) / 2  # S(C) = 1
    c_min, c_max = max(1.0, c_min or c_star / 20), min(c_top, c_max or c_star * 20)
    dims = np.geomspace(c_min, c_max, num)
    tokens = np.array([tokens_for_omega(c, omega, gamma) for c in dims])
    width = dims * tokens
    return {'C': dims, 'S': tokens, 'm': width, 'p': omega / (gamma * width ** 2)}


def plot_weights(weights: Dict[str, np.ndarray], out: str) -> None:
    """Fig. S.9: the non-zero pattern of M ⊙ A (SW-MLP), I_C ⊗ W (S-Mixer) and J2 (I_C ⊗ W) J1 (RP S-Mixer)."""
    Figure = require_matplotlib()
    titles = {'sw_mlp': 'SW-MLP: M ⊙ A', 'mixer': 'S-Mixer: $I_C \\otimes W$',
              'rp_mixer': 'RP S-Mixer: $J_2 (I_C \\otimes W) J_1$'}
    fig = Figure(figsize=(9.6, 3.7), layout='constrained')
    axes = fig.subplots(1, 3)
    for ax, key in zip(axes, ('sw_mlp', 'mixer', 'rp_mixer')):
        w = weights[key]
        ax.imshow(w != 0, cmap='Greys', interpolation='nearest', vmin=0, vmax=1)
        ax.set_title(f'{titles[key]}\nnon-zero {np.count_nonzero(w) / w.size:.3f} of {w.shape[0]}×{w.shape[1]}',
                     fontsize=9)
        ax.set_xticks([]), ax.set_yticks([])
    fig.savefig(out, dpi=100, bbox_inches='tight', pad_inches=0.1)


def plot_width(omega: float, gamma: float, out: str, points: Sequence[WidthPoint] = (),
               models: Sequence[ModelSummary] = ()) -> None:
    """Fig. 3: m = S·C and p against C at fixed Ω and γ, the optimum C* = S* marked, `points` (e.g. a patch
    sweep) and registered `models` placed at their (C, m)."""
    Figure = require_matplotlib()
    c_star, m_max = optimal_width(omega, gamma)
    dims = [pt.dim for pt in points] + [mw.dim for mw in models]
    data = width_curve_data(omega, gamma, c_min=min([c_star / 20] + [c / 1.5 for c in dims]),
                            c_max=max([c_star * 20] + [c * 1.5 for c in dims]))
    fig = Figure(figsize=(7.2, 4.2), layout='constrained')
    ax = fig.subplots()
    ax.plot(data['C'], data['m'], color='tab:red', label='m = S·C')
    ax.axvline(c_star, color='grey', ls='--', lw=0.8)
    ax.plot([c_star], [m_max], marker='*', ms=14, color='tab:red', ls='none',
            label=f'optimum C* = S* = {c_star:.1f}, m = {m_max:.0f}')
    for pt in points:
        label = f'P={pt.patch}' if pt.patch is not None else f'({pt.dim},{pt.num_tokens})'
        ax.plot([pt.dim], [pt.width], marker='o', color='tab:blue', ls='none')
        ax.annotate(label, (pt.dim, pt.width), textcoords='offset points', xytext=(4, -12), fontsize=8)
    for mw, marker in zip(_dedupe(models), 'sDv^P<>X'):
        gamma_note = '' if math.isclose(mw.gamma, gamma, rel_tol=1e-3) else f', γ={mw.gamma:.3g}'
        ax.plot([mw.dim], [mw.width], marker=marker, ms=8, color='tab:green', ls='none',
                label=f'{mw.name} (S={mw.num_tokens}, C={mw.dim}{gamma_note})')
    ax.set_xscale('log')
    ax.set_xlabel('channels C')
    ax.set_ylabel('effective width m = S·C')
    ax.set_ylim(0, m_max * 1.08)
    ax2 = ax.twinx()
    ax2.plot(data['C'], data['p'], color='tab:orange', lw=1, ls=':', label='p = Ω/(γm²) (right axis)')
    ax2.set_yscale('log')
    ax2.set_ylabel('density p', color='tab:orange')
    pairs_note = '; blue points: (C, S)' if any(pt.patch is None for pt in points) else ''
    omega_text = f'{omega:.0f}' if float(omega).is_integer() else f'{omega:.6g}'
    ax.set_title(f'Fixed Ω = {omega_text}, γ = {gamma:.3g}: S(C) from eq. 14{pairs_note}', fontsize=10)
    handles = ax.get_legend_handles_labels()
    handles2 = ax2.get_legend_handles_labels()
    ax.legend(handles[0] + handles2[0], handles[1] + handles2[1], fontsize=8, loc='lower center')
    fig.savefig(out, dpi=100)


def _dedupe(models: Sequence[ModelSummary]) -> List[ModelSummary]:
    """One entry per geometry: normal and RP twins share (S, C, Ω); keep the first name, join the rest."""
    seen: OrderedDict[tuple, ModelSummary] = OrderedDict()
    for mw in models:
        key = (mw.num_tokens, mw.dim, mw.omega)
        if key in seen:
            first = seen[key]
            seen[key] = dataclasses.replace(first, name=f'{first.name} / {mw.name}')
        else:
            seen[key] = mw
    return list(seen.values())
