"""Fine-tuning at a higher resolution: the exact Kronecker expansion of a trained Mixer (MLP-Mixer, App. C).

``expand_resolution(model, K)`` returns a Mixer for images K times larger per side (same patch size) that, on an
image made of K × K tiles of the original size, computes for every tile exactly the original model's tokens.
In the PK view the expansion is itself a PK layer: the tokens are grouped by tile right after the per-patch FC
(``TileTokens``: a fixed permutation), and each token-mixing layer becomes I_{K²} ⊗ W — the pre-trained W
copied onto the diagonal of a K²-times larger matrix, so the token MLP's input grows to K²·S and its hidden
width to K²·D_S (App. C). The off-diagonal blocks start at zero and are trainable: fine-tuning can mix tiles.
Everything else acts per token and is copied as it is: the per-patch FC, channel mixing, LayerNorms, head;
global average pooling then averages over the tiles.

* Normal Mixers keep their transposes: grouping tokens by tile is all the structure needs.
* RP Mixers: each random permutation is lifted tile by tile (`Tiling`), derived from the original seed and layer
  name, so the expanded model's checkpoints carry their own digests and reload exactly.
* S-Mixers with a skip layer: W̃ (S × S0) is expanded the same way, to K²S × K²S0.
* Per-block permutation patterns: each block as its own kind.

The result is a registered architecture (the original's, with ``img_size``, ``num_tokens``,
``token_hidden_dim`` and ``tiles`` set): its record, :func:`expanded_record`, recreates it, so a folder written by
``save_for_hf`` reloads with ``timm.create_model('local-dir:…', pretrained=True)`` and fine-tunes with timm's
train.py, no code.
"""
from typing import Any, Dict, Tuple

import torch
import torch.nn as nn

from ..errors import InvalidArgumentError
from ..validation import integer
from ._common import TRAINING_ONLY_ARGS
from .pk_mixer import MixerArgs, PKMixer
from .sw_mlp import SwMlp

__all__ = ['architecture_args', 'expanded_record', 'expanded_model_args', 'expanded_pretrained_cfg',
           'check_expanded_size', 'expand_resolution', 'tile_images', 'tile_tokens']

_INPUT_SIZE_KEYS = ('input_size', 'test_input_size', 'min_input_size')  # (C, H, W) entries of a pretrained cfg


def architecture_args(model: PKMixer) -> Dict[str, Any]:
    """The model arguments that recreate `model`'s architecture exactly: its record ``model.model_args`` as JSON
    values, without the training-only rates."""
    return model.model_args.to_json(exclude=TRAINING_ONLY_ARGS)


def _check(model: nn.Module, factor: Any) -> int:
    factor = integer('factor', factor)
    if factor < 2:
        raise InvalidArgumentError(f'factor must be an integer ≥ 2 (the image grows factor times per side), '
                                   f'got {factor}')
    if isinstance(model, SwMlp):
        raise InvalidArgumentError('the SW-MLP cannot be expanded: its dense m × m layers mix the whole image at '
                                   'once, there is no token mixing to copy tile by tile')
    if not isinstance(model, PKMixer):
        raise InvalidArgumentError(f'expand_resolution takes a timm-pkmixer Mixer (PKMixer), got '
                                   f'{type(model).__name__}')
    if model.tiles > 1:
        raise InvalidArgumentError(f'the model is already expanded (tiles={model.tiles}); its tiles would not be '
                                   f'the tiles of a larger grid: expand the original by the product of the factors')
    return factor


def expanded_record(model: PKMixer, factor: int) -> MixerArgs:
    """The record of the expanded architecture (validated): image and tokens K² times larger, token hidden K²·D_S,
    `tiles` = K, no training-only rates."""
    factor = _check(model, factor)
    tiles = factor * factor
    args = model.model_args
    grown = dict(img_size=tuple(s * factor for s in args.img_size), num_tokens=args.num_tokens * tiles, tiles=factor)
    if args.token_hidden_dim is not None:
        grown['token_hidden_dim'] = args.token_hidden_dim * tiles
    return args.replace(**grown, **{k: 0. for k in TRAINING_ONLY_ARGS})


def expanded_model_args(model: PKMixer, factor: int) -> Dict[str, Any]:
    """The arguments of the expanded architecture (:func:`expanded_record`) as JSON values."""
    return expanded_record(model, factor).to_json(exclude=TRAINING_ONLY_ARGS)


def check_expanded_size(record: MixerArgs, factor: int, device: torch.device, dtype: torch.dtype) -> int:
    """Refuse, naming `factor`, an expansion whose model and new weights (two copies) would not fit in `device`'s
    memory (:mod:`timm_pkmixer.sizes`), before anything is allocated; returns the bytes it needs."""
    img = record.img_size
    return PKMixer.check_size(
        record, device=device, dtype=dtype, cause=f'factor={factor} (images {img[0]}×{img[1]}, '
        f'{record.num_tokens} tokens)', copies=2, what='the expanded model', advice='Use a smaller factor.')


def _block_diagonal(source: torch.Tensor, tiles: int) -> torch.Tensor:
    """I_tiles ⊗ W for a weight (out, in), or the bias repeated per tile."""
    if source.dim() == 1:
        return source.repeat(tiles)
    return torch.block_diag(*([source] * tiles))


@torch.no_grad()
def expand_resolution(model: PKMixer, factor: int) -> PKMixer:
    """A Mixer for images `factor` times larger per side that computes, on every tile of a factor × factor tiled
    image, exactly `model`'s tokens (see the module docstring). The original is not changed.

    Args:
        model: A trained PKMixer (normal, RP, S-Mixer, per-block pattern; not already expanded).
        factor: K ≥ 2.

    Returns:
        The expanded model, on the original's device and dtype, in the original's train/eval mode.
    """
    record = expanded_record(model, factor)
    args = record.to_json(exclude=TRAINING_ONLY_ARGS)
    tiles = factor * factor
    ref = next(model.parameters())
    check_expanded_size(record, factor, ref.device, ref.dtype)
    cfg = getattr(model, 'pretrained_cfg', None) or {}
    architecture = cfg.get('architecture')
    if architecture:
        import timm
        expanded = timm.create_model(architecture, device=ref.device, dtype=ref.dtype, **args)
    else:
        expanded = PKMixer(device=ref.device, dtype=ref.dtype, **args)
    source = model.state_dict()
    target = expanded.state_dict()
    new_state = {}
    for name, value in target.items():
        if name.endswith('digest'):
            new_state[name] = value  # the lifted permutations' own digests
            continue
        src = source[name]
        if src.shape == value.shape:
            new_state[name] = src  # load_state_dict copies it: the original keeps its own
            continue
        grown = _block_diagonal(src, tiles)
        if grown.shape != value.shape:  # a bug, not a user error: the architectures disagree
            raise RuntimeError(f'{name}: expanded {tuple(src.shape)} to {tuple(grown.shape)}, the expanded model '
                               f'has {tuple(value.shape)}')
        new_state[name] = grown
    expanded.load_state_dict(new_state, strict=True)
    expanded.train(model.training)
    if cfg:
        expanded.pretrained_cfg = expanded.default_cfg = expanded_pretrained_cfg(cfg, factor)
    return expanded


def expanded_pretrained_cfg(cfg: Dict[str, Any], factor: int) -> Dict[str, Any]:
    """`cfg` (timm's pretrained cfg of the original) for images `factor` times larger per side: every input size it
    holds (input_size, test_input_size, min_input_size) grown, so timm's data config (``resolve_data_config``)
    feeds the expanded model its own size."""
    grown = {key: (cfg[key][0], *(s * factor for s in cfg[key][1:])) for key in _INPUT_SIZE_KEYS
             if cfg.get(key) is not None}
    return {**cfg, **grown}


def tile_images(images: torch.Tensor, factor: int) -> torch.Tensor:
    """(factor², B, C, H, W) → (B, C, factor·H, factor·W): tile (a, b) of the big image is images[a·factor + b]."""
    k2, b, c, h, w = images.shape
    if k2 != factor * factor:
        raise InvalidArgumentError(f'{k2} images do not make {factor} × {factor} tiles')
    return images.reshape(factor, factor, b, c, h, w).permute(2, 3, 0, 4, 1, 5).reshape(b, c, factor * h, factor * w)


def tile_tokens(tokens: torch.Tensor, factor: int) -> Tuple[torch.Tensor, ...]:
    """The expanded model's (B, K²·S, C) tokens as K² tensors (B, S, C), one per tile (tile-major)."""
    b, s, c = tokens.shape
    return tuple(tokens.reshape(b, factor * factor, s // (factor * factor), c).unbind(1))
