"""Fig. 2(d) at CPU scale: shallow Monarch vs Kronecker MLPs, x ↦ B_c B_2 ReLU(B_1 x), on the 8×8 digits.

The paper (§3.3, C.1) trains both on MNIST (AdamW, 200 epochs, cosine from lr 0.01, five seeds) and reports
comparable test errors; it states no weight decay. MNIST cannot be downloaded on the machine this was run on, so
this script trains ``shallow_monarch_N`` and ``shallow_kron_N`` on scikit-learn's bundled 8×8 digits
(``timm_pkmixer.data.datasets.write_digits_image_folder``: stratified 50/50 split, 898 train / 899
validation images, written into ``OUT/digits``, not committed) with timm's unmodified train.py through
``pkmixer train``, with C.1's optimiser and schedule: AdamW, lr 0.01, cosine, no warm-up; batch 128, the given
weight decay (default 0.05), no augmentation, no label smoothing. Two input sizes:

* ``--img-size 8``: the digits as they are, n = 64 (``shallow_*_8``: Monarch L, R with 8 blocks of 8 × 8;
  Kronecker V, W 8 × 8);
* ``--img-size 28``: the digits upsampled to MNIST's 28 × 28 by timm's transforms (bilinear Resize, crop_pct 1),
  n = 784, the paper's input size (``shallow_*_28``: 28 blocks of 28 × 28; V, W 28 × 28). The same 898 images:
  the paper's size, not its data.

Runs go JOBS at a time with one thread each. It writes

    OUT/runs.csv     one row per run: model, seed, epochs, final and best top-1 error, train loss, seconds
    OUT/fig2d.png    test error per epoch, mean ± sd over seeds, and the final errors
    OUT/meta.json    the commands, versions, summary, wall and CPU time
    OUT/scratch/     recipes, run folders (args.yaml, summary.csv), logs, the data, curves.csv (per epoch):
                     not committed

The MNIST recipe (the paper's setting) is ``train_recipes/mnist/shallow_monarch_28.yaml`` (and ``shallow_kron_28``).

    python benchmarks/fig2d/fig2d.py --train-py pytorch-image-models/train.py --out benchmarks/fig2d/n64_wd0.05_e200 \
        [--img-size 8] [--weight-decay 0.05] [--seeds 5] [--epochs 200] [--jobs 2]
"""
import argparse
import concurrent.futures
import csv
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
from typing import Dict, List

import yaml

STRUCTURES = ('monarch', 'kron')
BASE = dict(
    device_modules=['timm_pkmixer.replica_check'],
    num_classes=10, in_chans=1, crop_pct=1.0, mean=[0.5], std=[0.5],
    train_split='train', val_split='validation',
    batch_size=128, opt='adamw', lr=0.01, sched='cosine', warmup_epochs=0, min_lr=0.0,
    cooldown_epochs=0, no_aug=True, smoothing=0.0, mixup=0.0, cutmix=0.0, reprob=0.0, device='cpu', workers=0,
    pin_mem=False, checkpoint_hist=1, log_interval=1000,
)


def _cli(*args: str) -> List[str]:
    return [sys.executable, '-m', 'timm_pkmixer', *args]


def _train(recipe: Path, runs: Path, data: Path, train_py: str, env: dict) -> float:
    run = runs / recipe.stem
    shutil.rmtree(run, ignore_errors=True)
    cmd = _cli('train', str(recipe), '--train-py', train_py, '--data-dir', str(data), '--output', str(runs),
               '--experiment', recipe.stem)
    start = time.perf_counter()
    with open(runs / f'{recipe.stem}.log', 'w') as f:
        proc = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, env=env)
    if proc.returncode:
        raise SystemExit(f'failed ({proc.returncode}): {shlex.join(cmd)}; see {runs / recipe.stem}.log')
    for ckpt in run.glob('*.pth.tar'):
        ckpt.unlink()
    return time.perf_counter() - start


def _finished(run: Path, epochs: int) -> bool:
    summary = run / 'summary.csv'
    return summary.is_file() and len(summary.read_text().strip().splitlines()) == epochs + 1


def _read_summary(path: Path) -> List[Dict[str, float]]:
    with open(path) as f:
        return [{k: float(v) for k, v in row.items()} for row in csv.DictReader(f)]


def recipe(structure: str, img_size: int, weight_decay: float, epochs: int, seed: int) -> dict:
    """train.py arguments of one run: ``shallow_<structure>_<img_size>``; the 8×8 digits are resized (bilinear)
    to img_size by timm's transforms (Resize + CenterCrop at crop_pct 1), so img_size 28 is MNIST's n = 784."""
    r = dict(BASE, model=f'shallow_{structure}_{img_size}', img_size=img_size, weight_decay=weight_decay,
             epochs=epochs, seed=seed)
    if img_size != 8:
        r['interpolation'] = 'bilinear'
    return r


def _figure(curves: List[dict], runs: List[dict], path: Path, title: str) -> None:
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    import numpy as np
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(10, 3.8), gridspec_kw=dict(width_ratios=[2, 1]))
    models = list(dict.fromkeys(r['model'] for r in runs))
    for i, model in enumerate(models):
        seeds = sorted({r['seed'] for r in curves if r['model'] == model})
        err = np.array([[r['eval_top1_err'] for r in curves if r['model'] == model and r['seed'] == s]
                        for s in seeds])
        epochs = np.arange(1, err.shape[1] + 1)
        mean, sd = err.mean(0), err.std(0)
        label = 'Monarch  P L Pᵀ R' if 'monarch' in model else 'Kronecker  V ⊗ W'
        ax.plot(epochs, mean, color=f'C{i}', label=f'{label} ({len(seeds)} seeds)')
        ax.fill_between(epochs, mean - sd, mean + sd, color=f'C{i}', alpha=0.25)
        final = [r['final_top1_err'] for r in runs if r['model'] == model]
        bx.bar(i, np.mean(final), yerr=np.std(final), color=f'C{i}', capsize=6)
        bx.plot([i] * len(final), final, 'k.', ms=5)
    ax.set_xlabel('epoch')
    ax.set_ylabel('test error (%)')
    ax.set_yscale('log')
    ax.set_title(title)
    ax.legend()
    bx.set_xticks(range(len(models)), ['Monarch' if 'monarch' in m else 'Kronecker' for m in models])
    bx.set_ylabel('final test error (%)')
    bx.set_title('final epoch, mean ± sd')
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument('--train-py', required=True, help="timm's train.py (not in the timm wheel)")
    p.add_argument('--out', required=True, help='output folder')
    p.add_argument('--seeds', type=int, default=5, help='seeds 0..N-1 (default 5, as C.1)')
    p.add_argument('--epochs', type=int, default=200, help='epochs (default 200, as C.1)')
    p.add_argument('--jobs', type=int, default=2, help='runs at a time, one thread each (default 2)')
    p.add_argument('--img-size', type=int, default=8, choices=(8, 28),
                   help='8: the digits as they are (n = 64); 28: upsampled to MNIST\'s 28×28 (n = 784)')
    p.add_argument('--weight-decay', type=float, default=0.05, help='AdamW weight decay (C.1 gives none; '
                   'default 0.05)')
    p.add_argument('--collect', action='store_true',
                   help='train nothing: tabulate the runs under OUT/scratch that finished every epoch (seconds from '
                        'their files\' times)')
    p.add_argument('--note', default='', help='a sentence for meta.json')
    args = p.parse_args()

    out = Path(args.out)
    work = out / 'scratch'  # recipes, run folders, logs, data: not committed
    recipes, runs_dir, data = work / 'recipes', work / 'runs', work / 'digits'
    for d in (recipes, runs_dir):
        d.mkdir(parents=True, exist_ok=True)
    (out / '.gitignore').write_text('scratch/\n')
    from timm_pkmixer.data.datasets import write_digits_image_folder
    if not args.collect:
        shutil.rmtree(data, ignore_errors=True)
        write_digits_image_folder(str(data))
    models = [f'shallow_{s}_{args.img_size}' for s in STRUCTURES]
    paths = []
    for structure, model in zip(STRUCTURES, models):
        for seed in range(args.seeds):
            path = recipes / f'{model}_seed{seed}.yaml'
            r = recipe(structure, args.img_size, args.weight_decay, args.epochs, seed)
            if not args.collect:
                path.write_text(yaml.safe_dump(r, sort_keys=False))
            paths.append(path)
    env = dict(os.environ, OMP_NUM_THREADS='1', MKL_NUM_THREADS='1', TIMM_PKMIXER_AUTOLOAD='1')
    wall0, cpu0 = time.perf_counter(), resource.getrusage(resource.RUSAGE_CHILDREN)
    if args.collect:
        paths = [r for r in paths if _finished(runs_dir / r.stem, args.epochs)]
        seconds = [(runs_dir / r.stem / 'summary.csv').stat().st_mtime
                   - (runs_dir / r.stem / 'args.yaml').stat().st_mtime for r in paths]
    else:
        with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
            seconds = list(pool.map(lambda r: _train(r, runs_dir, data, args.train_py, env), paths))
    cpu1 = resource.getrusage(resource.RUSAGE_CHILDREN)

    runs, curves = _tabulate(paths, seconds, runs_dir)
    _write_outputs(args, out, work, models, paths, runs, curves, seconds,
                   wall=None if args.collect else time.perf_counter() - wall0,
                   cpu=None if args.collect else cpu1.ru_utime + cpu1.ru_stime - cpu0.ru_utime - cpu0.ru_stime)


def _tabulate(paths: List[Path], seconds: List[float], runs_dir: Path):
    """(one row per run, one row per run and epoch) from the runs' summary.csv."""
    runs, curves = [], []
    for path, secs in zip(paths, seconds):
        cfg = yaml.safe_load(path.read_text())
        rows = _read_summary(runs_dir / path.stem / 'summary.csv')
        for r in rows:
            curves.append(dict(model=cfg['model'], seed=cfg['seed'], epoch=int(r['epoch']) + 1,
                               eval_top1_err=round(100 - r['eval_top1'], 4), eval_loss=round(r['eval_loss'], 5),
                               train_loss=round(r['train_loss'], 5)))
        last = rows[-1]
        runs.append(dict(model=cfg['model'], seed=cfg['seed'], epochs=len(rows),
                         final_top1_err=round(100 - last['eval_top1'], 4),
                         best_top1_err=round(100 - max(r['eval_top1'] for r in rows), 4),
                         final_eval_loss=round(last['eval_loss'], 5), final_train_loss=round(last['train_loss'], 5),
                         seconds=round(secs, 1)))
    return runs, curves


def _write_outputs(args, out: Path, work: Path, models: List[str], paths: List[Path], runs: List[dict],
                   curves: List[dict], seconds: List[float], wall, cpu) -> None:
    for path, rows in ((out / 'runs.csv', runs), (work / 'curves.csv', curves)):
        with open(path, 'w', newline='') as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)
    n = args.img_size ** 2
    _figure(curves, runs, out / 'fig2d.png', f'digits at {args.img_size}×{args.img_size}: x ↦ B_c B_2 ReLU(B_1 x), '
            f'n = {n}, wd {args.weight_decay:g}')

    import numpy as np
    import timm
    import torch

    import timm_pkmixer
    summary = {}
    for model in models:
        final = [r['final_top1_err'] for r in runs if r['model'] == model]
        n_params = sum(q.numel() for q in timm.create_model(model).parameters())
        summary[model] = dict(params=n_params, final_top1_err_mean=round(float(np.mean(final)), 3),
                              final_top1_err_sd=round(float(np.std(final)), 3))
    meta = dict(
        python=platform.python_version(), torch=torch.__version__, timm=timm.__version__,
        timm_pkmixer=timm_pkmixer.__version__, cpu_count=os.cpu_count(), jobs=args.jobs, seeds=args.seeds,
        epochs=args.epochs, img_size=args.img_size, n=n, weight_decay=args.weight_decay,
        base_recipe={k: v for k, v in recipe(STRUCTURES[0], args.img_size, args.weight_decay, args.epochs, 0).items()
                     if k not in ('model', 'seed')}, summary=summary,
        wall_seconds=None if wall is None else round(wall, 1), cpu_seconds=None if cpu is None else round(cpu, 1),
        runs=[p.stem for p in paths], note=args.note or None,
        train_seconds_sum=round(sum(seconds), 1), load_average_end=os.getloadavg(),
        commands=[f'python benchmarks/fig2d/fig2d.py --train-py TRAIN_PY --out benchmarks/fig2d/{out.name} '
                  f'--img-size {args.img_size} --weight-decay {args.weight_decay:g} --seeds {args.seeds} '
                  f'--epochs {args.epochs} --jobs {args.jobs}',
                  f'pkmixer train RECIPE --train-py TRAIN_PY --data-dir DIGITS --output RUNS --experiment NAME   '
                  f'(x{len(paths)}, {args.jobs} at a time)'])
    (out / 'meta.json').write_text(json.dumps(meta, indent=1) + '\n')
    for model, s in summary.items():
        print(f'{model}: {s["params"]} params, final test error {s["final_top1_err_mean"]} ± '
              f'{s["final_top1_err_sd"]} %', flush=True)


if __name__ == '__main__':
    main()
