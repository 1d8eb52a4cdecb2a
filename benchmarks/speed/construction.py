"""What the size bound costs at construction (`timm_pkmixer.sizes`): `timm.create_model` with the bound against the
same call with the bound switched off (``PKModelMixin.check_size`` replaced by a no-op for those calls only), side
by side in one process: a warm-up of each, then repetitions that interleave the two (order reversed every other
repetition), medians and the median of per-repetition ratios (with bound / without) with its IQR; at 1 thread and
at all threads. On a shared machine a build's time varies more than the bound costs, so the bound is also timed
alone (``check_size`` of the model's record, the median of --bound-reps calls), and 1 + bound / build without it
is given beside the ratio.

    python benchmarks/speed/construction.py                      # the four cases, 9 repetitions
    python benchmarks/speed/construction.py --models rp_mixer_s16_224 --reps 11
"""
import argparse
import os
import statistics
import time
from contextlib import contextmanager
from typing import Callable, Dict, Iterator, List

import timm
import torch

import timm_pkmixer
from timm_pkmixer.models._common import PKModelMixin

MODELS = ['rp_mixer_s16_224', 'pk_mixer_s16_224', 's_mixer_rp_s64c64_32', 'sw_mlp_o18_32']


@contextmanager
def bound_switched_off() -> Iterator[None]:
    """Construction without the size bound: check_size answers 0 at once."""
    original = PKModelMixin.__dict__['check_size']
    PKModelMixin.check_size = classmethod(lambda cls, *args, **kwargs: 0)
    try:
        yield
    finally:
        PKModelMixin.check_size = original


def build(name: str, bound: bool) -> Callable[[], None]:
    def run() -> None:
        if bound:
            timm.create_model(name)
        else:
            with bound_switched_off():
                timm.create_model(name)
    return run


def interleaved(fns: Dict[str, Callable[[], None]], reps: int) -> Dict[str, List[float]]:
    """Seconds of each function per repetition, after one warm-up of each."""
    names = list(fns)
    for n in names:
        fns[n]()
    times: Dict[str, List[float]] = {n: [] for n in names}
    for r in range(reps):
        for n in (names if r % 2 == 0 else names[::-1]):
            start = time.perf_counter()
            fns[n]()
            times[n].append(time.perf_counter() - start)
    return times


def ratio(times: Dict[str, List[float]], a: str, b: str) -> str:
    rs = sorted(x / y for x, y in zip(times[a], times[b]))
    q = statistics.quantiles(rs, n=4) if len(rs) > 1 else [rs[0]] * 3
    return f'{statistics.median(rs):.3f} [{q[0]:.3f}, {q[2]:.3f}]'


def bound_alone(name: str, reps: int) -> float:
    """Median seconds of the size bound alone: ``check_size`` of the registered model's record, for the CPU."""
    model = timm.create_model(name, device='meta')
    record = model.model_args
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        type(model).check_size(record, device='cpu')
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument('--models', nargs='+', default=MODELS)
    p.add_argument('--threads', type=int, nargs='+', default=sorted({1, os.cpu_count() or 1}))
    p.add_argument('--reps', type=int, default=9)
    p.add_argument('--bound-reps', type=int, default=21)
    args = p.parse_args()
    print(f'torch {torch.__version__}, timm {timm.__version__}, timm-pkmixer {timm_pkmixer.__version__}, '
          f'{os.cpu_count()} CPUs, load {tuple(round(x, 1) for x in os.getloadavg())}\n')
    print('| model | threads | with bound (s) | without (s) | with / without (median [IQR]) | bound alone (ms) | '
          '1 + bound / without |')
    print('|---|---|---|---|---|---|---|')
    for threads in args.threads:
        torch.set_num_threads(threads)
        for name in args.models:
            times = interleaved({'with': build(name, True), 'without': build(name, False)}, args.reps)
            without = statistics.median(times['without'])
            alone = bound_alone(name, args.bound_reps)
            print(f'| `{name}` | {threads} | {statistics.median(times["with"]):.3f} | {without:.3f} | '
                  f'{ratio(times, "with", "without")} | {alone * 1e3:.2f} | {1 + alone / without:.4f} |', flush=True)
    print(f'\nload after: {tuple(round(x, 1) for x in os.getloadavg())}')


if __name__ == '__main__':
    main()
