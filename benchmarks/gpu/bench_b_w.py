"""The mission's own model through timm's own benchmark.py: `rp_mixer_b_w` against `pk_mixer_b_w`, inference and
a training step, bf16 autocast (benchmark.py's ``--amp --amp-dtype bfloat16``), batch 128.

benchmark.py is not in the timm wheel: `--benchmark-py` (or ``$TIMM_BENCHMARK_PY``) names the one of your timm
version. It is imported as a module and its own ``benchmark(args)`` is called with its own parser's arguments, once
per model and repetition, in one process (the models registered by ``import timm_pkmixer``), the order reversed
every other repetition (ABBA); each call builds the model afresh and runs benchmark.py's warm-up and timed
iterations for inference, then for training. Every call's result row goes into ``--out`` (CSV: the repetition, the
model, and benchmark.py's fields: samples per second, step time in ms, batch size, parameters).

    python benchmarks/gpu/bench_b_w.py --benchmark-py PATH/benchmark.py --out bench_b_w.csv          # a GPU
    python benchmarks/gpu/bench_b_w.py --device cpu --models pk_mixer_ss8_32 rp_mixer_ss8_32 \
        --batch-size 2 --warm 1 --iters 5 --reps 1 --out x.csv   # the smoke test's

`summarize` reads the rows back: per model the median samples per second, and per repetition the time ratio RP /
normal (the normal model's samples per second over the RP model's), median, min and max.
"""
import argparse
import csv
import importlib.util
import os
import statistics
from pathlib import Path
from types import ModuleType
from typing import Any, Dict, List, Optional, Sequence

MODELS = ('pk_mixer_b_w', 'rp_mixer_b_w')  # normal, RP
SMOKE_MODELS = ('pk_mixer_ss8_32', 'rp_mixer_ss8_32')  # the same code path on a CPU in seconds: Mixer-SS/8 at 32 px
BENCHES = ('infer', 'train')
FIELDS = ('rep', 'model', 'infer_samples_per_sec', 'infer_step_time', 'infer_batch_size', 'train_samples_per_sec',
          'train_step_time', 'train_batch_size', 'param_count', 'error')
BENCHMARK_PY_ENV = 'TIMM_BENCHMARK_PY'


def find_benchmark_py(option: Optional[str]) -> Path:
    """`option`, else ``$TIMM_BENCHMARK_PY``, else benchmark.py beside ``$TIMM_TRAIN_PY`` (timm's scripts sit
    together); FileNotFoundError naming what was looked at."""
    train_py = os.environ.get('TIMM_TRAIN_PY')
    candidates = [c for c in (option, os.environ.get(BENCHMARK_PY_ENV),
                              str(Path(train_py).with_name('benchmark.py')) if train_py else None) if c]
    for c in candidates:
        if Path(c).is_file():
            return Path(c)
    raise FileNotFoundError(f"timm's benchmark.py not found ({', '.join(candidates) or 'nothing given'}): it is not "
                            f'in the timm wheel; give --benchmark-py or {BENCHMARK_PY_ENV} (the scripts of your timm '
                            f'version, github.com/huggingface/pytorch-image-models)')


def load_benchmark_py(path: Path) -> ModuleType:
    """benchmark.py imported as a module (its ``main()`` not run); refused unless it has ``parser`` and
    ``benchmark``."""
    spec = importlib.util.spec_from_file_location('_timm_benchmark_py', path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    missing = [n for n in ('parser', 'benchmark') if not hasattr(module, n)]
    if missing:
        raise ValueError(f"{path} is not timm's benchmark.py (it defines no {', '.join(missing)})")
    return module


def run(module: ModuleType, device: str, batch: int, warm: int, iters: int, reps: int,
        models: Sequence[str] = MODELS, amp_dtype: str = 'bfloat16') -> List[Dict[str, Any]]:
    """benchmark.py's result of each model (normal, RP) in each repetition (ABBA order), as rows of FIELDS."""
    import timm_pkmixer  # noqa: F401  (registers the models with timm)
    rows = []
    for rep in range(reps):
        for model in (models if rep % 2 == 0 else models[::-1]):
            args = module.parser.parse_args(['--model', model, '--bench', 'both', '--device', device, '-b', str(batch),
                                             '--amp', '--amp-dtype', amp_dtype, '--num-warm-iter', str(warm),
                                             '--num-bench-iter', str(iters), '--no-retry'])
            result = module.benchmark(args)
            rows.append({k: result.get(k, '') for k in FIELDS if k not in ('rep', 'model')} | dict(rep=rep,
                                                                                                   model=model))
    return rows


def write_rows(rows: Sequence[Dict[str, Any]], path: Path) -> None:
    with open(path, 'w', newline='', encoding='utf-8') as f:
        writer = csv.DictWriter(f, fieldnames=FIELDS)
        writer.writeheader()
        writer.writerows(rows)


def read_rows(path: Path) -> List[Dict[str, str]]:
    with open(path, newline='', encoding='utf-8') as f:
        return list(csv.DictReader(f))


def summarize(rows: Sequence[Dict[str, Any]], models: Sequence[str] = MODELS) -> Dict[str, Any]:
    """{bench: per-model median samples/s, the per-repetition RP / normal time ratios and their median, min, max}
    of `models` (normal, RP); the rows that failed are named under 'errors'."""
    errors = sorted({f'{r["model"]}: {r["error"]}' for r in rows if r.get('error')})
    out: Dict[str, Any] = dict(models=list(models), errors=errors)
    normal, rp = models
    for bench in BENCHES:
        key = f'{bench}_samples_per_sec'
        by_rep: Dict[int, Dict[str, float]] = {}
        for r in rows:
            if not r.get('error') and r.get(key) not in (None, ''):
                by_rep.setdefault(int(r['rep']), {})[r['model']] = float(r[key])
        ratios = [v[normal] / v[rp] for v in by_rep.values() if normal in v and rp in v]
        if not ratios:
            continue
        out[bench] = dict(samples_per_s={m: statistics.median(v[m] for v in by_rep.values() if m in v)
                                         for m in models},
                          ratios=ratios, ratio_median=statistics.median(ratios), ratio_min=min(ratios),
                          ratio_max=max(ratios))
    return out


def main(argv: Optional[Sequence[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--benchmark-py', default=None, help=f'timm\'s benchmark.py (default ${BENCHMARK_PY_ENV})')
    parser.add_argument('--device', default='cuda')
    parser.add_argument('--batch-size', type=int, default=128)
    parser.add_argument('--warm', type=int, default=10, help="benchmark.py's --num-warm-iter (default 10)")
    parser.add_argument('--iters', type=int, default=40,
                        help="benchmark.py's --num-bench-iter (default 40; at least 5: it logs every iters // 5)")
    parser.add_argument('--reps', type=int, default=3, help='repetitions of each model, ABBA (default 3)')
    parser.add_argument('--models', nargs=2, default=list(MODELS), metavar=('NORMAL', 'RP'),
                        help=f'the pair (default {" ".join(MODELS)}; the smoke test: {" ".join(SMOKE_MODELS)})')
    parser.add_argument('--threads', type=int, default=None, help='CPU threads (default: torch\'s)')
    parser.add_argument('--out', required=True, help='the CSV of every call')
    args = parser.parse_args(argv)
    if args.iters < 5:
        parser.error(f'--iters {args.iters}: at least 5 (benchmark.py logs every iters // 5 steps)')
    try:
        path = find_benchmark_py(args.benchmark_py)
    except FileNotFoundError as e:
        parser.error(str(e))
    if args.threads:
        import torch
        torch.set_num_threads(args.threads)
    rows = run(load_benchmark_py(path), args.device, args.batch_size, args.warm, args.iters, args.reps, args.models)
    write_rows(rows, Path(args.out))
    s = summarize(rows, args.models)
    for bench in BENCHES:
        if bench in s:
            print(f'{bench}: RP / normal time ×{s[bench]["ratio_median"]:.3f} '
                  f'[{s[bench]["ratio_min"]:.3f}, {s[bench]["ratio_max"]:.3f}] over {len(s[bench]["ratios"])} reps; '
                  + ', '.join(f'{m} {v:.1f}/s' for m, v in s[bench]['samples_per_s'].items()))
    for e in s['errors']:
        print(f'error: {e}')


if __name__ == '__main__':
    main()
