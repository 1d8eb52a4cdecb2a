"""Research instruments of the paper computed from the real models: the width calculator (`pkmixer width`),
effective weight matrices (Fig. S.9), and figures (`pkmixer plot`; matplotlib is the optional `plot` extra)."""
import argparse

from .model_width import ModelWidth, model_width, models_near_omega
from .weights import fig_s9_weights, paper_vec_order, pk_effective_weight

__all__ = ['ModelWidth', 'model_width', 'models_near_omega', 'fig_s9_weights', 'paper_vec_order',
           'pk_effective_weight', 'add_research_commands']


def add_research_commands(subparsers: argparse._SubParsersAction) -> None:
    """Add `pkmixer width` and `pkmixer plot` to the `pkmixer` command."""
    from .plot_cmd import add_plot_command
    from .width_cmd import add_width_command
    add_width_command(subparsers)
    add_plot_command(subparsers)
