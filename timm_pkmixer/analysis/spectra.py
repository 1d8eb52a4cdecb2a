"""Singular values of effective weights and the random-matrix edges they are compared with (§4.3, D.1).

* `effective_singular_values`: the spectrum of every mixing FC of a model, seen as one layer of the wide MLP.
  A PK layer's effective weight J2 (I_{n1} ⊗ W) J1 has W's singular values, each n1 times (permutations are
  orthogonal; n1 = C for token mixing, S for channel mixing): computed from the small W, never from the
  m × m matrix. An SW-MLP layer's is M ⊙ W itself.
* Edges (§4.3): a γm × m matrix of i.i.d. N(0, 1/m) entries has its largest singular value at c_γ = 1 + √γ
  (Marchenko–Pastur); M ⊙ A with a mask of value 1/√p kept with probability p at √L+,
  L+ = c_γ² + 3c_γ²√γ (1 − p)/q² + O(1/q⁴), q = √(pm) (eq. 17, Hwang et al. 2019).
* `fig4_spectra` (Fig. 4 right, C.2) and `fig_s1_spectra` (Fig. S.1, D.1): the random matrices of the paper;
  Fig. 4's Mixer weights from the package's models, its SW-MLP weights drawn sparse with the distribution of
  the package's `MaskedLinear` initialisation (or, slower, from the layers themselves).

Largest singular values of the big sparse matrices are taken by ARPACK Lanczos (`scipy.sparse.linalg.svds`,
k = 1) on the sparse matrix: at 8192 × 4096 with p = 2^-6 it takes 0.3 s against 45 s for numpy's full SVD,
and agrees with it to float32 precision (measured on one core). scipy comes with scikit-learn (the `research`
extra).
"""
import logging
import math
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
import torch
import torch.nn as nn

from ..errors import InvalidArgumentError, MissingDependencyError
from ..layers import MaskedLinear, PKMlp
from ..validation import boolean, integer, optional, positive_int, positive_real, probability, real

__all__ = ['c_gamma', 'sparse_edge', 'mp_edge', 'effective_singular_values', 'mixing_fc_layers',
           'top_singular_value', 'init_edge', 'spectra_table', 'FIG4_DIMS', 'FIG4_TOKENS', 'fig4_spectra',
           'fig_s1_spectra', 'sparse_bernoulli', 'sparse_masked_gaussian', 'MAX_TRIALS']

_logger = logging.getLogger(__name__)

# Random draws per point: 20x the paper's most (50, Fig. S.1; C.2 uses 10). One Fig. 4 trial over C.2's 13 points
# took about 33 s on a shared 2-core machine (331 s for 10), so 1000 trials would run for about 9 hours.
MAX_TRIALS = 1000

# C.2: Ω = 2^19, γ = 2, C and the S that keeps Ω fixed
FIG4_DIMS = (4, 8, 12, 16, 20, 24, 28, 32, 36, 40, 44, 48, 64)
FIG4_TOKENS = (360, 252, 203, 173, 152, 136, 124, 113, 104, 96, 89, 83, 64)


def c_gamma(gamma: float) -> float:
    """c_γ = 1 + √γ: the Marchenko–Pastur edge of the singular values of a γn × n matrix of N(0, 1/n) entries."""
    return 1. + math.sqrt(positive_real('gamma', gamma))


def sparse_edge(gamma: float, density: float, width: int) -> float:
    """√L+ of eq. 17 (leading terms): the predicted largest singular value of M ⊙ A, a γm × m matrix with
    A ~ N(0, 1/m) and a mask of value 1/√p kept with probability p (`density`), m = `width`."""
    c = c_gamma(gamma)
    p = probability('density', density)
    q2 = p * positive_int('width', width)
    return math.sqrt(c * c + 3. * c * c * math.sqrt(gamma) * (1. - p) / q2)


def _std(value: float) -> float:
    return real('std', value, low=0.)


def _trials(value: int) -> int:
    value = positive_int('trials', value)
    if value > MAX_TRIALS:
        raise InvalidArgumentError(f'trials must be at most {MAX_TRIALS} (the paper uses 10 and 50), got {value}')
    return value


def _omega_at_least_one(value: float) -> float:
    value = real('omega', value)
    if value < 1:
        raise InvalidArgumentError(f'omega must be at least 1 (Ω counts connections per layer; below 1 the '
                                   f'density p = Ω/(γm²) or Ω^-a exceeds 1), got {value:g}')
    return value


def mp_edge(rows: int, cols: int, std: float) -> float:
    """σ(√rows + √cols): the Marchenko–Pastur edge of a rows × cols matrix of i.i.d. entries of deviation σ."""
    rows, cols, std = positive_int('rows', rows), positive_int('cols', cols), _std(std)
    return std * (math.sqrt(rows) + math.sqrt(cols))


def _pk_row_counts(model: nn.Module) -> Dict[str, int]:
    """n1 of every PK layer of a Mixer: C for token mixing, S for channel mixing."""
    dim, tokens = getattr(model, 'embed_dim', None), getattr(model, 'num_tokens', None)
    counts = {}
    for name, module in model.named_modules():
        if isinstance(module, PKMlp):
            if dim is None or tokens is None:
                raise InvalidArgumentError(f'{type(model).__name__} holds PK layers but does not say its S and C '
                                           f'(num_tokens, embed_dim): effective spectra need a PK-family Mixer')
            kind = name.rsplit('.', 1)[-1]
            if kind not in ('mlp_tokens', 'mlp_channels'):
                raise InvalidArgumentError(f'PK layer {name!r} is neither a token nor a channel mixing')
            counts[name] = dim if kind == 'mlp_tokens' else tokens
    return counts


def mixing_fc_layers(model: nn.Module) -> List[Tuple[str, torch.Tensor, int]]:
    """(name, small weight, n1) of every mixing FC: for a PK layer its fc1 / fc2 weight W and the number n1 of
    copies in I_{n1} ⊗ W; for an SW-MLP block's masked FC, M ⊙ W and 1. In order from the input."""
    counts = _pk_row_counts(model)
    out = []
    for name, module in model.named_modules():
        if name in counts:
            for fc in ('fc1', 'fc2'):
                layer = getattr(module, fc)
                if layer is not None:
                    out.append((f'{name}.{fc}', layer.weight.detach(), counts[name]))
        elif isinstance(module, MaskedLinear) and name.startswith('blocks.'):
            out.append((name, (module.weight * module.mask).detach(), 1))
    if not out:
        raise InvalidArgumentError(f'{type(model).__name__} has no mixing FCs (PK layers or SW-MLP blocks)')
    return out


@torch.no_grad()
def effective_singular_values(model: nn.Module, repeat: bool = True) -> Dict[str, np.ndarray]:
    """{name of each mixing FC: singular values (descending, float64) of its effective wide-MLP weight}.

    Names are module names, e.g. 'blocks.0.mlp_tokens.fc1' (PK Mixers) or 'blocks.0.fc1' (SW-MLP). For a PK
    layer the values are W's, each repeated n1 times (``repeat=False``: W's alone, once each).
    """
    repeat = boolean('repeat', repeat)
    out = {}
    for name, weight, n1 in mixing_fc_layers(model):
        values = torch.linalg.svdvals(weight.cpu().double()).numpy()
        out[name] = np.repeat(values, n1) if repeat else values
    return out


def _scipy_sparse():
    """scipy.sparse, or MissingDependencyError with the install hint."""
    try:
        import scipy.sparse as sp
        import scipy.sparse.linalg  # noqa: F401  (svds)
    except ImportError as e:
        raise MissingDependencyError("spectra need scipy: pip install scipy (or, in a checkout of timm-pkmixer, "
                                     "pip install '.[research]')") from e
    return sp


def top_singular_value(matrix) -> float:
    """Largest singular value of a dense array / tensor or a scipy sparse matrix, by Lanczos (ARPACK) on the
    sparse form when the matrix is larger than 256 × 256, else by a dense SVD."""
    sp = _scipy_sparse()
    from scipy.sparse.linalg import svds
    if isinstance(matrix, torch.Tensor):
        matrix = matrix.detach().cpu().numpy()
    if min(matrix.shape) <= 256:
        dense = matrix.toarray() if sp.issparse(matrix) else np.asarray(matrix)
        return float(np.linalg.svd(dense.astype(np.float64), compute_uv=False)[0])
    sparse = matrix if sp.issparse(matrix) else sp.csr_matrix(matrix)
    return float(svds(sparse.astype(np.float64), k=1, return_singular_vectors=False, random_state=0)[0])


def _stats(values: Sequence[float]) -> Tuple[float, float]:
    a = np.asarray(values, dtype=np.float64)
    return float(a.mean()), float(a.std(ddof=1)) if a.size > 1 else 0.


def sparse_masked_gaussian(rows: int, cols: int, density: float, std: float, rng: np.random.Generator):
    """M ⊙ A as a scipy CSR matrix (rows × cols): each entry kept with probability `density`, kept entries
    N(0, std²); drawn on the kept set only (O(p·rows·cols) work), never as a dense matrix."""
    rows, cols = positive_int('rows', rows), positive_int('cols', cols)
    density, std = probability('density', density), _std(std)
    sp = _scipy_sparse()
    if density > 0.5:  # dense enough: a Bernoulli mask drawn entry by entry is cheaper than redrawing repeats
        kept = rng.random((rows, cols)) < density
        return sp.csr_matrix(np.where(kept, rng.standard_normal((rows, cols)) * std, 0.))
    counts = rng.binomial(cols, density, size=rows)
    row_index = np.repeat(np.arange(rows), counts)
    # columns of each row: a uniform k-subset (draw with replacement, redraw repeats until none are left; the
    # procedure treats every column alike, so given k every subset is equally likely)
    col_index = rng.integers(0, cols, size=row_index.size)
    while True:
        keys = row_index * cols + col_index
        order = np.argsort(keys, kind='stable')
        repeat = order[1:][keys[order[1:]] == keys[order[:-1]]]
        if not repeat.size:
            break
        col_index[repeat] = rng.integers(0, cols, size=repeat.size)
    values = rng.standard_normal(row_index.size) * std
    return sp.csr_matrix((values, (row_index, col_index)), shape=(rows, cols))


def fig4_spectra(
        omega: float = 2 ** 19,
        gamma: float = 2.,
        dims: Sequence[int] = FIG4_DIMS,
        tokens: Optional[Sequence[int]] = None,
        trials: int = 10,
        source: str = 'sampled',
) -> List[Dict[str, float]]:
    """Fig. 4 (right): for each (C, S) at fixed Ω, the largest singular value of the SW-MLP's γm × m weight
    M ⊙ A (m = S·C, p = Ω/(γm²)) over `trials` draws, the edges c_γ and √L+, and the largest singular value of
    the MLP-Mixer's token (γS × S) and channel (γC × C) fc1 weights W at the same S, C (block 1, as block 0's
    token mixing maps the S0 patches to S).

    The SW-MLP weight has kept entries N(0, 1/(pm)), i.e. the paper's 1/√p mask times A ~ N(0, 1/m), the
    initialisation of the package's `MaskedLinear`. ``source='sampled'`` draws it directly as a sparse matrix
    (seed t for trial t), ``'layer'`` builds the `MaskedLinear` itself (mask seed t, torch seed t): the same
    distribution, but building an 8192 × 4096 layer (its hashed mask) takes about 7 s against 0.1 s. The Mixer's
    values come from a two-block MLP-Mixer of S tokens and C channels (`pk_mixer_ss8_32` reshaped, paper init
    N(0, 1/fan_in), torch seed t) through `effective_singular_values`. Tokens default to S(C) at this Ω (eq. 14).
    Logs one line per trial (at most MAX_TRIALS trials).
    """
    import timm

    from ..width import tokens_for_omega
    omega, gamma = _omega_at_least_one(omega), positive_real('gamma', gamma)
    trials = _trials(trials)
    if source not in ('sampled', 'layer'):
        raise InvalidArgumentError(f"source must be 'sampled' or 'layer', got {source!r}")
    dims = [positive_int('dims', c) for c in dims]
    if tokens is None:
        tokens = [max(1, round(tokens_for_omega(c, omega, gamma))) for c in dims]
    elif len(tokens) != len(dims):
        raise InvalidArgumentError(f'tokens gives {len(tokens)} values for {len(dims)} dims')
    rows = []
    for c, s in zip(dims, tokens):
        s = positive_int('tokens', s)
        m = s * c
        p = omega / (gamma * m * m)
        if p > 1:
            raise InvalidArgumentError(f'C={c}, S={s}: p = Ω/(γm²) = {p:.3g} > 1 (the width m = {m} is too small '
                                       f'for omega={omega:g})')
        sw, tok, chan = [], [], []
        for t in range(trials):
            if source == 'layer':
                torch.manual_seed(t)
                layer = MaskedLinear(m, round(gamma * m), p, seed=t, key='blocks.0.fc1')
                sw.append(top_singular_value((layer.weight * layer.mask).detach().numpy()))
                del layer
            else:
                rng = np.random.default_rng([t, m])
                sw.append(top_singular_value(sparse_masked_gaussian(round(gamma * m), m, p, 1 / math.sqrt(p * m),
                                                                    rng)))
            torch.manual_seed(t)
            mixer = timm.create_model('pk_mixer_ss8_32', num_blocks=2, num_tokens=s, embed_dim=c, gamma=gamma,
                                      num_classes=0)
            values = effective_singular_values(mixer, repeat=False)  # block 1: S → S (block 0 maps S0 → S)
            tok.append(float(values['blocks.1.mlp_tokens.fc1'][0]))
            chan.append(float(values['blocks.1.mlp_channels.fc1'][0]))
            _logger.info(f'C={c} S={s} (point {len(rows) + 1}/{len(dims)}): trial {t + 1}/{trials}, SW-MLP '
                         f'σ_max {sw[-1]:.4f}')
        sw_mean, sw_sd = _stats(sw)
        rows.append(dict(
            C=c, S=s, m=m, p=p, sv_max_mean=sw_mean, sv_max_sd=sw_sd, c_gamma=c_gamma(gamma),
            sqrt_L_plus=sparse_edge(gamma, p, m), mixer_token_sv_max_mean=_stats(tok)[0],
            mixer_token_sv_max_sd=_stats(tok)[1], mixer_channel_sv_max_mean=_stats(chan)[0],
            mixer_channel_sv_max_sd=_stats(chan)[1], trials=trials))
    return rows


def sparse_bernoulli(size: int, density: float, rng: np.random.Generator):
    """Z = M ⊙ W (size × size) as a scipy CSR matrix: M Bernoulli(p), W ~ N(0, 1) (D.1)."""
    return sparse_masked_gaussian(size, size, density, 1., rng)


def _normalised_singular_values(z) -> np.ndarray:
    """All singular values λ of Z with Q = ZZᵀ divided by its mean diagonal (D.1), descending. Zero rows and
    columns only add zeros, so the SVD runs on the rows and columns that hold an entry."""
    size = z.shape[0]
    z = z.tocsr()
    r = np.flatnonzero(np.diff(z.indptr))
    c = np.unique(z.indices)
    sub = z[r][:, c].toarray()
    values = np.linalg.svd(sub, compute_uv=False) if sub.size else np.zeros(0)
    mean_diag = float((sub ** 2).sum()) / size
    values = np.concatenate([values, np.zeros(size - values.size)])
    return values / math.sqrt(mean_diag) if mean_diag > 0 else values


def fig_s1_spectra(
        a_values: Sequence[float],
        omega: float = 1e3,
        trials: int = 50,
        seed: int = 0,
        keep_values_at: Optional[float] = 1.5,
) -> Tuple[List[Dict[str, float]], np.ndarray]:
    """Fig. S.1 (D.1): Z = M ⊙ W, m = round(Ω^((1+a)/2)), p = Ω^(−a), W ~ N(0, 1), M Bernoulli(p); the singular
    values λ of Z with Q = ZZᵀ normalised by its mean diagonal, over `trials` draws per a.

    Returns one row per a (m, p, mean and sd of the largest λ, of λ_max² — the largest eigenvalue of Q/c — and
    the mean count of non-zero λ), and every λ of every trial at a = `keep_values_at` (Fig. S.1 center; empty if
    that a is not in `a_values`). Logs one line per trial (at most MAX_TRIALS).
    """
    omega, trials = _omega_at_least_one(omega), _trials(trials)
    keep_values_at = optional(real, 'keep_values_at', keep_values_at)
    rng = np.random.default_rng(integer('seed', seed))
    rows, kept = [], []
    for a in a_values:
        a = real('a', a)
        if a < 0:
            raise InvalidArgumentError(f'a must be >= 0 (p = Ω^-a <= 1), got {a:g}')
        m, p = max(1, round(omega ** ((1 + a) / 2))), omega ** -a
        tops, nonzero = [], []
        for _ in range(trials):
            values = _normalised_singular_values(sparse_bernoulli(m, p, rng))
            tops.append(values[0])
            nonzero.append(int((values > 1e-12).sum()))
            if keep_values_at is not None and math.isclose(a, keep_values_at):
                kept.append(values)
            _logger.info(f'a={a:g} m={m} (point {len(rows) + 1}/{len(a_values)}): trial {len(tops)}/{trials}, '
                         f'largest λ {values[0]:.4f}')
        top_mean, top_sd = _stats(tops)
        sq_mean, sq_sd = _stats(np.square(tops))
        rows.append(dict(a=a, m=m, p=p, sv_max_mean=top_mean, sv_max_sd=top_sd, eig_max_mean=sq_mean,
                         eig_max_sd=sq_sd, nonzero_sv_mean=float(np.mean(nonzero)), trials=trials))
    return rows, (np.concatenate(kept) if kept else np.zeros(0))


def init_edge(rows: int, cols: int, std: float, density: float = 1.) -> float:
    """Predicted largest singular value of a rows × cols weight of i.i.d. entries of deviation `std` (zeros
    included), kept with probability `density`: the Marchenko–Pastur edge σ(√rows + √cols), times the sparse
    factor √(L+/c_γ²) = √(1 + 3√γ(1 − p)/(p·n)) of eq. 17 with n = min(rows, cols), γ = max/min."""
    rows, cols, std = positive_int('rows', rows), positive_int('cols', cols), _std(std)
    density = probability('density', density)
    small, big = min(rows, cols), max(rows, cols)
    factor = 1. + 3. * math.sqrt(big / small) * (1. - density) / (density * small)
    return mp_edge(rows, cols, std) * math.sqrt(factor)


@torch.no_grad()
def spectra_table(model: nn.Module, init_model: nn.Module) -> List[Dict[str, float]]:
    """One row per mixing FC of a trained `model`: its shape, n1, largest effective singular value, the same at
    initialisation (`init_model`: the same architecture freshly initialised) and the edge `init_edge` predicts
    from the initial weights' deviation and density, and the fraction of W's singular values above that edge."""
    init = {name: weight for name, weight, _ in mixing_fc_layers(init_model)}
    rows = []
    for name, weight, n1 in mixing_fc_layers(model):
        if name not in init or init[name].shape != weight.shape:
            raise InvalidArgumentError(f'init_model does not have the layer {name} of shape {tuple(weight.shape)}')
        w0 = init[name].cpu().double()
        density = float((w0 != 0).double().mean())
        edge = init_edge(*w0.shape, std=float(w0.square().mean().sqrt()), density=max(density, 1e-12))
        values = torch.linalg.svdvals(weight.cpu().double())
        rows.append(dict(layer=name, rows=weight.shape[0], cols=weight.shape[1], copies=n1, density=density,
                         sv_max=float(values[0]), sv_max_init=float(torch.linalg.svdvals(w0)[0]), edge_init=edge,
                         frac_above_edge=float((values > edge).double().mean())))
    return rows
