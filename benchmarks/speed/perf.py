"""Performance of the PK family side by side with timm's Mixer and the paper (Table S.3).

Every figure is a ratio (or a throughput) measured in one process, side by side: warm-up, then
repetitions that interleave the compared variants (the order reversed every other repetition), and
medians. A ratio is the median of the per-repetition ratios, with its interquartile range.

    python benchmarks/speed/perf.py                      # everything, CPU fp32, at 1 thread and at all threads
    python benchmarks/speed/perf.py --quick              # fewer repetitions, smaller compile/construction cases
    python benchmarks/speed/perf.py --only op,step       # sections: op, step, memory, compile, construct
    python benchmarks/speed/perf.py --threads 1          # one thread count only (default: 1 and os.cpu_count())
    python benchmarks/speed/perf.py --device cuda --dtype bfloat16 --batch-size 128   # on a GPU (bf16 autocast)

Markdown tables go to stdout; ``--json PATH`` also writes the raw numbers with the environment.
"""
import argparse
import contextlib
import gc
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np
import timm
import torch
import torch.nn as nn
import torch.nn.functional as F

import timm_pkmixer  # noqa: F401  (registers the models)
from timm_pkmixer.layers.gather import gather_spec, tuned_choices, use_gather_backend
from timm_pkmixer.layers.permutation import FixedPermutation
from timm_pkmixer.markdown import markdown_table

SECTIONS = ('op', 'step', 'memory', 'compile', 'construct')
TIMM_MIXER_B16_TRAIN_3090 = 528  # img/s, timm's published benchmark (AMP, RTX 3090), for scale only


# ---------------------------------------------------------------- measurement


class Bench:
    """Device, dtype and timing protocol shared by the sections."""

    def __init__(self, device: str, dtype: str, reps: int, warmup: int) -> None:
        self.device = torch.device(device)
        self.amp = dtype == 'bfloat16'
        self.reps = reps
        self.warmup = warmup

    def sync(self) -> None:
        if self.device.type == 'cuda':
            torch.cuda.synchronize(self.device)

    def autocast(self):
        if self.amp:
            return torch.autocast(self.device.type, dtype=torch.bfloat16)
        return contextlib.nullcontext()

    def interleaved(self, fns: Dict[str, Callable[[], None]], reps: Optional[int] = None,
                    warmup: Optional[int] = None) -> Dict[str, List[float]]:
        """Seconds per call of each function, the functions interleaved (order reversed every other rep)."""
        names = list(fns)
        for _ in range(self.warmup if warmup is None else warmup):
            for n in names:
                fns[n]()
        self.sync()
        times = {n: [] for n in names}
        for r in range(self.reps if reps is None else reps):
            for n in (names if r % 2 == 0 else names[::-1]):
                t0 = time.perf_counter()
                fns[n]()
                self.sync()
                times[n].append(time.perf_counter() - t0)
        return times


def median(xs: Sequence[float]) -> float:
    return statistics.median(xs)


def ratio(times: Dict[str, List[float]], num: str, den: str) -> Dict[str, float]:
    """Median and interquartile range of the per-repetition ratios num/den."""
    rs = sorted(a / b for a, b in zip(times[num], times[den]))
    q = statistics.quantiles(rs, n=4) if len(rs) > 1 else [rs[0]] * 3
    return {'median': statistics.median(rs), 'q1': q[0], 'q3': q[2], 'n': len(rs)}


def fmt_ratio(r: Dict[str, float]) -> str:
    return f"{r['median']:.3f} [{r['q1']:.3f}, {r['q3']:.3f}]"


def goal(value: float, limit: float, at_least: bool = False, spread: Optional[Tuple[float, float]] = None) -> str:
    """'met' / 'NOT met' for the median `value`; 'tie' when it misses but the limit lies inside `spread` (IQR)."""
    ok = value >= limit if at_least else value <= limit
    verdict = 'met' if ok else ('tie (limit inside the IQR)' if spread and spread[0] <= limit <= spread[1]
                                else 'NOT met')
    return f"{verdict} ({'≥' if at_least else '≤'} {limit:g})"


# ---------------------------------------------------------------- 1. the permutation op


def section_op(b: Bench, batch: int, rows: int, cols: int) -> dict:
    """J·x forward + backward at (batch, rows, cols): ours (each gather backend) vs the obvious PyTorch ways
    and a transpose copy."""
    m = rows * cols
    dev = b.device
    ours = FixedPermutation(m, (cols, rows), seed=0, key='bench', device=dev)
    index = ours.index.long()
    x = torch.randn(batch, rows, cols, device=dev, requires_grad=True)
    g = torch.randn(batch, m, device=dev)
    gather_index = index.expand(batch, m)

    def run(fn, backend=None):
        def call():
            with use_gather_backend(backend, dev.type, modes=('eager',)) if backend else contextlib.nullcontext():
                y = fn(x)
            (gx,) = torch.autograd.grad(y, x, g.view(y.shape))
            gx.contiguous()  # the consumer (LayerNorm backward) needs a dense gradient
        return call

    default = gather_spec(dev.type, 'eager')
    ref = f'ours (FixedPermutation, {default})'
    fns = {
        ref: run(ours),
        'ours, index_select backend': run(ours, 'index_select'),
        'ours, gather backend': run(ours, 'gather'),
        'x[:, perm]': run(lambda t: t.reshape(batch, m)[:, index]),
        'index_select (autograd)': run(lambda t: t.reshape(batch, m).index_select(1, index)),
        'gather (autograd)': run(lambda t: t.reshape(batch, m).gather(1, gather_index)),
        'transpose copy': run(lambda t: t.transpose(1, 2).contiguous()),
    }
    times = b.interleaved(fns, reps=3 * b.reps)  # cheap: more repetitions for a tighter median
    rows_out = []
    for n in fns:
        rows_out.append([n, f'{median(times[n]) * 1e3:.2f}', fmt_ratio(ratio(times, n, ref)),
                         fmt_ratio(ratio(times, n, 'transpose copy'))])
    r_adv, r_t = ratio(times, 'x[:, perm]', ref), ratio(times, ref, 'transpose copy')
    vs_adv, vs_t = r_adv['median'], r_t['median']
    print(f'\n### 1. Permutation op, forward + backward, batch {batch}, {rows} × {cols} (m = {m}), '
          f'{torch.get_num_threads()} threads\n')
    print(markdown_table(['variant', 'ms (median)', 'time / ours', 'time / transpose copy'], rows_out))
    chosen = {k[2:4]: v for k, v in tuned_choices().items() if k[4] == torch.get_num_threads()}
    g_adv = goal(vs_adv, 2.0, at_least=True, spread=(r_adv['q1'], r_adv['q3']))
    g_t = goal(vs_t, 1.3, spread=(r_t['q1'], r_t['q3']))
    print(f'\nours is {vs_adv:.2f}× faster than x[:, perm]: goal {g_adv}; '
          f'ours / transpose copy = {vs_t:.2f}: goal {g_t}; the tuned backend chose {chosen or "-"}')
    return {'ms': {n: median(t) * 1e3 for n, t in times.items()},
            'speedup_vs_adv_index': vs_adv, 'ours_over_transpose': vs_t,
            'tuned': {str(k): v for k, v in chosen.items()}}


# ---------------------------------------------------------------- 2. training step and inference


def make_model(name: str, b: Bench, num_classes: int = 1000, **kwargs) -> nn.Module:
    torch.manual_seed(0)
    return timm.create_model(name, num_classes=num_classes, **kwargs).to(b.device)


def image_size(model: nn.Module) -> int:
    return model.pretrained_cfg['input_size'][-1] if hasattr(model, 'pretrained_cfg') else 224


class TrainStep:
    """One training step: forward, cross-entropy, backward, AdamW (lr 1e-4) on a fixed random batch."""

    def __init__(self, model: nn.Module, b: Bench, batch: int, num_classes: int) -> None:
        size = image_size(model)
        self.model, self.b = model, b
        self.x = torch.randn(batch, 3, size, size, device=b.device)
        self.y = torch.randint(0, num_classes, (batch,), device=b.device)
        self.opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
        model.train()

    def __call__(self) -> None:
        with self.b.autocast():
            loss = F.cross_entropy(self.model(self.x), self.y)
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        self.opt.step()


def infer_fn(model: nn.Module, b: Bench, batch: int) -> Callable[[], None]:
    size = image_size(model)
    x = torch.randn(batch, 3, size, size, device=b.device)

    def infer():
        model.eval()
        with torch.inference_mode(), b.autocast():
            model(x)
    return infer


STEP_PAIRS = [
    # (baseline, candidate, goal on candidate/baseline time, image size)
    ('mixer_s16_224', 'pk_mixer_s16_224', 1.00, 224),
    ('pk_mixer_s16_224', 'rp_mixer_s16_224', 1.03, 224),
    ('pk_mixer_b_w', 'rp_mixer_b_w', 1.03, 224),
    ('s_mixer_s64c64_32', 's_mixer_rp_s64c64_32', None, 32),
    ('s_mixer_s128c128_32', 's_mixer_rp_s128c128_32', None, 32),
]
# on a GPU also Mixer-B/16, the model of timm's published training throughput
GPU_STEP_PAIRS = [
    ('mixer_b16_224', 'pk_mixer_b16_224', 1.00, 224),
    ('pk_mixer_b16_224', 'rp_mixer_b16_224', 1.03, 224),
]


def section_step(b: Bench, batch_224: int, batch_32: int, quick: bool, only: Optional[Sequence[str]] = None) -> dict:
    print(f'\n### 2. Training step (forward, backward, AdamW) and inference, '
          f'{"bf16 autocast" if b.amp else "fp32"}, {b.device.type}\n')
    out = {}
    print(markdown_table(['time ratio', 'batch', 'train step [IQR]', 'train img/s', 'inference [IQR]',
                          'inference img/s', 'goal (train step)'], []), flush=True)
    pairs = STEP_PAIRS[:4] if quick else STEP_PAIRS
    if b.device.type == 'cuda':
        pairs = pairs + GPU_STEP_PAIRS
    if only:
        pairs = [p for p in pairs if p[1] in only]
    for base, cand, limit, size in pairs:
        batch = batch_224 if size == 224 else batch_32
        ncls = 1000 if size == 224 else 10
        models = {n: make_model(n, b, ncls) for n in (base, cand)}
        train = b.interleaved({n: TrainStep(m, b, batch, ncls) for n, m in models.items()})
        infer = b.interleaved({n: infer_fn(m, b, batch) for n, m in models.items()})
        r_train, r_inf = ratio(train, cand, base), ratio(infer, cand, base)
        ips = {n: batch / median(train[n]) for n in models}
        ips_inf = {n: batch / median(infer[n]) for n in models}
        if limit == 1.00:  # "candidate at least as fast": throughput ratio ≥ 1
            verdict = goal(1 / r_train['median'], 1.0, at_least=True,
                           spread=(1 / r_train['q3'], 1 / r_train['q1'])) + ' (speed ratio)'
        elif limit is not None:
            verdict = goal(r_train['median'], limit, spread=(r_train['q1'], r_train['q3']))
        else:
            verdict = '-'
        row = [f'`{cand}` / `{base}`', batch, fmt_ratio(r_train), f'{ips[base]:.1f} → {ips[cand]:.1f}',
               fmt_ratio(r_inf), f'{ips_inf[base]:.1f} → {ips_inf[cand]:.1f}', verdict]
        print('| ' + ' | '.join(str(c) for c in row) + ' |', flush=True)
        out[f'{cand}/{base}'] = {'batch': batch, 'train_time_ratio': r_train, 'infer_time_ratio': r_inf,
                                 'train_img_s': ips, 'infer_img_s': ips_inf}
        del models
        gc.collect()
    if b.device.type == 'cuda':
        print(f'\nFor scale: timm publishes {TIMM_MIXER_B16_TRAIN_3090} img/s training `mixer_b16_224` '
              f'(AMP, RTX 3090).')
    return out


# ---------------------------------------------------------------- 3. memory


def tensor_bytes(ts) -> int:
    return sum(t.numel() * t.element_size() for t in ts)


def static_bytes(model: nn.Module, opt: torch.optim.Optimizer) -> Dict[str, int]:
    """Weights, gradients, optimizer state and buffers (masks, permutations, digests) after a step."""
    state = [v for s in opt.state.values() for v in s.values() if torch.is_tensor(v)]
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    return {'weights': tensor_bytes(model.parameters()), 'grads': tensor_bytes(grads),
            'optimizer': tensor_bytes(state), 'buffers': tensor_bytes(model.buffers())}


def saved_activation_bytes(model: nn.Module, b: Bench, x: torch.Tensor) -> int:
    """Bytes of the distinct tensors autograd saves for backward in one forward (storage-deduplicated),
    parameters and buffers excluded."""
    own = {t.untyped_storage().data_ptr() for t in list(model.parameters()) + list(model.buffers())}
    seen: Dict[int, int] = {}

    def pack(t):
        ptr = t.untyped_storage().data_ptr()
        if ptr not in own:
            seen[ptr] = t.untyped_storage().nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t), b.autocast():
        out = model(x)
    del out
    return sum(seen.values())


def peak_step_bytes(step: 'TrainStep') -> int:
    """Peak of the memory allocated during one training step, above what was allocated before it.

    CUDA: torch.cuda.max_memory_allocated. CPU: the profiler's memory events (every ATen CPU
    allocation and free, profile_memory=True), accumulated in time order.
    """
    step()  # grads and optimizer state exist before the measured step, as in training
    if step.b.device.type == 'cuda':
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        before = torch.cuda.memory_allocated()
        step()
        torch.cuda.synchronize()
        return torch.cuda.max_memory_allocated() - before
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        step()
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, 'trace.json')
        prof.export_chrome_trace(path)
        with open(path) as f:
            events = json.load(f)['traceEvents']
    mem = sorted((e['ts'], e['args']['Bytes']) for e in events if e.get('name') == '[memory]')
    cur = peak = 0
    for _, nbytes in mem:
        cur += nbytes
        peak = max(peak, cur)
    return peak


def checkpoint_bytes(model: nn.Module) -> int:
    from safetensors.torch import save_file
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, 'w.safetensors')
        save_file({k: v.contiguous() for k, v in model.state_dict().items()}, path)
        return os.path.getsize(path)


def flops_per_image(model: nn.Module, b: Bench) -> float:
    from torch.utils.flop_counter import FlopCounterMode
    size = image_size(model)
    x = torch.randn(1, 3, size, size, device=b.device)
    model.eval()
    with FlopCounterMode(display=False) as fc, torch.no_grad():
        model(x)
    return fc.get_total_flops()


def mib(n: int) -> str:
    return f'{n / 2 ** 20:.1f}'


def table_s3_models(b: Bench) -> Dict[str, nn.Module]:
    """Table S.3's CIFAR setting: S = 64, C = 48, L = 3, γ = 2 (P = 4 on 32 px: S0 = 64, C0 = 48);
    SW-MLP of the same width m = S·C and the same Ω (density p = Ω / (γ m²))."""
    from timm_pkmixer.width import mixer_omega
    s, c, depth, gamma = 64, 48, 3, 2.0
    omega = mixer_omega(s, c, gamma)
    m = s * c
    density = omega / (gamma * m * m)
    mixer = dict(img_size=32, patch_size=4, num_blocks=depth, num_tokens=s, embed_dim=c, gamma=gamma)
    return {
        'SW-MLP': make_model('sw_mlp_o18_32', b, 10, width=m, density=density, gamma=gamma, num_blocks=depth),
        'RP-Mixer': make_model('rp_mixer_ss_w_32', b, 10, **mixer),
        'MLP-Mixer': make_model('pk_mixer_ss_w_32', b, 10, **mixer),
    }


def section_memory(b: Bench, batch_224: int, batch_32: int, quick: bool) -> dict:
    out = {}
    print('\n### 3. Memory\n')
    rows = []
    pairs = [('pk_mixer_s16_224', 'rp_mixer_s16_224', 224), ('pk_mixer_b_w', 'rp_mixer_b_w', 224),
             ('s_mixer_s64c64_32', 's_mixer_rp_s64c64_32', 32)]
    for base, cand, size in pairs[:2] if quick else pairs:
        batch = batch_224 if size == 224 else batch_32
        ncls = 1000 if size == 224 else 10
        res = {}
        for n in (base, cand):
            model = make_model(n, b, ncls)
            x = torch.randn(batch, 3, size, size, device=b.device)
            step = TrainStep(model, b, batch, ncls)
            peak = peak_step_bytes(step)
            res[n] = dict(peak_step=peak, saved=saved_activation_bytes(model, b, x),
                          static=static_bytes(model, step.opt), checkpoint=checkpoint_bytes(model))
            del model, step
            gc.collect()
        for r in res.values():
            r['resident'] = sum(r['static'].values())
            r['peak_total'] = r['resident'] + r['peak_step']
        out[f'{cand}/{base}'] = res
        for key, label in (('peak_total', 'peak of a training step (resident + transient)'),
                           ('resident', 'resident: weights, grads, AdamW state, buffers'),
                           ('peak_step', 'transient peak during the step'),
                           ('saved', 'saved activations (autograd)'), ('checkpoint', 'checkpoint (safetensors)')):
            r = res[cand][key] / res[base][key]
            lim = {'peak_total': 1.05, 'checkpoint': 1.02}.get(key)
            rows.append([f'`{cand}` / `{base}`', batch, label, mib(res[base][key]), mib(res[cand][key]),
                         f'{r:.4f}', goal(r, lim) if lim else '-'])
    print(markdown_table(['models', 'batch', 'what', 'normal MiB', 'RP MiB', 'RP / normal', 'goal'], rows))
    print('\nStatic memory (after a step, AdamW): weights + grads + optimizer state + buffers, MiB\n')
    srows = []
    for res in out.values():
        for n, r in res.items():
            s = r['static']
            srows.append([f'`{n}`', mib(s['weights']), mib(s['grads']), mib(s['optimizer']), mib(s['buffers']),
                          mib(sum(s.values()))])
    print(markdown_table(['model', 'weights', 'grads', 'AdamW state', 'buffers', 'total'], srows))

    # Table S.3 direction: SW-MLP vs RP Mixer vs MLP-Mixer at the same Ω (CIFAR setting)
    models = table_s3_models(b)
    rows, s3 = [], {}
    steps = {n: TrainStep(m, b, batch_32, 10) for n, m in models.items()}
    times = b.interleaved(steps, reps=max(3, b.reps // 2))
    for n, m in models.items():
        st = static_bytes(m, steps[n].opt)
        mask = sum(t.numel() * t.element_size() for k, t in m.named_buffers() if k.endswith('mask'))
        total = st['weights'] + st['grads'] + st['optimizer'] + st['buffers']
        s3[n] = dict(static=st, masks=mask, total=total, flops=flops_per_image(m, b),
                     step_ms=median(times[n]) * 1e3)
    for n, r in s3.items():
        rows.append([n, mib(r['static']['weights']), mib(r['masks']), mib(r['static']['buffers'] - r['masks']),
                     mib(r['static']['optimizer']), mib(r['total']), f"{r['flops'] / 2e6:.1f}",
                     f"{r['step_ms']:.1f}", fmt_ratio(ratio(times, n, 'MLP-Mixer'))])
    print(f'\nTable S.3 setting (CIFAR: S = 64, C = 48, L = 3, γ = 2, SW-MLP of the same Ω and width m = 3072), '
          f'batch {batch_32}; memory = weights + grads + AdamW state + buffers (masks, permutations)\n')
    print(markdown_table(['model', 'weights MiB', 'masks MiB', 'other buffers MiB', 'AdamW MiB', 'total MiB',
                          'MMACs / image', 'step ms', 'step time / MLP-Mixer'], rows))
    out['table_s3'] = s3
    return out



# ---------------------------------------------------------------- 4. torch.compile


def section_compile(b: Bench, batch_224: int, batch_32: int, quick: bool) -> dict:
    print('\n### 4. torch.compile (inductor, default mode): training step\n')
    cases = [('s_mixer_s64c64_32', 's_mixer_rp_s64c64_32', 32, {})]
    if not quick:
        cases.append(('pk_mixer_s16_224', 'rp_mixer_s16_224', 224, {}))
    rows, out = [], {}
    for base, cand, size, kw in cases:
        batch = batch_224 if size == 224 else batch_32
        ncls = 1000 if size == 224 else 10
        torch._dynamo.reset()
        fns, compile_s = {}, {}
        default = gather_spec(b.device.type, 'compile')
        alternative = 'index_select' if default == 'opaque' else 'opaque'
        other = 'gathers fused by inductor' if alternative == 'index_select' else 'gathers as opaque kernels'
        variants = [(base, None), (cand, None), (cand, alternative)]
        for n, backend in variants:
            label = n if backend is None else f'{n} ({other})'
            model = make_model(n, b, ncls, **kw)
            step = TrainStep(torch.compile(model), b, batch, ncls)
            if backend is None:
                run = step
                fns[n + ' eager'] = TrainStep(model, b, batch, ncls)
            else:
                def run(step=step, backend=backend):
                    with use_gather_backend(backend, b.device.type, modes=('compile',)):
                        step()
            t0 = time.perf_counter()
            run()
            compile_s[label] = time.perf_counter() - t0
            fns[label + ' compiled'] = run
        times = b.interleaved(fns, warmup=1)
        c_ratio = ratio(times, cand + ' compiled', base + ' compiled')
        rows.append([f'`{cand}` / `{base}`', batch, 'RP / normal, both compiled', fmt_ratio(c_ratio),
                     goal(c_ratio['median'], 1.01, spread=(c_ratio['q1'], c_ratio['q3']))])
        rows.append(['', '', 'RP / normal, both eager', fmt_ratio(ratio(times, cand + ' eager', base + ' eager')),
                     '-'])
        for n in (base, cand):
            rows.append(['', '', f'`{n}` compiled / eager', fmt_ratio(ratio(times, n + ' compiled', n + ' eager')),
                         '-'])
        if f'{cand} ({other}) compiled' in times:
            rows.append(['', '', f'RP with {other} / normal, compiled',
                         fmt_ratio(ratio(times, f'{cand} ({other}) compiled', base + ' compiled')), '-'])
        out[f'{cand}/{base}'] = {'ms': {k: median(v) * 1e3 for k, v in times.items()}, 'compile_s': compile_s,
                                 'rp_over_normal_compiled': c_ratio}
        print('compile time (first step), s: ' + ', '.join(f'{k} {v:.0f}' for k, v in compile_s.items()))
        gc.collect()
    print()
    print(markdown_table(['models', 'batch', 'comparison', 'time ratio [IQR]', 'goal'], rows))
    return out


# ---------------------------------------------------------------- construction


def section_construct(b: Bench, quick: bool) -> dict:
    base, cand = ('pk_mixer_s16_224', 'rp_mixer_s16_224') if quick else ('pk_mixer_l16_224', 'rp_mixer_l16_224')
    fns = {n: (lambda n=n: timm.create_model(n)) for n in (base, cand)}
    times = b.interleaved(fns, reps=max(3, b.reps // 3), warmup=1)
    r = ratio(times, cand, base)
    print('\n### Model construction (`timm.create_model`, CPU)\n')
    print(markdown_table(['model', 's (median)'], [[f'`{n}`', f'{median(t):.2f}'] for n, t in times.items()]))
    print(f'\n`{cand}` / `{base}` construction time: {fmt_ratio(r)}')
    return {'s': {n: median(t) for n, t in times.items()}, 'ratio': r}


# ---------------------------------------------------------------- main


def environment(args: argparse.Namespace) -> dict:
    cpu = platform.processor() or platform.machine()
    try:
        with open('/proc/cpuinfo') as f:
            cpu = next(line.split(':', 1)[1].strip() for line in f if line.startswith('model name'))
    except (OSError, StopIteration):
        pass
    env = {
        'command': 'python ' + ' '.join(sys.argv), 'python': platform.python_version(), 'torch': torch.__version__,
        'timm': timm.__version__, 'numpy': np.__version__, 'timm_pkmixer': timm_pkmixer.__version__, 'cpu': cpu,
        'logical_cpus': os.cpu_count(),
        'load_average': os.getloadavg() if hasattr(os, 'getloadavg') else None,
        'date': time.strftime('%Y-%m-%d %H:%M:%S %Z'),
    }
    if args.device == 'cuda':
        env['gpu'] = torch.cuda.get_device_name()
    return env


def main(argv: Optional[Sequence[str]] = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument('--only', default=','.join(SECTIONS), help=f'comma-separated sections of {SECTIONS}')
    p.add_argument('--quick', action='store_true', help='fewer repetitions, smaller cases')
    p.add_argument('--device', default='cpu')
    p.add_argument('--dtype', default='float32', choices=('float32', 'bfloat16'),
                   help='bfloat16: autocast (weights and optimizer stay fp32), as timm --amp')
    p.add_argument('--batch-size', type=int, default=None,
                   help='batch of every model (default: CPU 8 at 224 px and 128 at 32 px; CUDA 128)')
    p.add_argument('--threads', type=int, nargs='+', default=None,
                   help='torch.set_num_threads values to run every section at (CPU; default: 1 and all cores)')
    p.add_argument('--reps', type=int, default=None, help='timed repetitions (default 10, --quick 4)')
    p.add_argument('--pairs', default=None,
                   help='step section: only the pairs whose candidate is in this comma-separated list')
    p.add_argument('--json', default=None, help='also write the raw numbers here')
    args = p.parse_args(argv)
    sections = [s.strip() for s in args.only.split(',') if s.strip()]
    unknown = set(sections) - set(SECTIONS)
    if unknown:
        p.error(f'unknown section(s) {sorted(unknown)}; choose from {SECTIONS}')
    if args.device.startswith('cuda') and not torch.cuda.is_available():
        p.error('--device cuda: no CUDA device is available here')
    threads = args.threads or sorted({1, os.cpu_count() or 1})
    reps = args.reps or (4 if args.quick else 10)
    b = Bench(args.device, args.dtype, reps=reps, warmup=1 if args.quick else 2)
    on_gpu = b.device.type == 'cuda'
    batch_224 = args.batch_size or (128 if on_gpu else 8)
    batch_32 = args.batch_size or 128

    env = environment(args)
    env['threads'] = threads
    print('## timm-pkmixer performance\n')
    print(markdown_table(['', ''], [[k, v] for k, v in env.items()]))
    results = {'env': env}
    for n_threads in (threads if b.device.type == 'cpu' else [torch.get_num_threads()]):
        torch.set_num_threads(n_threads)
        print(f'\n## {n_threads} thread{"s" if n_threads > 1 else ""}')
        res = results[f'threads_{n_threads}'] = {}
        for s in sections:
            if s == 'op':
                res['op'] = section_op(b, 32, 256, 588)
            elif s == 'step':
                res['step'] = section_step(b, batch_224, batch_32, args.quick,
                                           args.pairs.split(',') if args.pairs else None)
            elif s == 'memory':
                res['memory'] = section_memory(b, batch_224, batch_32, args.quick)
            elif s == 'compile':
                res['compile'] = section_compile(b, batch_224, batch_32, args.quick)
            elif s == 'construct':
                res['construct'] = section_construct(b, args.quick)
    results['env']['load_average_end'] = os.getloadavg() if hasattr(os, 'getloadavg') else None
    if args.json:
        with open(args.json, 'w') as f:
            json.dump(results, f, indent=1, default=str)
    return results


if __name__ == '__main__':
    main()
