"""Linear CKA (Kornblith et al. 2019) and mini-batch CKA (Nguyen et al. 2021, §3.1(2)).

For features X (n, d1), Y (n, d2) with linear Gram matrices K = XXᵀ, L = YYᵀ:

* biased HSIC₀(K, L) = tr(K H L H) / (n − 1)², H = I − 11ᵀ/n (Gretton et al. 2005, Kornblith et al. 2019);
* unbiased HSIC₁(K, L) = [tr(K̃L̃) + 1ᵀK̃1 · 1ᵀL̃1 / ((n − 1)(n − 2)) − 2/(n − 2) · 1ᵀK̃L̃1] / (n(n − 3)),
  K̃, L̃ = K, L with zero diagonal (Song et al. 2012), n ≥ 4;
* CKA = HSIC(K, L) / √(HSIC(K, K) HSIC(L, L)).

Mini-batch CKA sums HSIC₁ over batches before the ratio: CKA = Σ_b HSIC₁(K_b, L_b) / √(Σ_b HSIC₁(K_b, K_b)
Σ_b HSIC₁(L_b, L_b)) — not an average of per-batch CKAs. Everything is computed in float64.
"""
import math
from typing import Optional, Sequence, Tuple

import torch

from ..errors import InvalidArgumentError
from ..validation import boolean

__all__ = ['gram', 'hsic_biased', 'hsic_unbiased', 'linear_cka', 'HsicAccumulator', 'check_self_hsic']


def _features(name: str, x: torch.Tensor) -> torch.Tensor:
    if not isinstance(x, torch.Tensor):
        raise InvalidArgumentError(f'{name} must be a tensor of shape (n, d), got {type(x).__name__}')
    if x.ndim < 2:
        raise InvalidArgumentError(f'{name} must have shape (n, d) (examples first), got shape {tuple(x.shape)}')
    return x.detach().reshape(x.shape[0], -1).double()


def gram(x: torch.Tensor) -> torch.Tensor:
    """Linear Gram matrix XXᵀ (n, n), float64, of features (n, ...) flattened to (n, d)."""
    x = _features('x', x)
    return x @ x.t()


def hsic_biased(kx: torch.Tensor, ky: torch.Tensor) -> torch.Tensor:
    """HSIC₀ = tr(K H L H) / (n − 1)² of two (n, n) Gram matrices (a 0-d tensor)."""
    n = kx.shape[0]
    kc = kx - kx.mean(0, keepdim=True) - kx.mean(1, keepdim=True) + kx.mean()  # H K H
    return (kc * ky).sum() / (n - 1) ** 2  # tr(HKH L) = tr(KHLH)


def hsic_unbiased(kx: torch.Tensor, ky: torch.Tensor) -> torch.Tensor:
    """Song et al.'s unbiased HSIC₁ of two (n, n) Gram matrices, n ≥ 4 (a 0-d tensor)."""
    n = kx.shape[0]
    if n < 4:
        raise InvalidArgumentError(f'the unbiased HSIC needs at least 4 examples per batch, got {n}')
    kx = kx - torch.diag_embed(torch.diagonal(kx))
    ky = ky - torch.diag_embed(torch.diagonal(ky))
    kl_sum = (kx.sum(0) * ky.sum(1)).sum()  # 1ᵀ K̃ L̃ 1
    value = (kx * ky).sum() + kx.sum() * ky.sum() / ((n - 1) * (n - 2)) - 2. / (n - 2) * kl_sum  # tr(K̃L̃): symmetric
    return value / (n * (n - 3))


def _defined_features(name: str, x: torch.Tensor) -> None:
    """Refuse features whose CKA is undefined: non-finite values, or the same features for every example
    (constant or all-zero: centred, they vanish, so their HSIC with themselves is 0)."""
    bad = ~torch.isfinite(x)
    if bad.any():
        raise InvalidArgumentError(f'{name} holds {int(bad.sum())} non-finite values (nan or inf): CKA is undefined')
    if x.shape[0] > 1 and bool((x == x[:1]).all()):
        what = 'all zero' if not x.any() else 'constant (the same for every example)'
        raise InvalidArgumentError(f'{name} is {what}: its HSIC with itself, the denominator of CKA, is 0: CKA is '
                                   f'undefined')


CONSTANT_TOLERANCE = 1e-10  # HSIC(K, K) below this fraction of its terms' size is rounding error: constant features


def check_self_hsic(values: torch.Tensor, names: Sequence[str], owner: str,
                    scale: Optional[torch.Tensor] = None) -> None:
    """Refuse a CKA denominator that is not a positive finite number: `values` are the HSIC(K, K) of the
    features `names` of `owner` (e.g. 'model_a'; '' for none); the message names the features. With `scale`
    (the size of the terms each value sums, e.g. ‖K‖²_F/(n(n − 3))), a value below CONSTANT_TOLERANCE of it
    counts as 0: constant features give an exact 0 only up to rounding."""
    scales = [0.] * len(names) if scale is None else scale.reshape(-1).tolist()
    for value, name, size in zip(values.reshape(-1).tolist(), names, scales):
        label = f'{owner} feature {name}' if owner else name
        if math.isfinite(value) and value > 0 and value <= CONSTANT_TOLERANCE * size:
            value = 0.
        if not math.isfinite(value):
            raise InvalidArgumentError(f'{label} has HSIC {value} with itself: its values are not finite (nan or '
                                       f'inf), so CKA is undefined')
        if value <= 0:
            raise InvalidArgumentError(
                f'{label} has HSIC {value:.3g} <= 0 with itself: the features are constant or zero, or vary less '
                f'than rounding error (or the examples are too few for the unbiased estimate), so CKA is undefined')


def linear_cka(x: torch.Tensor, y: torch.Tensor, unbiased: bool = False) -> float:
    """Linear CKA of features x (n, d1) and y (n, d2) of the same n examples, with the biased HSIC₀ or
    (``unbiased=True``) Song et al.'s unbiased HSIC₁. Trailing dimensions are flattened. Features that are
    non-finite or the same for every example (CKA undefined) are refused, naming x or y."""
    unbiased = boolean('unbiased', unbiased)
    x, y = _features('x', x), _features('y', y)
    if x.shape[0] != y.shape[0]:
        raise InvalidArgumentError(f'x and y must hold the same examples: {x.shape[0]} != {y.shape[0]} rows')
    _defined_features('x', x)
    _defined_features('y', y)
    hsic = hsic_unbiased if unbiased else hsic_biased
    kx, ky = x @ x.t(), y @ y.t()
    hxx, hyy = hsic(kx, kx), hsic(ky, ky)
    check_self_hsic(hxx, ['x'], '')
    check_self_hsic(hyy, ['y'], '')
    return float(hsic(kx, ky) / torch.sqrt(hxx * hyy))


class HsicAccumulator:
    """Mini-batch CKA between `rows` features of one model and `cols` of another: HSIC₁ summed over batches.

    ``update(grams_a, grams_b)`` with the (n, n) Gram matrices of one batch; ``cka()`` the (rows, cols) matrix.
    """

    def __init__(self, rows: int, cols: int) -> None:
        self.xy = torch.zeros(rows, cols, dtype=torch.float64)
        self.xx = torch.zeros(rows, dtype=torch.float64)
        self.yy = torch.zeros(cols, dtype=torch.float64)
        self.xx_scale = torch.zeros(rows, dtype=torch.float64)  # Σ_b ‖K_b‖²_F / (n(n − 3)): the size of the terms
        self.yy_scale = torch.zeros(cols, dtype=torch.float64)
        self.batches = 0
        self.examples = 0

    def update(self, grams_a: Tuple[torch.Tensor, ...], grams_b: Tuple[torch.Tensor, ...]) -> None:
        n = grams_a[0].shape[0]
        for i, kx in enumerate(grams_a):
            self.xx[i] += hsic_unbiased(kx, kx)
            self.xx_scale[i] += kx.square().sum() / (n * (n - 3))
            for j, ky in enumerate(grams_b):
                self.xy[i, j] += hsic_unbiased(kx, ky)
        for j, ky in enumerate(grams_b):
            self.yy[j] += hsic_unbiased(ky, ky)
            self.yy_scale[j] += ky.square().sum() / (n * (n - 3))
        self.batches += 1
        self.examples += grams_a[0].shape[0]

    def cka(self) -> torch.Tensor:
        """The (rows, cols) mini-batch CKA matrix (float64)."""
        if not self.batches:
            raise InvalidArgumentError('batches is empty: mini-batch CKA needs at least one batch')
        check_self_hsic(self.xx, [f'{i}' for i in range(len(self.xx))], 'row', self.xx_scale)
        check_self_hsic(self.yy, [f'{j}' for j in range(len(self.yy))], 'column', self.yy_scale)
        return self.xy / torch.sqrt(self.xx[:, None] * self.yy[None, :])
