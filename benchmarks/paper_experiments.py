"""The paper's experiments at CPU scale, through the package's own commands: sweep → train → report.

For each experiment (``depth``: Fig. 7; ``rp-block``: Fig. S.4; ``width``: Fig. 5 with its SW-MLP arm) this runs

    pkmixer sweep BASE --experiment E --seeds 0 1 2 3 4 --out-dir OUT/E/recipes [--model-kwargs …]
    pkmixer train RECIPE --train-py TRAIN_PY        (once per recipe: timm's unmodified train.py)
    pkmixer report OUT/E/runs --out-dir OUT/E/report

as subprocesses, on scikit-learn's bundled 8×8 digits written as an ImageFolder (stratified 50/50 split,
`timm_pkmixer.datasets.write_digits_image_folder`, into `OUT/digits`, not committed). The base recipe
(`OUT/digits_s_mixer.yaml`) scales the paper's S-Mixer setting down to 8×8 images: P = 2 (S0 = 16 patches of C0 = 12
values), S = C = 32, skip layer, AdamW lr 0.01, weight decay 0.05, 40 epochs, 2 warm-up epochs, cosine, batch 128, no
augmentation, no label smoothing. Runs go two at a time with one thread each (2 cores). Checkpoints are deleted after
each run; ``args.yaml`` and ``summary.csv`` of every run are kept. ``OUT/meta.json`` records the commands, wall and
CPU time, and versions.

    python benchmarks/paper_experiments.py --train-py pytorch-image-models/train.py --out /tmp/paper_cpu
    python benchmarks/paper_experiments.py ... --out benchmarks/paper_experiments_results   # update the committed
"""
import argparse
import concurrent.futures
import json
import os
import platform
import resource
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Optional

import yaml

EXPERIMENTS = {
    # experiment: extra `pkmixer sweep` arguments
    'depth': [],
    'rp-block': [],
    'width': [],
}
BASE = dict(
    model='s_mixer_s64c64_32',
    model_kwargs=dict(img_size=8, patch_size=2, num_tokens=32, embed_dim=32),
    device_modules=['timm_pkmixer'],
    num_classes=10, img_size=8, crop_pct=1.0, mean=[0.5, 0.5, 0.5], std=[0.5, 0.5, 0.5],
    train_split='train', val_split='validation',
    batch_size=128, opt='adamw', lr=0.01, weight_decay=0.05, epochs=40, sched='cosine', warmup_epochs=2,
    warmup_lr=1.0e-4, min_lr=1.0e-5, cooldown_epochs=0, no_aug=True, smoothing=0.0, mixup=0.0, cutmix=0.0,
    reprob=0.0, device='cpu', workers=0, pin_mem=False, checkpoint_hist=1, log_interval=1000,
)


def _cli(*args: str) -> list:
    return [sys.executable, '-m', 'timm_pkmixer', *args]


def _run(cmd: list, env: dict, log: Path) -> float:
    start = time.perf_counter()
    with open(log, 'w') as f:
        proc = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, env=env)
    if proc.returncode:
        raise SystemExit(f'failed ({proc.returncode}): {shlex.join(cmd)}; see {log}')
    return time.perf_counter() - start


def _finished(run: Path, epochs: int) -> bool:
    """True when ``run/summary.csv`` holds every epoch (a run of an earlier, interrupted invocation)."""
    summary = run / 'summary.csv'
    return summary.is_file() and len(summary.read_text().strip().splitlines()) == epochs + 1


def _train(recipe: Path, runs: Path, data: Path, train_py: str, env: dict, epochs: int) -> Optional[float]:
    """Train one recipe; None when ``--resume`` found it finished. A partial run folder is started afresh."""
    run = runs / recipe.stem
    if epochs and _finished(run, epochs):
        return None
    if run.exists():
        shutil.rmtree(run)
    seconds = _run(_cli('train', str(recipe), '--train-py', train_py, '--data-dir', str(data), '--output',
                        str(runs)), env, runs / f'{recipe.stem}.log')
    for ckpt in (runs / recipe.stem).glob('*.pth.tar'):
        ckpt.unlink()
    return seconds


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument('--train-py', required=True, help="timm's train.py (not in the timm wheel)")
    p.add_argument('--out', required=True, help='output folder')
    p.add_argument('--experiments', nargs='+', choices=list(EXPERIMENTS), default=list(EXPERIMENTS))
    p.add_argument('--seeds', type=int, default=5, help='seeds 0..N-1 (default 5)')
    p.add_argument('--epochs', type=int, default=40)
    p.add_argument('--jobs', type=int, default=2, help='runs at a time, one thread each (default 2)')
    p.add_argument('--resume', action='store_true',
                   help='keep runs of an interrupted invocation that finished every epoch (wall and CPU time '
                        'then cover only the runs trained now; meta.json counts both)')
    args = p.parse_args()

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    base = dict(BASE, epochs=args.epochs)
    base_path = out / 'digits_s_mixer.yaml'
    base_path.write_text('# Base recipe of benchmarks/paper_experiments.py: the S-Mixer setting on 8x8 digits.\n'
                         + yaml.safe_dump(base, sort_keys=False))
    env = dict(os.environ, OMP_NUM_THREADS='1', MKL_NUM_THREADS='1', TIMM_PKMIXER_AUTOLOAD='1')
    meta = json.loads((out / 'meta.json').read_text()) if (out / 'meta.json').is_file() else {}
    meta.update(python=platform.python_version(), cpu_count=os.cpu_count(), jobs=args.jobs, seeds=args.seeds,
                epochs=args.epochs, train_py=args.train_py)
    import timm
    import torch

    import timm_pkmixer
    meta.update(torch=torch.__version__, timm=timm.__version__, timm_pkmixer=timm_pkmixer.__version__)
    from timm_pkmixer.datasets import write_digits_image_folder
    # One data path for every invocation, so runs kept by --resume and runs trained now record the same data_dir
    # (`pkmixer report` refuses to average runs that disagree on it). Deterministic, rewritten each time, not committed.
    data = out / 'digits'
    shutil.rmtree(data, ignore_errors=True)
    write_digits_image_folder(str(data))
    (out / '.gitignore').write_text('digits/\n*.pth.tar\n')
    for experiment in args.experiments:
        folder = out / experiment
        runs = folder / 'runs'
        runs.mkdir(parents=True, exist_ok=True)
        seeds = [str(s) for s in range(args.seeds)]
        sweep = _cli('sweep', str(base_path), '--experiment', experiment, '--seeds', *seeds, '--out-dir',
                     str(folder / 'recipes'), *EXPERIMENTS[experiment])
        wall0, cpu0 = time.perf_counter(), resource.getrusage(resource.RUSAGE_CHILDREN)
        _run(sweep, env, folder / 'sweep.log')
        recipes = sorted((folder / 'recipes').glob('*.yaml'))
        with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
            times = list(pool.map(lambda r, runs=runs: _train(
                r, runs, data, args.train_py, env, args.epochs if args.resume else 0), recipes))
        trained = [t for t in times if t is not None]
        report = _cli('report', str(runs), '--out-dir', str(folder / 'report'))
        _run(report, env, folder / 'report.log')
        cpu1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        earlier = meta.get(experiment) if args.resume else None
        meta[experiment] = dict(
            runs=len(recipes), runs_trained=len(trained), runs_kept_from_earlier=len(times) - len(trained),
            wall_seconds=round(time.perf_counter() - wall0, 1),
            cpu_seconds=round(cpu1.ru_utime + cpu1.ru_stime - cpu0.ru_utime - cpu0.ru_stime, 1),
            train_seconds_sum=round(sum(trained), 1),
            commands=[shlex.join(sweep), f'pkmixer train RECIPE --train-py {args.train_py} --data-dir {data} '
                      f'--output {runs}   (x{len(recipes)}, {args.jobs} at a time)', shlex.join(report)],
            load_average_end=os.getloadavg())
        if earlier:  # the record of the interrupted invocation(s) whose runs were kept
            meta[experiment]['earlier_invocations'] = earlier.pop('earlier_invocations', []) + [earlier]
        (out / 'meta.json').write_text(json.dumps(meta, indent=1))
        print(f'{experiment}: {len(recipes)} runs, {meta[experiment]["wall_seconds"]} s wall, '
              f'{meta[experiment]["cpu_seconds"]} s CPU', flush=True)


if __name__ == '__main__':
    main()
