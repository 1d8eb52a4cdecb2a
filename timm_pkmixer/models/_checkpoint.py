"""Checks that a checkpoint was saved from the same architecture as the model it is loaded into.

A mismatch (another model, another S, C, depth or hidden width) is refused before
``load_state_dict`` with an error that names the first differing keys and, for Mixers, the
(S, C, L) of both sides. The classifier may differ (timm drops it when ``num_classes`` changes)
and so may the input channels of the first conv (timm adapts them).
"""
import re
from typing import Dict, List, Optional, Tuple

import torch
import torch.nn as nn

__all__ = ['check_checkpoint_fits', 'mixer_shape']

_BLOCK = re.compile(r'^blocks\.(\d+)\.')


def mixer_shape(state_dict: Dict[str, torch.Tensor]) -> Optional[Tuple[int, int, int]]:
    """(S, C, L) of a Mixer state dict: tokens and channels of the last block, number of blocks; None if not one."""
    depth = 1 + max((int(m.group(1)) for m in map(_BLOCK.match, state_dict) if m), default=-1)
    last = f'blocks.{depth - 1}.mlp_tokens.'
    token_out = state_dict.get(last + 'fc2.weight', state_dict.get(last + 'fc1.weight'))
    norm = state_dict.get('norm.weight')
    if depth == 0 or token_out is None or norm is None:
        return None
    return int(token_out.shape[0]), int(norm.shape[0]), depth


def _examples(keys: List[str], n: int = 3) -> str:
    more = f', … ({len(keys)} in all)' if len(keys) > n else ''
    return ', '.join(keys[:n]) + more


def check_checkpoint_fits(
        state_dict: Dict[str, torch.Tensor],
        model: nn.Module,
        model_desc: str = '',
        checkpoint_desc: str = '',
) -> None:
    """Raise ValueError if `state_dict` has other keys or shapes than `model` (classifier excepted).

    Args:
        state_dict: Checkpoint tensors.
        model: Model built with the intended architecture and arguments.
        model_desc: Short description of the model's shape for the message, e.g. '(S=196, C=768, L=12)'.
        checkpoint_desc: The same for the checkpoint, if it can be read from its tensors.
    """
    cfg = getattr(model, 'pretrained_cfg', None) or {}
    classifiers = cfg.get('classifier') or ()
    classifiers = (classifiers,) if isinstance(classifiers, str) else tuple(classifiers)
    skip = tuple(f'{c}.' for c in classifiers)
    first_conv = cfg.get('first_conv')
    first_conv = f'{first_conv}.weight' if isinstance(first_conv, str) else None
    expected = model.state_dict()

    def allowed_extra(key: str) -> bool:
        # an explicit permutation index is accepted (and checked) by FixedPermutation next to its digest
        return key.endswith('.index') and key[:-len('index')] + 'digest' in expected

    missing = [k for k in expected if k not in state_dict and not k.startswith(skip)]
    unexpected = [k for k in state_dict if k not in expected and not k.startswith(skip) and not allowed_extra(k)]
    mismatched = []
    for key, want in expected.items():
        got = state_dict.get(key)
        if got is None or key.startswith(skip) or not hasattr(got, 'shape'):
            continue
        a, b = tuple(got.shape), tuple(want.shape)
        if key == first_conv and len(a) == len(b) == 4:
            a, b = a[:1] + a[2:], b[:1] + b[2:]  # timm adapts the input channels
        if a != b:
            mismatched.append(f'{key}: checkpoint {tuple(got.shape)} vs model {tuple(want.shape)}')
    if not (missing or unexpected or mismatched):
        return
    arch = cfg.get('architecture') or type(model).__name__
    parts = []
    if mismatched:
        parts.append(f'{len(mismatched)} shape mismatches ({_examples(mismatched)})')
    if missing:
        parts.append(f'{len(missing)} keys missing from the checkpoint ({_examples(missing)})')
    if unexpected:
        parts.append(f'{len(unexpected)} unexpected keys ({_examples(unexpected)})')
    ckpt = f' The checkpoint has {checkpoint_desc}.' if checkpoint_desc else ''
    raise ValueError(
        f'checkpoint does not fit {arch}{" " + model_desc if model_desc else ""}: {"; ".join(parts)}.{ckpt} '
        f'It was saved from another architecture or with other model arguments '
        f'(pass the arguments it was trained with).')
