"""What the model files share: timm's model API for our models, the entry-point idiom, the base of the records
(:class:`ModelArgs`), the size check of a record, the pretrained cfg."""
import json
from dataclasses import dataclass, fields
from typing import Any, Callable, ClassVar, Dict, Iterator, List, Mapping, Optional, Tuple, Union

import torch
import torch.nn as nn
from timm.layers import get_act_layer, register_notrace_function
from timm.models import build_model_with_cfg

from .._timm import feature_take_indices
from ..description import ModelDescription
from ..errors import InputShapeError, InvalidArgumentError
from ..layers.structure import DerivedStructure
from ..sizes import PlannedTensor, check_model_size
from ..validation import choice, int_pair, non_negative_int
from ._checkpoint import check_config_num_classes, check_state_dict, checkpoint_filter_fn

__all__ = ['build_registered', 'ALTERNATIVE_ARGS', 'UNUSED_ARGS', 'TRAINING_ONLY_ARGS', 'ModelArgs', 'merge_args',
           'layer_name', 'act_layer_arg', 'patch_grid', 'paper_cfg', 'check_input', 'PKModelMixin', 'FlatMapHeadMixin']

# Arguments that choose the same thing in different terms: when a caller gives one of a group, the entry
# point's defaults for the others are dropped (rp_mixer_b_w's default gamma=4.57 yields to mlp_ratio=...).
# A model's resolved ``model_args`` holds one of each group (the other None).
ALTERNATIVE_ARGS = (
    ('mlp_ratio', 'gamma'),       # hidden widths, timm's (ratio of C) or the paper's (γS, γC)
    ('norm_layer', 'norm_eps'),   # the LayerNorm, timm's way or by its epsilon
    ('omega', 'width'),           # the SW-MLP's width, from Ω or explicit
)
# Arguments that mean nothing for some value of another: a caller who picks that value drops the entry point's
# defaults for them (block_type='fc' on pk_mixer_b_w drops its gamma=4.57: an S-Mixer has no hidden layer).
UNUSED_ARGS = {
    ('block_type', 'fc'): ('mlp_ratio', 'gamma', 'token_hidden_dim', 'channel_hidden_dim'),
}
# Constructor arguments that change training, not the function of trained weights: left out of a pushed or
# expanded model's config.json (timm's save_for_hf leaves drop rates out too).
TRAINING_ONLY_ARGS = ('drop_rate', 'proj_drop_rate', 'drop_path_rate')


def _plain(value: Any) -> Any:
    return [_plain(v) for v in value] if isinstance(value, tuple) else value


@dataclass(frozen=True, eq=False)
class ModelArgs(Mapping):
    """A model's record: its constructor's arguments as it resolved them, canonical (entry-point defaults, the
    caller's overrides, one of each :data:`ALTERNATIVE_ARGS` group, ``None``s filled in, pairs and per-block
    lists as tuples, layers by their timm name). One frozen dataclass per family (``MixerArgs``, ``SwMlpArgs``,
    ``ShallowArgs``), its fields the constructor's arguments in order, built once by :meth:`resolve`, which
    validates the caller's values (each refusal names its argument). The constructor, ``describe()``,
    config.json, ``expand_resolution`` and the size bound read it; as a read-only mapping,
    ``type(model)(**model.model_args)`` rebuilds the same architecture.
    """

    # fields the record resolves from a group of ALTERNATIVE_ARGS, recomputed when the group changes (replace)
    RESOLVED_FROM: ClassVar[Mapping[Tuple[str, ...], Tuple[str, ...]]] = {}

    @classmethod
    def resolve(cls, given: Mapping[str, Any]) -> 'ModelArgs':
        """The record of the constructor arguments `given` (every field), validated and canonical."""
        raise NotImplementedError

    def planned_tensors(self, itemsize: int, sources: Mapping[str, str]) -> List[PlannedTensor]:
        """Every parameter and buffer of the model (`itemsize` bytes per parameter element) but those of the
        layers given by timm name (:meth:`layer_tensors`), for the size bound (:mod:`timm_pkmixer.sizes`), in
        Python integers; `sources` names arguments as the caller gave them (e.g. ``{'channel': 'gamma=1e+300 …'}``).
        """
        raise NotImplementedError

    def layer_tensors(self, dtype: Optional[torch.dtype]) -> List[PlannedTensor]:
        """The tensors of the layers given by timm name (norm, activation), each kind counted once on the meta
        device; with :meth:`planned_tensors`, every tensor of the model."""
        raise NotImplementedError

    def describe(self) -> ModelDescription:
        """The model in the paper's terms."""
        raise NotImplementedError

    @classmethod
    def names(cls) -> Tuple[str, ...]:
        """The constructor's arguments (less device, dtype), in its order."""
        return tuple(f.name for f in fields(cls))

    @classmethod
    def from_locals(cls, values: Mapping[str, Any]) -> 'ModelArgs':
        """:meth:`resolve` of a constructor's ``locals()`` (its arguments, read before any other local is set)."""
        return cls.resolve({k: values[k] for k in cls.names()})

    def __getitem__(self, key: str) -> Any:
        if key not in self.names():
            raise KeyError(key)
        return getattr(self, key)

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self.names())

    def replace(self, **changes: Any) -> 'ModelArgs':
        """The record of another architecture (an expanded one, a new head): these `changes` resolved again, as a
        caller's kwargs at an entry point (:func:`merge_args`): a change to one spelling of an
        :data:`ALTERNATIVE_ARGS` group (``mlp_ratio``, ``gamma``, ``norm_layer``, ``omega``, …) replaces the
        record's other spelling and what the record resolved from the group (:attr:`RESOLVED_FROM`), and one that
        makes arguments meaningless (:data:`UNUSED_ARGS`) drops them."""
        unknown = sorted(set(changes) - set(self.names()))
        if unknown:
            raise InvalidArgumentError(f'no model arguments {unknown}; the model takes {sorted(self.names())}')
        values = dict(self)
        dropped: List[str] = []
        for group in ALTERNATIVE_ARGS:
            if any(changes.get(k) is not None for k in group):
                dropped += [*group, *self.RESOLVED_FROM.get(group, ())]
        for (name, value), unused in UNUSED_ARGS.items():
            if name in changes and changes[name] == value:
                dropped += unused
        values.update({k: None for k in dropped if k in values})
        return self.resolve({**values, **changes})

    def to_json(self, exclude: Tuple[str, ...] = ()) -> Dict[str, Any]:
        """A JSON-ready dict (tuples as lists) without the arguments in `exclude` (e.g. TRAINING_ONLY_ARGS)."""
        out = {k: _plain(v) for k, v in self.items() if k not in exclude}
        for key, value in out.items():
            try:
                json.dumps(value)
            except TypeError as e:
                raise InvalidArgumentError(
                    f'model argument {key}={value!r} cannot be written to config.json: give layers by their timm '
                    f'name (e.g. act_layer=\'gelu\') to build a model that can be saved with its arguments') from e
        return out


def merge_args(defaults: Mapping[str, Any], overrides: Mapping[str, Any]) -> Dict[str, Any]:
    """An entry point's defaults updated by the caller's kwargs: every argument can be overridden, a caller's
    choice within a group of :data:`ALTERNATIVE_ARGS` replaces the defaults of that group, and one that makes
    arguments meaningless (:data:`UNUSED_ARGS`) drops their defaults."""
    merged = dict(defaults)
    for group in ALTERNATIVE_ARGS:
        if any(overrides.get(k) is not None for k in group):
            for k in group:
                merged.pop(k, None)
    for (name, value), unused in UNUSED_ARGS.items():
        if overrides.get(name) == value:
            for k in unused:
                if k not in overrides:
                    merged.pop(k, None)
    merged.update(overrides)
    return merged


def layer_name(layer: Any, lookup: Callable[[str], Any]) -> Any:
    """A layer argument as the model records it: a name as given, a class by its timm name when `lookup`
    (timm's ``get_act_layer`` / ``get_norm_layer``) maps that name back to it, else the class itself."""
    if isinstance(layer, str):
        return layer
    name = getattr(layer, '__name__', '').lower()
    try:
        return name if name and lookup(name) is layer else layer
    except KeyError:
        return layer


def act_layer_arg(act_layer: Any) -> Tuple[Any, Callable[..., nn.Module]]:
    """(the act_layer argument as recorded, the activation class): timm's activation by name or class; an
    unknown name is refused naming it."""
    try:
        layer = get_act_layer(act_layer)
    except KeyError:
        layer = None
    if layer is None:
        raise InvalidArgumentError(f"act_layer {act_layer!r} is not an activation timm knows (e.g. 'gelu', 'relu', "
                                   f"'silu', or a module class)")
    return layer_name(act_layer, get_act_layer), layer


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
                              f'got {tuple(x.shape)}. timm\'s train.py, validate.py and inference.py build a 3-channel '
                              f'model unless told: pass --in-chans {x.shape[1]} to build it for {x.shape[1]}-channel '
                              f'images')
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
    model with `blocks`, `norm`, `head`, `num_features`, `num_classes`, `global_pool` ('avg' or ''),
    a ``describe()`` method and its resolved arguments `model_args` (:class:`ModelArgs`), which the methods
    that change the architecture keep up to date."""

    @classmethod
    def check_size(cls, args: ModelArgs, device: Any = None, dtype: Any = None,
                   sources: Optional[Mapping[str, str]] = None, **message: Any) -> int:
        """Refuse the model that record `args` builds if its parameters and buffers would not fit in the memory of
        `device`, before anything is allocated (:func:`~timm_pkmixer.sizes.check_model_size`: the record's
        tensors, counted without building the model); returns their bytes. `sources`: the arguments as the
        caller gave them, for messages; `message`: ``cause``, ``copies``, ``what``, ``advice``."""
        return check_model_size(lambda itemsize: args.planned_tensors(itemsize, sources or {}), args.layer_tensors,
                                device, dtype, **message)

    @torch.jit.ignore
    def describe(self) -> ModelDescription:
        """The model in the paper's terms (see `ModelDescription`), read from its record `model_args`."""
        return self.model_args.describe()

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
        self.model_args = self.model_args.replace(num_classes=self.num_classes, global_pool=self.global_pool)

    def prune_intermediate_layers(
            self,
            indices: Union[int, List[int]] = 1,
            prune_norm: bool = False,
            prune_head: bool = True,
    ) -> List[int]:
        """Drop the blocks after the last of `indices` (and the norm / head if asked); returns the kept indices."""
        take_indices, max_index = feature_take_indices(len(self.blocks), indices)
        self.blocks = self.blocks[:max_index + 1]
        kept = dict(num_blocks=len(self.blocks))
        if 'permutation' in self.model_args:  # one per block
            kept['permutation'] = self.model_args['permutation'][:len(self.blocks)]
        self.model_args = self.model_args.replace(**kept)
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


def build_registered(model_class: type, variant: str, pretrained: bool, model_args: Mapping[str, Any],
                     **kwargs: Any) -> nn.Module:
    """An entry point's model: `variant` of `model_class` from its `model_args`, every one of which the caller's
    kwargs may override (:func:`merge_args`), through timm's ``build_model_with_cfg`` with our checkpoint filter
    and the feature getter."""
    cfg = kwargs.get('pretrained_cfg')
    if isinstance(cfg, Mapping):  # read from a config.json (timm's local-dir: / hf-hub:): checked before timm reads it
        check_config_num_classes(cfg)
    kwargs = merge_args(model_args, kwargs)
    out_indices = kwargs.pop('out_indices', 3)
    return build_model_with_cfg(
        model_class, variant, pretrained,
        pretrained_filter_fn=checkpoint_filter_fn,
        feature_cfg=dict(out_indices=out_indices, feature_cls='getter'),
        **kwargs,
    )


class FlatMapHeadMixin:
    """The head of a model whose features are one position, a (B, n, 1, 1) map (SW-MLP, shallow MLPs):
    'avg' pooling of the single position is a flatten, then dropout and the classifier."""

    def forward_head(self, x: torch.Tensor, pre_logits: bool = False) -> torch.Tensor:
        """(B, n, 1, 1) → (B, num_classes), or the (B, n) features with `pre_logits`."""
        if self.global_pool == 'avg':
            x = x.flatten(1)
        x = self.head_drop(x)
        return x if pre_logits else self.head(x)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.forward_head(self.forward_features(x))
