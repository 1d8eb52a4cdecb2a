"""`width_report`, the table of `pkmixer width`: it lives in the core (`timm_pkmixer.width_table`), so that the
arithmetic imports no torch; re-exported here with the other analyses."""
from ..width_table import width_report

__all__ = ['width_report']
