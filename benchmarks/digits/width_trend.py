"""The width trend at fixed Ω on real data, on the CPU (the paper's Fig. 5-6 claim, scaled down).

S-Mixers and RP S-Mixers at symmetric (C, S) pairs of equal Ω = (C·S² + C²·S)/2 (eq. S.42, as App. C.4), several
seeds, on scikit-learn's bundled 8×8 handwritten digits (1797 images, 10 classes; no download): per seed a
stratified 50/50 train/test split, P = 2 patches (S0 = 16 patches of C0 = 4 values), L = 8 blocks, skip layer
in block 0 (as the registered `s_mixer_*`). Training uses timm's optimizer and scheduler factories (AdamW,
warm-up + cosine); each run's per-epoch metrics go to a timm-format summary.csv (timm.utils.update_summary,
the writer of train.py), so `pkmixer plot run` draws them.

Outputs in --out: runs.csv (one row per run: its configuration and final metrics), epochs.csv (every run's
per-epoch metrics with its configuration, long form: the runs' summary.csv files merged, then removed),
table.md, width_trend.png, meta.json. `--replot` rebuilds table.md and the figure from runs.csv alone:

    python benchmarks/digits/width_trend.py --replot --out benchmarks/digits/width_trend_results

    pip install 'timm-pkmixer[research]'
    python benchmarks/digits/width_trend.py                       # defaults: ~15 min on an idle 2-core CPU, to output/
    python benchmarks/digits/width_trend.py --out benchmarks/digits/width_trend_results   # update the committed results
    python benchmarks/digits/width_trend.py --seeds 1 --epochs 2  # smoke run
"""
import argparse
import csv
import json
import math
import multiprocessing as mp
import os
import platform
import time
from typing import Dict, List, Tuple

import numpy as np
import torch
import torch.nn.functional as F

FAMILIES = {'S-Mixer': 's_mixer_s64c64_32', 'RP S-Mixer': 's_mixer_rp_s64c64_32'}
RUN_PREFIX = {'S-Mixer': 'smixer', 'RP S-Mixer': 'rp-smixer'}


def load_digits_split(seed: int) -> Tuple[torch.Tensor, ...]:
    """Stratified 50/50 split of the 8×8 digits, standardised with the train statistics: (x_tr, y_tr, x_te, y_te)."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split
    data = load_digits()
    x = torch.tensor(data.images, dtype=torch.float32)[:, None] / 16.  # (N, 1, 8, 8)
    y = torch.tensor(data.target, dtype=torch.long)
    tr, te = train_test_split(np.arange(len(y)), test_size=0.5, stratify=data.target, random_state=seed)
    mean, std = x[tr].mean(), x[tr].std()
    return (x[tr] - mean) / std, y[tr], (x[te] - mean) / std, y[te]


@torch.no_grad()
def evaluate(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor) -> Tuple[float, float]:
    """(mean cross-entropy, top-1 accuracy in %)."""
    model.eval()
    logits = model(x)
    return F.cross_entropy(logits, y).item(), 100. * (logits.argmax(-1) == y).float().mean().item()


def train_one(job: Dict) -> Dict:
    """Train one (family, C, S, seed) and return its final metrics; writes runs/<run>/summary.csv."""
    import timm
    from timm.optim import create_optimizer_v2
    from timm.scheduler import create_scheduler_v2
    from timm.utils import update_summary

    import timm_pkmixer  # noqa: F401  (registers the models even without the startup hook)

    torch.set_num_threads(job['threads'])
    seed, epochs, lr = job['seed'], job['epochs'], job['lr']
    x_tr, y_tr, x_te, y_te = load_digits_split(seed)
    torch.manual_seed(seed)
    model = timm.create_model(
        FAMILIES[job['family']], img_size=8, in_chans=1, patch_size=2, num_classes=10, num_blocks=job['depth'],
        num_tokens=job['S'], embed_dim=job['C'], perm_seed=seed)
    optimizer = create_optimizer_v2(model, 'adamw', lr=lr, weight_decay=job['weight_decay'])
    scheduler, _ = create_scheduler_v2(optimizer, 'cosine', num_epochs=epochs, warmup_epochs=job['warmup'],
                                       warmup_lr=lr / 100, min_lr=lr / 100)
    run_dir = os.path.join(job['out'], 'runs', job['run'])
    os.makedirs(run_dir, exist_ok=True)
    summary = os.path.join(run_dir, 'summary.csv')
    if os.path.exists(summary):
        os.remove(summary)

    gen = torch.Generator().manual_seed(seed)
    start, cpu_start = time.time(), time.process_time()
    for epoch in range(epochs):
        model.train()
        lr_epoch = optimizer.param_groups[0]['lr']
        order = torch.randperm(len(y_tr), generator=gen)
        total, count = 0., 0
        for i in range(0, len(order), job['batch_size']):
            idx = order[i:i + job['batch_size']]
            loss = F.cross_entropy(model(x_tr[idx]), y_tr[idx])
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            total, count = total + loss.item() * len(idx), count + len(idx)
        scheduler.step(epoch + 1)
        eval_loss, eval_top1 = evaluate(model, x_te, y_te)
        update_summary(epoch, {'loss': total / count}, {'loss': eval_loss, 'top1': eval_top1}, summary,
                       lr=lr_epoch, write_header=epoch == 0)
    train_loss, train_top1 = evaluate(model, x_tr, y_tr)
    return dict(family=job['family'], C=job['C'], S=job['S'], m=job['C'] * job['S'], seed=seed,
                params=sum(p.numel() for p in model.parameters()), train_loss=train_loss, train_err=100 - train_top1,
                test_loss=eval_loss, test_err=100 - eval_top1, seconds=time.time() - start,
                cpu_seconds=time.process_time() - cpu_start, run=job['run'])


EPOCH_CONFIG = ('family', 'C', 'S', 'm', 'seed')  # per run; the rest of the configuration is meta.json's


def merge_summaries(rows: List[Dict], out: str, config: Dict, keep_runs: bool = False) -> str:
    """Merge every run's runs/<run>/summary.csv into one long-form epochs.csv (one row per run and epoch, with the
    run's configuration) and remove the per-run folders unless `keep_runs`; returns the file."""
    import shutil
    path = os.path.join(out, 'epochs.csv')
    keys = ('depth', 'weight_decay', 'warmup', 'batch_size', 'epochs', 'omega')
    with open(path, 'w', newline='') as f:
        writer = None
        for r in sorted(rows, key=lambda r: r['run']):
            with open(os.path.join(out, 'runs', r['run'], 'summary.csv'), newline='') as g:
                for line in csv.DictReader(g):
                    record = dict(run=r['run'], **{k: r[k] for k in EPOCH_CONFIG}, **{k: config[k] for k in keys},
                                  base_lr=config['lr'], **line)  # lr: the epoch's, as summary.csv has it
                    if writer is None:
                        writer = csv.DictWriter(f, fieldnames=list(record))
                        writer.writeheader()
                    writer.writerow(record)
    if not keep_runs:
        shutil.rmtree(os.path.join(out, 'runs'))
    return path


def mean_sd(values: List[float]) -> Tuple[float, float]:
    a = np.asarray(values, dtype=float)
    return float(a.mean()), float(a.std(ddof=1)) if len(a) > 1 else 0.


def write_table(rows: List[Dict], pairs, omega: float, path: str) -> List[Dict]:
    """Markdown table: per (C, S) and family, test error and loss (mean ± sd over seeds) and the paired
    per-seed difference of the error from the C = S pair (or the widest pair)."""
    from timm_pkmixer.width import mixer_omega
    widest = max(pairs, key=lambda pt: (pt.width, -abs(pt.dim - pt.num_tokens)))
    agg = []
    lines = [f'Ω = {omega:g} (S-Mixer, γ = 1); mean ± sd over seeds; Δerr: paired per-seed difference from '
             f'(C, S) = ({widest.dim}, {widest.num_tokens}) of the same family.', '',
             '| family | C | S | m = S·C | p | Ω(S,C) | params | test error (%) | Δerr vs widest (pp) | '
             'test loss | train loss |',
             '|---|---|---|---|---|---|---|---|---|---|---|']
    for family in FAMILIES:
        ref = {r['seed']: r for r in rows
               if r['family'] == family and (r['C'], r['S']) == (widest.dim, widest.num_tokens)}
        for pt in pairs:
            sel = [r for r in rows if r['family'] == family and (r['C'], r['S']) == (pt.dim, pt.num_tokens)]
            if not sel:
                continue
            err, loss, tr_loss = (mean_sd([r[k] for r in sel]) for k in ('test_err', 'test_loss', 'train_loss'))
            diff = mean_sd([r['test_err'] - ref[r['seed']]['test_err'] for r in sel if r['seed'] in ref])
            loss_diff = mean_sd([r['test_loss'] - ref[r['seed']]['test_loss'] for r in sel if r['seed'] in ref])
            agg.append(dict(family=family, C=pt.dim, S=pt.num_tokens, m=pt.width, p=pt.density, seeds=len(sel),
                            test_err=err[0], test_err_sd=err[1], diff=diff[0], diff_sd=diff[1], test_loss=loss[0],
                            test_loss_sd=loss[1], loss_diff=loss_diff[0], loss_diff_sd=loss_diff[1],
                            train_loss=tr_loss[0]))
            lines.append(
                f'| {family} | {pt.dim} | {pt.num_tokens} | {pt.width} | {pt.density:.4f} | '
                f'{mixer_omega(pt.num_tokens, pt.dim):g} | {sel[0]["params"]:,} | {err[0]:.2f} ± {err[1]:.2f} | '
                f'{diff[0]:+.2f} ± {diff[1]:.2f} | {loss[0]:.3f} ± {loss[1]:.3f} | {tr_loss[0]:.4f} |')
    lines += [''] + paired_summary(rows, pairs, widest)
    with open(path, 'w') as f:
        f.write('\n'.join(lines) + '\n')
    return agg


def _mean_se(values: List[float]) -> str:
    mean, sd = mean_sd(values)
    return f'{mean:+.3f} ± {sd / math.sqrt(len(values)):.3f}'


def paired_summary(rows: List[Dict], pairs, widest) -> List[str]:
    """Paired (same seed, same data split) comparisons, mean ± standard error over seeds, and Spearman ρ of m
    against the test metrics over all runs of a family (runs of one seed share a split: the p-values are
    indicative only)."""
    from scipy.stats import spearmanr
    by_key = {(r['family'], r['C'], r['S'], r['seed']): r for r in rows}
    seeds = sorted({r['seed'] for r in rows})
    narrow = min(pt.width for pt in pairs)
    narrow_pts = [pt for pt in pairs if pt.width == narrow]
    lines = [f'Paired comparisons, mean ± standard error over {len(seeds)} seeds:', '',
             '| (C, S) | RP − normal test error (pp) | RP lower in | RP − normal test loss |', '|---|---|---|---|']
    normal, rp = FAMILIES
    for pt in pairs:
        both = [(by_key[(rp, pt.dim, pt.num_tokens, s)], by_key[(normal, pt.dim, pt.num_tokens, s)]) for s in seeds
                if (rp, pt.dim, pt.num_tokens, s) in by_key and (normal, pt.dim, pt.num_tokens, s) in by_key]
        if not both:
            continue
        wins = sum(a['test_err'] < b['test_err'] for a, b in both)
        lines.append(f'| ({pt.dim}, {pt.num_tokens}) | {_mean_se([a["test_err"] - b["test_err"] for a, b in both])} | '
                     f'{wins} of {len(both)} | {_mean_se([a["test_loss"] - b["test_loss"] for a, b in both])} |')
    lines += ['', f'| family | narrowest (m = {narrow}) − widest (m = {widest.width}): test error (pp) | same: '
              'test loss | Spearman ρ(m, test error) | Spearman ρ(m, test loss) |', '|---|---|---|---|---|']
    for family in FAMILIES:
        diffs = []  # per seed: mean over the narrowest pairs (both sides of C = S) minus the widest pair
        for s in seeds:
            ref = by_key.get((family, widest.dim, widest.num_tokens, s))
            narrow_runs = [by_key.get((family, pt.dim, pt.num_tokens, s)) for pt in narrow_pts if pt != widest]
            if ref and narrow_runs and all(narrow_runs):
                diffs.append(tuple(float(np.mean([r[k] for r in narrow_runs])) - ref[k]
                                   for k in ('test_err', 'test_loss')))
        runs = [r for r in rows if r['family'] == family]
        rho_err = spearmanr([r['m'] for r in runs], [r['test_err'] for r in runs])
        rho_loss = spearmanr([r['m'] for r in runs], [r['test_loss'] for r in runs])
        lines.append(f'| {family} | {_mean_se([d[0] for d in diffs]) if diffs else "-"} | '
                     f'{_mean_se([d[1] for d in diffs]) if diffs else "-"} | '
                     f'{rho_err.statistic:+.2f} (p = {rho_err.pvalue:.2g}, n = {len(runs)}) | '
                     f'{rho_loss.statistic:+.2f} (p = {rho_loss.pvalue:.2g}) |')
    return lines


def plot_trend(agg: List[Dict], omega: float, seeds: int, path: str) -> None:
    """Test error and test loss against C (log axis, C = S dashed), and the per-seed paired difference of the
    test loss from the widest pair against m, per family."""
    from timm_pkmixer.analysis._matplotlib import require_matplotlib
    Figure = require_matplotlib()
    fig = Figure(figsize=(12, 3.8), layout='constrained')
    axes = fig.subplots(1, 3)
    c_star = omega ** (1 / 3)
    for family, color, offset in (('S-Mixer', 'tab:red', 0.97), ('RP S-Mixer', 'tab:orange', 1.03)):
        sel = sorted((a for a in agg if a['family'] == family), key=lambda a: a['C'])
        c = np.array([a['C'] for a in sel], dtype=float)
        for ax, key in ((axes[0], 'test_err'), (axes[1], 'test_loss')):
            ax.errorbar(c * offset, [a[key] for a in sel], yerr=[a[key + '_sd'] for a in sel], color=color,
                        marker='o', ms=4, capsize=3, label=family)
        for branch, ls, marker in ((lambda a: a['C'] <= a['S'], '-', 'v'), (lambda a: a['C'] >= a['S'], '--', '^')):
            part = sorted((a for a in sel if branch(a)), key=lambda a: a['m'])
            side = 'C ≤ S' if ls == '-' else 'C ≥ S'
            axes[2].errorbar([a['m'] for a in part], [a['loss_diff'] for a in part],
                             yerr=[a['loss_diff_sd'] / math.sqrt(a['seeds']) for a in part], color=color, ls=ls,
                             marker=marker, ms=5, capsize=3, label=f'{family}, {side}')
    for ax in axes[:2]:
        ax.set_xscale('log')
        ax.axvline(c_star, color='grey', ls='--', lw=0.8)
        ax.set_xlabel('channels C  (S from eq. S.42; dashed: C = S)')
    axes[0].set_ylabel('test error (%)'), axes[1].set_ylabel('test loss')
    axes[2].set_ylabel('test loss − test loss at C = S')
    axes[2].axhline(0, color='grey', lw=0.8)
    axes[2].set_xlabel('effective width m = S·C')
    axes[0].set_title(f'8×8 digits, Ω = {omega:g}, mean ± sd of {seeds} seeds', fontsize=9)
    axes[1].set_title('test cross-entropy', fontsize=9)
    axes[2].set_title('Δ test loss from C = S, paired by seed (mean ± SE)', fontsize=9)
    for ax in axes:
        ax.legend(fontsize=8)
    fig.savefig(path, dpi=90)


def main() -> None:
    from timm_pkmixer.width import width_curve
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--omega', type=float, default=2 ** 15, help='Ω of every pair (default 2^15: C* = S* = 32)')
    parser.add_argument('--dims', type=int, nargs='+', default=[8, 12, 16, 32],
                        help='C of the pairs up to C*, each mirrored to (S, C) (default 8 12 16 32)')
    parser.add_argument('--seeds', type=int, default=10)
    parser.add_argument('--epochs', type=int, default=40)
    parser.add_argument('--depth', type=int, default=8, help='blocks L (8 as App. C.4)')
    parser.add_argument('--lr', type=float, default=1e-2)
    parser.add_argument('--weight-decay', type=float, default=0.05)
    parser.add_argument('--warmup', type=int, default=2, help='warm-up epochs')
    parser.add_argument('--batch-size', type=int, default=128)
    parser.add_argument('--workers', type=int, default=2, help='parallel runs (one torch thread each)')
    parser.add_argument('--keep-runs', action='store_true',
                        help='keep runs/<run>/summary.csv after merging them into epochs.csv (for `pkmixer plot run`)')
    parser.add_argument('--replot', action='store_true', help='no training: rebuild table and plot from runs.csv')
    parser.add_argument('--out', default=os.path.join('output', 'width_trend'),
                        help='output folder (default output/width_trend; the committed results are '
                             'benchmarks/digits/width_trend_results: pass that to update them)')
    args = parser.parse_args()

    pairs = width_curve(args.omega, 1.0, args.dims, mirror=True)
    os.makedirs(args.out, exist_ok=True)
    if args.replot:
        with open(os.path.join(args.out, 'runs.csv'), newline='') as f:
            rows = [{k: v if k in ('family', 'run') else float(v) for k, v in r.items()} for r in csv.DictReader(f)]
        for r in rows:
            r.update(C=int(r['C']), S=int(r['S']), m=int(r['m']), seed=int(r['seed']), params=int(r['params']))
        agg = write_table(rows, pairs, args.omega, os.path.join(args.out, 'table.md'))
        plot_trend(agg, args.omega, len({r['seed'] for r in rows}), os.path.join(args.out, 'width_trend.png'))
        print(open(os.path.join(args.out, 'table.md')).read())
        return
    jobs = [dict(family=family, C=pt.dim, S=pt.num_tokens, seed=seed, epochs=args.epochs, depth=args.depth,
                 lr=args.lr, weight_decay=args.weight_decay, warmup=args.warmup, batch_size=args.batch_size,
                 threads=1, out=args.out, run=f'{RUN_PREFIX[family]}-c{pt.dim}-s{pt.num_tokens}-seed{seed}')
            for seed in range(args.seeds) for pt in pairs for family in FAMILIES]
    print(f'{len(jobs)} runs: {len(pairs)} (C, S) pairs × {len(FAMILIES)} families × {args.seeds} seeds, '
          f'{args.workers} workers', flush=True)
    start, load_start = time.time(), os.getloadavg()
    rows = []
    with mp.get_context('spawn').Pool(args.workers) as pool:
        for r in pool.imap_unordered(train_one, jobs):
            rows.append(r)
            print(f'[{len(rows)}/{len(jobs)} {time.time() - start:6.0f} s] {r["family"]:10s} C={r["C"]:3d} '
                  f'S={r["S"]:3d} seed {r["seed"]}: test err {r["test_err"]:5.2f} %  loss {r["test_loss"]:.3f}  '
                  f'train loss {r["train_loss"]:.4f}  ({r["seconds"]:.0f} s, cpu {r["cpu_seconds"]:.0f} s)', flush=True)
    wall = time.time() - start
    rows.sort(key=lambda r: (r['family'], r['C'], r['seed']))
    with open(os.path.join(args.out, 'runs.csv'), 'w', newline='') as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    merge_summaries(rows, args.out, vars(args), keep_runs=args.keep_runs)
    agg = write_table(rows, pairs, args.omega, os.path.join(args.out, 'table.md'))
    plot_trend(agg, args.omega, args.seeds, os.path.join(args.out, 'width_trend.png'))
    meta = dict(vars(args), pairs=[(pt.dim, pt.num_tokens) for pt in pairs], runs=len(rows),
                wall_seconds=round(wall, 1), sum_run_seconds=round(sum(r['seconds'] for r in rows), 1),
                sum_run_cpu_seconds=round(sum(r['cpu_seconds'] for r in rows), 1),
                cpu_count=os.cpu_count(), load_avg_start=load_start, load_avg_end=os.getloadavg(),
                torch=torch.__version__, python=platform.python_version(),
                dataset='sklearn.datasets.load_digits (8x8, 1797 images), stratified 50/50 split per seed')
    meta['out'] = os.path.relpath(args.out)
    with open(os.path.join(args.out, 'meta.json'), 'w') as f:
        json.dump(meta, f, indent=2)
    print(open(os.path.join(args.out, 'table.md')).read())
    print(f'wall time {wall:.0f} s ({wall / 60:.1f} min); wrote {args.out}')


if __name__ == '__main__':
    main()
