""" Static sparse-weight MLP (SW-MLP), the baseline the PK family is compared with.

Paper: `Understanding MLP-Mixer as a Wide and Sparse MLP` - https://arxiv.org/abs/2306.01470
(App. A.2.5, C.4 (ii); §4.3 for the initialisation)

Per-patch FC, vectorisation, a masked input layer to width m, L residual sparse blocks
x ↦ x + φ((M ⊙ W) LN(x)) (eq. S.16), or MLP blocks x ↦ x + φ((M2 ⊙ W2) φ((M1 ⊙ W1) LN(x)))
with hidden γm (eq. S.17), LayerNorm and a linear classifier. C.1 reads the SW-MLP as the MLP-Mixer with its
factors replaced by M ⊙ A, i.e. the Mixer block's form without the outer φ: ``outer_act=False`` builds that
one (the default, True, is eq. S.17). Every mask is Bernoulli(p),
fixed at construction. The width follows Ω = p·γ·m² (eq. 13, S.43) unless given.

The paper does not say how the S0·C per-patch features reach width m; here a masked linear
layer of the same density p maps them (an identity when S0·C = m). Memory is O(m²): the masks
alone take m² bytes per layer, so this model is for CIFAR-size widths.

The features are returned as a (B, m, 1, 1) map: one position with m channels.
"""
import math
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Tuple, Union

import torch
import torch.nn as nn
from timm.layers import PatchEmbed, get_act_layer, lecun_normal_
from timm.models import checkpoint_seq, generate_default_cfgs, register_model

from .._timm import feature_take_indices
from ..description import ModelDescription, describe_sw_mlp
from ..errors import InvalidArgumentError
from ..layers import MaskedLinear
from ..sizes import PlannedTensor, linear_tensors, module_tensors, refuse_unbounded
from ..validation import (
    boolean,
    choice,
    integer,
    non_negative_int,
    optional,
    positive_int,
    positive_real,
    probability,
    rate,
)
from ..width import sw_mlp_width
from ._common import (
    FlatMapHeadMixin,
    ModelArgs,
    PKModelMixin,
    act_layer_arg,
    build_registered,
    check_input,
    paper_cfg,
    patch_grid,
)

MAX_WIDTH = 2 ** 20  # m² = 2^40 weights per layer (4 TiB in fp32): far past any machine

__all__ = ['SparseBlock', 'SwMlpArgs', 'SwMlp']

torch.fx.wrap('check_input')  # the input check is one node of an FX graph


class SparseBlock(nn.Module):
    """A residual block of masked linear layers, (B, m) → (B, m): x ↦ x + φ((M ⊙ W) LN(x)) (eq. S.16), or with a
    hidden layer of width γm x ↦ x + φ((M2 ⊙ W2) φ((M1 ⊙ W1) LN(x))) (eq. S.17, `outer_act`), or without the
    outer φ, x ↦ x + (M2 ⊙ W2) φ((M1 ⊙ W1) LN(x)): the MLP-Mixer block's form with its factors replaced by M ⊙ A,
    as C.1 reads (`outer_act=False`)."""

    def __init__(
            self,
            width: int,
            density: float,
            hidden: Optional[int] = None,
            mask_seed: int = 0,
            key: str = '',
            norm_eps: float = 1e-5,
            act_layer: Any = nn.GELU,
            outer_act: bool = True,
            device=None,
            dtype=None,
    ) -> None:
        super().__init__()
        dd = {'device': device, 'dtype': dtype}
        if not outer_act and not hidden:
            raise InvalidArgumentError(_OUTER_ACT_NEEDS_GAMMA)
        self.norm = nn.LayerNorm(width, eps=norm_eps, **dd)
        self.fc1 = MaskedLinear(width, hidden or width, density, seed=mask_seed, key=f'{key}.fc1', **dd)
        self.act1 = act_layer()
        self.fc2 = MaskedLinear(hidden, width, density, seed=mask_seed, key=f'{key}.fc2', **dd) if hidden else None
        self.act2 = act_layer() if hidden and outer_act else nn.Identity()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.act1(self.fc1(self.norm(x)))
        if self.fc2 is not None:
            y = self.act2(self.fc2(y))
        return x + y


_OUTER_ACT_NEEDS_GAMMA = ('outer_act=False needs gamma (MLP blocks): an FC block x + φ((M ⊙ W) LN(x)) has one φ, '
                          'as the S-Mixer\'s')


def _width(omega: Any, width: Any, density: float, gamma: float) -> int:
    """m: explicit, or from Ω = p·γ·m² (default Ω = 2^18); refused past MAX_WIDTH."""
    if omega is not None and width is not None:
        raise InvalidArgumentError('give omega (Ω, which sets m = √(Ω/(γp))) or width (m), not both')
    if width is None:
        omega = 2 ** 18 if omega is None else positive_real('omega', omega)
        width, source = sw_mlp_width(omega, density, gamma), f'omega={omega:g} at density p={density:g}'
    else:
        width, source = positive_int('width', width), 'width'
    if width > MAX_WIDTH:
        raise InvalidArgumentError(
            f'{source} gives an SW-MLP of width m = {width}: its dense m×m layers would hold {width ** 2:.3g} '
            f'weights each (the SW-MLP stores O(m²); at most m = {MAX_WIDTH} is accepted)')
    return width


def _hidden_width(width: int, gamma: Optional[float]) -> Optional[int]:
    """The MLP blocks' hidden width γm (None for FC blocks); past any float, refused as too large."""
    if gamma is None:
        return None
    if not math.isfinite(gamma * width):
        refuse_unbounded('blocks.*.fc1.weight, mask', f'gamma={gamma!r}, width={width}')
    hidden = round(gamma * width)
    if hidden < 1:
        raise InvalidArgumentError(f'gamma={gamma!r} gives a hidden width of {hidden} for m={width}')
    return hidden


@dataclass(frozen=True, eq=False)
class SwMlpArgs(ModelArgs):
    """The record of an :class:`SwMlp` (:class:`~timm_pkmixer.models.ModelArgs`), canonical: the width m explicit
    (``omega`` always None), the per-patch FC's C explicit, the activation by its timm name."""
    num_classes: int
    img_size: Tuple[int, int]
    in_chans: int
    patch_size: Tuple[int, int]
    embed_dim: int
    num_blocks: int
    density: float
    omega: None                  # resolved into the width
    width: int                   # m
    gamma: Optional[float]       # None: FC blocks (eq. S.16)
    outer_act: bool              # MLP blocks: φ after the second layer (eq. S.17) or not (C.1's reading)
    mask_seed: int
    norm_eps: float
    act_layer: Union[str, Any]
    drop_rate: float
    global_pool: str

    @classmethod
    def resolve(cls, given: Mapping[str, Any]) -> 'SwMlpArgs':
        """The record of SwMlp's arguments `given`, validated (each refusal names its argument)."""
        img_size, patch_size, grid = patch_grid(given['img_size'], given['patch_size'])
        in_chans = positive_int('in_chans', given['in_chans'])
        density = probability('density p', given['density'])
        gamma = optional(positive_real, 'gamma', given['gamma'])
        outer_act = boolean('outer_act', given['outer_act'])
        if not outer_act and gamma is None:
            raise InvalidArgumentError(_OUTER_ACT_NEEDS_GAMMA)
        embed_dim = optional(positive_int, 'embed_dim', given['embed_dim'])
        return cls(
            num_classes=non_negative_int('num_classes', given['num_classes']), img_size=img_size,
            in_chans=in_chans, patch_size=patch_size, embed_dim=embed_dim or in_chans * patch_size[0] * patch_size[1],
            num_blocks=positive_int('num_blocks', given['num_blocks']), density=density, omega=None,
            width=_width(given['omega'], given['width'], density, 1.0 if gamma is None else gamma), gamma=gamma,
            outer_act=outer_act, mask_seed=integer('mask_seed', given['mask_seed']),
            norm_eps=positive_real('norm_eps', given['norm_eps']), act_layer=act_layer_arg(given['act_layer'])[0],
            drop_rate=rate('drop_rate', given['drop_rate']),
            global_pool=choice('global_pool', given['global_pool'], ('', 'avg')))

    @property
    def hidden(self) -> Optional[int]:
        """The MLP blocks' hidden width γm (None for FC blocks)."""
        return _hidden_width(self.width, self.gamma)

    @property
    def num_inputs(self) -> int:
        """S0·C: the vectorised per-patch features."""
        return self.img_size[0] // self.patch_size[0] * (self.img_size[1] // self.patch_size[1]) * self.embed_dim

    def describe(self) -> ModelDescription:
        return describe_sw_mlp(self.width, self.num_blocks, self.density, self.hidden, self.mask_seed,
                               outer_act=self.outer_act)

    def planned_tensors(self, itemsize: int, sources: Mapping[str, str]) -> List[PlannedTensor]:
        """Every parameter and buffer but the activations' (:meth:`layer_tensors`): the per-patch FC, head,
        LayerNorms and masked layers (weights, masks, digests), naming the arguments that set them (`sources`:
        'width', how the caller set m)."""
        m, L, c = self.width, self.num_blocks, self.embed_dim
        width = sources.get('width', f'width={m}')
        stem = f'embed_dim={c} (with patch_size={self.patch_size}, in_chans={self.in_chans})'
        plan = [PlannedTensor('stem.proj.weight', (c, self.in_chans, *self.patch_size), itemsize, stem),
                PlannedTensor('stem.proj.bias', (c,), itemsize, stem),
                *[PlannedTensor(f'*norm.{n}', (m,), itemsize, width, L + 1) for n in ('weight', 'bias')]]
        if self.num_classes:
            plan += linear_tensors('head', m, self.num_classes, itemsize, f'num_classes={self.num_classes}, {width}')
        if self.num_inputs != m:
            plan += MaskedLinear.planned_tensors(self.num_inputs, m, itemsize, 'in_proj', f'{width}, embed_dim={c}')
        hidden = self.hidden
        if hidden is None:
            return plan + MaskedLinear.planned_tensors(m, m, itemsize, 'blocks.*.fc1', width, L)
        src = f'gamma={self.gamma!r}, {width}'
        return plan + [*MaskedLinear.planned_tensors(m, hidden, itemsize, 'blocks.*.fc1', src, L),
                       *MaskedLinear.planned_tensors(hidden, m, itemsize, 'blocks.*.fc2', src, L)]

    def layer_tensors(self, dtype: Optional[torch.dtype]) -> List[PlannedTensor]:
        """The activations' tensors (one counted on the meta device): φ in every block, twice in MLP blocks with
        `outer_act`."""
        with torch.device('meta'):
            act = get_act_layer(self.act_layer)()
        per_block = 2 if self.hidden is not None and self.outer_act else 1
        return module_tensors('blocks.*.act', act, f'act_layer={self.act_layer!r}', per_block * self.num_blocks)


class SwMlp(FlatMapHeadMixin, PKModelMixin, nn.Module):
    """SW-MLP: (B, in_chans, H, W) → (B, num_classes); ``forward_features`` gives (B, m, 1, 1).
    ``model_args`` is its record (:class:`SwMlpArgs`), from which every part is built.
    """

    def __init__(
            self,
            num_classes: int = 10,
            img_size: Union[int, Tuple[int, int]] = 32,
            in_chans: int = 3,
            patch_size: Union[int, Tuple[int, int]] = 4,
            embed_dim: Optional[int] = None,
            num_blocks: int = 8,
            density: float = 0.5,
            omega: Optional[float] = None,
            width: Optional[int] = None,
            gamma: Optional[float] = None,
            outer_act: bool = True,
            mask_seed: int = 0,
            norm_eps: float = 1e-5,
            act_layer: Union[str, Any] = 'gelu',
            drop_rate: float = 0.,
            global_pool: str = 'avg',
            device=None,
            dtype=None,
    ) -> None:
        """
        Args:
            num_classes: Classifier outputs (0 for none).
            img_size: Input image size.
            in_chans: Input channels.
            patch_size: Patch size P of the per-patch FC.
            embed_dim: Per-patch FC output C; None for C = C0 = in_chans·P².
            num_blocks: Number of sparse blocks L.
            density: p, the probability that a weight is kept (0 < p ≤ 1).
            omega: Ω, average connections per layer; sets m = round(√(Ω/(γp))) (default 2^18). Or `width`.
            width: Explicit width m (then Ω = pγm²). Instead of `omega`.
            gamma: The paper's γ: MLP blocks with hidden width γm (eq. S.17); None for FC blocks (eq. S.16).
            outer_act: MLP blocks: x + φ(M2⊙W2 φ(M1⊙W1 LN x)) as eq. S.17 (True), or x + M2⊙W2 φ(M1⊙W1 LN x),
                the MLP-Mixer block with its factors replaced by M ⊙ A as C.1 reads (False; needs `gamma`).
            mask_seed: Seed of the masks (a fixed hash stream, identical on every machine).
            norm_eps: LayerNorm epsilon.
            act_layer: Activation φ.
            drop_rate: Head dropout.
            global_pool: 'avg' (the 1×1 map to a vector) or ''.
        """
        super().__init__()
        # the record: the arguments validated and resolved; sizes past the device's memory refused before
        # anything is allocated; every part below is built from the record
        args = SwMlpArgs.from_locals(locals())
        source = f'width={args.width}' if width is not None else \
            f'omega={2 ** 18 if omega is None else omega:g} at density p={args.density:g}'
        self.check_size(args, device, dtype, sources={'width': source})
        self.model_args = args
        dd = {'device': device, 'dtype': dtype}
        # what timm's API and the forward read
        self.num_classes, self.global_pool, self.in_chans, self.img_size = \
            args.num_classes, args.global_pool, args.in_chans, args.img_size
        self.num_features = self.head_hidden_size = self.width = args.width
        self.density = args.density
        self.grad_checkpointing = False

        self.stem = PatchEmbed(img_size=args.img_size, patch_size=args.patch_size, in_chans=args.in_chans,
                               embed_dim=args.embed_dim, **dd)
        self.in_proj = nn.Identity() if args.num_inputs == args.width else MaskedLinear(
            args.num_inputs, args.width, args.density, seed=args.mask_seed, key='in_proj', **dd)
        self.blocks = nn.Sequential(*[
            SparseBlock(args.width, args.density, args.hidden, mask_seed=args.mask_seed, key=f'blocks.{i}',
                        norm_eps=args.norm_eps, act_layer=get_act_layer(args.act_layer), outer_act=args.outer_act,
                        **dd)
            for i in range(args.num_blocks)])
        self.feature_info = [dict(module=f'blocks.{i}', num_chs=args.width, reduction=max(args.img_size))
                             for i in range(args.num_blocks)]
        self.norm = nn.LayerNorm(args.width, eps=args.norm_eps, **dd)
        self.head_drop = nn.Dropout(args.drop_rate)
        self.head = nn.Linear(args.width, args.num_classes, **dd) if args.num_classes > 0 else nn.Identity()
        self.init_weights()

    @torch.jit.ignore
    def init_weights(self) -> None:
        """Masked weights N(0, 1/(p·fan_in)) on the kept entries (§4.3); stem lecun normal; zero head."""
        for name, module in self.named_modules():
            if isinstance(module, MaskedLinear):
                module.reset_parameters()
            elif isinstance(module, nn.Conv2d):
                lecun_normal_(module.weight)
                nn.init.zeros_(module.bias)
            elif isinstance(module, nn.Linear) and name.startswith('head'):
                nn.init.zeros_(module.weight)
                nn.init.zeros_(module.bias)

    @torch.jit.ignore
    def group_matcher(self, coarse: bool = False) -> Dict[str, Any]:
        return dict(stem=r'^stem|^in_proj', blocks=[(r'^blocks\.(\d+)', None), (r'^norm', (99999,))])

    def _vector_features(self, x: torch.Tensor) -> torch.Tensor:
        if not torch.jit.is_scripting():
            x = check_input(x, self.in_chans, self.img_size)
        x = self.stem(x)                         # (B, S0, C) per-patch FC
        return self.in_proj(x.flatten(1))        # (B, m)

    def forward_intermediates(
            self,
            x: torch.Tensor,
            indices: Optional[Union[int, List[int]]] = None,
            norm: bool = False,
            stop_early: bool = False,
            output_fmt: str = 'NCHW',
            intermediates_only: bool = False,
    ) -> Union[List[torch.Tensor], Tuple[torch.Tensor, List[torch.Tensor]]]:
        """Block outputs as (B, m, 1, 1) maps (NCHW) or (B, 1, m) (NLC)."""
        assert output_fmt in ('NCHW', 'NLC'), 'Output format must be one of NCHW or NLC.'
        take_indices, max_index = feature_take_indices(len(self.blocks), indices)
        x = self._vector_features(x)
        blocks = self.blocks if torch.jit.is_scripting() or not stop_early else self.blocks[:max_index + 1]
        intermediates = []
        for i, blk in enumerate(blocks):
            x = blk(x)
            if i in take_indices:
                y = self.norm(x) if norm else x
                intermediates.append(y[:, :, None, None] if output_fmt == 'NCHW' else y[:, None, :])
        if intermediates_only:
            return intermediates
        return self.norm(x)[:, :, None, None], intermediates

    def forward_features(self, x: torch.Tensor) -> torch.Tensor:
        """(B, in_chans, H, W) → (B, m, 1, 1)."""
        x = self._vector_features(x)
        if self.grad_checkpointing and not torch.jit.is_scripting():
            x = checkpoint_seq(self.blocks, x)
        else:
            x = self.blocks(x)
        return self.norm(x)[:, :, None, None]


def _create_sw_mlp(variant: str, pretrained: bool, model_args: Dict[str, Any], **kwargs) -> SwMlp:
    """Build `variant` from its `model_args`, every one of which the caller's kwargs may override."""
    return build_registered(SwMlp, variant, pretrained, model_args, **kwargs)


default_cfgs = generate_default_cfgs({
    'sw_mlp_o18_32': paper_cfg(input_size=(3, 32, 32), pool_size=(1, 1), crop_pct=1.0, num_classes=10),
})


@register_model
def sw_mlp_o18_32(pretrained: bool = False, **kwargs) -> SwMlp:
    """SW-MLP of C.4 (ii): 8 FC blocks, Ω = 2^18, P = 4 on 32 px; `density` p sets m = √(Ω/p)
    (p = 0.9, 0.7, 0.5, 0.3, 0.1 → m = 540, 612, 724, 935, 1619)."""
    model_args = dict(img_size=32, patch_size=4, num_blocks=8, omega=2 ** 18, density=0.5)
    return _create_sw_mlp('sw_mlp_o18_32', pretrained, model_args, **kwargs)
