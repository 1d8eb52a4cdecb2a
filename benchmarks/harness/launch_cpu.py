"""A CPU sweep of small runs: the README's old sequential loop against `pkmixer launch --workers N`, wall time.

Writes a synthetic ImageFolder and `--runs` recipes of tiny S-Mixers (S = C = 16, 2 blocks, 16×16 images), then, in
each round, trains all of them twice into fresh folders: once as the loop ``for r in DIR/*.yaml; do pkmixer train
"$r"; done`` (each run with the package's thread policy: the idle cores) and once as ``pkmixer launch DIR --workers
N`` (each worker its share of the idle cores); the order alternates between rounds. Runs use the stand-in train.py
of the tests (tests/mini_train_py.py: timm's loader, optimizer and scheduler) unless TIMM_TRAIN_PY is set.

    python benchmarks/harness/launch_cpu.py                      # 8 runs, --workers 2, 2 rounds
    python benchmarks/harness/launch_cpu.py --runs 8 --workers 2 --rounds 2 --epochs 2
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def write_data(root: Path, images: int) -> None:
    import numpy as np
    from PIL import Image
    rng = np.random.default_rng(0)
    for split, n in (('train', images), ('validation', images // 4)):
        for c in range(4):
            folder = root / split / f'class{c}'
            folder.mkdir(parents=True)
            for i in range(n // 4):
                Image.fromarray((rng.random((16, 16, 3)) * 255).astype(np.uint8)).save(folder / f'{i}.png')


def write_recipes(folder: Path, data: Path, runs: int, epochs: int) -> None:
    import yaml
    folder.mkdir(parents=True)
    for seed in range(runs):
        cfg = dict(model='s_mixer_s64c64_32', device_modules=['timm_pkmixer'],
                   model_kwargs=dict(img_size=16, patch_size=4, num_tokens=16, embed_dim=16, num_blocks=2),
                   data_dir=str(data), num_classes=4, img_size=16, batch_size=32, opt='adamw', lr=0.01,
                   epochs=epochs, warmup_epochs=0, device='cpu', workers=0, seed=seed)
        (folder / f'run{seed}.yaml').write_text(yaml.safe_dump(cfg))


def timed(command, env) -> float:
    t0 = time.perf_counter()
    subprocess.run(command, check=True, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t0


def sequential(folder: Path, train_py: str, env) -> float:
    t0 = time.perf_counter()
    for recipe in sorted(folder.glob('*.yaml')):
        subprocess.run([sys.executable, '-m', 'timm_pkmixer', 'train', str(recipe), '--train-py', train_py,
                        '--output', str(folder / 'runs'), '--experiment', recipe.stem], check=True, env=env,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t0


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    p.add_argument('--runs', type=int, default=8)
    p.add_argument('--workers', type=int, default=2)
    p.add_argument('--rounds', type=int, default=2)
    p.add_argument('--epochs', type=int, default=2)
    p.add_argument('--images', type=int, default=512, help='training images (validation: a quarter)')
    args = p.parse_args()
    train_py = os.environ.get('TIMM_TRAIN_PY') or str(ROOT / 'tests' / 'mini_train_py.py')
    env = {k: v for k, v in os.environ.items() if k != 'OMP_NUM_THREADS'}  # the thread policy decides
    work = Path(tempfile.mkdtemp(prefix='pkmixer-launch-bench-'))
    try:
        write_data(work / 'data', args.images)
        print(f'{args.runs} runs ({args.epochs} epochs, {args.images} images of 16×16), {os.cpu_count()} cores, '
              f'train.py: {Path(train_py).name}')
        ratios = []
        for r in range(args.rounds):
            times = {}
            order = ('sequential', 'launch') if r % 2 == 0 else ('launch', 'sequential')
            for kind in order:
                folder = work / f'round{r}_{kind}'
                write_recipes(folder, work / 'data', args.runs, args.epochs)
                load = os.getloadavg()[0]
                if kind == 'sequential':
                    times[kind] = sequential(folder, train_py, env)
                else:
                    times[kind] = timed([sys.executable, '-m', 'timm_pkmixer', 'launch', str(folder), '--workers',
                                         str(args.workers), '--train-py', train_py], env)
                print(f'round {r + 1} {kind:>10}: {times[kind]:7.1f} s  (load average before: {load:.1f}, after: '
                      f'{os.getloadavg()[0]:.1f})', flush=True)
            ratios.append(times['sequential'] / times['launch'])
            print(f'round {r + 1} sequential / launch --workers {args.workers}: {ratios[-1]:.2f}', flush=True)
        print(f'median ratio over {args.rounds} rounds: {statistics.median(ratios):.2f}')
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == '__main__':
    main()
