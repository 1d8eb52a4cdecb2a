"""Refusing a model too large to build, before anything is allocated.

The rule: the parameters and buffers that a model's arguments ask for must fit in the total memory of the
device the model is built on (this machine's RAM for ``'cpu'``, the accelerator's own memory for ``'cuda'`` and
the like; 1 PiB on ``'meta'``, where nothing is allocated but a larger model could never be materialised).
That is a lower bound of what building needs (activations, gradients and optimizer state come on top), so no
model that could be built is refused; one that could not is refused with a
:class:`~timm_pkmixer.errors.ModelTooLargeError` that names the arguments setting its largest tensor, the bytes
it would need and the memory there is, instead of torch's "Storage size calculation overflowed",
"can't allocate memory" or a machine that swaps until the process is killed.

Sizes are Python integers (no overflow) computed from the resolved sizes; the constructors call
:func:`check_mixer_size` / :func:`check_sw_mlp_size` before their first layer, and ``expand_resolution`` calls
:func:`check_mixer_size` for the expanded model before expanding.
"""
import math
import os
from dataclasses import dataclass
from typing import Any, Dict, Iterable, Optional, Sequence, Tuple, Union

import torch

from .errors import ModelTooLargeError

__all__ = ['PlannedTensor', 'META_LIMIT', 'device_memory', 'check_memory', 'check_mixer_size', 'check_sw_mlp_size',
           'check_architecture_size', 'check_shallow_size']

META_LIMIT = 2 ** 50  # 1 PiB: the bound on the meta device

Size = Union[int, float]  # elements; float('inf') when an argument's product is past any float


@dataclass(frozen=True)
class PlannedTensor:
    """A tensor (or `count` alike, one per block) a model would allocate, and the arguments that set its size."""
    name: str
    shape: Tuple[Size, ...]
    itemsize: int
    args: str
    count: int = 1

    @property
    def numel(self) -> Size:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> Size:
        return self.numel * self.itemsize * self.count


def _sci(n: Size) -> str:
    """A count as 3 significant digits (Python ints of any size, inf)."""
    if n == float('inf') or n >= 10 ** 308:
        return 'more than 1e308'
    if n < 1000:
        return str(int(n))
    digits = str(int(n))
    return f'{digits[0]}.{digits[1:3]}e{len(digits) - 1}'


def _bytes(n: Size) -> str:
    if n == float('inf') or n >= 10 ** 18:
        return f'{_sci(n)} bytes'
    for unit, scale in (('PB', 10 ** 15), ('TB', 10 ** 12), ('GB', 10 ** 9), ('MB', 10 ** 6), ('kB', 10 ** 3)):
        if n >= scale:
            return f'{n / scale:.3g} {unit}'
    return f'{int(n)} bytes'


def _ram() -> Tuple[int, str]:
    try:
        return os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES'), "this machine's memory (RAM)"
    except (AttributeError, ValueError, OSError):  # no sysconf (Windows): a bound no machine of today passes
        return 2 ** 42, 'a 4 TiB bound (this machine\'s memory is unknown)'


def device_memory(device: torch.device) -> Tuple[int, str]:
    """(bytes, description) of the memory a model built on `device` must fit in."""
    if device.type == 'meta':
        return META_LIMIT, 'the 1 PiB bound of the meta device (no device could materialise more)'
    if device.type != 'cpu':
        try:
            props = getattr(torch, device.type).get_device_properties(device)
            return int(props.total_memory), f'the memory of {device.type} device {props.name!r}'
        except (AttributeError, RuntimeError, AssertionError, ValueError):
            pass
    return _ram()


def _where(device: Any, dtype: Any) -> Tuple[torch.device, int]:
    """The device a constructor will build on (torch.device contexts honoured) and its bytes per parameter."""
    device = torch.empty(0, device=device).device if not isinstance(device, torch.device) else device
    try:
        itemsize = torch.empty((), dtype=dtype, device='meta').element_size()
    except (TypeError, RuntimeError):
        itemsize = 4
    return device, itemsize


def check_memory(tensors: Iterable[PlannedTensor], device: torch.device, cause: str = '', copies: int = 1,
                 what: str = 'the model', advice: str = 'Choose smaller sizes.') -> Size:
    """Raise :class:`ModelTooLargeError` unless `copies` × the `tensors` fit in `device`'s memory (module
    docstring); returns the bytes they need.

    Args:
        tensors: What would be allocated.
        device: Where.
        cause: The arguments to name (default: those of the largest tensor).
        copies: How many copies exist at once (``expand_resolution`` holds the new weights and the model).
        what: What is being built, for the message.
        advice: The message's last sentence.
    """
    tensors = list(tensors)
    total = sum(t.nbytes for t in tensors) * copies
    limit, where = device_memory(device)
    if total <= limit:
        return total
    big = max(tensors, key=lambda t: t.nbytes)
    shape = ' × '.join(_sci(s) for s in big.shape)
    per = f' × {big.count}' if big.count > 1 else ''
    raise ModelTooLargeError(
        f'{cause or big.args}: {what} would need {_bytes(total)} for its parameters and buffers alone'
        + (f' ({copies} copies)' if copies > 1 else '')
        + f', more than the {_bytes(limit)} of {where}; the largest is {big.name} ({shape}{per}, '
        f'{_bytes(big.nbytes)}). Refused before allocating anything: a model must fit in the memory of the '
        f'device it is built on. {advice}')


def _width_source(explicit_name: str, explicit: Optional[int], hidden: Optional[Size], widths: str, dim_name: str,
                  dim: int) -> str:
    """The arguments that set a hidden width, the one that makes it large first."""
    if explicit is not None:
        return f'{explicit_name}={explicit}'
    if hidden is not None and hidden > 16 * dim:  # the ratio is what is large
        return f'{widths} (a hidden width of {_sci(hidden)}) with {dim_name}={dim}'
    return f'{dim_name}={dim} with {widths}'


def check_mixer_size(
        *,
        grid: Tuple[int, int],
        in_chans: int,
        patch_size: Tuple[int, int],
        embed_dim: int,
        num_tokens: Optional[int],
        num_blocks: int,
        block_type: str,
        mlp_ratio: Any,
        gamma: Any,
        token_hidden_dim: Optional[int],
        channel_hidden_dim: Optional[int],
        permutations: Sequence[str],
        skip_layer: Optional[bool],
        num_classes: int,
        device: Any = None,
        dtype: Any = None,
        cause: str = '',
        copies: int = 1,
        what: str = 'the model',
        advice: str = 'Choose smaller sizes.',
) -> Size:
    """:func:`check_memory` for a PKMixer of these (validated) arguments; returns the bytes it needs."""
    from .layers.permutation import index_dtype
    from .models.pk_mixer import _hidden_widths
    device, itemsize = _where(device, dtype)
    s0 = grid[0] * grid[1]
    s, c = num_tokens or s0, embed_dim
    try:
        token_hidden, channel_hidden = _hidden_widths(
            block_type, s, c, mlp_ratio, gamma, token_hidden_dim, channel_hidden_dim)
    except OverflowError:  # γ·S or ratio·C past any float
        token_hidden = channel_hidden = float('inf')
    if gamma is not None:
        widths = f'gamma={gamma!r}'
    elif mlp_ratio is not None:
        widths = f'mlp_ratio={mlp_ratio!r}'
    else:
        widths = 'mlp_ratio (timm\'s default (0.5, 4.0))'
    token_src = _width_source('token_hidden_dim', token_hidden_dim, token_hidden, widths, 'num_tokens', s)
    channel_src = _width_source('channel_hidden_dim', channel_hidden_dim, channel_hidden, widths, 'embed_dim', c)
    L = num_blocks
    plan = [
        PlannedTensor('stem.proj.weight', (c, in_chans, *patch_size), itemsize,
                      f'embed_dim={c} (with patch_size={tuple(patch_size)}, in_chans={in_chans})'),
        PlannedTensor('head.weight', (num_classes, c), itemsize, f'num_classes={num_classes}, embed_dim={c}'),
        PlannedTensor('blocks.*.norm, norm', (4 * L + 2, c), itemsize, f'embed_dim={c}'),
    ]
    if skip_layer or (skip_layer is None and s != s0):
        plan.append(PlannedTensor('blocks.0.skip.proj.weight', (s, s0), itemsize, f'num_tokens={s}'))
    # block 0 maps the S0 patches (its token FC reads S0 inputs), blocks 1.. map S tokens
    first = [('blocks.0.mlp_tokens.fc1.weight', s0, 1)]
    if L > 1:
        first.append(('blocks.*.mlp_tokens.fc1.weight', s, L - 1))
    if token_hidden is None:  # S-Mixer: one FC per mixing
        plan += [PlannedTensor(name, (s, s_in), itemsize, f'num_tokens={s}', n) for name, s_in, n in first]
        plan.append(PlannedTensor('blocks.*.mlp_channels.fc1.weight', (c, c), itemsize, f'embed_dim={c}', L))
    else:
        plan += [PlannedTensor(name, (token_hidden, s_in), itemsize, token_src, n) for name, s_in, n in first]
        plan += [
            PlannedTensor('blocks.*.mlp_tokens.fc2.weight', (s, token_hidden), itemsize, token_src, L),
            PlannedTensor('blocks.*.mlp_channels.fc1.weight', (channel_hidden, c), itemsize, channel_src, L),
            PlannedTensor('blocks.*.mlp_channels.fc2.weight', (c, channel_hidden), itemsize, channel_src, L),
        ]
    randoms = [i for i, p in enumerate(permutations) if p == 'random']
    if randoms:  # 4 permutations per random block, each an index and its inverse (block 0's first: of S0·C)
        m = s * c
        index_size = torch.empty((), dtype=index_dtype(m), device='meta').element_size()
        src = f"num_tokens={s}, embed_dim={c} (permutation='random')"
        first_in = 2 if randoms[0] == 0 else 0
        plan.append(PlannedTensor('blocks.*.mlp_*.perm_*.index, inverse', (m,), index_size, src,
                                  8 * len(randoms) - first_in))
        if first_in:
            plan.append(PlannedTensor('blocks.0.mlp_tokens.perm_in.index, inverse', (s0 * c,), index_size, src, 2))
    return check_memory(plan, device, cause=cause, copies=copies, what=what, advice=advice)


def check_sw_mlp_size(
        *,
        grid: Tuple[int, int],
        in_chans: int,
        patch_size: Tuple[int, int],
        embed_dim: int,
        width: int,
        width_source: str,
        num_blocks: int,
        gamma: Optional[float],
        num_classes: int,
        device: Any = None,
        dtype: Any = None,
) -> Size:
    """:func:`check_memory` for an SwMlp of these (validated) arguments; returns the bytes it needs. Every masked
    weight also holds a bool mask of its size. `width_source` names what set m ('omega=… at density p=…' or
    'width')."""
    device, itemsize = _where(device, dtype)
    m, L = width, num_blocks
    if width_source == 'width':
        width_source = f'width={m}'
    hidden = None if gamma is None else round(gamma * m) if math.isfinite(gamma * m) else float('inf')
    masked = itemsize + 1
    num_inputs = grid[0] * grid[1] * embed_dim
    plan = [
        PlannedTensor('stem.proj.weight', (embed_dim, in_chans, *patch_size), itemsize,
                      f'embed_dim={embed_dim} (with patch_size={tuple(patch_size)}, in_chans={in_chans})'),
        PlannedTensor('head.weight', (num_classes, m), itemsize, f'num_classes={num_classes}, {width_source}'),
        PlannedTensor('blocks.*.norm, norm', (2 * L + 2, m), itemsize, width_source),
    ]
    if num_inputs != m:
        plan.append(PlannedTensor('in_proj.weight, mask', (m, num_inputs), masked,
                                  f'{width_source}, embed_dim={embed_dim}'))
    if hidden is None:
        plan.append(PlannedTensor('blocks.*.fc1.weight, mask', (m, m), masked, width_source, L))
    else:
        src = f'gamma={gamma!r}, {width_source}'
        plan += [PlannedTensor('blocks.*.fc1.weight, mask', (hidden, m), masked, src, L),
                 PlannedTensor('blocks.*.fc2.weight, mask', (m, hidden), masked, src, L)]
    return check_memory(plan, device)


def check_architecture_size(args: Dict[str, Any], device: Any = None, dtype: Any = None, **kwargs: Any) -> Size:
    """:func:`check_mixer_size` for a Mixer given by its architecture arguments
    (:func:`timm_pkmixer.expand.architecture_args`: explicit hidden widths, lists for sizes); `kwargs` go to it."""
    img, patch, permutation = args['img_size'], args['patch_size'], args['permutation']
    return check_mixer_size(
        grid=(img[0] // patch[0], img[1] // patch[1]), in_chans=args['in_chans'], patch_size=tuple(patch),
        embed_dim=args['embed_dim'], num_tokens=args['num_tokens'], num_blocks=args['num_blocks'],
        block_type=args['block_type'], mlp_ratio=None, gamma=None, token_hidden_dim=args.get('token_hidden_dim'),
        channel_hidden_dim=args.get('channel_hidden_dim'),
        permutations=[permutation] * args['num_blocks'] if isinstance(permutation, str) else permutation,
        skip_layer=args['skip_layer'], num_classes=args['num_classes'], device=device, dtype=dtype, **kwargs)


def check_shallow_size(*, structure: str, shape: Tuple[int, int], num_blocks: int, num_classes: int, cause: str,
                       device: Any = None, dtype: Any = None) -> Size:
    """:func:`check_memory` for a ShallowMlp: each of its `num_blocks` layers is a Monarch matrix (L and R, each
    √n blocks of √n × √n; `shape` = (√n, √n)) or a Kronecker product V ⊗ W (`shape` = (rows, cols) of the image
    matrix: V rows × rows, W cols × cols); the head is n × num_classes. `cause` names the size arguments."""
    device, itemsize = _where(device, dtype)
    rows, cols = shape
    if structure == 'monarch':
        plan = [PlannedTensor('blocks.*.fc.{left,right}', (rows, rows, rows), itemsize, cause, 2 * num_blocks)]
    else:
        plan = [PlannedTensor('blocks.*.fc.v.weight', (rows, rows), itemsize, cause, num_blocks),
                PlannedTensor('blocks.*.fc.w.weight', (cols, cols), itemsize, cause, num_blocks)]
    head = PlannedTensor('head.weight', (num_classes, rows * cols), itemsize, f'num_classes={num_classes}, {cause}')
    plan.append(head)
    return check_memory(plan, device)
