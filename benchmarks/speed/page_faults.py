"""Page faults per training step, normal vs RP Mixer, with glibc's default malloc and with freed memory kept mapped.

Each gather of an RP model returns a fresh tensor; glibc's malloc returns large freed blocks to the kernel and maps
them again, and the next op to write them pays first-touch page faults. This counts the minor faults (`getrusage`)
and times the training steps of `perf.py` (`TrainStep`, batch 8) of both models interleaved in one process (2 warm-
up steps each, then `--reps` steps, the order reversed every other repetition; medians), once per malloc setting and
thread count, each in a fresh subprocess (the malloc setting is per process).

    python benchmarks/speed/page_faults.py                       # rp_mixer_s16_224 vs pk_mixer_s16_224, 1 and 2 threads
    python benchmarks/speed/page_faults.py --threads 2 --reps 20
"""
import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time

KEEP_MAPPED = 'glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=17179869184'


def measure(normal: str, rp: str, threads: int, reps: int) -> dict:
    """Minor faults and seconds per training step of both models, interleaved in this process."""
    import torch
    from perf import Bench, TrainStep, make_model, ratio  # benchmarks/speed/perf.py: the same step and models

    torch.set_num_threads(threads)
    b = Bench('cpu', 'float32', reps=reps, warmup=2)
    steps = {n: TrainStep(make_model(n, b), b, batch=8, num_classes=1000) for n in (normal, rp)}
    for n in steps:
        for _ in range(b.warmup):
            steps[n]()
    secs = {n: [] for n in steps}
    faults = {n: [] for n in steps}
    for r in range(reps):
        for n in (list(steps) if r % 2 == 0 else list(steps)[::-1]):
            f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
            t0 = time.perf_counter()
            steps[n]()
            secs[n].append(time.perf_counter() - t0)
            faults[n].append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0)
    return {'faults': {n: statistics.median(v) for n, v in faults.items()},
            'ratio': ratio(secs, rp, normal)['median']}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument('--normal', default='pk_mixer_s16_224')
    p.add_argument('--rp', default='rp_mixer_s16_224')
    p.add_argument('--threads', type=int, nargs='+', default=sorted({1, os.cpu_count() or 1}))
    p.add_argument('--reps', type=int, default=10)
    p.add_argument('--child', action='store_true', help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        print(json.dumps(measure(args.normal, args.rp, args.threads[0], args.reps)))
        return
    print(f'| malloc | threads | minor faults / step, `{args.normal}` → `{args.rp}` | RP / normal step time |')
    print('|---|---|---|---|')
    for threads in args.threads:
        for label, tunables in (('glibc default', None), (f'`GLIBC_TUNABLES={KEEP_MAPPED}`', KEEP_MAPPED)):
            env = dict(os.environ)
            env.pop('GLIBC_TUNABLES', None)
            if tunables:
                env['GLIBC_TUNABLES'] = tunables
            out = subprocess.run([sys.executable, __file__, '--child', '--normal', args.normal, '--rp', args.rp,
                                  '--threads', str(threads), '--reps', str(args.reps)],
                                 env=env, check=True, capture_output=True, text=True).stdout
            r = json.loads(out.strip().splitlines()[-1])
            f = r['faults']
            print(f"| {label} | {threads} | {f[args.normal]:.0f} → {f[args.rp]:.0f} | {r['ratio']:.3f} |", flush=True)


if __name__ == '__main__':
    main()
