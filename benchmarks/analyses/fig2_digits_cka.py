"""The committed Fig. 2(a)-(c) digits results from the runs `fig2_digits.py` trained: three `pkmixer analyze cka`
sets, merged into compact CSVs.

    python benchmarks/analyses/fig2_digits_cka.py --runs OUT/runs --results benchmarks/analyses/fig2_digits

* ``seed0``, ``seed1``: the seed's Mixer against its nine SW-MLPs (p = 2^-n, n = 0..8);
* ``control``: the seed-0 Mixer against the seed-1 Mixer and the seed-1 SW-MLPs of p = 1/16 and p = 1.

Each set runs `pkmixer analyze cka` on the runs' validation split (899 images) in random mini-batches of 256
drawn with --batch-seed (default 0), and again in one batch of all 899 (the full-batch CKA that random
mini-batches should agree with), and through the library in batches of 256 read in the folder's own order
(sorted by class: the biased estimate the command gave before its batches were random, kept for comparison).
Writes into RESULTS: ``cka_summary.csv`` (one row per pair: mean diagonal, mean of the matrix, batches, batch
seed, the full-batch and the class-sorted mean diagonal), ``cka_matrices.csv`` (every matrix, long
form), ``training.csv`` (each run's accuracy and train wall time, from OUT/runs and OUT/meta.json), per set the
heatmaps of p = 1 and p = 1/16 and the density figure, and ``meta.json`` (each set's command, wall and CPU
seconds, versions).
"""
import argparse
import csv
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List

import yaml

DENSE, MIXER_P = 'sw_mlp_n0', 'sw_mlp_n4'  # the heatmaps kept: Fig. 2(c) (p = 1) and Fig. 2(b) (the Mixer's p)


def sets() -> Dict[str, List[str]]:
    """Set name -> [model A, models B...] (run folder names)."""
    out = {f'seed{s}': [f'mixer_s16c16_seed{s}'] + [f'sw_mlp_n{n}_seed{s}' for n in range(9)] for s in (0, 1)}
    out['control'] = ['mixer_s16c16_seed0', 'mixer_s16c16_seed1', 'sw_mlp_n4_seed1', 'sw_mlp_n0_seed1']
    return out


def _read(path: Path) -> List[dict]:
    with open(path) as f:
        return list(csv.DictReader(f))


def _write(path: Path, rows: List[dict]) -> None:
    with open(path, 'w', newline='') as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


def run_set(name: str, runs: List[str], runs_dir: Path, dest: Path, batch_seed: int, *extra: str) -> dict:
    """One `pkmixer analyze cka` run; keeps the kept figures, returns its meta."""
    cmd = [sys.executable, '-m', 'timm_pkmixer', 'analyze', 'cka', *(str(runs_dir / r) for r in runs),
           '--batch-seed', str(batch_seed), '--out-dir', str(dest), *extra]
    env = dict(os.environ, OMP_NUM_THREADS='1', MKL_NUM_THREADS='1')
    cpu0, start = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    wall, cpu1 = time.perf_counter() - start, resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode:
        raise SystemExit(f'{name} failed: {proc.stderr}')
    keep = {'cka_vs_density.png'} | {f'cka_{r}.png' for r in runs[1:]
                                      if name == 'control' or r.startswith((DENSE, MIXER_P))}
    for f in dest.glob('cka_*.png'):
        if f.name not in keep:
            f.unlink()
    command = ('pkmixer analyze cka ' + ' '.join(f'RUNS/{r}' for r in runs)
               + f' --batch-seed {batch_seed} --out-dir fig2_digits/{dest.name} ' + ' '.join(extra)).strip()
    printed = [line for line in proc.stdout.splitlines() if not line.startswith('wrote ')]  # 'wrote' names a path
    return dict(command=command, env='OMP_NUM_THREADS=1', wall_seconds=round(wall, 1),
                cpu_user_seconds=round(cpu1.ru_utime - cpu0.ru_utime, 2),
                cpu_system_seconds=round(cpu1.ru_stime - cpu0.ru_stime, 2), printed=printed)


def class_sorted_diagonals(runs_dir: Path, members: List[str], data_dir: Path) -> Dict[str, float]:
    """Model B -> the mean diagonal CKA in batches of 256 read in the folder's own order (sorted by class), as
    `pkmixer analyze cka` computed it before its batches were random: kept to show that estimator's bias."""
    import torch
    from timm.data import create_dataset, create_transform, resolve_data_config

    from timm_pkmixer.analysis import cka_matrix
    from timm_pkmixer.publish.checkpoint_file import build_validated_model, read_checkpoint

    def load(name):
        ckpt = read_checkpoint(str(runs_dir / name / 'last.pth.tar'))
        return build_validated_model(ckpt.train_args['model'], ckpt, None)[0], ckpt.train_args

    model_a, train_args = load(members[0])
    dataset = create_dataset('', root=str(data_dir), split='validation', is_training=False)
    dataset.transform = create_transform(**resolve_data_config(train_args, model=model_a), is_training=False)
    in_order = torch.utils.data.DataLoader(dataset, batch_size=256, shuffle=False)
    return {name: cka_matrix(model_a, load(name)[0], in_order).mean_diagonal for name in members[1:]}


def merge(results: Path, names: List[str], sorted_values: Dict[str, Dict[str, float]]) -> None:
    """Per-set CSVs -> cka_summary.csv (with the full-batch mean diagonal of the same pair) and
    cka_matrices.csv (long form); the per-set CSVs are removed."""
    summary, matrices = [], []
    for name in names:
        folder, full = results / name, results / f'{name}_full'
        full_rows = {r['model_b']: r for r in _read(full / 'cka_summary.csv')}
        for row in _read(folder / 'cka_summary.csv'):
            summary.append(dict(set=name, **row, mean_diagonal_full_batch=full_rows[row['model_b']]['mean_diagonal'],
                                mean_diagonal_class_sorted=f"{sorted_values[name][row['model_b']]:.6g}"))
            for line in _read(folder / f"cka_{row['model_b']}.csv"):
                feature_a = line.pop('feature_a')
                matrices += [dict(set=name, model_a=row['model_a'], model_b=row['model_b'], feature_a=feature_a,
                                  feature_b=fb, cka=v) for fb, v in line.items()]
        for f in folder.glob('*.csv'):
            f.unlink()
        shutil.rmtree(full)
    _write(results / 'cka_summary.csv', summary)
    _write(results / 'cka_matrices.csv', matrices)


def training_table(runs_dir: Path, train_meta: dict, names: List[str]) -> List[dict]:
    """One row per run of the given sets: model, density, seed, epochs, final and best top-1, train wall time
    (as fig2_digits.py recorded it; else from the run's files: last summary.csv write − args.yaml write)."""
    rows = []
    for name in sorted({r for s in names for r in sets()[s]}, key=lambda r: (r[-1], r)):
        args = yaml.safe_load((runs_dir / name / 'args.yaml').read_text())
        epochs = _read(runs_dir / name / 'summary.csv')
        top1 = [float(e['eval_top1']) for e in epochs]
        rows.append(dict(run=name, model=args['model'],
                         density=args['model_kwargs'].get('density', 1 / args['model_kwargs']['embed_dim']),
                         seed=args['seed'], epochs=len(epochs), final_eval_top1=round(top1[-1], 2),
                         best_eval_top1=round(max(top1), 2),
                         train_wall_seconds=train_meta.get(name, {}).get('wall_seconds') or round(
                             (runs_dir / name / 'summary.csv').stat().st_mtime
                             - (runs_dir / name / 'args.yaml').stat().st_mtime, 1)))
    return rows


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument('--runs', required=True, help="OUT/runs of fig2_digits.py")
    p.add_argument('--results', required=True, help='where the committed files go')
    p.add_argument('--batch-seed', type=int, default=0, help='seed of the random CKA mini-batches (default 0)')
    p.add_argument('--sets', nargs='+', choices=list(sets()), default=list(sets()), help='the sets to run')
    args = p.parse_args()
    runs_dir, results = Path(args.runs), Path(args.results)
    import numpy
    import timm
    import torch
    seeds = ' '.join(sorted({m[-1] for s in args.sets for m in sets()[s]}))
    meta = dict(note='Each set is one `pkmixer analyze cka` run (random mini-batches of 256 drawn with the batch '
                     'seed; RUNS = OUT/runs of `python benchmarks/analyses/fig2_digits.py --train-py TRAIN_PY '
                     f'--out OUT --seeds {seeds}`). Regenerate these files: `python '
                     'benchmarks/analyses/fig2_digits_cka.py --runs OUT/runs --results benchmarks/analyses/fig2_digits '
                     f'--batch-seed {args.batch_seed} --sets {" ".join(args.sets)}`.',
                torch=torch.__version__, timm=timm.__version__, numpy=numpy.__version__,
                python=platform.python_version(), machine='2 CPU cores shared by about 7 agents',
                batch_seed=args.batch_seed, sets={})
    for name in args.sets:
        members = sets()[name]
        dest = results / name
        dest.mkdir(parents=True, exist_ok=True)
        meta['sets'][name] = run_set(name, members, runs_dir, dest, args.batch_seed)
        # the same pairs in one batch of every example: what random mini-batches should agree with
        meta['sets'][f'{name}_full_batch'] = run_set(name, members, runs_dir, results / f'{name}_full',
                                                     args.batch_seed, '--batch-size', '899', '--no-figures')
        print(f"{name}: {meta['sets'][name]['wall_seconds']} s", flush=True)
    data = runs_dir.parent / 'digits'  # where fig2_digits.py wrote the ImageFolder
    sorted_values = {name: class_sorted_diagonals(runs_dir, sets()[name], data) for name in args.sets}
    merge(results, args.sets, sorted_values)
    train_meta = json.loads((runs_dir.parent / 'meta.json').read_text())
    _write(results / 'training.csv', training_table(runs_dir, train_meta.get('train', {}), args.sets))
    meta['training'] = {k: train_meta.get(k) for k in ('epochs', 'threads', 'jobs', 'train_command')}
    (results / 'meta.json').write_text(json.dumps(meta, indent=1) + '\n')


if __name__ == '__main__':
    main()
