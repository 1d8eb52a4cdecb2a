"""Higher-resolution fine-tuning: what the expansion costs (`timm_pkmixer.expand_resolution`).

For each case, three models side by side: the original (e.g. Mixer-B/16 at 224 px), the expanded one (448 px,
K = 2: token MLP K²·S → K²·D_S, block-diagonal copies of the original) and the same registered architecture built
at the large size from scratch (timm's shapes at 448 px: the token MLP's hidden width stays C/2). Reported:
parameters, the token-MLP shapes App. C predicts (checked), and the time of a training step (forward,
cross-entropy, backward, AdamW), as ratios measured in one process: warm-up, then repetitions that interleave
the models (order reversed every other repetition), median of per-repetition ratios with the IQR; at 1 thread
and at every thread count given.

    python benchmarks/speed/expand_resolution.py                 # Mixer-B/16 and an RP S-Mixer, 1 and 2 threads
    python benchmarks/speed/expand_resolution.py --reps 4 --threads 1
"""
import argparse
import os
import statistics
import time

import timm
import torch
import torch.nn.functional as F

import timm_pkmixer  # noqa: F401
from timm_pkmixer import expand_resolution

CASES = [
    # (label, registered model, kwargs, factor, batch)
    ('Mixer-B/16 (timm shapes)', 'pk_mixer_b16_224', {}, 2, 2),
    ('RP S-Mixer S=C=64', 's_mixer_rp_s64c64_32', {}, 2, 64),
]


def step_fn(model, batch, size, num_classes):
    x = torch.randn(batch, 3, size, size)
    y = torch.randint(0, num_classes, (batch,))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    model.train()

    def step():
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    return step


def interleaved(fns, reps, warmup=1):
    names = list(fns)
    for _ in range(warmup):
        for n in names:
            fns[n]()
    times = {n: [] for n in names}
    for r in range(reps):
        for n in (names if r % 2 == 0 else names[::-1]):
            t0 = time.perf_counter()
            fns[n]()
            times[n].append(time.perf_counter() - t0)
    return times


def ratio(times, a, b):
    rs = sorted(x / y for x, y in zip(times[a], times[b]))
    q = statistics.quantiles(rs, n=4) if len(rs) > 1 else [rs[0]] * 3
    return f'{statistics.median(rs):.2f} [{q[0]:.2f}, {q[2]:.2f}]'


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument('--threads', type=int, nargs='+', default=sorted({1, os.cpu_count() or 1}))
    p.add_argument('--reps', type=int, default=6)
    p.add_argument('--batch-size', type=int, default=None, help='batch of every case (default: 2 for B/16, 64)')
    args = p.parse_args()
    print(f'torch {torch.__version__}, timm {timm.__version__}, timm-pkmixer {timm_pkmixer.__version__}, '
          f'{os.cpu_count()} CPUs, load {os.getloadavg()}\n')
    for label, name, kwargs, k, batch in CASES:
        batch = args.batch_size or batch
        torch.manual_seed(0)
        original = timm.create_model(name, **kwargs)
        expanded = expand_resolution(original, k)
        size = original.img_size[0]
        scratch = timm.create_model(name, img_size=size * k, **kwargs)
        models = {'original': original, 'expanded': expanded, 'from scratch': scratch}
        d, e = original.describe(), expanded.describe()
        token_in = (d.num_tokens, e.num_tokens)
        token_hidden = (d.token_hidden or d.num_tokens, e.token_hidden or e.num_tokens)
        assert token_in[1] == k * k * token_in[0] and token_hidden[1] == k * k * token_hidden[0]  # App. C
        print(f'### {label}: `{name}` {size} px → {size * k} px (K = {k})\n')
        print('| model | img | params (M) | tokens S | token-MLP hidden | token fc1 weight |')
        print('|---|---|---|---|---|---|')
        for n, m in models.items():
            s = m.describe()
            fc1 = tuple(m.blocks[-1].mlp_tokens.fc1.weight.shape)
            print(f'| {n} | {m.img_size[0]} | {sum(q.numel() for q in m.parameters()) / 1e6:.2f} | {s.num_tokens} | '
                  f'{s.token_hidden or "- (one FC)"} | {fc1} |')
        print(f'\nApp. C: the token MLP grows from input {token_in[0]} to {token_in[1]} = K²·S and hidden '
              f'{token_hidden[0]} to {token_hidden[1]} = K²·D_S (checked).\n')
        print('| threads | batch | expanded / from scratch (train step) | expanded / original | '
              'from scratch / original | ms: original, expanded, from scratch |')
        print('|---|---|---|---|---|---|')
        for threads in args.threads:
            torch.set_num_threads(threads)
            fns = {n: step_fn(m, batch, m.img_size[0], m.num_classes) for n, m in models.items()}
            times = interleaved(fns, args.reps)
            ms = ', '.join(f'{statistics.median(times[n]) * 1e3:.0f}' for n in models)
            print(f'| {threads} | {batch} | {ratio(times, "expanded", "from scratch")} | '
                  f'{ratio(times, "expanded", "original")} | {ratio(times, "from scratch", "original")} | {ms} |',
                  flush=True)
        print()


if __name__ == '__main__':
    main()
