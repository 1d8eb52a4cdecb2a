""" Static sparse-weight MLP (SW-MLP), the baseline the PK family is compared with.

Paper: `Understanding MLP-Mixer as a Wide and Sparse MLP` - https://arxiv.org/abs/2306.01470
(App. A.2.5, C.4 (ii); §4.3 for the initialisation)

Per-patch FC, vectorisation, a masked input layer to width m, L residual sparse blocks
x ↦ x + φ((M ⊙ W) LN(x)) (eq. S.16), or MLP blocks x ↦ x + φ((M2 ⊙ W2) φ((M1 ⊙ W1) LN(x)))
with hidden γm (eq. S.17), LayerNorm and a linear classifier. Every mask is Bernoulli(p),
fixed at construction. The width follows Ω = p·γ·m² (eq. 13, S.43) unless given.

The paper does not say how the S0·C per-patch features reach width m; here a masked linear
layer of the same density p maps them (an identity when S0·C = m). Memory is O(m²): the masks
alone take m² bytes per layer, so this model is for CIFAR-size widths.

The features are returned as a (B, m, 1, 1) map: one position with m channels.
"""
from typing import Any, Dict, List, Optional, Tuple, Union

import torch
import torch.nn as nn
from timm.layers import PatchEmbed, get_act_layer, lecun_normal_
from timm.models import checkpoint_seq, generate_default_cfgs, register_model

from .._timm import feature_take_indices
from ..description import ModelDescription, describe_sw_mlp
from ..errors import InvalidArgumentError
from ..layers import MaskedLinear
from ..sizes import check_sw_mlp_size
from ..validation import choice, integer, non_negative_int, optional, positive_int, positive_real, probability, rate
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

__all__ = ['SparseBlock', 'SwMlp']

torch.fx.wrap('check_input')  # the input check is one node of an FX graph


class SparseBlock(nn.Module):
    """x ↦ x + φ((M ⊙ W) LN(x)) (eq. S.16), or with a hidden layer of width γm (eq. S.17). (B, m) → (B, m)."""

    def __init__(
            self,
            width: int,
            density: float,
            hidden: Optional[int] = None,
            mask_seed: int = 0,
            key: str = '',
            norm_eps: float = 1e-5,
            act_layer: Any = nn.GELU,
            device=None,
            dtype=None,
    ) -> None:
        super().__init__()
        dd = {'device': device, 'dtype': dtype}
        self.norm = nn.LayerNorm(width, eps=norm_eps, **dd)
        self.fc1 = MaskedLinear(width, hidden or width, density, seed=mask_seed, key=f'{key}.fc1', **dd)
        self.act1 = act_layer()
        self.fc2 = MaskedLinear(hidden, width, density, seed=mask_seed, key=f'{key}.fc2', **dd) if hidden else None
        self.act2 = act_layer() if hidden else nn.Identity()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.act1(self.fc1(self.norm(x)))
        if self.fc2 is not None:
            y = self.act2(self.fc2(y))
        return x + y


def _hidden_width(width: int, gamma: Optional[float]) -> Optional[int]:
    """The MLP blocks' hidden width γm (None for FC blocks)."""
    return None if gamma is None else round(gamma * width)


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


def _resolve_args(given: Dict[str, Any], device: Any = None, dtype: Any = None) -> ModelArgs:
    """The constructor's arguments, validated (each refusal names its argument) and resolved into the model's
    record: the width m explicit (omega None), the per-patch FC's C explicit, the activation by timm name.
    Sizes past the memory of the device the model is built on are refused here, naming the arguments as given,
    before anything is allocated (:mod:`timm_pkmixer.sizes`)."""
    num_classes = non_negative_int('num_classes', given['num_classes'])
    img_size, patch_size, grid = patch_grid(given['img_size'], given['patch_size'])
    in_chans = positive_int('in_chans', given['in_chans'])
    num_blocks = positive_int('num_blocks', given['num_blocks'])
    embed_dim = optional(positive_int, 'embed_dim', given['embed_dim'])
    density = probability('density p', given['density'])
    gamma = optional(positive_real, 'gamma', given['gamma'])
    mask_seed = integer('mask_seed', given['mask_seed'])
    norm_eps = positive_real('norm_eps', given['norm_eps'])
    global_pool = choice('global_pool', given['global_pool'], ('', 'avg'))
    drop_rate = rate('drop_rate', given['drop_rate'])
    width = _width(given['omega'], given['width'], density, 1.0 if gamma is None else gamma)
    act_layer, _ = act_layer_arg(given['act_layer'])
    embed_dim = embed_dim or in_chans * patch_size[0] * patch_size[1]
    source = 'width' if given['width'] is not None else \
        f'omega={2 ** 18 if given["omega"] is None else given["omega"]:g} at density p={density:g}'
    check_sw_mlp_size(
        grid=grid, in_chans=in_chans, patch_size=patch_size, embed_dim=embed_dim, width=width, width_source=source,
        num_blocks=num_blocks, gamma=gamma, num_classes=num_classes, device=device, dtype=dtype)
    hidden = _hidden_width(width, gamma)
    if hidden is not None and hidden < 1:
        raise InvalidArgumentError(f'gamma={given["gamma"]!r} gives a hidden width of {hidden} for m={width}')
    resolved = dict(
        num_classes=num_classes, img_size=img_size, in_chans=in_chans, patch_size=patch_size,
        embed_dim=embed_dim, num_blocks=num_blocks, density=density,
        omega=None, width=width, gamma=gamma, mask_seed=mask_seed, norm_eps=norm_eps, act_layer=act_layer,
        drop_rate=drop_rate, global_pool=global_pool)
    return ModelArgs({k: resolved[k] for k in given})  # in the constructor's order


class SwMlp(FlatMapHeadMixin, PKModelMixin, nn.Module):
    """SW-MLP: (B, in_chans, H, W) → (B, num_classes); ``forward_features`` gives (B, m, 1, 1).
    ``model_args`` holds the arguments it was built with, resolved (:class:`~timm_pkmixer.models.ModelArgs`).
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
            mask_seed: Seed of the masks (a fixed hash stream, identical on every machine).
            norm_eps: LayerNorm epsilon.
            act_layer: Activation φ.
            drop_rate: Head dropout.
            global_pool: 'avg' (the 1×1 map to a vector) or ''.
        """
        super().__init__()
        dd = {'device': device, 'dtype': dtype}
        # the arguments, validated and resolved into the model's record: every part below is built from it
        self.model_args = args = _resolve_args(dict(
            num_classes=num_classes, img_size=img_size, in_chans=in_chans, patch_size=patch_size, embed_dim=embed_dim,
            num_blocks=num_blocks, density=density, omega=omega, width=width, gamma=gamma, mask_seed=mask_seed,
            norm_eps=norm_eps, act_layer=act_layer, drop_rate=drop_rate, global_pool=global_pool), device, dtype)
        self._set_attributes(args)
        self.stem = PatchEmbed(img_size=self.img_size, patch_size=args['patch_size'], in_chans=self.in_chans,
                               embed_dim=args['embed_dim'], **dd)
        num_inputs = self.stem.num_patches * args['embed_dim']
        self.in_proj = nn.Identity() if num_inputs == self.width else MaskedLinear(
            num_inputs, self.width, self.density, seed=self.mask_seed, key='in_proj', **dd)
        self.blocks = nn.Sequential(*[
            SparseBlock(self.width, self.density, self.hidden, mask_seed=self.mask_seed, key=f'blocks.{i}',
                        norm_eps=args['norm_eps'], act_layer=get_act_layer(args['act_layer']), **dd)
            for i in range(args['num_blocks'])])
        self.feature_info = [dict(module=f'blocks.{i}', num_chs=self.width, reduction=max(self.img_size))
                             for i in range(args['num_blocks'])]
        self.norm = nn.LayerNorm(self.width, eps=args['norm_eps'], **dd)
        self.head_drop = nn.Dropout(args['drop_rate'])
        self.head = nn.Linear(self.width, self.num_classes, **dd) if self.num_classes > 0 else nn.Identity()
        self.init_weights()

    def _set_attributes(self, args: ModelArgs) -> None:
        """The attributes timm's API and the forward read, from the record."""
        self.num_classes = args['num_classes']
        self.in_chans = args['in_chans']
        self.img_size = args['img_size']
        self.global_pool = args['global_pool']
        self.density = args['density']
        self.width = args['width']
        self.mask_seed = args['mask_seed']
        self.hidden = _hidden_width(args['width'], args['gamma'])
        self.num_features = self.head_hidden_size = args['width']
        self.grad_checkpointing = False

    @torch.jit.ignore
    def describe(self) -> ModelDescription:
        """m, p, γ, Ω, depth and mask seed (see `ModelDescription`), read from the record `model_args`."""
        args = self.model_args
        return describe_sw_mlp(args['width'], args['num_blocks'], args['density'],
                               _hidden_width(args['width'], args['gamma']), args['mask_seed'])

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
