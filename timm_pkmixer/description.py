"""What a model of this package is, in the paper's terms: one record every model gives with ``describe()``.

The catalog (``pkmixer models``), the demo, the Hub model card and push, the width tools and the sweep
report all read :class:`ModelDescription`; none of them asks which class a model is. A Mixer is described
by its S, C, depth, hidden widths and per-block permutations; the SW-MLP by its width m, density p and γ.
Width numbers follow §4.1: Ω = average connections per layer, m = effective width, p = Ω/(γm²).
"""
from dataclasses import asdict, dataclass, replace
from typing import Any, Dict, Optional, Protocol, Sequence, Tuple, runtime_checkable

from .permutation_kinds import PERMUTATION_KINDS
from .width import optimal_width

__all__ = ['ModelDescription', 'Describable', 'describe_mixer', 'describe_sw_mlp', 'describe_shallow', 'built_label',
           'permutation_label']

_FAMILY_BY_BLOCK = {'mlp': 'MLP-Mixer', 'fc': 'S-Mixer'}
_SHALLOW_FAMILY = {'monarch': 'Shallow Monarch', 'kronecker': 'Shallow Kronecker'}


def permutation_label(permutation: Sequence[str]) -> str:
    """The kind ('normal', 'random') when every block agrees, else the per-block pattern, each block's kind by its
    label in PERMUTATION_KINDS ('R' random, 'N' normal): 'RNNN' is a 4-block model whose first block alone is
    random."""
    kinds = set(permutation)
    if len(kinds) == 1:
        return next(iter(kinds))
    return ''.join(PERMUTATION_KINDS[p].label for p in permutation)


def _mixer_family(family: str, permutation: Sequence[str]) -> str:
    """The family with the prefixes of its blocks' kinds in table order ('RP S-Mixer'), 'Mixed' before them
    when the blocks differ ('Mixed RP S-Mixer')."""
    kinds = set(permutation)
    prefixes = ''.join(kind.family_prefix for name, kind in PERMUTATION_KINDS.items() if name in kinds)
    return ('Mixed ' if prefixes and len(kinds) > 1 else '') + prefixes + family


@dataclass(frozen=True, kw_only=True)
class ModelDescription:
    """A model in the paper's terms. Mixers fill S, C and the per-block permutations; the SW-MLP its hidden width."""
    family: str                          # 'MLP-Mixer', 'RP S-Mixer', 'Mixed RP S-Mixer', 'SW-MLP', ...
    block_type: str                      # 'mlp' (two FCs per mixing), 'fc' (one FC), 'sparse' (SW-MLP),
                                         # 'monarch' / 'kronecker' (shallow MLPs of Fig. 2(d))
    depth: int                           # L
    width: int                           # m (S·C for a Mixer)
    omega: float                         # Ω, average connections per layer
    density: float                       # p, ratio of non-zero entries of the effective weights
    gamma: float                         # γ: of eq. 14 for a Mixer (2Ω/(CS² + C²S)), of eq. 13 for the SW-MLP
    num_tokens: Optional[int] = None     # S
    dim: Optional[int] = None            # C
    token_hidden: Optional[int] = None   # hidden width of the token MLP (None: one FC)
    channel_hidden: Optional[int] = None  # hidden width of the channel MLP (None: one FC)
    hidden: Optional[int] = None         # SW-MLP hidden width γm (None: FC blocks)
    permutation: Tuple[str, ...] = ()    # per block: a kind of PERMUTATION_KINDS, 'normal' or 'random' (Mixers)
    perm_seed: Optional[int] = None      # seed of the random permutations (when a block's kind has one)
    mask_seed: Optional[int] = None      # seed of the SW-MLP masks
    outer_act: Optional[bool] = None     # SW-MLP MLP blocks: φ after the second layer (eq. S.17) or not (C.1)
    tiles: int = 1                       # K: expanded from K-times smaller images, K × K tiles (expand_resolution)

    @property
    def gamma_tokens(self) -> Optional[float]:
        """Token-MLP expansion h_S / S (None for one FC or the SW-MLP)."""
        return None if self.token_hidden is None or not self.num_tokens else self.token_hidden / self.num_tokens

    @property
    def gamma_channels(self) -> Optional[float]:
        return None if self.channel_hidden is None or not self.dim else self.channel_hidden / self.dim

    @property
    def gamma_label(self) -> str:
        """γ for a table: '1 (FC)', 'tokens/channels' for a Mixer ('1.96/4'), the SW-MLP's γ."""
        if self.block_type in ('fc', *_SHALLOW_FAMILY) or (self.block_type == 'sparse' and self.hidden is None):
            return '1 (FC)'
        if self.block_type == 'sparse':
            return f'{self.gamma:.3g}'
        return f'{self.gamma_tokens:.3g}/{self.gamma_channels:.3g}'

    @property
    def geometry(self) -> str:
        """The shape in the paper's terms, for a reader: 'S = 64, C = 64, L = 4' (a Mixer or shallow MLP; γ added
        for MLP blocks), 'm = 724, p = 0.5, L = 8' (the SW-MLP; γ added for MLP blocks)."""
        if self.num_tokens is not None:
            shape = f'S = {self.num_tokens}, C = {self.dim}, L = {self.depth}'
            return shape + (f', γ = {self.gamma_label}' if self.block_type == 'mlp' else '')
        shape = f'm = {self.width}, p = {self.density:.4g}, L = {self.depth}'
        return shape + (f', γ = {self.gamma:.3g}' if self.hidden is not None else '')

    @property
    def permutation_label(self) -> str:
        """'normal', 'random', or the per-block pattern ('RNNN'); '' for the SW-MLP."""
        return permutation_label(self.permutation) if self.permutation else ''

    @property
    def random_blocks(self) -> Tuple[int, ...]:
        """Indices of the blocks whose permutations are derived from a seed (random ones)."""
        return tuple(i for i, p in enumerate(self.permutation) if PERMUTATION_KINDS[p].seeded)

    @property
    def has_random_structure(self) -> bool:
        """Random permutations or masks, derived from a seed (replicas must agree on it)."""
        return bool(self.random_blocks) or self.mask_seed is not None

    @property
    def family_tag(self) -> str:
        """The family as a Hub tag: 'rp-s-mixer', 'mixed-rp-mlp-mixer', 'sw-mlp'."""
        return self.family.lower().replace(' ', '-')

    @property
    def width_fraction(self) -> Optional[float]:
        """m / max m at this Ω and γ (eq. 15); None for the SW-MLP, whose width is not S·C."""
        return None if self.dim is None else self.width / optimal_width(self.omega, self.gamma)[1]

    @property
    def seeds(self) -> Dict[str, int]:
        """The seeds that fix the model's random structure, as model arguments."""
        out = {}
        if self.perm_seed is not None:
            out['perm_seed'] = self.perm_seed
        if self.mask_seed is not None:
            out['mask_seed'] = self.mask_seed
        return out

    def as_dict(self) -> Dict[str, Any]:
        return dict(asdict(self), permutation=self.permutation_label, gamma_tokens=self.gamma_tokens,
                    gamma_channels=self.gamma_channels, width_fraction=self.width_fraction)


def built_label(name: str, built: ModelDescription, registered: ModelDescription) -> str:
    """How to name a model built from the registered `name` (whose own model `registered` describes) with other
    arguments: the name when its shape is the registered one, else the name and the shape built
    ('s_mixer_s128c128_32 reshaped to S = 64, C = 64, L = 4'): a registered name alone would misname it."""
    return name if built.geometry == registered.geometry else f'{name} reshaped to {built.geometry}'


@runtime_checkable
class Describable(Protocol):
    """Every model of this package: ``model.describe()`` gives its :class:`ModelDescription`."""

    def describe(self) -> ModelDescription:
        ...


def describe_mixer(
        num_tokens: int,
        dim: int,
        depth: int,
        token_hidden: Optional[int] = None,
        channel_hidden: Optional[int] = None,
        permutation: Sequence[str] = (),
        perm_seed: Optional[int] = None,
        tiles: int = 1,
) -> ModelDescription:
    """The description of a Mixer with S tokens, C channels, L blocks, these hidden widths (None: one FC,
    an S-Mixer) and per-block permutations (default: all normal).

    Each mixing layer is an m × (γm) effective weight: Ω = (C·S·h_S + S·C·h_C)/2 (eq. 14 for h = γS, γC,
    S.42 for one FC: h = S, C), p = (1/C + 1/S)/2 (= Ω/(γm²)), γ = 2Ω/(CS² + C²S).
    """
    s, c = num_tokens, dim
    permutation = tuple(permutation) or ('normal',) * depth
    omega = (c * s * (token_hidden or s) + s * c * (channel_hidden or c)) / 2
    block_type = 'fc' if token_hidden is None and channel_hidden is None else 'mlp'
    seeded = any(PERMUTATION_KINDS[p].seeded for p in permutation)
    return ModelDescription(
        family=_mixer_family(_FAMILY_BY_BLOCK[block_type], permutation), block_type=block_type, depth=depth,
        width=s * c, omega=omega, density=(1 / c + 1 / s) / 2, gamma=2 * omega / (c * s * s + c * c * s),
        num_tokens=s, dim=c, token_hidden=token_hidden, channel_hidden=channel_hidden, permutation=permutation,
        perm_seed=perm_seed if seeded else None, tiles=tiles)


def describe_sw_mlp(width: int, depth: int, density: float, hidden: Optional[int] = None,
                    mask_seed: int = 0, outer_act: bool = True) -> ModelDescription:
    """The description of an SW-MLP: Ω = p·γ·m² (eq. 13) with γ = hidden / m (1 for FC blocks); `outer_act` (MLP
    blocks only) whether the block ends with φ (eq. S.17) or not (the Mixer block's form, C.1)."""
    gamma = (hidden or width) / width
    return ModelDescription(
        family='SW-MLP', block_type='sparse', depth=depth, width=width, omega=density * gamma * width ** 2,
        density=density, gamma=gamma, hidden=hidden, mask_seed=mask_seed,
        outer_act=None if hidden is None else outer_act)


def describe_shallow(structure: str, rows: int, cols: int, depth: int) -> ModelDescription:
    """The description of a shallow MLP of Fig. 2(d) (§3.3): `depth` n × n layers B_i, each a Monarch matrix
    P L Pᵀ R (``structure='monarch'``, rows = cols = √n) or a Kronecker product V ⊗ W (``'kronecker'``, V rows ×
    rows, W cols × cols), n = rows·cols.

    In §4.1's terms each B_i is an S-Mixer's pair of sparse factors with S = rows, C = cols (R or I ⊗ W, then
    P L Pᵀ or V ⊗ I, eq. 12) without the activation between them: width m = S·C, Ω = (CS² + C²S)/2 connections
    per factor, p = (1/C + 1/S)/2, γ = 1; the product B_i itself is dense in general. The two structures have
    the same Ω and p and differ in their independent weights per factor: S·C² (Monarch), C² (Kronecker).
    """
    return replace(describe_mixer(rows, cols, depth), family=_SHALLOW_FAMILY[structure], block_type=structure)
