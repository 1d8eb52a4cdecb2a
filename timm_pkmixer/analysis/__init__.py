"""The paper's analyses as instruments, computed from the real layers of the package's models (computes,
never prints; `pkmixer analyze` writes the tables and figures).

* CKA (Fig. 2, §3.4, C.1): `linear_cka` (biased HSIC of Kornblith et al. 2019, or the unbiased HSIC of Song et
  al. 2012) and `cka_matrix`, mini-batch CKA (Nguyen et al. 2021, §3.1(2)) between the mixing branches of two
  models, each taken just before its skip connection (`capture_branches`).
* Spectra (Fig. 4 right, §4.3; Fig. S.1, D.1): `effective_singular_values` of every mixing FC seen as a layer
  of the wide MLP, the Marchenko–Pastur edge c_γ and the sparse edge √L+ (eq. 17), and the random-matrix
  experiments `fig4_spectra`, `fig_s1_spectra`.
* Costs (Table S.3, D.9): `table_s3`, `count_costs`: parameters, buffers, saved activations and FLOPs counted on
  the meta device, and the time per training step of the RP Mixer, MLP-Mixer and SW-MLP measured in alternation.
* Width (Fig. 3, S.9, §3.3): `width_report` (the table of `pkmixer width`), `fig_s9_weights` and
  `pk_effective_weight` (the effective weight J2 (I ⊗ W) J1 of a PK layer as a dense matrix, for figures only).

Why not a CKA library: ckatorch 1.0.3 (PyPI, MIT, read before deciding) was weighed against the ~40 lines of
`cka.py`. Its mini-batch loop assigns ``cka_epoch[i, j] = cka_batch(x, y)`` inside the batch loop, so each
"epoch" keeps the last batch's CKA instead of summing HSIC terms over batches as Nguyen et al. do; its hooks
take module outputs, which cannot see our branches (the skip connection is added inside J2); it prints tqdm
bars and pulls in seaborn, tqdm and safetensors-saving code. torch-cka is unmaintained with an open NaN bug.
The formulas here are tested against independent references (the feature-space form of linear CKA, and
Song et al.'s U-statistic summed over all 4-tuples of distinct examples) and the invariances of CKA.

The names below are imported on first use (PEP 562), so `width_table` (the arithmetic of `pkmixer width`) and
`_matplotlib` (where matplotlib is asked for) import neither torch nor timm.
"""
import importlib
from typing import Any, List

# module of this package -> the public names it defines (each imported on first access)
_EXPORTS = {
    'width_table': ('width_report',),
    'cka': ('HsicAccumulator', 'gram', 'hsic_biased', 'hsic_unbiased', 'linear_cka'),
    'compare': ('CkaMatrix', 'cka_matrix', 'random_batches'),
    'cost': ('COST_SIZES', 'count_costs', 'table_s3'),
    'features': ('capture_branches', 'mixing_branches'),
    'spectra': ('FIG4_DIMS', 'FIG4_TOKENS', 'c_gamma', 'effective_singular_values', 'fig4_spectra', 'fig_s1_spectra',
                'init_edge', 'mixing_fc_layers', 'mp_edge', 'sparse_edge', 'spectra_table', 'top_singular_value'),
    'weights': ('fig_s9_weights', 'paper_vec_order', 'pk_effective_weight'),
}
_LAZY = {name: module for module, names in _EXPORTS.items() for name in names}
__all__ = list(_LAZY)


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(f'.{_LAZY[name]}', __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f'module {__name__!r} has no attribute {name!r}')


def __dir__() -> List[str]:
    return sorted(set(globals()) | set(_LAZY))
