"""RP's cost on real work: the time of a training step of the RP S-Mixer against its normal twin (CPU or GPU), on the
Fashion-MNIST recipe's model and batch (`fashion_mnist/s_mixer_fig7`: the S-Mixer S = C = 64, L = 8, one input
channel, 10 classes, batch 128, Nesterov SGD as the recipe sets it), and per epoch (60,000 images: 468 steps).

Both models are built, warmed up and timed in one process at one thread, in interleaved repetitions (the order
reversed every other one); each repetition times `--steps` steps of each with ``time.process_time`` (this process's
CPU time: on a machine whose other cores are busy it counts this work alone). A figure is the median over the
repetitions, a ratio the median of the per-repetition ratios, with its interquartile range. Two modes: ``eager``,
and ``compile``: the model wrapped in ``torch.compile`` as timm's train.py does for ``--torchcompile`` (inductor,
default mode; the optimizer step stays eager). The step is train.py's: forward, cross-entropy, backward, optimizer
step, on a fixed random batch (no data loading, the same for both models).

    python benchmarks/speed/rp_cost.py                      # eager and compile; writes benchmarks/speed/rp_cost/
    python benchmarks/speed/rp_cost.py --quick              # fewer repetitions
    python benchmarks/speed/rp_cost.py --modes eager --profile   # and where each step spends its CPU
    python benchmarks/speed/rp_cost.py --device cuda --out-dir benchmarks/speed/rp_cost_gpu   # Table S.3's setting
    python benchmarks/speed/rp_cost.py --data-dir data/fmnist   # and whole epochs of real training (Table S.3's unit)

With ``--data-dir`` (a prepared Fashion-MNIST) each mode also times whole training epochs, wall clock: the recipe's
training loader as train.py builds it (timm's create_dataset / create_loader, ``--loader-workers`` processes),
each model in turn (the order reversed every other epoch), so loading counts as it does in a real epoch.

On a GPU (``--device cuda``) a step's time is wall-clock time with the device synchronized before and after each
repetition's steps (``time.perf_counter``), not process CPU time: the GPU's work is what the step waits for.

In eager mode on the CPU a third arm runs in the same repetitions: the RP model with every gather replaced by a copy
of the same tensor (values not permuted), which bounds what any faster gather kernel could give the step.

Writes ``rp_cost.md`` (the tables, the environment, and with ``--profile`` the operators whose CPU time differs
most between the two models) and ``rp_cost.json`` (every measurement) into ``--out-dir``; prints the Markdown.
"""
import argparse
import contextlib
import itertools
import json
import os
import platform
import statistics
import time
from pathlib import Path
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

import timm
import torch
import torch.nn.functional as F
from timm.optim import create_optimizer_v2

import timm_pkmixer  # noqa: F401  (registers the models)
from timm_pkmixer.layers.gather import _backend, _flat, _shaped, gather_spec, tuned_choices, use_gather_backend
from timm_pkmixer.sweeps.recipes import load_recipe, resolve_recipe

RECIPE = 'fashion_mnist/s_mixer_fig7'
# the models timed: the recipe's S-Mixer, and Table S.3's small MLP-Mixer (S = 64, C = 48, L = 3, γ = 2; CIFAR's
# 3 × 32 px, P = 4), each with the recipe's optimiser and batch
MODELS = ('s_mixer', 'table_s3')
TRAIN_IMAGES = 60000  # Fashion-MNIST's training set: an epoch is TRAIN_IMAGES // batch steps (train.py drops the last)
CPU = torch.device('cpu')
TARGET = 1.05  # RP / normal per epoch; the paper's Table S.3: +5.4 % (V100)
TARGETS = {'s_mixer': 1.10, 'table_s3': 1.05}  # issue 44's targets for a CPU eager step at one thread
HOST_TARGET = 1.25  # one permutation's forward + backward host cost at (2, 64), against a plain index_select


def model_recipe(recipe: Dict[str, Any], model: str) -> Dict[str, Any]:
    """The recipe with its model replaced by one of MODELS ('s_mixer': the recipe's own)."""
    if model == 's_mixer':
        return recipe
    from timm_pkmixer.analysis.cost import COST_SIZES, cost_model_args
    name, kwargs = cost_model_args(COST_SIZES['table-s3-small'], 'mlp_mixer')
    kwargs = {k: v for k, v in kwargs.items() if k not in ('permutation', 'num_classes')}
    return dict(recipe, model=name, model_kwargs=kwargs, in_chans=3, num_classes=10, img_size=kwargs['img_size'])


def build(recipe: Dict[str, Any], permutation: str,
          device: torch.device = CPU) -> Tuple[torch.nn.Module, torch.optim.Optimizer]:
    """The recipe's model (with `permutation`) on `device` and its optimizer, as train.py creates them."""
    torch.manual_seed(0)
    model = timm.create_model(recipe['model'], num_classes=recipe['num_classes'], in_chans=recipe['in_chans'],
                              permutation=permutation, **(recipe.get('model_kwargs') or {}))
    model.to(device).train()
    optimizer = create_optimizer_v2(model, opt=recipe['opt'], lr=recipe['lr'], momentum=recipe.get('momentum', 0.9),
                                    weight_decay=recipe['weight_decay'])
    return model, optimizer


class Stepper:
    """One model's training step (train.py's: forward, loss, backward, optimizer step) on a fixed batch."""

    def __init__(self, recipe: Dict[str, Any], permutation: str, mode: str, batch: int,
                 device: torch.device = CPU):
        self.device = device
        self.model, self.optimizer = build(recipe, permutation, device)
        self.name = f'{recipe["model"]} permutation={permutation}'
        self.forward = torch.compile(self.model) if mode == 'compile' else self.model
        gen = torch.Generator().manual_seed(1)
        size = recipe['img_size']
        self.x = torch.randn(batch, recipe['in_chans'], size, size, generator=gen).to(device)
        self.y = torch.randint(0, recipe['num_classes'], (batch,), generator=gen).to(device)

    def step(self, x: Optional[torch.Tensor] = None, y: Optional[torch.Tensor] = None) -> None:
        """One training step on (x, y), by default the fixed batch."""
        self.optimizer.zero_grad(set_to_none=True)
        loss = F.cross_entropy(self.forward(self.x if x is None else x), self.y if y is None else y)
        loss.backward()
        self.optimizer.step()

    def epoch_seconds(self, loader: Iterable, batches: Optional[int] = None) -> float:
        """Wall-clock seconds of one pass over `loader` (its first `batches`; its workers' loading included), the
        device synchronized."""
        synchronize(self.device)
        start = time.perf_counter()
        for x, y in itertools.islice(loader, batches):
            self.step(x.to(self.device, non_blocking=True), y.to(self.device, non_blocking=True))
        synchronize(self.device)
        return time.perf_counter() - start

    def time_per_step(self, steps: int) -> float:
        """Seconds per step: this process's CPU time on a CPU, synchronized wall-clock time on a GPU."""
        clock = time.process_time if self.device.type == 'cpu' else time.perf_counter
        synchronize(self.device)
        start = clock()
        for _ in range(steps):
            self.step()
        synchronize(self.device)
        return (clock() - start) / steps


def copy_kernel(x: torch.Tensor, index: torch.Tensor, out_shape: Sequence[int]) -> torch.Tensor:
    """A stand-in for the gather that moves the same bytes in order: a contiguous copy of x's (B, m) flattening, as
    (B, *out_shape). Its values are wrong (nothing is permuted): it times what an RP step would cost with a gather as
    fast as a copy."""
    return _shaped(_flat(x, index.shape[0]).clone(memory_format=torch.contiguous_format), out_shape)


# A gather backend (GATHER_TABLE's signature) running copy_kernel through the package's own backend factory: the RP
# model's every dispatch, autograd Function and backward, with the gathers' memory access made sequential (eager only).
copy_gather = _backend(copy_kernel, copy_kernel)


class CopyStepper(Stepper):
    """The RP model's step with every gather replaced by a copy (:func:`copy_gather`)."""

    def step(self, x: Optional[torch.Tensor] = None, y: Optional[torch.Tensor] = None) -> None:
        with use_gather_backend(copy_gather, 'cpu', ('eager',)):  # the function: a script has no import path
            super().step(x, y)


def synchronize(device: torch.device) -> None:
    """Wait for `device`'s queued work (a CUDA device; a CPU has none)."""
    if device.type == 'cuda':
        torch.cuda.synchronize(device)


def quartiles(values: Sequence[float]) -> Tuple[float, float, float]:
    q = statistics.quantiles(values, n=4, method='inclusive') if len(values) > 1 else [values[0]] * 3
    return q[0], statistics.median(values), q[2]


def epoch_loader(recipe: Dict[str, Any], batch: int, data_dir: str, workers: int, device: torch.device) -> Iterable:
    """The recipe's training loader as train.py builds it (timm's create_dataset / create_loader: its dataset, crop
    mode, flip, jitter, AutoAugment, interpolation, mean and std, the prefetcher), over the prepared `data_dir`."""
    from timm.data import create_dataset, create_loader
    dataset = create_dataset(recipe['dataset'], root=data_dir, split=recipe['train_split'], is_training=True,
                             download=False)
    size = recipe['img_size']
    return create_loader(dataset, input_size=(recipe['in_chans'], size, size), batch_size=batch, is_training=True,
                         train_crop_mode=recipe.get('train_crop_mode'), hflip=recipe.get('hflip', 0.5),
                         color_jitter=recipe.get('color_jitter', 0.4), auto_augment=recipe.get('aa'),
                         interpolation=recipe.get('train_interpolation', 'random'), mean=tuple(recipe['mean']),
                         std=tuple(recipe['std']), num_workers=workers, device=device, persistent_workers=workers > 0)


def measure_epochs(steppers: Dict[str, 'Stepper'], loader: Iterable, batch: int, reps: int,
                   batches: Optional[int]) -> Dict[str, Any]:
    """Wall seconds per pass over `loader` of each model, alternating (the order reversed every other repetition),
    after one batch that starts the loader's workers; and the per-repetition ratios."""
    next(iter(loader))  # a persistent loader's workers start here, not in the first timed epoch
    times: Dict[str, List[float]] = {p: [] for p in steppers}
    for rep in range(reps):
        for p in (('normal', 'random') if rep % 2 == 0 else ('random', 'normal')):
            times[p].append(steppers[p].epoch_seconds(loader, batches))
    steps = min(len(loader), batches or len(loader))
    return dict(reps=reps, steps=steps, images=steps * batch, seconds=times,
                ratios=[r / n for r, n in zip(times['random'], times['normal'])])


def measure(recipe: Dict[str, Any], mode: str, batch: int, reps: int, steps: int, warmup: int,
            device: torch.device = CPU, loader: Optional[Iterable] = None, epoch_reps: int = 0,
            epoch_batches: Optional[int] = None) -> Dict[str, Any]:
    """Seconds per step of each model (CPU time; on a GPU, wall time) in `reps` interleaved repetitions, and the
    per-repetition ratios; with a `loader`, also whole epochs (:func:`measure_epochs`)."""
    steppers = {p: Stepper(recipe, p, mode, batch, device) for p in ('normal', 'random')}
    oracle = mode == 'eager' and device.type == 'cpu'
    if oracle:  # the RP model again, each gather replaced by a copy: the floor of any faster gather kernel
        steppers['copies'] = CopyStepper(recipe, 'random', mode, batch, device)
    t0 = time.time()
    for s in steppers.values():  # warm-up (compile: the compilation itself)
        for _ in range(warmup):
            s.step()
    synchronize(device)
    warm_s = time.time() - t0
    times: Dict[str, List[float]] = {p: [] for p in steppers}
    for rep in range(reps):
        order = list(steppers) if rep % 2 == 0 else list(steppers)[::-1]
        for p in order:
            times[p].append(steppers[p].time_per_step(steps))
    ratios = [r / n for r, n in zip(times['random'], times['normal'])]
    if oracle:
        steppers.pop('copies')
    result = dict(mode=mode, reps=reps, steps=steps, warmup=warmup, warmup_wall_s=warm_s,
                  clock='process CPU' if device.type == 'cpu' else 'wall, synchronized', seconds_per_step=times,
                  ratios=ratios, params={p: sum(t.numel() for t in s.model.parameters()) for p, s in steppers.items()})
    if oracle:
        result['copy_ratios'] = [c / n for c, n in zip(times['copies'], times['normal'])]
    if loader is not None and epoch_reps:
        result['epochs'] = measure_epochs(steppers, loader, batch, epoch_reps, epoch_batches)
    return result


def profile(recipe: Dict[str, Any], mode: str, batch: int, steps: int, rounds: int = 3) -> Dict[str, Dict[str, float]]:
    """Self CPU time (ms per step) of every operator of each model's step (torch.profiler, after a warm-up): the
    two models profiled in turn `rounds` times, each operator's minimum kept (a busy machine's preemptions inflate
    single profiles at random)."""
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile
    steppers = {p: Stepper(recipe, p, mode, batch) for p in ('normal', 'random')}
    for s in steppers.values():
        for _ in range(3):
            s.step()
    out: Dict[str, Dict[str, float]] = {p: {} for p in steppers}
    for _ in range(rounds):
        for p, s in steppers.items():
            with torch_profile(activities=[ProfilerActivity.CPU]) as prof:
                for _ in range(steps):
                    s.step()
            for e in prof.key_averages():
                ms = e.self_cpu_time_total / 1000 / steps
                out[p][e.key] = min(out[p].get(e.key, ms), ms)
    return out


def permutation_ops(recipe: Dict[str, Any], batch: int, reps: int = 7, calls: int = 100) -> Dict[str, Any]:
    """What one permutation costs on this (B, m): the normal model's transpose copy (J_c) against the gathers an RP
    layer can use (µs per call, median over `reps`), and how many of each a forward pass makes."""
    from timm_pkmixer.layers.permutation import FixedPermutation, Transpose
    rp, _ = build(recipe, 'random')
    normal, _ = build(recipe, 'normal')
    d = rp.describe()
    x = torch.randn(batch, d.num_tokens * d.dim)
    index = torch.randperm(x.shape[1])
    expanded, out = index.expand(batch, -1), torch.empty_like(x)
    cases = {'transpose copy (normal: J_c)': lambda: x.view(batch, d.num_tokens, d.dim).transpose(1, 2).contiguous(),
             'index_select along features (RP)': lambda: torch.index_select(x, 1, index, out=out),
             'expanded torch.gather (RP)': lambda: torch.gather(x, 1, expanded, out=out),
             'plain copy (for scale)': lambda: out.copy_(x)}
    times = {}
    for name, f in cases.items():
        for _ in range(10):
            f()
        runs = []
        for _ in range(reps):
            start = time.process_time()
            for _ in range(calls):
                f()
            runs.append((time.process_time() - start) / calls * 1e6)
        times[name] = statistics.median(runs)
    counts = dict(transposes=sum(isinstance(m, Transpose) for m in normal.modules()),
                  gathers=sum(isinstance(m, FixedPermutation) for m in rp.modules()))
    return dict(shape=list(x.shape), us_per_call=times, per_forward=counts)


class _BareGather(torch.autograd.Function):
    """The least a permutation written in Python can be: an old-style Function whose forward is one index_select and
    whose backward is one index_select by the inverse (no reshape, no dispatch, no kernel choice)."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, index: torch.Tensor, inverse: torch.Tensor) -> torch.Tensor:
        ctx.inverse = inverse
        return torch.index_select(x, 1, index)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        return torch.index_select(grad, 1, ctx.inverse), None, None


def host_cost(reps: int = 25, calls: int = 200) -> Dict[str, Any]:
    """Host cost of one permutation, forward and backward, on a tiny (2, 64) batch, against a plain index_select
    with autograd's own backward, each followed by the same sum().backward(): µs per call (the minimum over `reps`
    interleaved repetitions of `calls` calls) and the per-repetition ratios to the plain one, at one thread."""
    from timm_pkmixer.layers.gather import permute
    from timm_pkmixer.layers.permutation import FixedPermutation
    perm = FixedPermutation(64, (8, 8), seed=0, key='host')
    index, inverse = perm.index, perm.inverse
    x = torch.randn(2, 64, requires_grad=True)
    x3 = torch.randn(2, 8, 8, requires_grad=True)
    cases = {'sum().backward() alone': lambda: x.sum().backward(),
             'plain: x.index_select(1, i), autograd backward': lambda: x.index_select(1, index).sum().backward(),
             'floor: a bare autograd.Function around index_select': (
                 lambda: _BareGather.apply(x, index, inverse).sum().backward()),
             'permute(x, i, inverse, [64])': lambda: permute(x, index, inverse, [64]).sum().backward(),
             'plain, shaped (2, 8, 8)': lambda: x.index_select(1, index).view(2, 8, 8).sum().backward(),
             'permute(x, i, inverse, [8, 8])': lambda: permute(x, index, inverse, [8, 8]).sum().backward(),
             'FixedPermutation module, (2, 8, 8)': lambda: perm(x3).sum().backward()}
    runs: Dict[str, List[float]] = {k: [] for k in cases}
    for f in cases.values():
        for _ in range(20):
            f()
    for rep in range(reps):
        for name in (list(cases) if rep % 2 == 0 else list(cases)[::-1]):
            start = time.perf_counter()
            for _ in range(calls):
                cases[name]()
            runs[name].append((time.perf_counter() - start) / calls * 1e6)
    base, base8 = runs['plain: x.index_select(1, i), autograd backward'], runs['plain, shaped (2, 8, 8)']
    ratios = {'floor: a bare autograd.Function around index_select': base,
              'permute(x, i, inverse, [64])': base, 'permute(x, i, inverse, [8, 8])': base8,
              'FixedPermutation module, (2, 8, 8)': base8}
    return dict(us=runs, ratios={k: [a / b for a, b in zip(runs[k], ref)] for k, ref in ratios.items()})


GATHER_SHAPES = ((2, 64), (128, 4096), (256, 1024), (8, 100352), (1, 150528))


def _take_columns(x: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """x[:, index], for inductor to generate its own CPU gather kernel from (the 'inductor kernel' column)."""
    return x[:, index]


def _gather_cases(b: int, m: int, dtype: torch.dtype) -> Dict[str, Any]:
    from timm_pkmixer.layers.gather import permute
    x = torch.randn(b, m).to(dtype)
    index = torch.randperm(m, generator=torch.Generator().manual_seed(0)).int()
    inverse = torch.argsort(index.long()).int()
    out = torch.empty_like(x)
    expanded = index.long().expand(b, -1)
    cols = 64 if m % 64 == 0 else 1
    torch._dynamo.reset()  # a fresh graph per case: dynamo's recompile limit would otherwise fall back to eager
    inductor = torch.compile(_take_columns, dynamic=False)
    long_index = index.long()
    inductor(x, long_index)  # compiled here, not in the timed calls
    return {'ours (tuned)': lambda: permute(x, index, inverse, [m]),
            'index_select': lambda: torch.index_select(x, 1, index, out=out),
            'expanded gather': lambda: torch.gather(x, 1, expanded, out=out),
            'inductor kernel': lambda: inductor(x, long_index),
            'transpose copy': lambda: x.view(b, -1, cols).transpose(1, 2).contiguous(),
            'copy': lambda: out.copy_(x)}


def gather_speed(threads: Sequence[int], reps: int = 7, calls: int = 20) -> List[Dict[str, Any]]:
    """The CPU gather against copy speed: µs per call (minimum over `reps`) of the package's eager gather (no grad:
    the kernel alone, as the tuned backend picks it), index_select, the expanded torch.gather, a transpose copy and a
    plain copy of the same (B, m) tensor, float32 and bfloat16, at each thread count; and inductor's own kernel for
    ``x[:, index]`` (torch.compile, the C++ it generates for this CPU), the kernel an eager backend could call."""
    rows = []
    for t, (b, m), dtype in itertools.product(threads, GATHER_SHAPES, (torch.float32, torch.bfloat16)):
        torch.set_num_threads(t)
        cases = _gather_cases(b, m, dtype)
        best = {k: float('inf') for k in cases}
        for f in cases.values():
            f()
        for _ in range(reps):
            for name, f in cases.items():
                start = time.perf_counter()
                for _ in range(calls):
                    f()
                best[name] = min(best[name], (time.perf_counter() - start) / calls * 1e6)
        rows.append(dict(threads=t, shape=[b, m], dtype=str(dtype).replace('torch.', ''), us=best))
    return rows


def fmt(q: Tuple[float, float, float], scale: float = 1.0, digits: int = 1) -> str:
    lo, mid, hi = (v * scale for v in q)
    return f'{mid:.{digits}f} [{lo:.{digits}f}, {hi:.{digits}f}]'


def markdown(results: List[Dict[str, Any]], env: Dict[str, Any], batch: int,
             profiles: Dict[str, Dict[str, Dict[str, float]]], ops: Dict[str, Any],
             host: Optional[Dict[str, Any]] = None, gathers: Sequence[Dict[str, Any]] = ()) -> str:
    steps_per_epoch = TRAIN_IMAGES // batch
    where = ('CPU time' if env['device'] == 'cpu' else f'{env["device"]}: wall-clock time, the GPU synchronized,')
    lines = [f'RP against normal: the S-Mixer of `{RECIPE}` (S = C = 64, L = 8) and Table S.3\'s MLP-Mixer (S = 64, '
             f'C = 48, L = 3, γ = 2), batch {batch}, the recipe\'s optimiser; {where} per training step (ms; median '
             f'[IQR] over the repetitions) and per epoch of {TRAIN_IMAGES} images ({steps_per_epoch} steps, '
             f'extrapolated), and the ratio RP / normal (median of the per-repetition ratios [IQR]); the targets '
             f'(issue 44, eager, one thread): S-Mixer ≤ {TARGETS["s_mixer"]}, Table S.3 ≤ {TARGETS["table_s3"]}.',
             '', '| model | threads | mode | normal ms/step | RP ms/step | normal s/epoch | RP s/epoch | RP / normal |',
             '|---|---|---|---|---|---|---|---|']
    for r in results:
        n, p, ratio = (quartiles(r['seconds_per_step']['normal']), quartiles(r['seconds_per_step']['random']),
                       quartiles(r['ratios']))
        lines.append(f'| {r.get("model", "s_mixer")} | {r.get("threads", env["threads"])} | {r["mode"]} '
                     f'({r["reps"]} × {r["steps"]} steps) | {fmt(n, 1e3)} | {fmt(p, 1e3)} | '
                     f'{n[1] * steps_per_epoch:.1f} | {p[1] * steps_per_epoch:.1f} | {fmt(ratio, digits=3)} |')
    oracles = [r for r in results if 'copy_ratios' in r]
    if oracles:
        lines += ['', 'What a faster gather kernel could give: the RP step again with every gather replaced by a copy '
                      'of the same tensor (the same Function, dispatch and backward; sequential memory access, values '
                      'not permuted), timed in the same interleaved repetitions (eager, ms per step, median [IQR]); '
                      '"copies / normal" is the floor of RP / normal for any gather kernel in this eager step:', '',
                  '| model | threads | normal | RP | RP, gathers as copies | RP / normal | copies / normal |',
                  '|---|---|---|---|---|---|---|']
        for r in oracles:
            sec = r['seconds_per_step']
            lines.append(f'| {r.get("model", "s_mixer")} | {r.get("threads", env["threads"])} | '
                         f'{fmt(quartiles(sec["normal"]), 1e3)} | {fmt(quartiles(sec["random"]), 1e3)} | '
                         f'{fmt(quartiles(sec["copies"]), 1e3)} | {fmt(quartiles(r["ratios"]), digits=3)} | '
                         f'{fmt(quartiles(r["copy_ratios"]), digits=3)} |')
    if host:
        host_reps = len(next(iter(host['us'].values())))
        lines += ['', f'Host cost of one permutation, forward + backward, on a (2, 64) batch, each followed by the '
                      f'same sum().backward(), one thread: µs per call (minimum over {host_reps} '
                      f'interleaved repetitions) and the ratio to the plain index_select of the same output shape '
                      f'(median of the per-repetition ratios [IQR]); target ≤ {HOST_TARGET}:', '',
                  '| call | µs | / plain |', '|---|---|---|']
        for name, us in host['us'].items():
            ratio = fmt(quartiles(host['ratios'][name]), digits=2) if name in host['ratios'] else ''
            lines.append(f'| {name} | {min(us):.1f} | {ratio} |')
    if gathers:
        names = list(gathers[0]['us'])
        lines += ['', 'The CPU gather against copy speed: µs per call (minimum over 7 repetitions) of one (B, m) '
                      'tensor; ours is the eager backend without gradient (the tuned kernel alone); the inductor '
                      'kernel is the C++ torch.compile generates for x[:, index], called through its compiled '
                      'wrapper:', '',
                  '| threads | (B, m) | dtype | ' + ' | '.join(names) + ' | ours / copy | ours / transpose |',
                  '|---|---|---|' + '---|' * (len(names) + 2)]
        for g in gathers:
            us = g['us']
            lines.append(f'| {g["threads"]} | ({g["shape"][0]}, {g["shape"][1]}) | {g["dtype"]} | '
                         + ' | '.join(f'{us[k]:.1f}' for k in names)
                         + f' | {us["ours (tuned)"] / us["copy"]:.1f} | '
                         + f'{us["ours (tuned)"] / us["transpose copy"]:.2f} |')
    epochs = [r for r in results if 'epochs' in r]
    if epochs:
        e0 = epochs[0]['epochs']
        lines += ['', f'Whole epochs of real training: {e0["images"]} Fashion-MNIST images ({e0["steps"]} steps) '
                      f'through the recipe\'s training loader ({env["loader_workers"]} loading worker'
                      f'{"s" if env["loader_workers"] != 1 else ""}), the two '
                      f'models alternating; wall-clock seconds per epoch (median [IQR]) and RP / normal:', '',
                  '| mode | normal s/epoch | RP s/epoch | RP / normal | ≤ 1.05 |', '|---|---|---|---|---|']
        for r in epochs:
            e = r['epochs']
            n, p, ratio = (quartiles(e['seconds']['normal']), quartiles(e['seconds']['random']),
                           quartiles(e['ratios']))
            lines.append(f'| {r["mode"]} ({e["reps"]} epochs each) | {fmt(n, digits=2)} | {fmt(p, digits=2)} | '
                         f'{fmt(ratio, digits=3)} | {"met" if ratio[1] <= TARGET else "not met"} |')
    if ops:
        lines += ['', f'One permutation of a ({ops["shape"][0]}, {ops["shape"][1]}) batch (µs of CPU per call, '
                      f'median); a forward pass makes {ops["per_forward"]["transposes"]} transposes (normal) or '
                      f'{ops["per_forward"]["gathers"]} gathers (RP), the backward as many again:', '',
                  '| operation | µs |', '|---|---|']
        lines += [f'| {name} | {us:.0f} |' for name, us in ops['us_per_call'].items()]
    lines += ['', 'Environment: ' + ', '.join(f'{k} {v}' for k, v in env.items())]
    for mode, prof in profiles.items():
        diff = sorted(set(prof['normal']) | set(prof['random']),
                      key=lambda k: -abs(prof['random'].get(k, 0.) - prof['normal'].get(k, 0.)))
        total = {p: sum(v.values()) for p, v in prof.items()}
        lines += ['', f'Profile ({mode}; self CPU ms per step, torch.profiler): normal {total["normal"]:.1f}, RP '
                      f'{total["random"]:.1f}; the operators that differ most:', '',
                  '| operator | normal | RP | RP − normal |', '|---|---|---|---|']
        for k in diff[:12]:
            a, b = prof['normal'].get(k, 0.), prof['random'].get(k, 0.)
            lines.append(f'| `{k}` | {a:.2f} | {b:.2f} | {b - a:+.2f} |')
    return '\n'.join(lines) + '\n'


def main(argv: Sequence[str] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--modes', nargs='+', choices=('eager', 'compile'), default=['eager', 'compile'])
    parser.add_argument('--models', nargs='+', choices=MODELS, default=list(MODELS))
    parser.add_argument('--threads', nargs='+', type=int, default=sorted({1, os.cpu_count() or 1}),
                        help='CPU thread counts to time at (default: 1 and all cores)')
    parser.add_argument('--no-micro', action='store_true',
                        help='leave out the host-cost and gather-speed tables (CPU only)')
    parser.add_argument('--reps', type=int, default=15, help='interleaved repetitions (default 15)')
    parser.add_argument('--steps', type=int, default=5, help='steps per model per repetition (default 5)')
    parser.add_argument('--warmup', type=int, default=5, help='warm-up steps per model (default 5)')
    parser.add_argument('--quick', action='store_true', help='5 repetitions of 3 steps')
    parser.add_argument('--batch-size', type=int, default=None, help="default: the recipe's (128)")
    parser.add_argument('--profile', action='store_true',
                        help="also profile each model's step per mode, and time one permutation of each kind")
    parser.add_argument('--gather', default=None, choices=('tuned', 'index_select', 'gather'),
                        help="the RP model's eager gather backend (default: the package's table: tuned)")
    parser.add_argument('--device', default='cpu', help="'cpu' (default) or a CUDA device ('cuda', 'cuda:1')")
    parser.add_argument('--data-dir', default=None,
                        help='also time whole epochs of real training on this prepared Fashion-MNIST '
                             '(pkmixer prepare-fashion-mnist DIR)')
    parser.add_argument('--epoch-reps', type=int, default=3, help='epochs of each model per mode (default 3)')
    parser.add_argument('--epoch-batches', type=int, default=None,
                        help='cut each epoch to its first N batches (default: the whole training set)')
    parser.add_argument('--loader-workers', type=int, default=4,
                        help="data-loading worker processes (default 4, train.py's --workers default)")
    parser.add_argument('--out-dir', default=str(Path(__file__).with_name('rp_cost')))
    args = parser.parse_args(argv)
    if args.data_dir is not None and not Path(args.data_dir).is_dir():
        parser.error(f'--data-dir {args.data_dir}: no such folder (prepare it with pkmixer prepare-fashion-mnist)')
    try:
        device = torch.device(args.device)
    except RuntimeError:
        parser.error(f'--device {args.device}: not a device name (cpu, cuda, cuda:1)')
    if device.type not in ('cpu', 'cuda'):
        parser.error(f'--device {args.device}: a CPU or a CUDA device')
    if device.type == 'cuda' and not torch.cuda.is_available():
        parser.error(f'--device {args.device}: this machine has no CUDA device')
    if device.type == 'cuda' and (args.profile or args.gather):
        parser.error('--profile and --gather time CPU work only: leave them out with --device cuda')
    if args.quick:
        args.reps, args.steps = 5, 3
    recipe = load_recipe(str(resolve_recipe(RECIPE)))
    batch = args.batch_size or recipe['batch_size']
    load = os.getloadavg()
    with use_gather_backend(args.gather, 'cpu', ('eager',)) if args.gather else contextlib.nullcontext():
        loader = (epoch_loader(recipe, batch, args.data_dir, args.loader_workers, device) if args.data_dir else
                  None)
        results = []
        for model, threads, mode in itertools.product(args.models, args.threads, args.modes):
            torch.set_num_threads(threads)
            r = measure(model_recipe(recipe, model), mode, batch, args.reps, args.steps, args.warmup, device,
                        loader if model == 's_mixer' else None, args.epoch_reps, args.epoch_batches)
            results.append(dict(r, model=model, threads=threads))
        torch.set_num_threads(1)
        micro = device.type == 'cpu' and not args.no_micro
        host = host_cost() if micro else {}
        gathers = gather_speed(args.threads) if micro else []
        torch.set_num_threads(1)
        profiles = {mode: profile(recipe, mode, batch, 3) for mode in args.modes} if args.profile else {}
        ops = permutation_ops(recipe, batch) if args.profile else {}
        backend = gather_spec(device.type, 'eager')
    chosen = ', '.join(f'tuned for ({k[2]}, {k[3]}): {v}' for k, v in tuned_choices().items() if k[0] == device.type)
    env = dict(device='cpu' if device.type == 'cpu' else torch.cuda.get_device_name(device),
               threads=' and '.join(map(str, args.threads)), gather=backend + (f' ({chosen})' if chosen else ''),
               **(dict(loader_workers=args.loader_workers) if args.data_dir else {}), torch=torch.__version__,
               timm=timm.__version__,
               cpu=platform.processor() or platform.machine(), cores=os.cpu_count(),
               load=f'{load[0]:.1f} before, {os.getloadavg()[0]:.1f} after',
               date=time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime()))
    text = markdown(results, env, batch, profiles, ops, host, gathers)
    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / 'rp_cost.md').write_text(text, encoding='utf-8')
    (out / 'rp_cost.json').write_text(json.dumps(dict(recipe=RECIPE, batch=batch, env=env, results=results,
                                                      profiles=profiles, permutation_ops=ops, host_cost=host,
                                                      gather_speed=gathers), indent=1),
                                      encoding='utf-8')
    print(text, end='')


if __name__ == '__main__':
    main()
