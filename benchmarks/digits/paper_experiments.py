"""The paper's experiments at CPU scale, through the package's own commands: sweep → train → report.

For each experiment (``depth``: Fig. 7; ``rp-block``: Fig. S.4; ``width``: Fig. 5 with its SW-MLP arm) this runs

    pkmixer sweep BASE --experiment E [--figure fig5] --seeds 0 1 2 3 4 --out-dir WORK/E/recipes
    pkmixer train RECIPE --train-py TRAIN_PY        (once per recipe: timm's unmodified train.py)
    pkmixer report WORK/E/runs --out-dir OUT/E

as subprocesses, on scikit-learn's bundled 8×8 digits written as an ImageFolder (stratified 50/50 split,
`timm_pkmixer.data.datasets.write_digits_image_folder`, into `WORK/digits`). The base recipe
(`OUT/digits_s_mixer.yaml`) scales the paper's S-Mixer setting down to 8×8 images: P = 2 (S0 = 16 patches of C0 = 12
values), S = C = 32, skip layer, AdamW lr 0.01, weight decay 0.05, 40 epochs, 2 warm-up epochs, cosine, batch 128, no
augmentation, no label smoothing; the rp-block study keeps the registered S-Mixer's L = 8 (our choice: Fig. S.4's
caption gives no L, D.5's text 4 blocks). Runs go two at a time with one thread each (2 cores).

What is kept in OUT, per experiment: `E/epochs.csv` (every run's per-epoch metrics with its configuration, long
form, no machine path), `E/report.csv`, `E/report.md` and the figures; `OUT/meta.json` records the commands (with
placeholders for machine paths), wall and CPU time, and versions. The run folders, recipes and logs stay in WORK
(default: a temporary folder, deleted at the end; `--keep-work DIR` keeps them). The tables and figures regenerate
from the epochs.csv files alone:

    python benchmarks/digits/paper_experiments.py --regenerate          # rewrites OUT/E/report.* and figures
    python benchmarks/digits/paper_experiments.py --train-py pytorch-image-models/train.py --out output/paper_cpu
    python benchmarks/digits/paper_experiments.py --train-py ... \
        --out benchmarks/digits/paper_experiments_results  # update
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
import tempfile
import time
from pathlib import Path
from typing import Optional

import yaml

EXPERIMENTS = {
    # experiment: extra `pkmixer sweep` arguments (the digits recipe declares no figure: the width sweep is Fig. 5's)
    'depth': [],
    'rp-block': [],
    'width': ['--figure', 'fig5'],
}
RESULTS = Path(__file__).resolve().parent / 'paper_experiments_results'
BASE = dict(
    model='s_mixer_s64c64_32',
    model_kwargs=dict(img_size=8, patch_size=2, num_tokens=32, embed_dim=32),
    device_modules=['timm_pkmixer.replica_check'],
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


def _finished(run: Path) -> bool:
    """True when the run folder holds every epoch train.py runs (a run of an earlier, interrupted invocation)."""
    from timm_pkmixer.runs.run_folder import read_run
    return (run / 'args.yaml').is_file() and read_run(run).finished


def _train(recipe: Path, runs: Path, data: Path, train_py: str, env: dict, resume: bool) -> Optional[float]:
    """Train one recipe; None when ``--resume`` found it finished. A partial run folder is started afresh."""
    run = runs / recipe.stem
    if resume and _finished(run):
        return None
    if run.exists():
        shutil.rmtree(run)
    seconds = _run(_cli('train', str(recipe), '--train-py', train_py, '--data-dir', str(data), '--output',
                        str(runs)), env, runs / f'{recipe.stem}.log')
    for ckpt in (runs / recipe.stem).glob('*.pth.tar'):
        ckpt.unlink()
    return seconds


def _portable(text: str, paths: dict) -> str:
    """A command with this machine's paths replaced by placeholders (WORK, OUT, TRAIN_PY, pkmixer)."""
    for path, name in paths.items():
        text = text.replace(path, name)
    return text


def regenerate(out: Path, experiments: list, env: dict) -> None:
    """report.csv, report.md and the figures of each experiment again, from its epochs.csv alone."""
    for experiment in experiments:
        folder = out / experiment
        _run(_cli('report', str(folder / 'epochs.csv'), '--out-dir', str(folder)), env, Path(os.devnull))
        print(f'{experiment}: rewrote {folder}/report.csv, report.md and the figures from epochs.csv', flush=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument('--train-py', help="timm's train.py (not in the timm wheel); not needed with --regenerate")
    p.add_argument('--out', default=str(RESULTS), help='results folder (default: the committed one)')
    p.add_argument('--regenerate', action='store_true',
                   help='no training: rewrite each OUT/E/report.* and figures from OUT/E/epochs.csv')
    p.add_argument('--keep-work', default=None,
                   help='keep run folders, recipes and logs in this folder (default: a temporary folder, deleted)')
    p.add_argument('--experiments', nargs='+', choices=list(EXPERIMENTS), default=list(EXPERIMENTS))
    p.add_argument('--seeds', type=int, default=5, help='seeds 0..N-1 (default 5)')
    p.add_argument('--epochs', type=int, default=40)
    p.add_argument('--jobs', type=int, default=2, help='runs at a time, one thread each (default 2)')
    p.add_argument('--resume', action='store_true',
                   help='with --keep-work: keep runs of an interrupted invocation that finished every epoch (wall '
                        'and CPU time then cover only the runs trained now; meta.json counts both)')
    args = p.parse_args()

    out = Path(args.out)
    env = dict(os.environ, OMP_NUM_THREADS='1', MKL_NUM_THREADS='1', TIMM_PKMIXER_AUTOLOAD='1')
    if args.regenerate:
        regenerate(out, args.experiments, env)
        return
    if not args.train_py:
        p.error('--train-py is required (unless --regenerate)')
    if args.resume and not args.keep_work:
        p.error('--resume needs --keep-work (the runs of the interrupted invocation)')
    out.mkdir(parents=True, exist_ok=True)
    work = Path(args.keep_work) if args.keep_work else Path(tempfile.mkdtemp(prefix='paper_experiments_'))
    work.mkdir(parents=True, exist_ok=True)
    paths = {str(work.resolve()): 'WORK', str(work): 'WORK', str(out.resolve()): 'OUT', str(out): 'OUT',
             args.train_py: 'TRAIN_PY', shlex.join(_cli()): 'pkmixer'}
    base = dict(BASE, epochs=args.epochs)
    base_path = out / 'digits_s_mixer.yaml'
    base_path.write_text('# Base recipe of benchmarks/digits/paper_experiments.py: the S-Mixer setting on 8x8 digits.\n'
                         + yaml.safe_dump(base, sort_keys=False))
    meta = json.loads((out / 'meta.json').read_text()) if (out / 'meta.json').is_file() else {}
    meta.update(python=platform.python_version(), cpu_count=os.cpu_count(), jobs=args.jobs, seeds=args.seeds,
                epochs=args.epochs, train_py="TRAIN_PY: timm's train.py of the timm version below")
    import timm
    import torch

    import timm_pkmixer
    meta.update(torch=torch.__version__, timm=timm.__version__, timm_pkmixer=timm_pkmixer.__version__)
    from timm_pkmixer.data.datasets import write_digits_image_folder
    # One data path for every invocation, so runs kept by --resume and runs trained now record the same data_dir
    # (`pkmixer report` groups runs by their whole configuration). Deterministic, rewritten each time.
    data = work / 'digits'
    shutil.rmtree(data, ignore_errors=True)
    write_digits_image_folder(str(data))
    for experiment in args.experiments:
        folder = work / experiment
        runs = folder / 'runs'
        runs.mkdir(parents=True, exist_ok=True)
        seeds = [str(s) for s in range(args.seeds)]
        shutil.rmtree(folder / 'recipes', ignore_errors=True)
        sweep = _cli('sweep', str(base_path), '--experiment', experiment, '--seeds', *seeds, '--out-dir',
                     str(folder / 'recipes'), *EXPERIMENTS[experiment])
        wall0, cpu0 = time.perf_counter(), resource.getrusage(resource.RUSAGE_CHILDREN)
        _run(sweep, env, folder / 'sweep.log')
        recipes = sorted((folder / 'recipes').glob('*.yaml'))
        with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
            times = list(pool.map(lambda r, runs=runs: _train(r, runs, data, args.train_py, env, args.resume),
                                  recipes))
        trained = [t for t in times if t is not None]
        (out / experiment).mkdir(exist_ok=True)
        report = _cli('report', str(runs), '--out-dir', str(out / experiment))
        _run(report, env, folder / 'report.log')
        cpu1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        earlier = meta.get(experiment) if args.resume else None
        meta[experiment] = dict(
            runs=len(recipes), runs_trained=len(trained), runs_kept_from_earlier=len(times) - len(trained),
            wall_seconds=round(time.perf_counter() - wall0, 1),
            cpu_seconds=round(cpu1.ru_utime + cpu1.ru_stime - cpu0.ru_utime - cpu0.ru_stime, 1),
            train_seconds_sum=round(sum(trained), 1),
            commands=[_portable(c, paths) for c in (
                shlex.join(sweep), f'pkmixer train RECIPE --train-py {args.train_py} --data-dir {data} '
                f'--output {runs}   (x{len(recipes)}, {args.jobs} at a time)', shlex.join(report))],
            load_average_end=os.getloadavg())
        if earlier:  # the record of the interrupted invocation(s) whose runs were kept
            meta[experiment]['earlier_invocations'] = earlier.pop('earlier_invocations', []) + [earlier]
        (out / 'meta.json').write_text(json.dumps(meta, indent=1, ensure_ascii=False) + '\n')
        print(f'{experiment}: {len(recipes)} runs, {meta[experiment]["wall_seconds"]} s wall, '
              f'{meta[experiment]["cpu_seconds"]} s CPU', flush=True)
    if not args.keep_work:
        shutil.rmtree(work)


if __name__ == '__main__':
    main()
