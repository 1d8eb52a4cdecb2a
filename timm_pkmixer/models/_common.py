"""Argument checks and the config helper shared by the model files."""
from typing import Any, Dict, List, Optional, Union

import torch
import torch.nn as nn
from timm.layers import to_2tuple
from timm.models._features import feature_take_indices

__all__ = ['check_positive', 'check_choice', 'check_patch', 'merge_args', 'paper_cfg', 'HeadAndBlocksMixin']


def check_positive(**values: Any) -> None:
    """Raise ValueError naming the first argument that is not a positive number."""
    for name, value in values.items():
        if value is None:
            continue
        for v in (value if isinstance(value, (tuple, list)) else (value,)):
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not v > 0:
                raise ValueError(f'{name} must be positive, got {value!r}')


def check_choice(name: str, value: Any, choices: tuple) -> None:
    if value not in choices:
        raise ValueError(f'{name} must be one of {choices}, got {value!r}')


def check_patch(img_size: Any, patch_size: Any) -> tuple:
    """Return the (H/P, W/P) patch grid, or raise ValueError if the patch does not divide the image."""
    check_positive(img_size=img_size, patch_size=patch_size)
    img, patch = to_2tuple(img_size), to_2tuple(patch_size)
    if img[0] % patch[0] or img[1] % patch[1]:
        raise ValueError(f'patch_size {patch_size} does not divide img_size {img_size}')
    return img[0] // patch[0], img[1] // patch[1]


def merge_args(defaults: Dict[str, Any], overrides: Dict[str, Any]) -> Dict[str, Any]:
    """Entry-point defaults updated by the caller's kwargs: every argument can be overridden."""
    return {**defaults, **overrides}


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


class HeadAndBlocksMixin:
    """timm's classifier / pruning / checkpointing API for a model with `blocks`, `norm`, `head`,
    `num_features`, `num_classes` and `global_pool` ('avg' or '')."""

    @torch.jit.ignore
    def set_grad_checkpointing(self, enable: bool = True) -> None:
        self.grad_checkpointing = enable

    @torch.jit.ignore
    def get_classifier(self) -> nn.Module:
        return self.head

    def reset_classifier(self, num_classes: int, global_pool: Optional[str] = None) -> None:
        ref = next(self.parameters())
        dd = {'device': ref.device, 'dtype': ref.dtype}
        self.num_classes = num_classes
        if global_pool is not None:
            check_choice('global_pool', global_pool, ('', 'avg'))
            self.global_pool = global_pool
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
