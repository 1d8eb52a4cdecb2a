"""Table S.3 (D.9): memory, FLOPs and time per training step of the RP Mixer, the MLP-Mixer and the SW-MLP.

The models are the package's own (`timm.create_model`), at the table's sizes: S = 256, C = 588, L = 8, γ = 4
(ImageNet, P = 14 on 224 px) and S = 64, C = 48, L = 3, γ = 2 (CIFAR, P = 4 on 32 px). The caption sets S, C,
L and γ "for the three models": the SW-MLP is the MLP of the same width m = S·C, depth L and hidden width γm
(eq. S.17 blocks), at the Mixer's Ω (p = Ω/(γm²), eq. 13). Its masks are dense bool tensors, so p changes none of
its costs.

Counted on the meta device (shapes only, nothing allocated; identical to the counts on a real device), so even
the 1.45·10¹² parameters of the ImageNet-size SW-MLP are counted from the model itself:

* parameters, parameter bytes, buffer bytes (an RP Mixer's buffers are its permutation indices: an int32 index and
  its inverse of m entries per J plus one int64 digest; an SW-MLP's are its bool masks plus one digest per layer);
* bytes autograd saves for the backward (`torch.autograd.graph.saved_tensors_hooks`, each storage once,
  parameters and buffers excluded): the activation memory of a training step at its peak, the end of the forward;
* the training state: parameters + gradients + AdamW's two moments + buffers + saved tensors. An estimate of the
  peak that leaves out transient buffers (a CPU has no honest peak-allocation counter; RSS deltas are not);
* FLOPs of matmuls and convolutions as `torch.utils.flop_counter.FlopCounterMode` counts them (forward, and
  forward + backward; LayerNorm, GELU, the gathers and the optimizer are not counted).

Time per step (forward, backward, AdamW step) is measured on a real device: the models in turn, one step each
per round, the order rotated every round, so that a change of the machine's load hits all of them; each model's
time is reported as the median over rounds of its ratio to the MLP-Mixer's step of the same round. On CUDA the
peak allocation of one step (`torch.cuda.max_memory_allocated`) is measured too, one model at a time.
"""
import logging
import statistics
import time
from dataclasses import dataclass
from typing import Any, Dict, List, Sequence, Tuple

import torch
import torch.nn as nn
import torch.nn.functional as F

from ..errors import InvalidArgumentError
from ..markdown import markdown_table
from ..validation import choice, integer, positive_int

__all__ = ['CostSize', 'COST_SIZES', 'COST_MODELS', 'PAPER_TABLE_S3', 'ModelCost', 'cost_model_args',
           'build_cost_model', 'count_costs', 'time_steps', 'table_s3', 'cost_markdown', 'MAX_STEPS',
           'MAX_BATCH_SIZE']

_logger = logging.getLogger(__name__)

COST_MODELS = ('rp_mixer', 'mlp_mixer', 'sw_mlp')
MODEL_LABELS = {'rp_mixer': 'RP MLP-Mixer', 'mlp_mixer': 'MLP-Mixer', 'sw_mlp': 'SW-MLP'}
MAX_STEPS = 1000        # timed steps per model: a median is stable long before; more only occupies the machine
MAX_BATCH_SIZE = 4096   # the paper's largest global batch
ADAMW_STATES = 2        # exp_avg and exp_avg_sq, each the size of the parameters


@dataclass(frozen=True)
class CostSize:
    """One column of Table S.3: the mixing sizes and the image they come from (S0 = (img/P)², C0 = 3P²)."""
    name: str
    num_tokens: int      # S
    embed_dim: int       # C
    num_blocks: int      # L
    gamma: float         # γ: token hidden γS, channel hidden γC; SW-MLP hidden γm
    img_size: int
    patch_size: int
    num_classes: int
    data: str


COST_SIZES: Dict[str, CostSize] = {
    'table-s3-large': CostSize('table-s3-large', 256, 588, 8, 4.0, 224, 14, 1000, 'ImageNet'),
    'table-s3-small': CostSize('table-s3-small', 64, 48, 3, 2.0, 32, 4, 10, 'CIFAR'),
}

# Table S.3 as printed (memory, FLOPs; runtime on CIFAR, V100, s/epoch), quoted for comparison only
PAPER_TABLE_S3 = {
    ('table-s3-small', 'sw_mlp'): ('3.22GB', '805M', '28.2 s/epoch'),
    ('table-s3-small', 'rp_mixer'): ('3.94MB', '12.5M', '6.41 s/epoch'),
    ('table-s3-small', 'mlp_mixer'): ('3.93MB', '12.5M', '6.08 s/epoch'),
    ('table-s3-large', 'sw_mlp'): ('23.2TB', '5.80T', ''),
    ('table-s3-large', 'rp_mixer'): ('26.3MB', '4.06G', ''),
    ('table-s3-large', 'mlp_mixer'): ('26.3MB', '4.06G', ''),
}


def _omega(size: CostSize) -> float:
    """Ω = γ(C·S² + C²·S)/2 (eq. 14)."""
    s, c = size.num_tokens, size.embed_dim
    return size.gamma * (c * s * s + c * c * s) / 2


def cost_model_args(size: CostSize, model: str) -> Tuple[str, Dict[str, Any]]:
    """(registered timm name, kwargs) of one of COST_MODELS at `size`."""
    choice('model', model, COST_MODELS)
    common = dict(img_size=size.img_size, patch_size=size.patch_size, num_blocks=size.num_blocks,
                  embed_dim=size.embed_dim, gamma=size.gamma, num_classes=size.num_classes)
    if model != 'sw_mlp':
        return 'pk_mixer_ss8_32', dict(common, num_tokens=size.num_tokens,
                                       permutation='random' if model == 'rp_mixer' else 'normal')
    m = size.num_tokens * size.embed_dim
    p = _omega(size) / (size.gamma * m * m)
    if p > 1:
        raise InvalidArgumentError(f'size {size.name}: the SW-MLP at the Mixer\'s Ω would need density '
                                   f'p = Ω/(γm²) = {p:.3g} > 1')
    return 'sw_mlp_o18_32', dict(common, width=m, omega=None, density=p)


def build_cost_model(size: CostSize, model: str, device: Any = 'meta', seed: int = 0) -> nn.Module:
    """One of COST_MODELS at `size` on `device` (default meta: shapes only), torch seed `seed`."""
    import timm
    name, kwargs = cost_model_args(size, model)
    torch.manual_seed(seed)
    return timm.create_model(name, device=device, **kwargs)


@dataclass
class ModelCost:
    """Counts of one model at one batch size (bytes and FLOPs of the whole batch)."""
    params: int
    param_bytes: int
    buffer_bytes: int
    saved_bytes: int           # tensors autograd keeps for the backward, parameters and buffers excluded
    forward_flops: int
    train_flops: int           # forward + backward

    @property
    def train_state_bytes(self) -> int:
        """Parameters + gradients + AdamW moments + buffers + saved tensors."""
        return self.param_bytes * (2 + ADAMW_STATES) + self.buffer_bytes + self.saved_bytes


def _storage_key(t: torch.Tensor) -> int:
    return t.untyped_storage()._cdata


def count_costs(model: nn.Module, batch_size: int, input_size: Sequence[int]) -> ModelCost:
    """Count `model`'s parameters, buffers, saved tensors and FLOPs for one training step on a batch of
    `batch_size` inputs of `input_size` (C, H, W), on the model's device (meta counts without computing)."""
    from torch.utils.flop_counter import FlopCounterMode
    batch_size = positive_int('batch_size', batch_size)
    params = list(model.parameters())
    device = params[0].device
    own = {_storage_key(t) for t in (*params, *model.buffers())}
    saved: Dict[int, int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        key = _storage_key(t)
        if key not in own:
            saved[key] = t.untyped_storage().nbytes()
        return t

    x = torch.randn(batch_size, *input_size, device=device)
    target = torch.zeros(batch_size, dtype=torch.long, device=device)
    mode = model.training
    model.train()
    try:
        with FlopCounterMode(display=False) as counter:
            with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
                loss = F.cross_entropy(model(x), target)
            forward = counter.get_total_flops()
            loss.backward()
    finally:
        model.train(mode)
        model.zero_grad(set_to_none=True)
    return ModelCost(
        params=sum(p.numel() for p in params),
        param_bytes=sum(p.numel() * p.element_size() for p in params),
        buffer_bytes=sum(b.numel() * b.element_size() for b in model.buffers()),
        saved_bytes=sum(saved.values()), forward_flops=forward, train_flops=counter.get_total_flops())


def _train_step(model: nn.Module, optimizer: torch.optim.Optimizer, x: torch.Tensor, y: torch.Tensor) -> None:
    F.cross_entropy(model(x), y).backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)


def _sync(device: torch.device) -> None:
    if device.type == 'cuda':
        torch.cuda.synchronize(device)


def _tensor_bytes(tensors) -> int:
    return sum(t.numel() * t.element_size() for t in tensors if isinstance(t, torch.Tensor))


def _cuda_peak(model: nn.Module, optimizer: torch.optim.Optimizer, x: torch.Tensor, y: torch.Tensor) -> int:
    """Peak bytes this model alone would allocate during one training step (its AdamW state already exists):
    the step's peak above what was allocated before it (other models may be resident too), plus this model's own
    resident parameters, buffers and optimizer state."""
    torch.cuda.synchronize(x.device)
    before = torch.cuda.memory_allocated(x.device)
    torch.cuda.reset_peak_memory_stats(x.device)
    _train_step(model, optimizer, x, y)
    torch.cuda.synchronize(x.device)
    resident = _tensor_bytes(model.parameters()) + _tensor_bytes(model.buffers()) + _tensor_bytes(
        v for state in optimizer.state.values() for v in state.values()
        if isinstance(v, torch.Tensor) and v.device == x.device)  # AdamW keeps its step counts on the CPU
    return torch.cuda.max_memory_allocated(x.device) - before + resident + x.nbytes + y.nbytes


def time_steps(
        models: Dict[str, nn.Module],
        batch_size: int,
        input_size: Sequence[int],
        num_classes: int,
        steps: int,
        warmup: int = 2,
) -> Dict[str, List[float]]:
    """Seconds per training step (forward, backward, AdamW step) of each model, measured in turn: `warmup`
    rounds untimed, then `steps` rounds of one step per model, the order rotated each round, a line logged per
    round. Models are on their own devices (all the same); returns {name: [seconds of round 0, 1, …]}."""
    steps = integer('steps', steps, minimum=1)
    warmup = integer('warmup', warmup, minimum=0)
    if steps > MAX_STEPS:
        raise InvalidArgumentError(f'steps must be at most {MAX_STEPS}, got {steps}')
    names = list(models)
    device = next(iter(models[names[0]].parameters())).device
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(batch_size, *input_size, generator=gen).to(device)
    y = torch.randint(0, num_classes, (batch_size,), generator=gen).to(device)
    optimizers = {n: torch.optim.AdamW(m.parameters(), lr=1e-4) for n, m in models.items()}
    for m in models.values():
        m.train()
    times: Dict[str, List[float]] = {n: [] for n in names}
    for r in range(warmup + steps):
        order = names[r % len(names):] + names[:r % len(names)]
        elapsed = {}
        for n in order:
            _sync(device)
            start = time.perf_counter()
            _train_step(models[n], optimizers[n], x, y)
            _sync(device)
            elapsed[n] = time.perf_counter() - start
        if r >= warmup:
            for n in names:
                times[n].append(elapsed[n])
        _logger.info(f'round {r + 1}/{warmup + steps} ({"warm-up" if r < warmup else "timed"}): ' +
                     ', '.join(f'{n} {elapsed[n]:.3f} s' for n in names))
    return times


def _ratio_stats(times: Dict[str, List[float]], name: str, base: str) -> Tuple[float, float, float]:
    """(median, first quartile, third quartile) of the per-round ratio time[name] / time[base]."""
    ratios = sorted(a / b for a, b in zip(times[name], times[base]))
    if len(ratios) == 1:
        return ratios[0], ratios[0], ratios[0]
    q1, _, q3 = statistics.quantiles(ratios, n=4, method='inclusive')
    return statistics.median(ratios), q1, q3


def _fits(cost: ModelCost, device: torch.device) -> Tuple[bool, str]:
    """Whether the estimated training state fits in half of the device's memory, and if not why."""
    from ..sizes import device_memory
    available, what = device_memory(device)
    if cost.train_state_bytes <= available / 2:
        return True, ''
    return False, (f'not timed: its training state ({cost.train_state_bytes / 1e9:.3g} GB estimated) exceeds half '
                   f'of {what} ({available / 1e9:.3g} GB)')


def _count_row(size: CostSize, name: str, batch_size: int) -> Dict[str, Any]:
    """One model's counted row (its :class:`ModelCost` under ``_cost``), built on the meta device."""
    model = build_cost_model(size, name, 'meta')
    cost = count_costs(model, batch_size, (3, size.img_size, size.img_size))
    desc = model.describe()
    return dict(
        size=size.name, data=size.data, model=name, S=size.num_tokens, C=size.embed_dim, L=size.num_blocks,
        gamma=size.gamma, m=desc.width, omega=desc.omega, density=desc.density, batch_size=batch_size,
        params=cost.params, param_bytes=cost.param_bytes, buffer_bytes=cost.buffer_bytes,
        saved_bytes=cost.saved_bytes, train_state_bytes=cost.train_state_bytes,
        forward_flops_per_image=cost.forward_flops // batch_size,
        train_flops_per_image=cost.train_flops // batch_size, _cost=cost)


def _count_rows(size: CostSize, models: Sequence[str], batch_size: int) -> Dict[str, Dict[str, Any]]:
    """:func:`_count_row` of each model, a line logged per model counted."""
    rows = {}
    for name in models:
        rows[name] = row = _count_row(size, name, batch_size)
        _logger.info(f'{size.name} {name}: {row["params"]:,} parameters, {row["forward_flops_per_image"]:,} '
                     f'forward FLOPs per image (counted on the meta device)')
    return rows


def _timed_models(size: CostSize, rows: Dict[str, Dict[str, Any]], batch_size: int, device: torch.device
                  ) -> Dict[str, nn.Module]:
    """The models to time, built on `device`: the MLP-Mixer (the reference of every ratio) and those of `rows`
    whose training state fits; a row that does not fit gets a `note`. Empty when the MLP-Mixer does not fit."""
    timed = {}
    for name in dict.fromkeys(['mlp_mixer', *rows]):
        cost = rows[name]['_cost'] if name in rows else _count_row(size, name, batch_size)['_cost']
        fits, note = _fits(cost, device)
        if fits:
            timed[name] = build_cost_model(size, name, device)
        elif name in rows:
            rows[name]['note'] = note
    return timed if 'mlp_mixer' in timed else {}


def _measured_cuda_peak(model: nn.Module, size: CostSize, batch_size: int) -> int:
    device = next(iter(model.parameters())).device
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    x = torch.randn(batch_size, 3, size.img_size, size.img_size, device=device)
    y = torch.zeros(batch_size, dtype=torch.long, device=device)
    _train_step(model, opt, x, y)  # the optimizer's state exists from here on
    return _cuda_peak(model, opt, x, y)


def table_s3(
        sizes: Sequence[CostSize],
        models: Sequence[str] = COST_MODELS,
        batch_size: int = 32,
        steps: int = 10,
        warmup: int = 2,
        device: Any = 'cpu',
) -> List[Dict[str, Any]]:
    """One row per (size, model): counts (see the module doc) and, with `steps` > 0, the measured time per
    training step on `device` (each model's median and its per-round ratio to the MLP-Mixer's, which is then
    always measured). Models whose training state does not fit in half the device's memory are counted but not
    timed (their `note` says why). Logs a line per model counted and per round timed."""
    batch_size = positive_int('batch_size', batch_size)
    if batch_size > MAX_BATCH_SIZE:
        raise InvalidArgumentError(f'batch_size must be at most {MAX_BATCH_SIZE}, got {batch_size}')
    steps = integer('steps', steps, minimum=0)
    if steps > MAX_STEPS:
        raise InvalidArgumentError(f'steps must be at most {MAX_STEPS}, got {steps}')
    models = [choice('models', m, COST_MODELS) for m in models]
    if not models:
        raise InvalidArgumentError('models is empty: give one or more of ' + ', '.join(COST_MODELS))
    sizes = [s if isinstance(s, CostSize) else COST_SIZES[choice('sizes', s, tuple(COST_SIZES))] for s in sizes]
    device = torch.device(device)
    out = []
    for size in sizes:
        rows = _count_rows(size, models, batch_size)
        timed = _timed_models(size, rows, batch_size, device) if steps else {}
        times = time_steps(timed, batch_size, (3, size.img_size, size.img_size), size.num_classes, steps,
                           warmup) if timed else {}
        for name, row in rows.items():
            del row['_cost']
            row.update(device=str(device), threads=torch.get_num_threads() if device.type == 'cpu' else '',
                       steps=len(times.get(name, ())))
            if name in times:
                median, q1, q3 = _ratio_stats(times, name, 'mlp_mixer')
                row.update(step_seconds_median=statistics.median(times[name]), time_ratio_vs_mlp_mixer=median,
                           time_ratio_q1=q1, time_ratio_q3=q3)
                if device.type == 'cuda':
                    row['peak_train_bytes_measured'] = _measured_cuda_peak(timed[name], size, batch_size)
            out.append(_with_columns(row))
        timed.clear()
    return out


_COLUMNS = ('size', 'data', 'model', 'S', 'C', 'L', 'gamma', 'm', 'omega', 'density', 'batch_size', 'params',
            'param_bytes', 'buffer_bytes', 'saved_bytes', 'train_state_bytes', 'peak_train_bytes_measured',
            'forward_flops_per_image', 'train_flops_per_image', 'device', 'threads', 'steps', 'step_seconds_median',
            'time_ratio_vs_mlp_mixer', 'time_ratio_q1', 'time_ratio_q3', 'note')


def _with_columns(row: Dict[str, Any]) -> Dict[str, Any]:
    return {k: row.get(k, '') for k in _COLUMNS}


def _si(n: float, unit: str = '') -> str:
    for prefix, scale in (('T', 1e12), ('G', 1e9), ('M', 1e6), ('k', 1e3)):
        if abs(n) >= scale:
            return f'{n / scale:.3g} {prefix}{unit}'
    return f'{n:.3g} {unit}'.rstrip()


def _time_cells(r: Dict[str, Any]) -> Tuple[str, str]:
    if r['time_ratio_vs_mlp_mixer'] == '':
        return r['note'] or 'not timed', ''
    where = f'{r["device"]}, {r["threads"]} thread{"s" if r["threads"] != 1 else ""}' if r['threads'] else r['device']
    return (f'{r["time_ratio_vs_mlp_mixer"]:.3f} ({r["time_ratio_q1"]:.3f}–{r["time_ratio_q3"]:.3f})',
            f'{r["step_seconds_median"]:.3g} s ({where}, batch {r["batch_size"]})')


_COST_COLUMNS = ('size', 'model', 'parameters', 'params + buffers', 'of which buffers', 'saved for backward (batch)',
                 'training state of a step (est.)', 'fwd FLOPs / image', 'train FLOPs / image',
                 "time / step ÷ MLP-Mixer's (IQR)", 'time / step', 'paper: memory, FLOPs, runtime')


def cost_markdown(rows: Sequence[Dict[str, Any]]) -> str:
    """Table S.3 as a markdown table of `table_s3`'s rows (bytes and FLOPs with SI prefixes, powers of 1000)."""
    cells = []
    for r in rows:
        ratio, seconds = _time_cells(r)
        cells.append([f'{r["size"]} (S={r["S"]}, C={r["C"]}, L={r["L"]}, γ={r["gamma"]:g})', MODEL_LABELS[r['model']],
                      f'{r["params"]:,}', _si(r['param_bytes'] + r['buffer_bytes'], 'B'), _si(r['buffer_bytes'], 'B'),
                      _si(r['saved_bytes'], 'B'), f'{_si(r["train_state_bytes"], "B")} at batch {r["batch_size"]}',
                      _si(r['forward_flops_per_image']), _si(r['train_flops_per_image']), ratio, seconds,
                      ', '.join(v for v in PAPER_TABLE_S3.get((r['size'], r['model']), ()) if v)])
    return markdown_table(_COST_COLUMNS, cells) + '\n'
