"""What the model files share: timm's model API for our models, the entry-point idiom, the pretrained cfg."""
from typing import Any, Dict, List, Mapping, Optional, Tuple, Union

import torch
import torch.nn as nn
from timm.layers import register_notrace_function
from timm.models._features import feature_take_indices

from ..errors import InputShapeError, InvalidArgumentError
from ..layers.structure import DerivedStructure
from ..validation import choice, int_pair, non_negative_int
from ._checkpoint import check_state_dict

__all__ = ['ALTERNATIVE_ARGS', 'merge_args', 'patch_grid', 'paper_cfg', 'check_input', 'PKModelMixin']

# Arguments that choose the same thing in different terms: when a caller gives one of a group, the entry
# point's defaults for the others are dropped (rp_mixer_b_w's default gamma=4.57 yields to mlp_ratio=...).
ALTERNATIVE_ARGS = (
    ('mlp_ratio', 'gamma'),       # hidden widths, timm's (ratio of C) or the paper's (γS, γC)
    ('norm_layer', 'norm_eps'),   # the LayerNorm, timm's way or by its epsilon
    ('omega', 'width'),           # the SW-MLP's width, from Ω or explicit
)


def merge_args(defaults: Mapping[str, Any], overrides: Mapping[str, Any]) -> Dict[str, Any]:
    """An entry point's defaults updated by the caller's kwargs: every argument can be overridden, and a
    caller's choice within a group of :data:`ALTERNATIVE_ARGS` replaces the defaults of that group."""
    merged = dict(defaults)
    for group in ALTERNATIVE_ARGS:
        if any(overrides.get(k) is not None for k in group):
            for k in group:
                merged.pop(k, None)
    merged.update(overrides)
    return merged


def patch_grid(img_size: Any, patch_size: Any) -> Tuple[Tuple[int, int], Tuple[int, int], Tuple[int, int]]:
    """(img_size, patch_size, grid) as (H, W) pairs; refused unless the patch divides the image."""
    img, patch = int_pair('img_size', img_size), int_pair('patch_size', patch_size)
    if img[0] % patch[0] or img[1] % patch[1]:
        raise InvalidArgumentError(f'patch_size {patch_size} does not divide img_size {img_size}')
    return img, patch, (img[0] // patch[0], img[1] // patch[1])


@register_notrace_function  # a leaf of FX graphs (timm's tracer; the model files also torch.fx.wrap it)
def check_input(x: torch.Tensor, in_chans: int, img_size: Tuple[int, int]) -> torch.Tensor:
    """`x` if it is a (B, in_chans, H, W) batch of the model's image size, else InputShapeError saying what is
    expected (instead of an unpacking or convolution error deep in torch)."""
    expected = f'(B, {in_chans}, {img_size[0]}, {img_size[1]})'
    if x.dim() != 4:
        raise InputShapeError(f'expected a 4-D input {expected}, got a {x.dim()}-D tensor of shape {tuple(x.shape)}')
    if x.shape[1] != in_chans:
        raise InputShapeError(f'Input channels ({x.shape[1]}) don\'t match model ({in_chans}): expected {expected}, '
                              f'got {tuple(x.shape)}')
    for axis, name in ((2, 'height'), (3, 'width')):
        if x.shape[axis] != img_size[axis - 2]:
            raise InputShapeError(f"Input {name} ({x.shape[axis]}) doesn't match model ({img_size[axis - 2]}): "
                                  f'expected {expected}, got {tuple(x.shape)}')
    return x


def paper_cfg(url: str = '', **kwargs: Any) -> Dict[str, Any]:
    """timm pretrained cfg of a model trained from scratch (no weights published)."""
    return {
        'url': url,
        'num_classes': 1000, 'input_size': (3, 224, 224), 'pool_size': None,
        'crop_pct': 0.875, 'interpolation': 'bicubic', 'fixed_input_size': True,
        'mean': (0.5, 0.5, 0.5), 'std': (0.5, 0.5, 0.5),
        'first_conv': 'stem.proj', 'classifier': 'head',
        'license': 'apache-2.0',
        'paper_ids': 'arXiv:2306.01470',
        'paper_name': 'Understanding MLP-Mixer as a Wide and Sparse MLP',
        **kwargs,
    }


class PKModelMixin:
    """timm's classifier / pruning / checkpointing API, checked loading and buffer (re)initialisation for a
    model with `blocks`, `norm`, `head`, `num_features`, `num_classes`, `global_pool` ('avg' or '') and
    a ``describe()`` method."""

    @torch.jit.ignore
    def set_grad_checkpointing(self, enable: bool = True) -> None:
        self.grad_checkpointing = enable

    @torch.jit.ignore
    def get_classifier(self) -> nn.Module:
        return self.head

    def reset_classifier(self, num_classes: int, global_pool: Optional[str] = None) -> None:
        ref = next(self.parameters())
        dd = {'device': ref.device, 'dtype': ref.dtype}
        self.num_classes = non_negative_int('num_classes', num_classes)
        if global_pool is not None:
            self.global_pool = choice('global_pool', global_pool, ('', 'avg'))
        self.head = nn.Linear(self.num_features, num_classes, **dd) if num_classes > 0 else nn.Identity()
        self.head.train(self.training)

    def prune_intermediate_layers(
            self,
            indices: Union[int, List[int]] = 1,
            prune_norm: bool = False,
            prune_head: bool = True,
    ) -> List[int]:
        """Drop the blocks after the last of `indices` (and the norm / head if asked); returns the kept indices."""
        take_indices, max_index = feature_take_indices(len(self.blocks), indices)
        self.blocks = self.blocks[:max_index + 1]
        if prune_norm:
            self.norm = nn.Identity()
        if prune_head:
            self.reset_classifier(0, '')
        return take_indices

    @torch.jit.ignore
    def init_non_persistent_buffers(self) -> None:
        """Compute every permutation / mask from its seed (timm's convention for derived buffers): after
        ``to_empty()`` of a model built on the meta device, e.g. under FSDP2."""
        for module in self.modules():
            if isinstance(module, DerivedStructure):
                module.init_non_persistent_buffers()

    @torch.jit.ignore
    def load_state_dict(self, state_dict: Mapping[str, Any], strict: bool = True, assign: bool = False):
        """``nn.Module.load_state_dict`` after :func:`check_state_dict`: a checkpoint of another architecture,
        S, C, depth, permutation or mask seed is refused with one error that says which (a
        :class:`~timm_pkmixer.errors.CheckpointMismatchError`, a RuntimeError as torch raises)."""
        if not isinstance(state_dict, Mapping):
            raise InvalidArgumentError(f'load_state_dict needs a mapping of tensors, got {type(state_dict).__name__}')
        state_dict = check_state_dict(self, state_dict, strict=strict)
        return super().load_state_dict(state_dict, strict=strict, assign=assign)
