""" Shallow MLPs with Monarch or Kronecker-product weights (Fig. 2(d) of the paper).

Paper: `Understanding MLP-Mixer as a Wide and Sparse MLP` - https://arxiv.org/abs/2306.01470
(§3.3, App. C.1, Table S.1); Monarch matrices: Dao et al., `Monarch: Expressive Structured Matrices for
Efficient and Accurate Training`, ICML 2022 - https://arxiv.org/abs/2204.00595

x ↦ B_c B_2 ReLU(B_1 x): the image is flattened to x ∈ R^n (no per-patch FC, skip connection, LayerNorm or
pooling; Table S.1), B_1, B_2 are n × n structured matrices without bias and B_c is the linear classifier.

* ``structure='monarch'``: B_i = P L_i Pᵀ R_i (:class:`~timm_pkmixer.layers.MonarchLinear`), n = b², L_i and
  R_i block-diagonal with b blocks of b × b, P the b × b transpose.
* ``structure='kronecker'``: B_i = V_i ⊗ W_i (:class:`~timm_pkmixer.layers.KroneckerLinear`) on the image read
  as an (in_chans·H) × W matrix X: B_i x = vec(V_i X W_iᵀ). This is the Monarch matrix with shared blocks
  L = I ⊗ V, R = I ⊗ W, i.e. an S-Mixer's token/channel pair without the activation between them (§3.3).

Neither builds an n × n matrix. ``num_blocks`` generalises the depth (activation after every B_i but the
last). The features are returned as a (B, n, 1, 1) map: one position with n channels.
"""
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple, Union

import torch
import torch.nn as nn
from timm.layers import get_act_layer
from timm.models import checkpoint_seq, generate_default_cfgs, register_model

from .._timm import feature_take_indices
from ..description import ModelDescription, describe_shallow
from ..layers import KroneckerLinear, MonarchLinear, monarch_block_size
from ..sizes import PlannedTensor, linear_tensors, module_tensors
from ..validation import choice, int_pair, non_negative_int, positive_int, rate
from ._common import FlatMapHeadMixin, ModelArgs, PKModelMixin, act_layer_arg, build_registered, check_input, paper_cfg

__all__ = ['STRUCTURES', 'ShallowBlock', 'ShallowArgs', 'ShallowMlp']

STRUCTURES = ('monarch', 'kronecker')

torch.fx.wrap('check_input')  # the input check is one node of an FX graph


class ShallowBlock(nn.Module):
    """x ↦ φ(B x), B a Monarch or Kronecker n × n matrix (φ = identity in the last block): (B, n) → (B, n)."""

    def __init__(
            self,
            structure: str,
            shape: Tuple[int, int],
            act_layer: Optional[Callable[..., nn.Module]] = None,
            device=None,
            dtype=None,
    ) -> None:
        """
        Args:
            structure: 'monarch' (P L Pᵀ R) or 'kronecker' (V ⊗ W).
            shape: (rows, cols) of the input read as a matrix: n = rows·cols (V is rows × rows, W cols × cols).
            act_layer: Activation φ; None for none.
        """
        super().__init__()
        dd = {'device': device, 'dtype': dtype}
        n = shape[0] * shape[1]
        self.fc = MonarchLinear(n, **dd) if structure == 'monarch' else KroneckerLinear(shape, **dd)
        self.act = act_layer() if act_layer is not None else nn.Identity()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.act(self.fc(x))


@dataclass(frozen=True, eq=False)
class ShallowArgs(ModelArgs):
    """The record of a :class:`ShallowMlp` (:class:`~timm_pkmixer.models.ModelArgs`), canonical: pairs as tuples,
    the activation by its timm name."""
    num_classes: int
    img_size: Tuple[int, int]
    in_chans: int
    structure: str               # 'monarch' or 'kronecker'
    num_blocks: int
    act_layer: Union[str, Callable[..., nn.Module]]
    drop_rate: float
    global_pool: str

    @classmethod
    def resolve(cls, given: Mapping[str, Any]) -> 'ShallowArgs':
        """The record of ShallowMlp's arguments `given`, validated (each refusal names its argument)."""
        args = cls(
            num_classes=non_negative_int('num_classes', given['num_classes']),
            img_size=int_pair('img_size', given['img_size']), in_chans=positive_int('in_chans', given['in_chans']),
            structure=choice('structure', given['structure'], STRUCTURES),
            num_blocks=positive_int('num_blocks', given['num_blocks']),
            act_layer=act_layer_arg(given['act_layer'])[0], drop_rate=rate('drop_rate', given['drop_rate']),
            global_pool=choice('global_pool', given['global_pool'], ('', 'avg')))
        if args.structure == 'monarch':
            monarch_block_size('in_chans·H·W', args.features)  # refused unless n is a perfect square
        return args

    @property
    def features(self) -> int:
        """n = in_chans·H·W."""
        return self.in_chans * self.img_size[0] * self.img_size[1]

    @property
    def shape(self) -> Tuple[int, int]:
        """The input read as a matrix: (√n, √n) for Monarch (b blocks of b × b), (in_chans·H, W) for Kronecker."""
        if self.structure == 'monarch':
            b = monarch_block_size('in_chans·H·W', self.features)
            return b, b
        return self.in_chans * self.img_size[0], self.img_size[1]

    def describe(self) -> ModelDescription:
        """Family 'Shallow Monarch' / 'Shallow Kronecker', S × C = the matrix shape, depth, Ω, p (§4.1)."""
        return describe_shallow(self.structure, *self.shape, self.num_blocks)

    def planned_tensors(self, itemsize: int, sources: Mapping[str, str]) -> List[PlannedTensor]:
        """Every parameter but the activations' (:meth:`layer_tensors`): each layer's factors (Monarch L and R:
        √n blocks of √n × √n; Kronecker V, W) and the n-wide head."""
        rows, cols = self.shape
        cause = f'img_size={self.img_size}, in_chans={self.in_chans} (n = {self.features})'
        if self.structure == 'monarch':
            plan = [PlannedTensor(f'blocks.*.fc.{f}.weight', (rows, rows, rows), itemsize, cause, self.num_blocks)
                    for f in ('l', 'r')]
        else:
            plan = [PlannedTensor('blocks.*.fc.v.weight', (rows, rows), itemsize, cause, self.num_blocks),
                    PlannedTensor('blocks.*.fc.w.weight', (cols, cols), itemsize, cause, self.num_blocks)]
        if self.num_classes:
            plan += linear_tensors('head', self.features, self.num_classes, itemsize,
                                   f'num_classes={self.num_classes}, {cause}')
        return plan

    def layer_tensors(self, dtype: Optional[torch.dtype]) -> List[PlannedTensor]:
        """The activations' tensors (one counted on the meta device): after every structured layer but the last."""
        with torch.device('meta'):
            act = get_act_layer(self.act_layer)()
        return module_tensors('blocks.*.act', act, f'act_layer={self.act_layer!r}', self.num_blocks - 1)


class ShallowMlp(FlatMapHeadMixin, PKModelMixin, nn.Module):
    """x ↦ B_c B_L φ(… φ(B_1 x)): (B, in_chans, H, W) → (B, num_classes); ``forward_features`` gives (B, n, 1, 1).
    ``model_args`` is its record (:class:`ShallowArgs`), from which every part is built."""

    def __init__(
            self,
            num_classes: int = 10,
            img_size: Union[int, Tuple[int, int]] = 28,
            in_chans: int = 1,
            structure: str = 'monarch',
            num_blocks: int = 2,
            act_layer: Union[str, Callable[..., nn.Module]] = 'relu',
            drop_rate: float = 0.,
            global_pool: str = 'avg',
            device=None,
            dtype=None,
    ) -> None:
        """
        Args:
            num_classes: Classifier outputs (0 for none).
            img_size: Input image size (H, W); n = in_chans·H·W.
            in_chans: Input channels.
            structure: 'monarch' (B_i = P L Pᵀ R; n must be a perfect square) or 'kronecker' (B_i = V ⊗ W on the
                image read as an (in_chans·H) × W matrix).
            num_blocks: Number L of structured layers (2 in the paper).
            act_layer: Activation φ after every structured layer but the last (ReLU in the paper).
            drop_rate: Head dropout.
            global_pool: 'avg' (the 1×1 map to a vector) or ''.
        """
        super().__init__()
        # the record: the arguments validated and resolved; sizes past the device's memory refused before
        # anything is allocated; every part below is built from the record
        args = ShallowArgs.from_locals(locals())
        self.check_size(args, device, dtype)
        self.model_args = args
        dd = {'device': device, 'dtype': dtype}
        # what timm's API and the forward read
        self.num_classes, self.global_pool, self.in_chans, self.img_size = \
            args.num_classes, args.global_pool, args.in_chans, args.img_size
        self.num_features = self.head_hidden_size = args.features
        self.structure, self.shape = args.structure, args.shape
        self.grad_checkpointing = False

        self.stem = nn.Flatten(1)  # vec of the image: (B, in_chans, H, W) → (B, n)
        act = get_act_layer(args.act_layer)
        self.blocks = nn.Sequential(*[
            ShallowBlock(args.structure, args.shape, act_layer=act if i < args.num_blocks - 1 else None, **dd)
            for i in range(args.num_blocks)])
        reduction = max(args.img_size)
        self.feature_info = [dict(module='stem', num_chs=args.features, reduction=reduction)] + [
            dict(module=f'blocks.{i}', num_chs=args.features, reduction=reduction) for i in range(args.num_blocks)]
        self.norm = nn.Identity()  # no LayerNorm (Table S.1); kept for timm's pruning API
        self.head_drop = nn.Dropout(args.drop_rate)
        self.head = nn.Linear(args.features, args.num_classes, **dd) if args.num_classes > 0 else nn.Identity()
        self.init_weights()

    @torch.jit.ignore
    def init_weights(self) -> None:
        """Structured factors N(0, 1/fan_in) (each B_i then has the entry variance 1/n of a dense layer);
        zero head, as the package's Mixers."""
        for module in self.blocks.modules():
            if isinstance(module, (MonarchLinear, KroneckerLinear)):
                module.reset_parameters()
        if isinstance(self.head, nn.Linear):
            nn.init.zeros_(self.head.weight)
            nn.init.zeros_(self.head.bias)

    @torch.jit.ignore
    def group_matcher(self, coarse: bool = False) -> Dict[str, Any]:
        return dict(stem=r'^stem', blocks=[(r'^blocks\.(\d+)', None)])

    def prune_intermediate_layers(
            self,
            indices: Union[int, List[int]] = 1,
            prune_norm: bool = False,
            prune_head: bool = True,
    ) -> List[int]:
        """Drop the blocks after the last of `indices` (feature levels: 0 the input vector, i the output of
        ``blocks[i-1]``) and the head if asked; returns the kept indices."""
        take_indices, max_index = feature_take_indices(len(self.blocks) + 1, indices)
        self.blocks = self.blocks[:max_index]
        self.model_args = self.model_args.replace(num_blocks=len(self.blocks))
        if prune_head:
            self.reset_classifier(0, '')
        return take_indices

    def forward_intermediates(
            self,
            x: torch.Tensor,
            indices: Optional[Union[int, List[int]]] = None,
            norm: bool = False,
            stop_early: bool = False,
            output_fmt: str = 'NCHW',
            intermediates_only: bool = False,
    ) -> Union[List[torch.Tensor], Tuple[torch.Tensor, List[torch.Tensor]]]:
        """Feature levels (0: the input vector, i: output of ``blocks[i-1]``) as (B, n, 1, 1) maps (NCHW) or
        (B, 1, n) (NLC)."""
        assert output_fmt in ('NCHW', 'NLC'), 'Output format must be one of NCHW or NLC.'
        take_indices, max_index = feature_take_indices(len(self.blocks) + 1, indices)
        x = self._vector(x)
        intermediates = []
        if 0 in take_indices:
            intermediates.append(x[:, :, None, None] if output_fmt == 'NCHW' else x[:, None, :])
        blocks = self.blocks if torch.jit.is_scripting() or not stop_early else self.blocks[:max_index]
        for i, blk in enumerate(blocks):
            x = blk(x)
            if i + 1 in take_indices:
                intermediates.append(x[:, :, None, None] if output_fmt == 'NCHW' else x[:, None, :])
        if intermediates_only:
            return intermediates
        return x[:, :, None, None], intermediates

    def _vector(self, x: torch.Tensor) -> torch.Tensor:
        if not torch.jit.is_scripting():
            x = check_input(x, self.in_chans, self.img_size)
        return self.stem(x)

    def forward_features(self, x: torch.Tensor) -> torch.Tensor:
        """(B, in_chans, H, W) → (B, n, 1, 1)."""
        x = self._vector(x)
        if self.grad_checkpointing and not torch.jit.is_scripting():
            x = checkpoint_seq(self.blocks, x)
        else:
            x = self.blocks(x)
        return x[:, :, None, None]


def _create_shallow(variant: str, pretrained: bool, model_args: Dict[str, Any], **kwargs) -> ShallowMlp:
    """Build `variant` from its `model_args`, every one of which the caller's kwargs may override."""
    return build_registered(ShallowMlp, variant, pretrained, model_args, **kwargs)


def _cfg(size: int, structure: str, mean: float, std: float, **kwargs: Any) -> Dict[str, Any]:
    first = 'blocks.0.fc.r' if structure == 'monarch' else 'blocks.0.fc.w'
    return paper_cfg(
        input_size=(1, size, size), pool_size=(1, 1), crop_pct=1.0, interpolation='bilinear', num_classes=10,
        mean=(mean,), std=(std,), first_conv=first, **kwargs)


_MNIST = dict(mean=0.1307, std=0.3081)  # MNIST's pixel mean and std (torchvision's usual values)
_DIGITS = dict(mean=0.5, std=0.5)       # scikit-learn's 8×8 digits, as benchmarks/digits/paper_experiments.py

default_cfgs = generate_default_cfgs({
    'shallow_monarch_28': _cfg(28, 'monarch', **_MNIST),
    'shallow_kron_28': _cfg(28, 'kronecker', **_MNIST),
    'shallow_monarch_8': _cfg(8, 'monarch', **_DIGITS),
    'shallow_kron_8': _cfg(8, 'kronecker', **_DIGITS),
})


@register_model
def shallow_monarch_28(pretrained: bool = False, **kwargs) -> ShallowMlp:
    """Fig. 2(d) on MNIST: x ↦ B_c B_2 ReLU(B_1 x), B_i = P L Pᵀ R Monarch, n = 784 (28 blocks of 28 × 28)."""
    model_args = dict(img_size=28, in_chans=1, structure='monarch', num_blocks=2)
    return _create_shallow('shallow_monarch_28', pretrained, model_args, **kwargs)


@register_model
def shallow_kron_28(pretrained: bool = False, **kwargs) -> ShallowMlp:
    """Fig. 2(d) on MNIST: x ↦ B_c B_2 ReLU(B_1 x), B_i = V_i ⊗ W_i with V_i, W_i 28 × 28 (n = 784)."""
    model_args = dict(img_size=28, in_chans=1, structure='kronecker', num_blocks=2)
    return _create_shallow('shallow_kron_28', pretrained, model_args, **kwargs)


@register_model
def shallow_monarch_8(pretrained: bool = False, **kwargs) -> ShallowMlp:
    """Fig. 2(d) at 8 × 8 (scikit-learn's digits): B_i = P L Pᵀ R Monarch, n = 64 (8 blocks of 8 × 8)."""
    model_args = dict(img_size=8, in_chans=1, structure='monarch', num_blocks=2)
    return _create_shallow('shallow_monarch_8', pretrained, model_args, **kwargs)


@register_model
def shallow_kron_8(pretrained: bool = False, **kwargs) -> ShallowMlp:
    """Fig. 2(d) at 8 × 8 (scikit-learn's digits): B_i = V_i ⊗ W_i with V_i, W_i 8 × 8 (n = 64)."""
    model_args = dict(img_size=8, in_chans=1, structure='kronecker', num_blocks=2)
    return _create_shallow('shallow_kron_8', pretrained, model_args, **kwargs)
