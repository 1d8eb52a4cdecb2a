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
  fixed uniform random J1, J2 per layer, seeded by ``perm_seed``);
* ``block_type='mlp'`` (two FCs with expansion γ, MLP-Mixer) or ``'fc'`` (one FC, S-Mixer).

The mixing size (S, C) may differ from the patch grid (S0, C0): the per-patch FC maps C0 → C and a
SkipLayer (App. A.2.4) maps S0 → S in the first block. ``pk_mixer_*16_224`` are timm's Mixers
(same parameter names, same function), so timm's weights load into them unchanged.
"""
import math
from functools import partial
from typing import Any, Dict, List, Optional, Tuple, Union

import torch
import torch.nn as nn
from timm.layers import DropPath, PatchEmbed, get_act_layer, lecun_normal_, to_2tuple
from timm.models import build_model_with_cfg, checkpoint, checkpoint_seq, named_apply
from timm.models._features import feature_take_indices
from timm.models import generate_default_cfgs, register_model
from timm.models.mlp_mixer import _init_weights as _timm_mixer_init_weights

from ..distributed import check_replicas_if_distributed
from ..layers import FixedPermutation, SkipLayer, make_pk_mlp
from ..width import MixerGeometry
from ._checkpoint import check_checkpoint_fits, mixer_shape
from ._common import HeadAndBlocksMixin, check_choice, check_patch, check_positive, merge_args, paper_cfg

__all__ = ['PKMixerBlock', 'PKMixer']


class PKMixerBlock(nn.Module):
    """Token-mixing then channel-mixing PK layer, each with pre-LayerNorm and a skip connection.

    (B, S_in, C) → (B, S, C). With a skip layer (first block, App. A.2.4):
    U = LN(W̃ X) + PK_tokens(LN(X)); otherwise U = X + PK_tokens(LN(X)). Then Y = U + PK_channels(LN(U)).
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
            norm_layer: Any = nn.LayerNorm,
            act_layer: Any = nn.GELU,
            drop: float = 0.,
            drop_path: float = 0.,
            device=None,
            dtype=None,
    ) -> None:
        super().__init__()
        dd = {'device': device, 'dtype': dtype}
        if num_tokens_in != num_tokens and not skip_layer:
            raise ValueError(f'a block mapping {num_tokens_in} to {num_tokens} tokens needs skip_layer=True')
        pk = dict(dim=dim, permutation=permutation, seed=perm_seed, act_layer=act_layer, drop=drop, **dd)
        self.skip = SkipLayer(num_tokens_in, num_tokens, dim, norm_layer, **dd) if skip_layer else nn.Identity()
        self.norm1 = norm_layer(dim, **dd)
        self.mlp_tokens = make_pk_mlp('token', num_tokens_in, num_tokens, hidden_features=token_hidden,
                                      key=f'{key}.mlp_tokens', **pk)
        self.drop_path = DropPath(drop_path) if drop_path > 0. else nn.Identity()
        self.norm2 = norm_layer(dim, **dd)
        self.mlp_channels = make_pk_mlp('channel', num_tokens, num_tokens, hidden_features=channel_hidden,
                                        key=f'{key}.mlp_channels', **pk)
        # RP without stochastic depth: add the skip into J2's fresh output (PKMlp.forward_add)
        self.fused_residual = permutation == 'random' and drop_path <= 0.

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.fused_residual and not torch.jit.is_scripting():
            x = self.mlp_tokens.forward_add(self.norm1(x), self.skip(x))
            return self.mlp_channels.forward_add(self.norm2(x), x)
        x = self.skip(x) + self.drop_path(self.mlp_tokens(self.norm1(x)))
        x = x + self.drop_path(self.mlp_channels(self.norm2(x)))
        return x


class PKMixer(HeadAndBlocksMixin, nn.Module):
    """MLP-Mixer / S-Mixer of the PK family, normal or Random-Permuted.

    Input (B, in_chans, H, W); ``forward_features`` gives (B, S, C) tokens (NLC), ``forward`` logits.
    """

    def __init__(
            self,
            num_classes: int = 1000,
            img_size: Union[int, Tuple[int, int]] = 224,
            in_chans: int = 3,
            patch_size: Union[int, Tuple[int, int]] = 16,
            num_blocks: int = 8,
            embed_dim: int = 512,
            num_tokens: Optional[int] = None,
            block_type: str = 'mlp',
            mlp_ratio: Union[float, Tuple[float, float]] = 4.0,
            token_hidden_dim: Optional[int] = None,
            channel_hidden_dim: Optional[int] = None,
            permutation: str = 'normal',
            perm_seed: int = 0,
            skip_layer: Optional[bool] = None,
            norm_eps: float = 1e-5,
            act_layer: Union[str, Any] = 'gelu',
            weight_init: str = 'paper',
            drop_rate: float = 0.,
            proj_drop_rate: float = 0.,
            drop_path_rate: float = 0.,
            stem_norm: bool = False,
            global_pool: str = 'avg',
            device=None,
            dtype=None,
    ) -> None:
        """
        Args:
            num_classes: Classifier outputs (0 for none).
            img_size: Input image size.
            in_chans: Input channels.
            patch_size: Patch size P; S0 = HW/P² patches of C0 = in_chans·P² values.
            num_blocks: Depth L.
            embed_dim: Channels C of the mixing layers (per-patch FC maps C0 → C).
            num_tokens: Tokens S of the mixing layers; None for S = S0.
            block_type: 'mlp' (MLP-Mixer, two FCs) or 'fc' (S-Mixer, one FC).
            mlp_ratio: γ, or (γ_tokens, γ_channels): token hidden γS, channel hidden γC ('mlp' only).
            token_hidden_dim: Explicit token-MLP hidden width (overrides γS; timm's Mixers use C/2).
            channel_hidden_dim: Explicit channel-MLP hidden width (overrides γC).
            permutation: 'normal' (MLP-Mixer / S-Mixer) or 'random' (RP Mixer).
            perm_seed: Seed of the fixed random permutations ('random' only).
            skip_layer: Use the SkipLayer in block 0; None: only when S ≠ S0.
            norm_eps: LayerNorm epsilon (paper: 1e-5; timm's Mixers: 1e-6).
            act_layer: Activation φ (GELU in the paper).
            weight_init: 'paper' (mixing weights N(0, 1/fan_in), §4.3) or 'timm' (timm's Mixer init).
            drop_rate: Head dropout.
            proj_drop_rate: Dropout inside the mixing MLPs.
            drop_path_rate: Stochastic depth rate (the same in every block, as timm's Mixer).
            stem_norm: LayerNorm after the per-patch FC.
            global_pool: 'avg' or '' (no pooling).
        """
        super().__init__()
        dd = {'device': device, 'dtype': dtype}
        check_positive(num_blocks=num_blocks, embed_dim=embed_dim, num_tokens=num_tokens, in_chans=in_chans,
                       mlp_ratio=mlp_ratio, token_hidden_dim=token_hidden_dim, channel_hidden_dim=channel_hidden_dim,
                       norm_eps=norm_eps)
        check_positive(num_classes=num_classes + 1)
        grid = check_patch(img_size, patch_size)
        check_choice('block_type', block_type, ('mlp', 'fc'))
        check_choice('permutation', permutation, ('normal', 'random'))
        check_choice('weight_init', weight_init, ('paper', 'timm'))
        check_choice('global_pool', global_pool, ('', 'avg'))
        for name, rate in dict(drop_rate=drop_rate, proj_drop_rate=proj_drop_rate,
                               drop_path_rate=drop_path_rate).items():
            if not 0. <= rate < 1.:
                raise ValueError(f'{name} must be in [0, 1), got {rate}')

        self.num_classes = num_classes
        self.in_chans = in_chans
        self.global_pool = global_pool
        self.num_features = self.head_hidden_size = self.embed_dim = embed_dim
        self.grad_checkpointing = False
        self.permutation = permutation
        self.perm_seed = perm_seed
        self.block_type = block_type

        norm_layer = partial(nn.LayerNorm, eps=norm_eps)
        act_layer = get_act_layer(act_layer)
        self.stem = PatchEmbed(
            img_size=img_size, patch_size=patch_size, in_chans=in_chans, embed_dim=embed_dim,
            norm_layer=norm_layer if stem_norm else None, **dd,
        )
        self.grid_size = grid
        num_patches = grid[0] * grid[1]
        num_tokens = num_tokens or num_patches
        if skip_layer is None:
            skip_layer = num_tokens != num_patches
        if not skip_layer and num_tokens != num_patches:
            raise ValueError(f'num_tokens={num_tokens} differs from the {num_patches} patches: needs skip_layer=True')
        self.num_patches, self.num_tokens = num_patches, num_tokens

        if block_type == 'mlp':
            gamma_tokens, gamma_channels = to_2tuple(mlp_ratio)
            token_hidden = token_hidden_dim or round(gamma_tokens * num_tokens)
            channel_hidden = channel_hidden_dim or round(gamma_channels * embed_dim)
        else:
            if token_hidden_dim or channel_hidden_dim:
                raise ValueError("token_hidden_dim / channel_hidden_dim need block_type='mlp'")
            token_hidden = channel_hidden = None
        self.geometry = MixerGeometry(num_tokens, embed_dim, num_blocks, token_hidden, channel_hidden)

        self.blocks = nn.Sequential(*[
            PKMixerBlock(
                embed_dim,
                num_patches if i == 0 else num_tokens,
                num_tokens,
                token_hidden,
                channel_hidden,
                permutation=permutation,
                perm_seed=perm_seed,
                key=f'blocks.{i}',
                skip_layer=skip_layer and i == 0,
                norm_layer=norm_layer,
                act_layer=act_layer,
                drop=proj_drop_rate,
                drop_path=drop_path_rate,
                **dd,
            )
            for i in range(num_blocks)])
        reduction = self.stem.feat_ratio()
        self.feature_info = [
            dict(module=f'blocks.{i}', num_chs=embed_dim, reduction=reduction) for i in range(num_blocks)]
        self.norm = norm_layer(embed_dim, **dd)
        self.head_drop = nn.Dropout(drop_rate)
        self.head = nn.Linear(embed_dim, num_classes, **dd) if num_classes > 0 else nn.Identity()

        self.init_weights(weight_init)

    @torch.jit.ignore
    def init_weights(self, mode: str = 'paper') -> None:
        """'paper': mixing and skip weights N(0, 1/fan_in) (§4.3), zero biases and head;
        'timm': timm's MLP-Mixer init (xavier uniform, tiny MLP biases, zero head)."""
        named_apply(_init_weights_paper if mode == 'paper' else _timm_mixer_init_weights, module=self)

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

        B, _, height, width = x.shape
        x = self.stem(x)
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
            intermediates = [y.reshape(B, H, W, -1).permute(0, 3, 1, 2).contiguous() for y in intermediates]
        if intermediates_only:
            return intermediates
        x = self.norm(x)
        return x, intermediates

    def forward_features(self, x: torch.Tensor) -> torch.Tensor:
        """(B, in_chans, H, W) → (B, S, C)."""
        x = self.stem(x)
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


def _init_weights_paper(module: nn.Module, name: str) -> None:
    """Mixing weights N(0, 1/fan_in) (§4.3), stem lecun normal, zero biases, zero head."""
    if isinstance(module, nn.Linear):
        if name.startswith('head'):
            nn.init.zeros_(module.weight)
        else:
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


def checkpoint_filter_fn(state_dict: Dict[str, torch.Tensor], model: PKMixer) -> Dict[str, torch.Tensor]:
    """Check that a checkpoint's permutations and shapes are those of `model` before it is loaded.

    timm's MLP-Mixer checkpoints load into normal PK Mixers unchanged (same names). A normal
    checkpoint into an RP model, or the reverse, is refused with an error that says which; so is one
    of another architecture or S, C, L (the classifier may differ). Permutation digests (and explicit
    permutations, if present) are checked by `FixedPermutation`.
    """
    has_perm = any(k.endswith(('.perm_in.digest', '.perm_out.digest', '.perm_in.index', '.perm_out.index'))
                   for k in state_dict)
    is_rp = any(isinstance(m, FixedPermutation) for m in model.modules())
    if is_rp and not has_perm:
        raise ValueError('checkpoint has no permutation digests: it is a normal (non-RP) Mixer checkpoint, '
                         'but the model is a Random-Permuted Mixer (permutation="random")')
    if has_perm and not is_rp:
        raise ValueError('checkpoint holds permutations of a Random-Permuted Mixer, '
                         'but the model is a normal Mixer (permutation="normal")')
    g = model.geometry
    ckpt = mixer_shape(state_dict)
    check_checkpoint_fits(state_dict, model, model_desc=f'(S={g.num_tokens}, C={g.dim}, L={g.depth})',
                          checkpoint_desc='S={}, C={}, L={}'.format(*ckpt) if ckpt else '')
    return state_dict


def _create_pk_mixer(variant: str, pretrained: bool = False, **kwargs) -> PKMixer:
    out_indices = kwargs.pop('out_indices', 3)
    model = build_model_with_cfg(
        PKMixer,
        variant,
        pretrained,
        pretrained_filter_fn=checkpoint_filter_fn,
        feature_cfg=dict(out_indices=out_indices, feature_cls='getter'),
        **kwargs,
    )
    return check_replicas_if_distributed(model, variant)


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
    's_mixer_s128c128_32': _cfg32(),
    's_mixer_rp_s128c128_32': _cfg32(),
})


def _timm_shape(overrides: Dict[str, Any], embed_dim: int, **defaults) -> Dict[str, Any]:
    """timm's Mixer shapes: token hidden C/2 (of the final C), channel hidden 4C, LN eps 1e-6, timm init.
    A caller's `mlp_ratio` switches to the paper's γS / γC hidden widths."""
    args = merge_args(dict(embed_dim=embed_dim, mlp_ratio=4.0, norm_eps=1e-6, weight_init='timm', **defaults),
                      overrides)
    if 'mlp_ratio' not in overrides and args.get('block_type', 'mlp') == 'mlp':
        args.setdefault('token_hidden_dim', args['embed_dim'] // 2)
    return args


def _b_w(**kwargs) -> Dict[str, Any]:
    """Mixer-B-W: L=8, P=14, S=256, C=588, γ=4.57 (C.3)."""
    return dict(patch_size=14, num_blocks=8, embed_dim=588, num_tokens=256, mlp_ratio=4.57, **kwargs)


def _ss(patch_size: int, num_tokens: int, embed_dim: int, **kwargs) -> Dict[str, Any]:
    """Mixer-SS/8 and Mixer-SS-W: L=2, γ=4 on 32 px CIFAR (C.3)."""
    return dict(img_size=32, patch_size=patch_size, num_blocks=2, num_tokens=num_tokens, embed_dim=embed_dim,
                mlp_ratio=4.0, **kwargs)


def _s_mixer(size: int, **kwargs) -> Dict[str, Any]:
    """S-Mixer with S = C = size, L = 8, P = 4 on 32 px, skip layer in block 0 (C.4, C.6)."""
    return dict(img_size=32, patch_size=4, num_blocks=8, num_tokens=size, embed_dim=size, block_type='fc',
                skip_layer=True, **kwargs)


@register_model
def pk_mixer_s16_224(pretrained: bool = False, **kwargs) -> PKMixer:
    """Mixer-S/16 as a PK layer network (timm's `mixer_s16_224`)."""
    args = _timm_shape(kwargs, 512, patch_size=16, num_blocks=8)
    return _create_pk_mixer('pk_mixer_s16_224', pretrained=pretrained, **args)


@register_model
def pk_mixer_b16_224(pretrained: bool = False, **kwargs) -> PKMixer:
    """Mixer-B/16 as a PK layer network (timm's `mixer_b16_224`)."""
    args = _timm_shape(kwargs, 768, patch_size=16, num_blocks=12)
    return _create_pk_mixer('pk_mixer_b16_224', pretrained=pretrained, **args)


@register_model
def pk_mixer_l16_224(pretrained: bool = False, **kwargs) -> PKMixer:
    """Mixer-L/16 as a PK layer network (timm's `mixer_l16_224`)."""
    args = _timm_shape(kwargs, 1024, patch_size=16, num_blocks=24)
    return _create_pk_mixer('pk_mixer_l16_224', pretrained=pretrained, **args)


@register_model
def rp_mixer_s16_224(pretrained: bool = False, **kwargs) -> PKMixer:
    """RP Mixer-S/16: timm's Mixer-S/16 shapes with random permutations."""
    args = _timm_shape(kwargs, 512, patch_size=16, num_blocks=8, permutation='random')
    return _create_pk_mixer('rp_mixer_s16_224', pretrained=pretrained, **args)


@register_model
def rp_mixer_b16_224(pretrained: bool = False, **kwargs) -> PKMixer:
    """RP Mixer-B/16: timm's Mixer-B/16 shapes with random permutations."""
    args = _timm_shape(kwargs, 768, patch_size=16, num_blocks=12, permutation='random')
    return _create_pk_mixer('rp_mixer_b16_224', pretrained=pretrained, **args)


@register_model
def rp_mixer_l16_224(pretrained: bool = False, **kwargs) -> PKMixer:
    """RP Mixer-L/16: timm's Mixer-L/16 shapes with random permutations."""
    args = _timm_shape(kwargs, 1024, patch_size=16, num_blocks=24, permutation='random')
    return _create_pk_mixer('rp_mixer_l16_224', pretrained=pretrained, **args)


@register_model
def pk_mixer_b_w(pretrained: bool = False, **kwargs) -> PKMixer:
    """Mixer-B-W (Table 1): the wider Mixer at the Ω of Mixer-B/16, normal permutations."""
    return _create_pk_mixer('pk_mixer_b_w', pretrained=pretrained, **merge_args(_b_w(), kwargs))


@register_model
def rp_mixer_b_w(pretrained: bool = False, **kwargs) -> PKMixer:
    """RP Mixer-B-W: Mixer-B-W with random permutations."""
    return _create_pk_mixer('rp_mixer_b_w', pretrained=pretrained, **merge_args(_b_w(permutation='random'), kwargs))


@register_model
def pk_mixer_ss8_32(pretrained: bool = False, **kwargs) -> PKMixer:
    """Mixer-SS/8 (Table 1): L=2, P=8, S=16, C=986, γ=4, CIFAR."""
    return _create_pk_mixer('pk_mixer_ss8_32', pretrained=pretrained, **merge_args(_ss(8, 16, 986), kwargs))


@register_model
def rp_mixer_ss8_32(pretrained: bool = False, **kwargs) -> PKMixer:
    """RP Mixer-SS/8."""
    args = merge_args(_ss(8, 16, 986, permutation='random'), kwargs)
    return _create_pk_mixer('rp_mixer_ss8_32', pretrained=pretrained, **args)


@register_model
def pk_mixer_ss_w_32(pretrained: bool = False, **kwargs) -> PKMixer:
    """Mixer-SS-W (Table 1): L=2, P=4, S=64, C=487, γ=4, CIFAR."""
    return _create_pk_mixer('pk_mixer_ss_w_32', pretrained=pretrained, **merge_args(_ss(4, 64, 487), kwargs))


@register_model
def rp_mixer_ss_w_32(pretrained: bool = False, **kwargs) -> PKMixer:
    """RP Mixer-SS-W."""
    args = merge_args(_ss(4, 64, 487, permutation='random'), kwargs)
    return _create_pk_mixer('rp_mixer_ss_w_32', pretrained=pretrained, **args)


@register_model
def s_mixer_s64c64_32(pretrained: bool = False, **kwargs) -> PKMixer:
    """S-Mixer, S = C = 64 (the optimum of the Ω = 2^18 sweep, C.4), L=8."""
    return _create_pk_mixer('s_mixer_s64c64_32', pretrained=pretrained, **merge_args(_s_mixer(64), kwargs))


@register_model
def s_mixer_rp_s64c64_32(pretrained: bool = False, **kwargs) -> PKMixer:
    """RP S-Mixer, S = C = 64, L=8."""
    args = merge_args(_s_mixer(64, permutation='random'), kwargs)
    return _create_pk_mixer('s_mixer_rp_s64c64_32', pretrained=pretrained, **args)


@register_model
def s_mixer_s128c128_32(pretrained: bool = False, **kwargs) -> PKMixer:
    """S-Mixer, S = C = 128 (the optimum of the Ω = 2^21 sweep; the depth study of C.6), L=8."""
    return _create_pk_mixer('s_mixer_s128c128_32', pretrained=pretrained, **merge_args(_s_mixer(128), kwargs))


@register_model
def s_mixer_rp_s128c128_32(pretrained: bool = False, **kwargs) -> PKMixer:
    """RP S-Mixer, S = C = 128, L=8."""
    args = merge_args(_s_mixer(128, permutation='random'), kwargs)
    return _create_pk_mixer('s_mixer_rp_s128c128_32', pretrained=pretrained, **args)
