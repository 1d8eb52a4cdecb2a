""" PK-family Mixers: normal and Random-Permuted (RP) MLP-Mixers and S-Mixers, written as PK layers.

Paper: `Understanding MLP-Mixer as a Wide and Sparse MLP` - https://arxiv.org/abs/2306.01470

@inproceedings{hayase2024understanding,
  title={Understanding MLP-Mixer as a Wide and Sparse MLP},
  author={Hayase, Tomohiro and Karakida, Ryo},
  booktitle={International Conference on Machine Learning (ICML)},
  year={2024}
}

One architecture (App. A): per-patch FC, L blocks, LayerNorm, global average pooling, linear head.
Each block is a token-mixing PK layer and a channel-mixing PK layer with LayerNorm and skip
connections (eqs. S.5-S.8, S.13). Two switches select the family member:

* ``permutation='normal'`` (J_c / identity, the MLP-Mixer itself) or ``'random'`` (RP Mixer,
  fixed uniform random J1, J2 per layer, seeded by ``perm_seed``), or one of them per block (the kinds are
  ``permutation_kinds.PERMUTATION_KINDS``'s);
* ``block_type='mlp'`` (two FCs, MLP-Mixer; hidden widths by timm's ``mlp_ratio`` or the paper's ``gamma``)
  or ``'fc'`` (one FC, S-Mixer).

The mixing size (S, C) may differ from the patch grid (S0, C0): the per-patch FC maps C0 → C and a
SkipLayer (App. A.2.4) maps S0 → S in the first block. ``pk_mixer_*16_224`` are timm's Mixers
(same parameter names, same function), so timm's weights load into them unchanged.
"""
import math
from dataclasses import dataclass
from functools import partial
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import torch
import torch.nn as nn
from timm.layers import DropPath, PatchEmbed, get_act_layer, get_norm_layer, lecun_normal_
from timm.models import checkpoint, checkpoint_seq, generate_default_cfgs, named_apply, register_model

from .._timm import feature_take_indices, mixer_init_weights
from ..description import ModelDescription, describe_mixer
from ..errors import ArgumentTypeError, InvalidArgumentError
from ..layers import SkipLayer, make_pk_mlp
from ..permutation_kinds import PERMUTATION_KINDS
from ..sizes import PlannedTensor, format_count, linear_tensors, module_tensors, refuse_unbounded
from ..validation import (
    boolean,
    choice,
    integer,
    non_negative_int,
    optional,
    positive_int,
    positive_real,
    rate,
    real_pair,
)
from ._common import (
    ModelArgs,
    PKModelMixin,
    act_layer_arg,
    build_registered,
    check_input,
    layer_name,
    paper_cfg,
    patch_grid,
)

__all__ = ['TileTokens', 'PKMixerBlock', 'MixerArgs', 'PKMixer']

torch.fx.wrap('check_input')  # the input check is one node of an FX graph


class TileTokens(nn.Module):
    """Group the patch tokens of a K × K-tiled image by tile: (B, S0, C) in the patch grid's row-major order →
    (B, K²·S0/K², C) tile-major, each tile's tokens in the row-major order of the tile's own grid."""

    def __init__(self, grid: Tuple[int, int], tiles: int) -> None:
        super().__init__()
        self.tiles = tiles
        self.tile_grid = (grid[0] // tiles, grid[1] // tiles)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        K, (h, w) = self.tiles, self.tile_grid
        B, C = x.shape[0], x.shape[-1]
        return x.reshape(B, K, h, K, w, C).permute(0, 1, 3, 2, 4, 5).reshape(B, K * K * h * w, C)

    def ungroup(self, x: torch.Tensor) -> torch.Tensor:
        """The inverse: tile-major tokens back to the patch grid's row-major order."""
        K, (h, w) = self.tiles, self.tile_grid
        B, C = x.shape[0], x.shape[-1]
        return x.reshape(B, K, K, h, w, C).permute(0, 1, 3, 2, 4, 5).reshape(B, K * h * K * w, C)

    def extra_repr(self) -> str:
        return f'tiles={self.tiles}x{self.tiles}, tile_grid={self.tile_grid}'


class PKMixerBlock(nn.Module):
    """Token-mixing then channel-mixing PK layer, each with pre-LayerNorm and a skip connection.

    (B, S_in, C) → (B, S, C). With a skip layer (first block, App. A.2.4):
    U = LN(W̃ X) + PK_tokens(LN(X)); otherwise U = X + PK_tokens(LN(X)). Then Y = U + PK_channels(LN(U)).
    Each skip connection is added by the PK layer's J2 (``mlp(x, residual)``), or after DropPath when
    stochastic depth is on (it scales the branch alone).
    """

    def __init__(
            self,
            dim: int,
            num_tokens_in: int,
            num_tokens: int,
            token_hidden: Optional[int],
            channel_hidden: Optional[int],
            permutation: str = 'normal',
            perm_seed: int = 0,
            key: str = '',
            skip_layer: bool = False,
            norm_layer: Callable[..., nn.Module] = nn.LayerNorm,
            act_layer: Callable[..., nn.Module] = nn.GELU,
            drop: float = 0.,
            drop_path: float = 0.,
            tiles: int = 1,
            device=None,
            dtype=None,
    ) -> None:
        super().__init__()
        dd = {'device': device, 'dtype': dtype}
        if num_tokens_in != num_tokens and not skip_layer:
            raise InvalidArgumentError(f'a block mapping {num_tokens_in} to {num_tokens} tokens needs skip_layer=True')
        pk = dict(dim=dim, permutation=permutation, seed=perm_seed, act_layer=act_layer, drop=drop, tiles=tiles, **dd)
        self.skip = SkipLayer(num_tokens_in, num_tokens, dim, norm_layer, **dd) if skip_layer else nn.Identity()
        self.norm1 = norm_layer(dim, **dd)
        self.mlp_tokens = make_pk_mlp('token', num_tokens_in, num_tokens, hidden_features=token_hidden,
                                      key=f'{key}.mlp_tokens', **pk)
        self.drop_path = DropPath(drop_path) if drop_path > 0. else nn.Identity()
        self.norm2 = norm_layer(dim, **dd)
        self.mlp_channels = make_pk_mlp('channel', num_tokens, num_tokens, hidden_features=channel_hidden,
                                        key=f'{key}.mlp_channels', **pk)
        self.stochastic_depth = drop_path > 0.

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.stochastic_depth:
            x = self.skip(x) + self.drop_path(self.mlp_tokens(self.norm1(x)))
            return x + self.drop_path(self.mlp_channels(self.norm2(x)))
        x = self.mlp_tokens(self.norm1(x), self.skip(x))
        return self.mlp_channels(self.norm2(x), x)


def _block_permutations(permutation: Union[str, Sequence[str]], num_blocks: int) -> Tuple[str, ...]:
    """One kind of PERMUTATION_KINDS per block, from one for all blocks or a sequence of num_blocks of them."""
    kinds = tuple(PERMUTATION_KINDS)
    if isinstance(permutation, str):
        return (choice('permutation', permutation, kinds),) * num_blocks
    if not isinstance(permutation, (list, tuple)):
        raise ArgumentTypeError(f'permutation must be one of {kinds} or a list of them (one per block), '
                                f'got {permutation!r} ({type(permutation).__name__})')
    if len(permutation) != num_blocks:
        raise InvalidArgumentError(f'permutation lists {len(permutation)} entries for num_blocks={num_blocks}: '
                                   f'give one per block, or one string for all blocks')
    return tuple(choice(f'permutation[{i}]', p, kinds) for i, p in enumerate(permutation))


def _widths_given(mlp_ratio: Any, gamma: Any) -> str:
    """How the caller set the hidden widths, for messages."""
    if gamma is not None:
        return f'gamma={gamma!r}'
    if mlp_ratio is not None:
        return f'mlp_ratio={mlp_ratio!r}'
    return 'mlp_ratio (timm\'s default (0.5, 4.0))'


def _ratio_widths(num_tokens: int, dim: int, mlp_ratio: Any, gamma: Any) -> Tuple[int, int]:
    """(token, channel) hidden widths of the paper's γ (round(γS), round(γC)) or timm's mlp_ratio (int(r·C), both
    multiples of C, as timm's MixerBlock); a width past any float is refused as too large, naming the argument."""
    if mlp_ratio is not None and gamma is not None:
        raise InvalidArgumentError('give mlp_ratio (timm: hidden widths as multiples of C) or gamma (the paper: '
                                   'hidden widths γS and γC), not both')
    try:
        if gamma is not None:
            g_tokens, g_channels = real_pair('gamma', gamma)
            return round(g_tokens * num_tokens), round(g_channels * dim)
        r_tokens, r_channels = real_pair('mlp_ratio', (0.5, 4.0) if mlp_ratio is None else mlp_ratio)
        return int(r_tokens * dim), int(r_channels * dim)
    except OverflowError:  # γ·S or ratio·C past any float
        refuse_unbounded('blocks.*.mlp_*.fc1.weight', _widths_given(mlp_ratio, gamma))
        raise


def _hidden_widths(
        block_type: str,
        num_tokens: int,
        dim: int,
        mlp_ratio: Any,
        gamma: Any,
        token_hidden_dim: Optional[int],
        channel_hidden_dim: Optional[int],
) -> Tuple[Optional[int], Optional[int]]:
    """Hidden widths (token MLP, channel MLP) of an MLP-Mixer; (None, None) for an S-Mixer."""
    if block_type == 'fc':
        for name, value in (('mlp_ratio', mlp_ratio), ('gamma', gamma), ('token_hidden_dim', token_hidden_dim),
                            ('channel_hidden_dim', channel_hidden_dim)):
            if value is not None:
                raise InvalidArgumentError(f"{name} needs block_type='mlp': an S-Mixer (block_type='fc') has one "
                                           f"FC per mixing and no hidden layer")
        return None, None
    token, channel = _ratio_widths(num_tokens, dim, mlp_ratio, gamma)
    token = optional(positive_int, 'token_hidden_dim', token_hidden_dim) or token
    channel = optional(positive_int, 'channel_hidden_dim', channel_hidden_dim) or channel
    for name, width in (('token', token), ('channel', channel)):
        if width < 1:
            raise InvalidArgumentError(f'{_widths_given(mlp_ratio, gamma)} gives a {name}-MLP hidden width of '
                                       f'{width} for S={num_tokens}, C={dim}: it must be at least 1')
    return token, channel


def _norm_args(norm_layer: Any, norm_eps: Any) -> Tuple[Any, Optional[float]]:
    """(norm_layer, norm_eps) as the model records them: torch's LayerNorm by its epsilon (norm_layer None;
    default 1e-5, the paper's), any other norm layer by its timm name where it has one (norm_eps None)."""
    if norm_layer is None:
        return None, 1e-5 if norm_eps is None else positive_real('norm_eps', norm_eps)
    if norm_eps is not None:
        raise InvalidArgumentError('give norm_layer (timm) or norm_eps (the LayerNorm epsilon), not both')
    try:
        layer = get_norm_layer(norm_layer)
    except (KeyError, AssertionError):
        layer = None
    if layer is None:
        raise InvalidArgumentError(f'norm_layer {norm_layer!r} is not a norm layer timm knows')
    base, keywords = (layer.func, layer.keywords) if isinstance(layer, partial) else (layer, {})
    if base is nn.LayerNorm and set(keywords) <= {'eps'}:  # the very layer norm_eps builds
        return None, positive_real('norm_eps', keywords.get('eps', 1e-5))
    return layer_name(norm_layer, get_norm_layer), None


def _tokens(grid: Tuple[int, int], tiles: int, num_tokens: Optional[int], skip_layer: Optional[bool]
            ) -> Tuple[int, bool]:
    """(S, skip layer in block 0): S defaults to the S0 patches; the skip layer is needed exactly when S ≠ S0."""
    num_patches = grid[0] * grid[1]
    num_tokens = num_tokens or num_patches
    if skip_layer is None:
        skip_layer = num_tokens != num_patches
    if not skip_layer and num_tokens != num_patches:
        raise InvalidArgumentError(f'num_tokens={num_tokens} differs from the {num_patches} patches: '
                                   f'needs skip_layer=True')
    if num_tokens % (tiles * tiles):
        raise InvalidArgumentError(f'num_tokens={num_tokens} is not a multiple of the {tiles * tiles} tiles')
    return num_tokens, skip_layer


@dataclass(frozen=True, eq=False)
class MixerArgs(ModelArgs):
    """The record of a :class:`PKMixer` (:class:`~timm_pkmixer.models.ModelArgs`), canonical: the hidden widths
    explicit (``mlp_ratio`` and ``gamma`` always None, both widths None for an S-Mixer), S and the skip layer
    explicit, the permutation one kind per block, torch's LayerNorm by its epsilon (``norm_layer`` None) or any
    other norm by its timm name (``norm_eps`` None), the activation by its timm name."""
    num_classes: int
    img_size: Tuple[int, int]
    in_chans: int
    patch_size: Tuple[int, int]
    num_blocks: int
    embed_dim: int
    mlp_ratio: None                     # resolved into the hidden widths
    gamma: None                         # resolved into the hidden widths
    token_hidden_dim: Optional[int]     # None: one FC per mixing (S-Mixer)
    channel_hidden_dim: Optional[int]
    num_tokens: int                     # S
    block_type: str                     # 'mlp' or 'fc'
    permutation: Tuple[str, ...]        # per block: a kind of PERMUTATION_KINDS ('normal', 'random')
    perm_seed: int
    skip_layer: bool                    # the SkipLayer in block 0
    norm_layer: Optional[Union[str, Callable[..., nn.Module]]]
    norm_eps: Optional[float]
    act_layer: Union[str, Callable[..., nn.Module]]
    weight_init: str
    nlhb: bool
    drop_rate: float
    proj_drop_rate: float
    drop_path_rate: float
    stem_norm: bool
    global_pool: str
    tiles: int

    RESOLVED_FROM = {('mlp_ratio', 'gamma'): ('token_hidden_dim', 'channel_hidden_dim')}

    @classmethod
    def resolve(cls, given: Mapping[str, Any]) -> 'MixerArgs':
        """The record of PKMixer's arguments `given`, validated (each refusal names its argument)."""
        img_size, patch_size, grid = patch_grid(given['img_size'], given['patch_size'])
        num_blocks = positive_int('num_blocks', given['num_blocks'])
        embed_dim = positive_int('embed_dim', given['embed_dim'])
        tiles = positive_int('tiles', given['tiles'])
        if grid[0] % tiles or grid[1] % tiles:
            raise InvalidArgumentError(f'tiles={tiles} does not divide the {grid[0]} × {grid[1]} patch grid into '
                                       f'{tiles} × {tiles} tiles')
        num_tokens, skip_layer = _tokens(grid, tiles, optional(positive_int, 'num_tokens', given['num_tokens']),
                                         optional(boolean, 'skip_layer', given['skip_layer']))
        block_type = choice('block_type', given['block_type'], ('mlp', 'fc'))
        token_hidden, channel_hidden = _hidden_widths(
            block_type, num_tokens, embed_dim, given['mlp_ratio'], given['gamma'], given['token_hidden_dim'],
            given['channel_hidden_dim'])
        norm_layer, norm_eps = _norm_args(given['norm_layer'], given['norm_eps'])
        return cls(
            num_classes=non_negative_int('num_classes', given['num_classes']), img_size=img_size,
            in_chans=positive_int('in_chans', given['in_chans']), patch_size=patch_size, num_blocks=num_blocks,
            embed_dim=embed_dim, mlp_ratio=None, gamma=None, token_hidden_dim=token_hidden,
            channel_hidden_dim=channel_hidden, num_tokens=num_tokens, block_type=block_type,
            permutation=_block_permutations(given['permutation'], num_blocks),
            perm_seed=integer('perm_seed', given['perm_seed']), skip_layer=skip_layer, norm_layer=norm_layer,
            norm_eps=norm_eps, act_layer=act_layer_arg(given['act_layer'])[0],
            weight_init=choice('weight_init', given['weight_init'], ('paper', 'timm')),
            nlhb=boolean('nlhb', given['nlhb']), stem_norm=boolean('stem_norm', given['stem_norm']),
            global_pool=choice('global_pool', given['global_pool'], ('', 'avg')), tiles=tiles,
            **{k: rate(k, given[k]) for k in ('drop_rate', 'proj_drop_rate', 'drop_path_rate')})

    @property
    def grid(self) -> Tuple[int, int]:
        """The patch grid (H/P, W/P)."""
        return self.img_size[0] // self.patch_size[0], self.img_size[1] // self.patch_size[1]

    @property
    def num_patches(self) -> int:
        """S0."""
        return self.grid[0] * self.grid[1]

    def describe(self) -> ModelDescription:
        return describe_mixer(self.num_tokens, self.embed_dim, self.num_blocks, self.token_hidden_dim,
                              self.channel_hidden_dim, permutation=self.permutation, perm_seed=self.perm_seed,
                              tiles=self.tiles)

    @property
    def num_norms(self) -> int:
        """The norm layers: two per block, the final one, the skip layer's and the stem's when they exist."""
        return 2 * self.num_blocks + 1 + int(self.skip_layer) + int(self.stem_norm)

    def planned_tensors(self, itemsize: int, sources: Mapping[str, str]) -> List[PlannedTensor]:
        """Every parameter and buffer but those of a norm layer given by timm name (:meth:`layer_tensors`): the
        per-patch FC, head, skip layer, LayerNorms, mixing FCs and the random permutations' buffers, each naming
        the arguments that set it (`sources`: 'token' / 'channel', how the caller set those widths); J1, J2 as
        their kind counts them."""
        s0, s, c = self.num_patches, self.num_tokens, self.embed_dim
        stem = f'embed_dim={c} (with patch_size={self.patch_size}, in_chans={self.in_chans})'
        plan = [PlannedTensor('stem.proj.weight', (c, self.in_chans, *self.patch_size), itemsize, stem),
                PlannedTensor('stem.proj.bias', (c,), itemsize, stem)]
        if self.num_classes:
            plan += linear_tensors('head', c, self.num_classes, itemsize,
                                   f'num_classes={self.num_classes}, embed_dim={c}')
        if self.skip_layer:
            plan += linear_tensors('blocks.0.skip.proj', s0, s, itemsize, f'num_tokens={s}', bias=False)
        if self.norm_layer is None:  # torch's LayerNorm(C, eps): weight and bias
            plan += [PlannedTensor(f'*.norm.{n}', (c,), itemsize, f'embed_dim={c}', self.num_norms)
                     for n in ('weight', 'bias')]
        return plan + self._mixing_tensors(itemsize, sources) + self._permutation_tensors()

    def _permutation_tensors(self) -> List[PlannedTensor]:
        """J1, J2 of both mixings of every block, as each block's kind counts them (block 0's token J1: of S0·C)."""
        s0, s, c = self.num_patches, self.num_tokens, self.embed_dim
        plan = []
        for name, kind in PERMUTATION_KINDS.items():
            blocks = [i for i, p in enumerate(self.permutation) if p == name]
            if not blocks:
                continue
            count = kind.load().planned_tensors
            src = f'num_tokens={s}, embed_dim={c} (permutation={name!r})'
            first_in = int(blocks[0] == 0)
            plan += count(s * c, 'blocks.*.mlp_*.perm_*', src, 4 * len(blocks) - first_in)
            if first_in:
                plan += count(s0 * c, 'blocks.0.mlp_tokens.perm_in', src, 1)
        return plan

    def _mixing_tensors(self, itemsize: int, sources: Mapping[str, str]) -> List[PlannedTensor]:
        """The FCs of the token and channel mixings (block 0's token mixing from the S0 patches)."""
        s0, s, c, L = self.num_patches, self.num_tokens, self.embed_dim, self.num_blocks
        th, ch = self.token_hidden_dim, self.channel_hidden_dim
        token = sources.get('token', f'token_hidden_dim={th}') if th else f'num_tokens={s}'
        channel = sources.get('channel', f'channel_hidden_dim={ch}') if ch else f'embed_dim={c}'
        plan = []
        for name, s_in, n in (('blocks.0.mlp_tokens', s0, 1), ('blocks.*.mlp_tokens', s, L - 1)):
            if n and th is None:  # S-Mixer: one FC per mixing
                plan += linear_tensors(f'{name}.fc1', s_in, s, itemsize, token, n)
            elif n:
                plan += [*linear_tensors(f'{name}.fc1', s_in, th, itemsize, token, n),
                         *linear_tensors(f'{name}.fc2', th, s, itemsize, token, n)]
        if ch is None:
            return plan + linear_tensors('blocks.*.mlp_channels.fc1', c, c, itemsize, channel, L)
        return plan + [*linear_tensors('blocks.*.mlp_channels.fc1', c, ch, itemsize, channel, L),
                       *linear_tensors('blocks.*.mlp_channels.fc2', ch, c, itemsize, channel, L)]

    def layer_tensors(self, dtype: Optional[torch.dtype]) -> List[PlannedTensor]:
        """The tensors of the layers given by timm name, one of each counted on the meta device: the norm layer
        (if not torch's LayerNorm) and the activation of every mixing (built as the model builds it)."""
        tensors = []
        if self.norm_layer is not None:
            norm = get_norm_layer(self.norm_layer)(self.embed_dim, device='meta', dtype=dtype)
            tensors += module_tensors('*.norm', norm, f'norm_layer={self.norm_layer!r}', self.num_norms)
        with torch.device('meta'):
            act = get_act_layer(self.act_layer)()
        return tensors + module_tensors('blocks.*.mlp_*.act', act, f'act_layer={self.act_layer!r}',
                                        2 * self.num_blocks)


def _width_sources(args: MixerArgs, mlp_ratio: Any, gamma: Any, token_hidden_dim: Any, channel_hidden_dim: Any
                   ) -> Dict[str, str]:
    """How the caller set each hidden width, for the size check's messages: the explicit width, or the ratio
    (named first when it is what makes the width large)."""
    widths = _widths_given(mlp_ratio, gamma)
    sources = {}
    for key, explicit, hidden, dim_name, dim in (
            ('token', token_hidden_dim, args.token_hidden_dim, 'num_tokens', args.num_tokens),
            ('channel', channel_hidden_dim, args.channel_hidden_dim, 'embed_dim', args.embed_dim)):
        if explicit is not None:
            sources[key] = f'{key}_hidden_dim={explicit}'
        elif hidden is not None and hidden > 16 * dim:
            sources[key] = f'{widths} (a hidden width of {format_count(hidden)}) with {dim_name}={dim}'
        else:
            sources[key] = f'{dim_name}={dim} with {widths}'
    return sources


def _make_norm(args: MixerArgs) -> Callable[..., nn.Module]:
    """The norm layer of the recorded (norm_layer, norm_eps)."""
    return partial(nn.LayerNorm, eps=args.norm_eps) if args.norm_layer is None else get_norm_layer(args.norm_layer)


class PKMixer(PKModelMixin, nn.Module):
    """MLP-Mixer / S-Mixer of the PK family, normal, Random-Permuted, or with a permutation per block.

    Input (B, in_chans, H, W); ``forward_features`` gives (B, S, C) tokens (NLC), ``forward`` logits.
    ``model_args`` is its record (:class:`MixerArgs`), from which every part is built.

    Args:
        num_classes: Classifier outputs (0 for none).
        img_size: Input image size.
        in_chans: Input channels.
        patch_size: Patch size P; S0 = HW/P² patches of C0 = in_chans·P² values.
        num_blocks: Depth L.
        embed_dim: Channels C of the mixing layers (per-patch FC maps C0 → C).
        mlp_ratio: timm's spelling of the hidden widths, as in timm's MlpMixer (kept for timm compatibility): token
            and channel hidden widths int(r·C), one r or (r_tokens, r_channels); default (0.5, 4.0), timm's.
            'mlp' blocks only. Give it or `gamma`, not both.
        gamma: The paper's spelling of the hidden widths, its expansion γ: round(γS) and round(γC) (one γ or
            (γ_tokens, γ_channels)). Instead of `mlp_ratio`; the record holds the widths either gives.
        token_hidden_dim: Explicit token-MLP hidden width (overrides the ratio's).
        channel_hidden_dim: Explicit channel-MLP hidden width (overrides the ratio's).
        num_tokens: Tokens S of the mixing layers; None for S = S0.
        block_type: 'mlp' (MLP-Mixer, two FCs) or 'fc' (S-Mixer, one FC).
        permutation: 'normal' (MLP-Mixer / S-Mixer), 'random' (RP Mixer), or one of them per block
            (e.g. ['random'] + ['normal'] * 7: only the first block is random, Fig. S.4); any key of
            ``PERMUTATION_KINDS``.
        perm_seed: Seed of the fixed random permutations.
        skip_layer: Use the SkipLayer in block 0; None: only when S ≠ S0.
        norm_layer: timm's spelling (kept for timm compatibility): the norm layer (class, partial or name); default
            LayerNorm(eps=norm_eps). Give it or `norm_eps`, not both.
        norm_eps: The short spelling of torch's LayerNorm: its epsilon (paper: 1e-5, the default; timm's Mixers:
            1e-6). Instead of `norm_layer`; ``norm_layer=partial(nn.LayerNorm, eps=e)`` is recorded as it.
        act_layer: Activation φ (GELU in the paper).
        weight_init: 'paper' (mixing weights N(0, 1/fan_in), §4.3) or 'timm' (timm's Mixer init).
        nlhb: As in timm: initialise the head bias to -log(num_classes).
        drop_rate: Head dropout.
        proj_drop_rate: Dropout inside the mixing MLPs.
        drop_path_rate: Stochastic depth rate (the same in every block, as timm's Mixer).
        stem_norm: LayerNorm after the per-patch FC.
        global_pool: 'avg' or '' (no pooling).
        tiles: K > 1 for a model expanded from K-times smaller images (`expand_resolution`): the image is
            K × K tiles, tokens are grouped by tile after the stem, and every mixing layer acts on each tile
            alone at initialisation (random permutations lifted tile by tile, W block-diagonal).
    """

    def __init__(
            self,
            num_classes: int = 1000,
            img_size: Union[int, Tuple[int, int]] = 224,
            in_chans: int = 3,
            patch_size: Union[int, Tuple[int, int]] = 16,
            num_blocks: int = 8,
            embed_dim: int = 512,
            mlp_ratio: Optional[Union[float, Tuple[float, float]]] = None,
            gamma: Optional[Union[float, Tuple[float, float]]] = None,
            token_hidden_dim: Optional[int] = None,
            channel_hidden_dim: Optional[int] = None,
            num_tokens: Optional[int] = None,
            block_type: str = 'mlp',
            permutation: Union[str, Sequence[str]] = 'normal',
            perm_seed: int = 0,
            skip_layer: Optional[bool] = None,
            norm_layer: Optional[Union[str, Callable[..., nn.Module]]] = None,
            norm_eps: Optional[float] = None,
            act_layer: Union[str, Callable[..., nn.Module]] = 'gelu',
            weight_init: str = 'paper',
            nlhb: bool = False,
            drop_rate: float = 0.,
            proj_drop_rate: float = 0.,
            drop_path_rate: float = 0.,
            stem_norm: bool = False,
            global_pool: str = 'avg',
            tiles: int = 1,
            device=None,
            dtype=None,
    ) -> None:
        super().__init__()
        # the record: the arguments validated and resolved; sizes past the device's memory refused before
        # anything is allocated; every part below is built from the record
        args = MixerArgs.from_locals(locals())
        self.check_size(args, device, dtype, sources=_width_sources(
            args, mlp_ratio, gamma, token_hidden_dim, channel_hidden_dim))
        self.model_args = args
        dd = {'device': device, 'dtype': dtype}
        # what timm's API and the forward read
        self.num_classes, self.global_pool, self.in_chans, self.img_size = \
            args.num_classes, args.global_pool, args.in_chans, args.img_size
        self.num_features = self.head_hidden_size = self.embed_dim = args.embed_dim
        self.num_patches, self.num_tokens, self.tiles = args.num_patches, args.num_tokens, args.tiles
        self.grad_checkpointing = False

        norm_layer = _make_norm(args)
        self.stem = PatchEmbed(img_size=args.img_size, patch_size=args.patch_size, in_chans=args.in_chans,
                               embed_dim=args.embed_dim, norm_layer=norm_layer if args.stem_norm else None, **dd)
        self.tile_tokens = TileTokens(args.grid, args.tiles) if args.tiles > 1 else nn.Identity()
        self.blocks = _make_blocks(args, norm_layer, **dd)
        self.feature_info = [dict(module=f'blocks.{i}', num_chs=args.embed_dim, reduction=self.stem.feat_ratio())
                             for i in range(args.num_blocks)]
        self.norm = norm_layer(args.embed_dim, **dd)
        self.head_drop = nn.Dropout(args.drop_rate)
        self.head = nn.Linear(args.embed_dim, args.num_classes, **dd) if args.num_classes > 0 else nn.Identity()
        self.init_weights(args.weight_init)

    @torch.jit.ignore
    def init_weights(self, mode: str = 'paper') -> None:
        """'paper': mixing and skip weights N(0, 1/fan_in) (§4.3), zero biases and head;
        'timm': timm's MLP-Mixer init (xavier uniform, tiny MLP biases, zero head). Head bias -log(classes)
        with `nlhb`. Permutations are (re)computed from the seed."""
        head_bias = -math.log(self.num_classes) if self.model_args.nlhb and self.num_classes > 0 else 0.
        if mode == 'paper':
            named_apply(partial(_init_weights_paper, head_bias=head_bias), module=self)
        else:
            named_apply(partial(mixer_init_weights, head_bias=head_bias), module=self)
        self.init_non_persistent_buffers()

    @torch.jit.ignore
    def group_matcher(self, coarse: bool = False) -> Dict[str, Any]:
        return dict(
            stem=r'^stem',
            blocks=[(r'^blocks\.(\d+)', None), (r'^norm', (99999,))]
        )

    def forward_intermediates(
            self,
            x: torch.Tensor,
            indices: Optional[Union[int, List[int]]] = None,
            norm: bool = False,
            stop_early: bool = False,
            output_fmt: str = 'NCHW',
            intermediates_only: bool = False,
    ) -> Union[List[torch.Tensor], Tuple[torch.Tensor, List[torch.Tensor]]]:
        """Forward returning the outputs of the blocks in `indices` (NCHW needs S = the patch grid).

        Args:
            x: Input images (B, in_chans, H, W).
            indices: Last n blocks if int, all if None, these blocks if a list.
            norm: Apply the final norm to the intermediates.
            stop_early: Stop after the last requested block.
            output_fmt: 'NCHW' (tokens reshaped to the patch grid) or 'NLC' ((B, S, C)).
            intermediates_only: Return only the intermediates.
        """
        assert output_fmt in ('NCHW', 'NLC'), 'Output format must be one of NCHW or NLC.'
        reshape = output_fmt == 'NCHW'
        if reshape and self.num_tokens != self.num_patches:
            raise ValueError(f'NCHW intermediates need S = number of patches ({self.num_patches}); this model '
                             f'mixes S={self.num_tokens} tokens: use output_fmt="NLC"')
        intermediates = []
        take_indices, max_index = feature_take_indices(len(self.blocks), indices)

        if not torch.jit.is_scripting():
            x = check_input(x, self.in_chans, self.img_size)
        B, _, height, width = x.shape
        x = self.tile_tokens(self.stem(x))
        if torch.jit.is_scripting() or not stop_early:
            blocks = self.blocks
        else:
            blocks = self.blocks[:max_index + 1]
        for i, blk in enumerate(blocks):
            if self.grad_checkpointing and not torch.jit.is_scripting():
                x = checkpoint(blk, x)
            else:
                x = blk(x)
            if i in take_indices:
                intermediates.append(self.norm(x) if norm else x)

        if reshape:
            H, W = self.stem.dynamic_feat_size((height, width))
            if self.tiles > 1:
                intermediates = [self.tile_tokens.ungroup(y) for y in intermediates]
            intermediates = [y.reshape(B, H, W, y.shape[-1]).permute(0, 3, 1, 2).contiguous() for y in intermediates]
        if intermediates_only:
            return intermediates
        x = self.norm(x)
        return x, intermediates

    def forward_features(self, x: torch.Tensor) -> torch.Tensor:
        """(B, in_chans, H, W) → (B, S, C)."""
        if not torch.jit.is_scripting():
            x = check_input(x, self.in_chans, self.img_size)
        x = self.tile_tokens(self.stem(x))
        if self.grad_checkpointing and not torch.jit.is_scripting():
            x = checkpoint_seq(self.blocks, x)
        else:
            x = self.blocks(x)
        return self.norm(x)

    def forward_head(self, x: torch.Tensor, pre_logits: bool = False) -> torch.Tensor:
        """(B, S, C) → (B, num_classes), or pooled (B, C) features with `pre_logits`."""
        if self.global_pool == 'avg':
            x = x.mean(dim=1)
        x = self.head_drop(x)
        return x if pre_logits else self.head(x)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.forward_head(self.forward_features(x))


def _init_weights_paper(module: nn.Module, name: str, head_bias: float = 0.) -> None:
    """Mixing weights N(0, 1/fan_in) (§4.3), stem lecun normal, zero biases, zero head (bias `head_bias`)."""
    if isinstance(module, nn.Linear):
        if name.startswith('head'):
            nn.init.zeros_(module.weight)
            nn.init.constant_(module.bias, head_bias)
            return
        nn.init.normal_(module.weight, std=1. / math.sqrt(module.in_features))
        if module.bias is not None:
            nn.init.zeros_(module.bias)
    elif isinstance(module, nn.Conv2d):
        lecun_normal_(module.weight)
        if module.bias is not None:
            nn.init.zeros_(module.bias)
    elif isinstance(module, nn.LayerNorm):
        nn.init.ones_(module.weight)
        nn.init.zeros_(module.bias)


def _make_blocks(args: MixerArgs, norm_layer: Callable[..., nn.Module], **dd: Any) -> nn.Sequential:
    """The L blocks of record `args`; block 0 maps the S0 patches to S tokens (through the skip layer when
    S ≠ S0)."""
    return nn.Sequential(*[
        PKMixerBlock(
            args.embed_dim,
            args.num_patches if i == 0 else args.num_tokens,
            args.num_tokens,
            args.token_hidden_dim,
            args.channel_hidden_dim,
            permutation=args.permutation[i],
            perm_seed=args.perm_seed,
            key=f'blocks.{i}',
            skip_layer=args.skip_layer and i == 0,
            norm_layer=norm_layer,
            act_layer=get_act_layer(args.act_layer),
            drop=args.proj_drop_rate,
            drop_path=args.drop_path_rate,
            tiles=args.tiles * args.tiles,
            **dd,
        )
        for i in range(args.num_blocks)])


def _create_pk_mixer(variant: str, pretrained: bool, model_args: Dict[str, Any], **kwargs) -> PKMixer:
    """Build `variant` from its `model_args`, every one of which the caller's kwargs may override."""
    return build_registered(PKMixer, variant, pretrained, model_args, **kwargs)


def _cfg32(**kwargs) -> Dict[str, Any]:
    return paper_cfg(input_size=(3, 32, 32), crop_pct=1.0, num_classes=10, **kwargs)


_TIMM_WEIGHT_ORIGINS = {
    'goog': dict(origin_url='https://github.com/google-research/vision_transformer',
                 paper_ids='arXiv:2105.01601', paper_name='MLP-Mixer: An all-MLP Architecture for Vision'),
    'miil': dict(origin_url='https://github.com/Alibaba-MIIL/ImageNet21K',
                 paper_ids='arXiv:2104.10972', paper_name='ImageNet-21K Pretraining for the Masses'),
}
_MIIL = dict(mean=(0., 0., 0.), std=(1., 1., 1.), crop_pct=0.875, interpolation='bilinear')


def _timm_weights_cfg(timm_name: str, **kwargs) -> Dict[str, Any]:
    """Pretrained cfg of timm's MLP-Mixer weights `timm/<name>.<tag>` on the Hub: their `model.safetensors`
    loads through `checkpoint_filter_fn` (the normal PK Mixer is the same function, same names)."""
    origin = _TIMM_WEIGHT_ORIGINS[timm_name.split('.')[1].split('_')[0]]
    return paper_cfg(hf_hub_id=f'timm/{timm_name}', hf_hub_filename='model.safetensors', **origin, **kwargs)


default_cfgs = generate_default_cfgs({
    # timm's Mixer shapes (token hidden C/2, channel hidden 4C, LayerNorm eps 1e-6, timm init)
    'pk_mixer_s16_224': paper_cfg(),
    # timm's Mixer-B/16 and L/16 weights (same function): loaded from timm's Hub repositories
    'pk_mixer_b16_224.goog_in21k_ft_in1k': _timm_weights_cfg('mixer_b16_224.goog_in21k_ft_in1k'),
    'pk_mixer_b16_224.goog_in21k': _timm_weights_cfg('mixer_b16_224.goog_in21k', num_classes=21843),
    'pk_mixer_b16_224.miil_in21k': _timm_weights_cfg('mixer_b16_224.miil_in21k', num_classes=11221, **_MIIL),
    'pk_mixer_b16_224.miil_in21k_ft_in1k': _timm_weights_cfg('mixer_b16_224.miil_in21k_ft_in1k', **_MIIL),
    'pk_mixer_l16_224.goog_in21k_ft_in1k': _timm_weights_cfg('mixer_l16_224.goog_in21k_ft_in1k'),
    'pk_mixer_l16_224.goog_in21k': _timm_weights_cfg('mixer_l16_224.goog_in21k', num_classes=21843),
    'rp_mixer_s16_224': paper_cfg(),
    'rp_mixer_b16_224': paper_cfg(),
    'rp_mixer_l16_224': paper_cfg(),
    # Mixer-B-W (Table 1, C.3)
    'pk_mixer_b_w': paper_cfg(),
    'rp_mixer_b_w': paper_cfg(),
    # CIFAR Mixers of Table 1 (C.3)
    'pk_mixer_ss8_32': _cfg32(),
    'rp_mixer_ss8_32': _cfg32(),
    'pk_mixer_ss_w_32': _cfg32(),
    'rp_mixer_ss_w_32': _cfg32(),
    # S-Mixers of C.4-C.6 (P = 4 on 32 px, skip layer always)
    's_mixer_s64c64_32': _cfg32(),
    's_mixer_rp_s64c64_32': _cfg32(),
    's_mixer_rp_first_s64c64_32': _cfg32(),
    's_mixer_s128c128_32': _cfg32(),
    's_mixer_rp_s128c128_32': _cfg32(),
})


# timm's Mixer shapes: token hidden C/2, channel hidden 4C (timm's mlp_ratio), LayerNorm eps 1e-6, timm's init
_TIMM_MIXER = dict(mlp_ratio=(0.5, 4.0), norm_eps=1e-6, weight_init='timm')
# Mixer-B-W (Table 1, C.3): L=8, P=14, S=256, C=588, γ=4.57
_B_W = dict(patch_size=14, num_blocks=8, embed_dim=588, num_tokens=256, gamma=4.57)
# S-Mixers of C.4-C.6: P = 4 on 32 px, L = 8, skip layer in block 0 always
_S_MIXER = dict(img_size=32, patch_size=4, num_blocks=8, block_type='fc', skip_layer=True)


def _ss(patch_size: int, num_tokens: int, embed_dim: int) -> Dict[str, Any]:
    """Mixer-SS/8 and Mixer-SS-W (Table 1, C.3): L=2, γ=4 on 32 px CIFAR."""
    return dict(img_size=32, patch_size=patch_size, num_blocks=2, num_tokens=num_tokens, embed_dim=embed_dim,
                gamma=4.0)


@register_model
def pk_mixer_s16_224(pretrained: bool = False, **kwargs) -> PKMixer:
    """Mixer-S/16 as a PK layer network (timm's `mixer_s16_224`)."""
    model_args = dict(patch_size=16, num_blocks=8, embed_dim=512, **_TIMM_MIXER)
    return _create_pk_mixer('pk_mixer_s16_224', pretrained, model_args, **kwargs)


@register_model
def pk_mixer_b16_224(pretrained: bool = False, **kwargs) -> PKMixer:
    """Mixer-B/16 as a PK layer network (timm's `mixer_b16_224`)."""
    model_args = dict(patch_size=16, num_blocks=12, embed_dim=768, **_TIMM_MIXER)
    return _create_pk_mixer('pk_mixer_b16_224', pretrained, model_args, **kwargs)


@register_model
def pk_mixer_l16_224(pretrained: bool = False, **kwargs) -> PKMixer:
    """Mixer-L/16 as a PK layer network (timm's `mixer_l16_224`)."""
    model_args = dict(patch_size=16, num_blocks=24, embed_dim=1024, **_TIMM_MIXER)
    return _create_pk_mixer('pk_mixer_l16_224', pretrained, model_args, **kwargs)


@register_model
def rp_mixer_s16_224(pretrained: bool = False, **kwargs) -> PKMixer:
    """RP Mixer-S/16: timm's Mixer-S/16 shapes with random permutations."""
    model_args = dict(patch_size=16, num_blocks=8, embed_dim=512, permutation='random', **_TIMM_MIXER)
    return _create_pk_mixer('rp_mixer_s16_224', pretrained, model_args, **kwargs)


@register_model
def rp_mixer_b16_224(pretrained: bool = False, **kwargs) -> PKMixer:
    """RP Mixer-B/16: timm's Mixer-B/16 shapes with random permutations."""
    model_args = dict(patch_size=16, num_blocks=12, embed_dim=768, permutation='random', **_TIMM_MIXER)
    return _create_pk_mixer('rp_mixer_b16_224', pretrained, model_args, **kwargs)


@register_model
def rp_mixer_l16_224(pretrained: bool = False, **kwargs) -> PKMixer:
    """RP Mixer-L/16: timm's Mixer-L/16 shapes with random permutations."""
    model_args = dict(patch_size=16, num_blocks=24, embed_dim=1024, permutation='random', **_TIMM_MIXER)
    return _create_pk_mixer('rp_mixer_l16_224', pretrained, model_args, **kwargs)


@register_model
def pk_mixer_b_w(pretrained: bool = False, **kwargs) -> PKMixer:
    """Mixer-B-W (Table 1): the wider Mixer at the Ω of Mixer-B/16, normal permutations."""
    model_args = dict(**_B_W)
    return _create_pk_mixer('pk_mixer_b_w', pretrained, model_args, **kwargs)


@register_model
def rp_mixer_b_w(pretrained: bool = False, **kwargs) -> PKMixer:
    """RP Mixer-B-W: Mixer-B-W with random permutations."""
    model_args = dict(permutation='random', **_B_W)
    return _create_pk_mixer('rp_mixer_b_w', pretrained, model_args, **kwargs)


@register_model
def pk_mixer_ss8_32(pretrained: bool = False, **kwargs) -> PKMixer:
    """Mixer-SS/8 (Table 1): L=2, P=8, S=16, C=986, γ=4, CIFAR."""
    model_args = _ss(8, 16, 986)
    return _create_pk_mixer('pk_mixer_ss8_32', pretrained, model_args, **kwargs)


@register_model
def rp_mixer_ss8_32(pretrained: bool = False, **kwargs) -> PKMixer:
    """RP Mixer-SS/8."""
    model_args = dict(permutation='random', **_ss(8, 16, 986))
    return _create_pk_mixer('rp_mixer_ss8_32', pretrained, model_args, **kwargs)


@register_model
def pk_mixer_ss_w_32(pretrained: bool = False, **kwargs) -> PKMixer:
    """Mixer-SS-W (Table 1): L=2, P=4, S=64, C=487, γ=4, CIFAR."""
    model_args = _ss(4, 64, 487)
    return _create_pk_mixer('pk_mixer_ss_w_32', pretrained, model_args, **kwargs)


@register_model
def rp_mixer_ss_w_32(pretrained: bool = False, **kwargs) -> PKMixer:
    """RP Mixer-SS-W."""
    model_args = dict(permutation='random', **_ss(4, 64, 487))
    return _create_pk_mixer('rp_mixer_ss_w_32', pretrained, model_args, **kwargs)


@register_model
def s_mixer_s64c64_32(pretrained: bool = False, **kwargs) -> PKMixer:
    """S-Mixer, S = C = 64 (the optimum of the Ω = 2^18 sweep, C.4), L=8."""
    model_args = dict(num_tokens=64, embed_dim=64, **_S_MIXER)
    return _create_pk_mixer('s_mixer_s64c64_32', pretrained, model_args, **kwargs)


@register_model
def s_mixer_rp_s64c64_32(pretrained: bool = False, **kwargs) -> PKMixer:
    """RP S-Mixer, S = C = 64, L=8."""
    model_args = dict(num_tokens=64, embed_dim=64, permutation='random', **_S_MIXER)
    return _create_pk_mixer('s_mixer_rp_s64c64_32', pretrained, model_args, **kwargs)


@register_model
def s_mixer_rp_first_s64c64_32(pretrained: bool = False, **kwargs) -> PKMixer:
    """S-Mixer, S = C = 64, L=8, whose first block alone is Random-Permuted (Fig. S.4, D.5); the pattern follows
    `num_blocks`."""
    depth = kwargs.get('num_blocks', _S_MIXER['num_blocks'])
    first_random = ['random'] + ['normal'] * (depth - 1) if isinstance(depth, int) and depth >= 1 else 'random'
    model_args = dict(num_tokens=64, embed_dim=64, permutation=first_random, **_S_MIXER)
    return _create_pk_mixer('s_mixer_rp_first_s64c64_32', pretrained, model_args, **kwargs)


@register_model
def s_mixer_s128c128_32(pretrained: bool = False, **kwargs) -> PKMixer:
    """S-Mixer, S = C = 128 (the optimum of the Ω = 2^21 sweep; the depth study of C.6), L=8."""
    model_args = dict(num_tokens=128, embed_dim=128, **_S_MIXER)
    return _create_pk_mixer('s_mixer_s128c128_32', pretrained, model_args, **kwargs)


@register_model
def s_mixer_rp_s128c128_32(pretrained: bool = False, **kwargs) -> PKMixer:
    """RP S-Mixer, S = C = 128, L=8."""
    model_args = dict(num_tokens=128, embed_dim=128, permutation='random', **_S_MIXER)
    return _create_pk_mixer('s_mixer_rp_s128c128_32', pretrained, model_args, **kwargs)
