"""The one check of a state dict against a model: before timm's pretrained loading (the checkpoint
filters), in every model's ``load_state_dict``, and in ``pkmixer push``.

It refuses, with one :class:`~timm_pkmixer.errors.CheckpointMismatchError` that lists every problem:

* another architecture, S, C, depth, width or hidden size (keys and shapes), naming both geometries;
* a normal checkpoint for blocks that are Random-Permuted in the model, or the reverse (per block, so a
  model with a per-block permutation pattern is checked block by block);
* permutations or masks of another seed, a corrupted digest, a digest cast to a floating dtype, an explicit
  permutation or mask that is not the model's. The structured layers own these checks
  (:meth:`~timm_pkmixer.layers.DerivedStructure.check_state`); the first mismatching digest is searched
  among seeds 0..255 so the message can say which seed the checkpoint was made with.

The classifier may differ (timm drops it when ``num_classes`` changes) and so may the input channels of the
first conv (timm adapts them) when ``pretrained_cfg_may_adapt`` is set.

Which file: through timm's pretrained loading (``create_model(…, pretrained=True)``, also with
``pretrained_cfg_overlay=dict(file=…)``) the error starts with the file, folder, Hub id or url the weights came
from (:func:`weights_source`). ``timm.models.load_checkpoint(model, path)`` hands ``load_state_dict`` the tensors
alone, so its error cannot name the file. A file timm cannot read at all (empty, truncated, text, a pickle of
something that is no dict) fails inside timm's reader (``timm.models.load_state_dict``: safetensors'
``SafetensorError``, ``EOFError``, ``OSError``, ``KeyError``, ``AttributeError``), before any code of this package
runs; ``pkmixer push`` / ``pkmixer expand`` read files with
:func:`timm_pkmixer.publish.checkpoint_file.read_checkpoint`, which names the file.
"""
import re
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Tuple

import torch
import torch.nn as nn

from ..errors import CheckpointError, CheckpointMismatchError
from ..layers.structure import DerivedStructure, StructureProblem

__all__ = ['check_state_dict', 'checkpoint_filter_fn', 'describe_state_dict', 'weights_source', 'config_json_of',
           'check_config_num_classes']

_BLOCK = re.compile(r'^blocks\.(\d+)\.')


def describe_state_dict(state_dict: Dict[str, torch.Tensor]) -> str:
    """'S=…, C=…, L=…' of a Mixer state dict, 'm=…, L=…' of an SW-MLP one, '' if neither can be read."""
    depth = _depth(state_dict)
    norm = state_dict.get('norm.weight')
    if depth == 0 or not isinstance(norm, torch.Tensor) or norm.dim() != 1:
        return ''
    last = f'blocks.{depth - 1}.mlp_tokens.'
    token_out = state_dict.get(last + 'fc2.weight', state_dict.get(last + 'fc1.weight'))
    if isinstance(token_out, torch.Tensor):
        return f'S={int(token_out.shape[0])}, C={int(norm.shape[0])}, L={depth}'
    return f'm={int(norm.shape[0])}, L={depth}'


def _depth(state_dict: Dict[str, torch.Tensor]) -> int:
    """1 + the highest block index of a state dict's keys (0 if it has no blocks)."""
    return 1 + max((int(m.group(1)) for m in map(_BLOCK.match, state_dict) if m), default=-1)


def _model_desc(model: nn.Module) -> str:
    d = model.describe()
    return f'(S={d.num_tokens}, C={d.dim}, L={d.depth})' if d.num_tokens is not None else f'(m={d.width}, L={d.depth})'


def _examples(items: List[str], n: int = 3) -> str:
    more = f', … ({len(items)} in all)' if len(items) > n else ''
    return ', '.join(items[:n]) + more


def _block_list(prefixes: List[str]) -> str:
    blocks = sorted({int(m.group(1)) for m in map(_BLOCK.match, prefixes) if m})
    return f'blocks {blocks}' if blocks else _examples(prefixes)


def _structure_layers(model: nn.Module) -> Dict[str, DerivedStructure]:
    return {f'{name}.': m for name, m in model.named_modules() if isinstance(m, DerivedStructure)}


def _structure_key_names() -> Tuple[str, ...]:
    """The state-dict names owned by structured layers ('digest', 'index', 'mask_digest', 'mask')."""
    names = set()
    stack = list(DerivedStructure.__subclasses__())
    while stack:
        cls = stack.pop()
        names.update(n for n in (cls.digest_name, cls.explicit_name) if n)
        stack.extend(cls.__subclasses__())
    return tuple(sorted(names))


def _key_problems(
        state_dict: Dict[str, torch.Tensor],
        model: nn.Module,
        structure_keys: set,
        pretrained_cfg_may_adapt: bool,
) -> List[str]:
    cfg = getattr(model, 'pretrained_cfg', None) or {}
    skip: Tuple[str, ...] = ()
    first_conv = None
    if pretrained_cfg_may_adapt:
        classifiers = cfg.get('classifier') or ()
        classifiers = (classifiers,) if isinstance(classifiers, str) else tuple(classifiers)
        skip = tuple(f'{c}.' for c in classifiers)
        first_conv = f"{cfg['first_conv']}.weight" if isinstance(cfg.get('first_conv'), str) else None
    expected = model.state_dict()
    missing = [k for k in expected if k not in state_dict and k not in structure_keys and not k.startswith(skip)]
    unexpected = [k for k in state_dict if k not in expected and k not in structure_keys and not k.startswith(skip)]
    mismatched = []
    for key, want in expected.items():
        got = state_dict.get(key)
        if got is None or key.startswith(skip) or key in structure_keys or not hasattr(got, 'shape'):
            continue
        a, b = tuple(got.shape), tuple(want.shape)
        if key == first_conv and len(a) == len(b) == 4:
            a, b = a[:1] + a[2:], b[:1] + b[2:]  # timm adapts the input channels
        if a != b:
            mismatched.append(f'{key}: checkpoint {tuple(got.shape)} vs model {tuple(want.shape)}')
    parts = []
    if mismatched:
        parts.append(f'{len(mismatched)} shape mismatches ({_examples(mismatched)})')
    if missing:
        parts.append(f'{len(missing)} keys missing from the checkpoint ({_examples(missing)})')
    if unexpected:
        parts.append(f'{len(unexpected)} unexpected keys ({_examples(unexpected)})')
    return parts


def check_state_dict(
        model: nn.Module,
        state_dict: Dict[str, torch.Tensor],
        strict: bool = True,
        pretrained_cfg_may_adapt: bool = False,
) -> Dict[str, torch.Tensor]:
    """Raise :class:`CheckpointMismatchError` unless `state_dict` fits `model`; return it ready to load.

    Args:
        model: A model of this package (it has ``describe()``).
        state_dict: The checkpoint's tensors.
        strict: Also require the same keys and shapes, and the model's permutations / masks to be present
            (``load_state_dict(strict=False)`` semantics otherwise: only what is present is checked).
        pretrained_cfg_may_adapt: Let the classifier and the first conv's input channels differ (timm's
            pretrained loading adapts them).

    Returns:
        The state dict, with the digest of every explicit permutation / mask it held (another writer's
        format) filled in once that array was checked.
    """
    layers = _structure_layers(model)
    names = _structure_key_names()
    model_structure_keys = {p + n for p in layers for n in names}
    ckpt_structure_keys = {k for k in state_dict if k.rsplit('.', 1)[-1] in names}

    model_depth = len(model.blocks) if isinstance(getattr(model, 'blocks', None), nn.Module) else None
    ckpt_depth = _depth(state_dict)
    other_depth = model_depth is not None and ckpt_depth > 0 and ckpt_depth != model_depth

    def in_both(prefix: str) -> bool:  # a block both have (per-block messages speak of no other)
        m = _BLOCK.match(prefix)
        return not other_depth or m is None or int(m.group(1)) < min(ckpt_depth, model_depth)

    arch = (getattr(model, 'pretrained_cfg', None) or {}).get('architecture') or type(model).__name__
    head = f'checkpoint does not fit {arch} {_model_desc(model)}: '
    if not state_dict and strict:
        raise CheckpointMismatchError(head + 'the checkpoint holds no tensors at all (an empty state dict).')
    parts: List[str] = []
    if other_depth and strict:
        parts.append(f'the checkpoint has {ckpt_depth} blocks, the model {model_depth} (num_blocks={model_depth}): '
                     f'build the model with num_blocks={ckpt_depth}')
    if strict:
        absent = [p for p, m in layers.items()
                  if p + m.digest_name not in state_dict and p + m.explicit_name not in state_dict and in_both(p)]
        perms_absent = [p for p in absent if layers[p].what == 'permutation']
        if perms_absent:
            pattern = model.describe().permutation_label
            parts.append(
                f'the checkpoint has no permutation digests for {_block_list(perms_absent)}: it is a normal (non-RP) '
                f'Mixer checkpoint there, but the model is Random-Permuted in those blocks '
                f'(permutation={pattern!r})')
        masks_absent = [p for p in absent if layers[p].what == 'mask']
        if masks_absent:
            parts.append(f'the checkpoint has no mask digests for {_examples(masks_absent)}')
    foreign = sorted(p for p in {k.rsplit('.', 1)[0] + '.' for k in ckpt_structure_keys} - set(layers) if in_both(p))
    if foreign:
        owned = [p for p in foreign if p.startswith('blocks.')]
        parts.append(
            f'the checkpoint holds permutations of a Random-Permuted Mixer for {_block_list(owned or foreign)}, '
            f'but the model is a normal Mixer there'
            + (f' (permutation={model.describe().permutation_label!r})' if hasattr(model, 'describe') else ''))
    if strict:
        parts += _key_problems(state_dict, model, model_structure_keys | ckpt_structure_keys, pretrained_cfg_may_adapt)

    if parts:  # another architecture or other model arguments
        ckpt = describe_state_dict(state_dict)
        raise CheckpointMismatchError(
            head + f'{"; ".join(parts)}.' + (f' The checkpoint has {ckpt}.' if ckpt else '')
            + ' It was saved from another architecture or with other model arguments (pass the arguments it '
              'was trained with).')
    # the same architecture: the structure is only worth comparing when everything else fits, and each
    # problem says itself what it is (another seed, named when found; a cast or corrupted digest)
    parts = _structure_problems(state_dict, layers)
    if parts:
        raise CheckpointMismatchError(head + f'{"; ".join(parts)}.')
    return _fill_digests(state_dict, layers)


def _structure_problems(state_dict: Dict[str, torch.Tensor], layers: Dict[str, DerivedStructure]) -> List[str]:
    parts = []
    for what in ('permutation', 'mask'):
        group = {p: m for p, m in layers.items() if m.what == what}
        problems: List[StructureProblem] = []
        mismatched: List[StructureProblem] = []
        for prefix, layer in group.items():
            for problem in layer.check_state(state_dict, prefix, name_seed=not mismatched):
                (mismatched if problem.kind == 'digest' else problems).append(problem)
        if mismatched:
            first = next(iter(group.values()))
            parts.append(f'{len(mismatched)} of {len(group)} {first.digest_noun} (first: {mismatched[0].key}) differ '
                         f'from those of {first.seed_arg}={first.seed}: {mismatched[0].message}')
        if problems:
            parts.append(f'{len(problems)} {what} problems: ' + '; '.join(p.message for p in problems[:3])
                         + (f'; … ({len(problems)} in all)' if len(problems) > 3 else ''))
    return parts


def _fill_digests(state_dict: Dict[str, torch.Tensor], layers: Dict[str, DerivedStructure]
                  ) -> Dict[str, torch.Tensor]:
    out: Optional[Dict[str, torch.Tensor]] = None
    for prefix, layer in layers.items():
        digest_key = prefix + layer.digest_name
        if prefix + layer.explicit_name in state_dict and digest_key not in state_dict:
            if out is None:
                out = type(state_dict)(state_dict) if isinstance(state_dict, dict) else dict(state_dict)
                if hasattr(state_dict, '_metadata'):
                    out._metadata = state_dict._metadata  # torch's per-module versions
            out[digest_key] = torch.tensor(layer.expected_digest(), dtype=torch.long)
    return state_dict if out is None else out


def config_json_of(cfg: Mapping[str, Any]) -> str:
    """The config.json a pretrained cfg was read from by timm (``local-dir:`` / ``hf-hub:`` names), as messages
    name it; '' for a cfg of the registry."""
    if cfg.get('source') == 'local-dir' and cfg.get('file'):
        return str(Path(str(cfg['file'])) / 'config.json')
    if cfg.get('source') == 'hf-hub' and cfg.get('hf_hub_id'):
        return f"hf-hub:{cfg['hf_hub_id']} config.json"
    return ''


def check_config_num_classes(cfg: Mapping[str, Any], state_dict: Optional[Mapping[str, Any]] = None) -> None:
    """Refuse a config.json (:func:`config_json_of`) whose ``num_classes`` is no class count, or, given the
    weights beside it, not the outputs of their head: timm would build another head and drop the trained one
    (a negative count it does not pass on at all: the entry point's 1000 classes). A registry cfg passes."""
    where = config_json_of(cfg)
    if not where:
        return
    value = cfg.get('num_classes')
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise CheckpointError(
            f'{where}: num_classes={value!r} is not a number of classes (a non-negative integer: the outputs of the '
            f'trained head, 0 for a model without one); timm would build another head and drop the trained one. '
            f'Correct num_classes in config.json.')
    if state_dict is None:
        return
    classifier = cfg.get('classifier') or 'head'
    head = state_dict.get(f'{classifier if isinstance(classifier, str) else classifier[0]}.weight')
    rows = int(head.shape[0]) if isinstance(head, torch.Tensor) and head.dim() == 2 else 0
    if rows != value:
        held = f'a {rows}-class head ({tuple(head.shape)})' if rows else 'no head'
        raise CheckpointMismatchError(
            f'{where}: num_classes={value} but the weights beside it hold {held}: config.json does not describe its '
            f'weights. Correct num_classes in config.json (to {rows}).')


def checkpoint_filter_fn(state_dict: Dict[str, torch.Tensor], model: nn.Module) -> Dict[str, torch.Tensor]:
    """timm's pretrained filter for every model of the package: :func:`check_state_dict` with the classifier
    and input channels free to differ, after the num_classes of a config.json is checked against the weights'
    head (:func:`check_config_num_classes`). timm's own MLP-Mixer checkpoints load into the normal PK Mixers as
    they are (same names, same function)."""
    check_config_num_classes(getattr(model, 'pretrained_cfg', None) or {}, state_dict)
    try:
        return check_state_dict(model, state_dict, strict=True, pretrained_cfg_may_adapt=True)
    except CheckpointMismatchError as e:
        source = weights_source(getattr(model, 'pretrained_cfg', None) or {})
        if not source:
            raise
        raise CheckpointMismatchError(f'{source}: {e}') from None


def weights_source(cfg: Dict[str, Any]) -> str:
    """Where timm's pretrained loading reads a model's weights from, by its pretrained cfg (the order of timm's
    own resolution): the file or folder, ``hf-hub:ID[/FILE]``, the url; '' for a state dict passed in memory."""
    hub = f"hf-hub:{cfg.get('hf_hub_id')}" + (f"/{cfg['hf_hub_filename']}" if cfg.get('hf_hub_filename') else '')
    if cfg.get('source') == 'hf-hub':
        return hub
    if cfg.get('source') == 'local-dir':
        return str(cfg.get('file') or '')
    if cfg.get('state_dict') is not None:
        return ''
    if cfg.get('file'):
        return str(cfg['file'])
    if cfg.get('hf_hub_id'):
        return hub
    return str(cfg.get('url') or '')
