"""The numbers of `pkmixer width`: the optimum width at fixed Ω (eq. 15), the (P, C, S, m, p) table along the
curve (eq. 14, S.42, S.44), γ of a given (S, C, Ω), and the numbers of a registered model. Every number
comes from `timm_pkmixer.width`, the functions the models use, or from the models themselves. The arithmetic
modes import neither torch nor timm: only `models` does."""
from typing import List, Optional

from ..errors import InvalidArgumentError
from ..validation import boolean
from ..width import WidthPoint, gamma_for_omega, mixer_omega, optimal_width, patch_sweep, width_curve

__all__ = ['width_report']


def _optimum(omega: float, gamma: float) -> dict:
    c_star, m_max = optimal_width(omega, gamma)
    return dict(C=c_star, S=c_star, m=m_max, p=omega / (gamma * m_max ** 2))


def _point_row(pt: WidthPoint, m_max: float) -> dict:
    return dict(pt.as_dict(), width_fraction=pt.width / m_max)


def width_report(
        omega: Optional[float] = None,
        gamma: Optional[float] = None,
        dims: Optional[List[int]] = None,
        patches: Optional[List[int]] = None,
        num_tokens: Optional[int] = None,
        in_chans: int = 3,
        models: Optional[List[str]] = None,
        mirror: bool = False,
) -> dict:
    """The numbers `pkmixer width` prints, as a dict (its `--json` output).

    Modes: `models` (registered models); `num_tokens` with one C in `dims` (solve γ from Ω, or Ω from γ);
    `omega` with `patches` (C = in_chans·P², S from eq. S.44), with `dims` (S from eq. S.42/14 per C), or
    alone (the curve around the optimum); `mirror` adds (S, C) for each (C, S) of `dims`.
    """
    mirror = boolean('mirror', mirror)
    if models:
        if any(v is not None for v in (omega, gamma, dims, patches, num_tokens)):
            raise InvalidArgumentError('models cannot be combined with omega, gamma, dims, patches or num_tokens')
        from ..catalog import summarize  # torch and timm: only for registered models
        return {'models': [summarize(name).as_dict() for name in models]}
    if num_tokens is not None:
        if not dims or len(dims) != 1 or patches:
            raise InvalidArgumentError('num_tokens (S) needs exactly one of dims (C), and no patches')
        if omega is not None and gamma is not None:
            raise InvalidArgumentError('with num_tokens and dims give omega (to solve γ) or gamma (to compute Ω), '
                                       'not both')
        dim = dims[0]
        if omega is not None:
            gamma = gamma_for_omega(num_tokens, dim, omega)
        else:
            gamma = 1.0 if gamma is None else gamma
            omega = mixer_omega(num_tokens, dim, gamma)
        pt = WidthPoint(dim, num_tokens, gamma)
        opt = _optimum(omega, gamma)
        return dict(mode='point', omega=omega, gamma=gamma, optimum=opt, points=[_point_row(pt, opt['m'])])
    if omega is None:
        raise InvalidArgumentError('give omega (with gamma, dims or patches), num_tokens and dims, or models')
    gamma = 1.0 if gamma is None else gamma
    if patches and dims:
        raise InvalidArgumentError('give dims or patches, not both')
    opt = _optimum(omega, gamma)
    if patches:
        points, mode = patch_sweep(omega, gamma, patches, in_chans=in_chans), 'patch'
    else:
        points, mode = width_curve(omega, gamma, dims, mirror), 'dims' if dims else 'curve'
    return dict(mode=mode, omega=omega, gamma=gamma, optimum=opt, points=[_point_row(pt, opt['m']) for pt in points])
