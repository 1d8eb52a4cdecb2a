"""The kinds of rearrangement J1, J2 a Mixer block can have: one table, :data:`PERMUTATION_KINDS`, that the
whole package asks.

==========  =====  ============  =========  =====  =====  ===========================================
kind        label  family        perm_seed  fused  names  J1, J2 of a layer (``implementation``)
==========  =====  ============  =========  =====  =====  ===========================================
``normal``  N      MLP-Mixer     no         yes    pk     J_c / identity: ``layers.permutation``'s
                                                          ``NormalPermutations``
``random``  R      RP MLP-Mixer  yes        yes    rp     fixed uniform random permutations derived
                                                          from (perm_seed, layer key):
                                                          ``RandomPermutations``
==========  =====  ============  =========  =====  =====  ===========================================

A model names its kind per block by the table's key (``permutation='random'`` or a list, one per block). The
record's validation and the command line's choices read the keys, ``describe()`` the label (a per-block pattern
such as ``'RNNN'``), the family prefix and whether the model has a ``perm_seed``, the PK layer whether J2 adds the
skip connection itself (fused), a sweep the prefix of its run names, and the layer builder and the size bound the
implementation. Adding a kind (a structured or
a learned permutation) is one new file that defines its implementation plus one entry here naming it by import
path, e.g. ``PERMUTATION_KINDS['reverse'] = PermutationKind('V', 'Reversed ', False, True,
'my_package.reverse:ReversePermutations', 'rev')``; it is imported on first use. docs/ARCHITECTURE.md walks
through it; ``tests/example_permutation_kind.py`` is one.

This module imports neither torch nor timm (the command line's choices read it); the implementations do.
"""
import pkgutil
from dataclasses import dataclass
from typing import Any, Dict

from .errors import InvalidArgumentError

__all__ = ['PermutationKind', 'PERMUTATION_KINDS', 'permutation_kind']


@dataclass(frozen=True)
class PermutationKind:
    """What the package asks about one kind of J1, J2.

    ``implementation`` names an object (a class or a module) with two callables:

    * ``layers(spec: layers.permutation.PermutationSpec) -> (J1, J2)``: the two modules of one PK layer; J1 maps
      (B, S_in, C) to (B, *spec.rows_in), J2 maps (B, *spec.rows_out) to (B, S_out, C), and J2 takes
      ``forward(x, residual=None)`` when the kind is ``fused``;
    * ``planned_tensors(num, name, args, count) -> List[sizes.PlannedTensor]``: the parameters and buffers of
      `count` such modules over `num` features, for the size bound (empty when they hold none).
    """
    label: str                   # one letter in a per-block pattern: 'RNNN'
    family_prefix: str           # before the family in describe(): '' (MLP-Mixer), 'RP ' (RP MLP-Mixer)
    seeded: bool                 # derived from the model's perm_seed (describe() and the card name it)
    fused: bool                  # J2 adds the skip connection itself (J2(x, residual)); else the PK layer adds it
    implementation: str          # 'package.module:object', imported on first use
    name_prefix: str             # in model and run names: 'pk' (pk_mixer_b_w), 'rp' (rp_mixer_b_w)

    def load(self) -> Any:
        """The implementation (imported on first use)."""
        found = _LOADED.get(self.implementation)
        if found is None:
            found = _LOADED[self.implementation] = pkgutil.resolve_name(self.implementation)
        return found


# kind (what users write: permutation='random') -> what it is
PERMUTATION_KINDS: Dict[str, PermutationKind] = {
    'normal': PermutationKind('N', '', False, True, 'timm_pkmixer.layers.permutation:NormalPermutations', 'pk'),
    'random': PermutationKind('R', 'RP ', True, True, 'timm_pkmixer.layers.permutation:RandomPermutations',
                              'rp'),
}

_LOADED: Dict[str, Any] = {}


def permutation_kind(name: Any, argument: str = 'permutation') -> PermutationKind:
    """The entry of kind `name`; any other value is refused naming `argument` and the kinds there are."""
    kind = PERMUTATION_KINDS.get(name) if isinstance(name, str) else None
    if kind is None:
        raise InvalidArgumentError(f'{argument} must be one of {tuple(PERMUTATION_KINDS)}, got {name!r}')
    return kind
