"""Fig. 2(a)-(c) at the scale of the 8×8 digits: train an MLP-Mixer and SW-MLPs of density 2^-n with timm's
train.py (through `pkmixer train`), then compare their hidden features with `pkmixer analyze cka`.

The paper's C.1 setting scaled down to scikit-learn's bundled 8×8 digits (stratified 50/50 split, written as an
ImageFolder by `timm_pkmixer.data.datasets.write_digits_image_folder`, not committed):

* Mixer: L = 3, γ = 2, P = 2 (S0 = 16 patches of C0 = 12 values), S = C = 16 (m = 256), `pk_mixer_ss8_32` with
  its shape arguments overridden;
* SW-MLPs: 6 MLP blocks of width m = 256, hidden γm = 512, density p = 2^-n (n = 0..8), the same per-patch FC
  (12 → 16, so S0·C = m and the input layer is the identity), `sw_mlp_o18_32` with its shape arguments overridden;
* training as `benchmarks/digits/paper_experiments.py`: AdamW lr 0.01, weight decay 0.05, cosine, 2 warm-up epochs,
  batch 128, no augmentation, EPOCHS epochs, the given train.py seeds, JOBS runs at a time (default one), one
  thread each.

    python benchmarks/analyses/fig2_digits.py --train-py /path/to/timm/train.py --out OUT [--epochs 40] [--seeds 0 1] \
        [--jobs 1] [--only RUN ...]

then, from the repository root,

    pkmixer analyze cka OUT/runs/mixer_s16c16_seed0 OUT/runs/sw_mlp_n*_seed0 --out-dir OUT/cka

Checkpoints stay under OUT/runs (git-ignored); args.yaml and summary.csv of each run are kept. OUT/meta.json
records the commands and times. A run that already finished every epoch is not trained again.
"""
import argparse
import concurrent.futures
import json
import os
import platform
import shlex
import subprocess
import sys
import time
from pathlib import Path

import yaml

BASE = dict(
    device_modules=['timm_pkmixer.replica_check'],
    num_classes=10, img_size=8, crop_pct=1.0, mean=[0.5, 0.5, 0.5], std=[0.5, 0.5, 0.5],
    train_split='train', val_split='validation',
    batch_size=128, opt='adamw', lr=0.01, weight_decay=0.05, epochs=40, sched='cosine', warmup_epochs=2,
    warmup_lr=1.0e-4, min_lr=1.0e-5, cooldown_epochs=0, no_aug=True, smoothing=0.0, mixup=0.0, cutmix=0.0,
    reprob=0.0, device='cpu', workers=0, pin_mem=False, checkpoint_hist=1, log_interval=1000, seed=0,
)
SIZE = 16          # S = C
GAMMA = 2.0
DENSITY_EXPONENTS = range(0, 9)  # p = 2^-n, n = 0..8 (p = 1/256: about one weight per row of a 256-wide layer)


def recipes(epochs: int, seed: int) -> dict:
    """Run name -> train.py arguments (train.py's --seed also seeds the SW-MLP's weights; its mask seed stays 0)."""
    base = dict(BASE, epochs=epochs, seed=seed)
    out = {f'mixer_s{SIZE}c{SIZE}_seed{seed}': dict(
        model='pk_mixer_ss8_32',
        model_kwargs=dict(img_size=8, patch_size=2, num_blocks=3, num_tokens=SIZE, embed_dim=SIZE, gamma=GAMMA),
        **base)}
    for n in DENSITY_EXPONENTS:
        out[f'sw_mlp_n{n}_seed{seed}'] = dict(
            model='sw_mlp_o18_32',
            model_kwargs=dict(img_size=8, patch_size=2, embed_dim=SIZE, num_blocks=6, width=SIZE * SIZE,
                              gamma=GAMMA, density=2.0 ** -n),
            **base)
    return out


def _finished(run: Path, epochs: int) -> bool:
    summary = run / 'summary.csv'
    return (summary.is_file() and len(summary.read_text().strip().splitlines()) == epochs + 1
            and (run / 'last.pth.tar').is_file())


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument('--train-py', required=True, help="timm's train.py (not in the timm wheel)")
    p.add_argument('--out', required=True, help='output folder')
    p.add_argument('--epochs', type=int, default=40)
    p.add_argument('--seeds', type=int, nargs='+', default=[0], help="train.py --seed values (default 0)")
    p.add_argument('--jobs', type=int, default=1, help='runs at a time, one thread each (default 1)')
    p.add_argument('--only', nargs='+', default=None, metavar='RUN',
                   help='train only these runs, e.g. mixer_s16c16_seed0 sw_mlp_n4_seed0 (default: every run)')
    args = p.parse_args()

    out = Path(args.out)
    (out / 'recipes').mkdir(parents=True, exist_ok=True)
    runs = out / 'runs'
    runs.mkdir(exist_ok=True)
    (out / '.gitignore').write_text('digits/\n*.pth.tar\n*.log\n')
    from timm_pkmixer.data.datasets import write_digits_image_folder
    data = out / 'digits'
    if not (data / 'validation').is_dir():
        write_digits_image_folder(str(data))
    env = dict(os.environ, OMP_NUM_THREADS='1', MKL_NUM_THREADS='1', TIMM_PKMIXER_AUTOLOAD='1')
    meta_path = out / 'meta.json'
    meta = json.loads(meta_path.read_text()) if meta_path.is_file() else {}
    import timm
    import torch
    meta.update(python=platform.python_version(), torch=torch.__version__, timm=timm.__version__,
                epochs=args.epochs, threads=1, jobs=args.jobs)
    train_meta = meta.setdefault('train', {})
    todo = {name: r for seed in args.seeds for name, r in recipes(args.epochs, seed).items()}
    unknown = sorted(set(args.only or ()) - set(todo))
    if unknown:
        p.error(f'--only: no run {", ".join(unknown)} (the runs: {", ".join(todo)})')
    todo = {name: r for name, r in todo.items() if args.only is None or name in args.only}
    for name, recipe in todo.items():
        path = out / 'recipes' / f'{name}.yaml'
        path.write_text(yaml.safe_dump(dict(recipe, experiment=name), sort_keys=False))

    def train(name: str) -> float:
        cmd = [sys.executable, '-m', 'timm_pkmixer', 'train', str(out / 'recipes' / f'{name}.yaml'),
               '--train-py', args.train_py, '--data-dir', str(data), '--output', str(runs)]
        start = time.perf_counter()
        with open(runs / f'{name}.log', 'w') as f:
            proc = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, env=env)
        if proc.returncode:
            raise SystemExit(f'failed ({proc.returncode}): {shlex.join(cmd)}; see {runs / name}.log')
        for ckpt in (runs / name).glob('checkpoint-*.pth.tar'):
            ckpt.unlink()
        return time.perf_counter() - start

    names = [name for name in todo if not _finished(runs / name, args.epochs)]
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        futures = {pool.submit(train, name): name for name in names}
        for future in concurrent.futures.as_completed(futures):
            name = futures[future]
            train_meta[name] = dict(wall_seconds=round(future.result(), 1), jobs=args.jobs)
            meta['train_command'] = ('pkmixer train recipes/NAME.yaml --train-py TRAIN_PY --data-dir digits '
                                     '--output runs   (JOBS runs at a time, OMP_NUM_THREADS=1)')
            meta_path.write_text(json.dumps(meta, indent=1))
            print(f'{name}: {train_meta[name]["wall_seconds"]} s', flush=True)


if __name__ == '__main__':
    main()
