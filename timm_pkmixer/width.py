"""Width and sparsity of Mixers seen as wide sparse MLPs (Hayase & Karakida 2024, §4.1, App. C.4).

Notation: S tokens, C channels, expansion factor γ, effective width m = S·C, Ω = average number
of connections (non-zero weights) per layer, p = ratio of non-zero entries of the effective weight.
"""
import math
from dataclasses import dataclass
from typing import List, Optional, Sequence

from .errors import ArgumentValueError, InvalidArgumentError
from .validation import positive_int, positive_real, probability

__all__ = [
    'mixer_omega', 'tokens_for_omega', 'optimal_width', 'density', 'sw_mlp_width', 'gamma_for_omega',
    'WidthPoint', 'width_point', 'width_curve', 'patch_sweep', 'omega_ratio', 'MAX_OMEGA_RATIO',
]

# Ω/γ beyond which the formulas leave double precision: m² = (Ω/γ)^(4/3) overflows near 1e231
MAX_OMEGA_RATIO = 1e200


def omega_ratio(omega: float, gamma: float) -> float:
    """Ω/γ, after checking that Ω and γ describe a Mixer the formulas can compute: Ω ≥ 1 connection, and
    1 ≤ Ω/γ ≤ `MAX_OMEGA_RATIO` (S = C = 1 gives Ω = γ, the least; beyond the upper bound floats overflow).
    Raises :class:`ArgumentValueError` naming omega."""
    omega, gamma = positive_real('omega', omega), positive_real('gamma', gamma)
    if omega < 1:
        raise ArgumentValueError('omega', f'must be at least 1 (connections per layer), got {omega:g}')
    ratio = omega / gamma
    if ratio < 1:
        raise ArgumentValueError('omega', f'{omega:g} is below gamma {gamma:g}: no Mixer has fewer connections per '
                                          'layer than γ (Ω = γ(C·S² + C²·S)/2 ≥ γ at S = C = 1)')
    if ratio > MAX_OMEGA_RATIO:
        raise ArgumentValueError('omega', f'{omega:g} is too large: omega/gamma = {ratio:g} exceeds '
                                          f'{MAX_OMEGA_RATIO:g}, beyond which the width formulas overflow')
    return ratio


def mixer_omega(num_tokens: float, dim: float, gamma: float = 1.0) -> float:
    """Ω = γ(C·S² + C²·S)/2 (eq. 14); the S-Mixer is γ = 1 (eq. S.42)."""
    positive_real('S', num_tokens), positive_real('C', dim), positive_real('gamma', gamma)
    return gamma * (dim * num_tokens ** 2 + dim ** 2 * num_tokens) / 2


def tokens_for_omega(dim: float, omega: float, gamma: float = 1.0) -> float:
    """S(C) at fixed Ω and γ: S = (√(C² + 8Ω/(γC)) − C)/2, the positive root of eq. 14."""
    positive_real('C', dim)
    ratio = omega_ratio(omega, gamma)
    return (math.sqrt(dim ** 2 + 8 * ratio / dim) - dim) / 2


def optimal_width(omega: float, gamma: float = 1.0) -> tuple:
    """(C* = S* = (Ω/γ)^(1/3), max m = (Ω/γ)^(2/3)) (eq. 15)."""
    c_star = omega_ratio(omega, gamma) ** (1 / 3)
    return c_star, c_star ** 2


def density(omega: float, gamma: float, width: float) -> float:
    """p = Ω/(γ m²) (eq. 13): the ratio of non-zero entries of the effective weight."""
    positive_real('omega', omega), positive_real('gamma', gamma), positive_real('m', width)
    return omega / (gamma * width ** 2)


def sw_mlp_width(omega: float, p: float, gamma: float = 1.0) -> int:
    """Width m of an SW-MLP with Ω connections per layer at density p: m = √(Ω/(γp)) (eq. 13, S.43)."""
    ratio, p = omega_ratio(omega, gamma), probability('density p', p)
    return round(math.sqrt(ratio / p))


def gamma_for_omega(num_tokens: float, dim: float, omega: float) -> float:
    """γ = 2Ω/(C·S² + C²·S): eq. 14 solved for the expansion factor (Mixer-B-W: S=256, C=588 → 4.57)."""
    positive_real('S', num_tokens), positive_real('C', dim), positive_real('omega', omega)
    gamma = 2 * omega / (dim * num_tokens ** 2 + dim ** 2 * num_tokens)
    omega_ratio(omega, gamma)
    return gamma


@dataclass(frozen=True)
class WidthPoint:
    """One integer (C, S) on the fixed-Ω curve of eq. 14; `patch` P when C = in_chans·P² (eq. S.44)."""
    dim: int                  # C
    num_tokens: int           # S
    gamma: float              # γ
    patch: Optional[int] = None  # P

    @property
    def width(self) -> int:
        """Effective width m = S·C."""
        return self.num_tokens * self.dim

    @property
    def omega(self) -> float:
        """Ω of the integer (S, C), eq. 14 (close to, not equal to, the Ω it was solved for)."""
        return mixer_omega(self.num_tokens, self.dim, self.gamma)

    @property
    def density(self) -> float:
        """p = Ω/(γm²) = (1/C + 1/S)/2."""
        return density(self.omega, self.gamma, self.width)

    def as_dict(self) -> dict:
        return dict(P=self.patch, C=self.dim, S=self.num_tokens, m=self.width, p=self.density,
                    omega=self.omega, gamma=self.gamma)


def width_point(dim: int, omega: float, gamma: float = 1.0, patch: Optional[int] = None) -> WidthPoint:
    """The point at channels C: S = round(S(C)) at fixed Ω, γ (how App. C.4 / C.5 pick their pairs)."""
    positive_int('C', dim)
    num_tokens = round(tokens_for_omega(dim, omega, gamma))
    if num_tokens < 1:
        raise InvalidArgumentError(f'C={dim} leaves less than one token at omega={omega:g}, gamma={gamma:g}')
    return WidthPoint(int(dim), int(num_tokens), float(gamma), patch)


def width_curve(
        omega: float,
        gamma: float = 1.0,
        dims: Optional[Sequence[int]] = None,
        mirror: bool = False,
) -> List[WidthPoint]:
    """Integer points along the fixed-Ω curve, ordered by C.

    Args:
        omega: Ω, connections per layer.
        gamma: Expansion factor γ.
        dims: Channels C to place, S = round(S(C)) each. Default: C = round(C*·2^(-k/2)), k = 0..6
            (C* down to C*/8), mirrored.
        mirror: Also add each (C, S) as (C, S) = (S, C), which has the same Ω (eq. 14 is symmetric in S and C):
            the symmetric pairs of App. C.4.
    """
    if dims is None:
        c_star = optimal_width(omega, gamma)[0]
        dims, mirror = [max(1, round(c_star * 2 ** (-k / 2))) for k in range(7)], True
    points = {}
    for c in dims:
        pt = width_point(c, omega, gamma)
        points.setdefault(pt.dim, pt)
        if mirror:
            points.setdefault(pt.num_tokens, WidthPoint(pt.num_tokens, pt.dim, float(gamma)))
    return [points[c] for c in sorted(points)]


def patch_sweep(omega: float, gamma: float, patches: Sequence[int], in_chans: int = 3) -> List[WidthPoint]:
    """C = in_chans·P² and S from eq. S.44 for each patch size P (the ImageNet sweep of C.5, Fig. 6d)."""
    for p in patches:
        positive_int('patch size P', p)
    return [width_point(in_chans * p * p, omega, gamma, patch=p) for p in patches]
