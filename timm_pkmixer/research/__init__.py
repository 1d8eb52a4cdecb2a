"""Research instruments of the paper computed from the real models: the width table (`pkmixer width`),
effective weight matrices (Fig. S.9), and figures (`pkmixer plot`; matplotlib is the optional `plot` extra)."""
from .weights import fig_s9_weights, paper_vec_order, pk_effective_weight
from .width_table import width_report

__all__ = ['fig_s9_weights', 'paper_vec_order', 'pk_effective_weight', 'width_report']
