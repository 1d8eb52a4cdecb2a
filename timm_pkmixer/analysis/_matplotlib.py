"""matplotlib, a dependency of the package imported only to draw: every figure asks for it here, so an install
that left it out (``pip install --no-deps``) ends in one message that says what to install (timm-pkmixer is not on
PyPI: the `plot` extra, an alias kept for old commands, installs from a checkout)."""
from ..errors import MissingDependencyError

__all__ = ['PLOT_EXTRA_HINT', 'require_matplotlib']

PLOT_EXTRA_HINT = ("pkmixer plot needs matplotlib: pip install matplotlib (or, in a checkout of timm-pkmixer, "
                   "pip install '.[plot]')")


def require_matplotlib():
    """matplotlib's `Figure` class (no pyplot, no global state), or ImportError with the install hint."""
    try:
        from matplotlib.figure import Figure
    except ImportError as e:
        raise MissingDependencyError(PLOT_EXTRA_HINT) from e
    return Figure
