"""Figs. S.6–S.8's form (mean loss curves with min–max bands over seeds) from a committed report's epochs.csv.

No training: reads `benchmarks/digits/paper_experiments_results/width/epochs.csv` (the CPU-scale Fig. 5 width sweep
on the 8×8 digits, five seeds per point) and writes `benchmarks/digits/curve_bands/bands.csv` (point, metric, epoch,
n, mean, min, max) and `width_bands.png` (test loss, train loss, test accuracy of the S-Mixers, normal solid, RP
dashed). It shows the D.7 figure form on the committed runs; it is not Fig. S.6's setting (CIFAR-10, L = 8, lr 0.1,
600 epochs).

    python benchmarks/digits/curve_bands.py
"""
import csv
import re
from pathlib import Path

from timm_pkmixer.reports.curve_figures import CURVE_METRICS, min_max_band, plot_curve_bands
from timm_pkmixer.runs.epochs_csv import read_epochs_csv

HERE = Path(__file__).resolve().parent
SOURCE = HERE / 'paper_experiments_results' / 'width' / 'epochs.csv'
OUT = HERE / 'curve_bands'


def main() -> None:
    groups = {}
    for run in read_epochs_csv(SOURCE):
        if run.model.startswith('sw_mlp'):
            continue  # D.7 compares normal and RP Mixers
        perm = run.model_kwargs.get('permutation', 'random' if 'perm_seed' in run.model_kwargs else 'normal')
        label = f"c{run.model_kwargs['embed_dim']}_s{run.model_kwargs['num_tokens']}_{perm}"
        groups.setdefault(label, []).append(run.curves)
    groups = dict(sorted(groups.items(), key=lambda kv: [int(x) for x in re.findall(r'\d+', kv[0])] + [kv[0]]))
    OUT.mkdir(exist_ok=True)
    with open(OUT / 'bands.csv', 'w', newline='') as f:
        w = csv.writer(f)
        w.writerow(['point', 'metric', 'epoch', 'n', 'mean', 'min', 'max'])
        for label, trials in groups.items():
            for metric in CURVE_METRICS:
                epochs, mean, lo, hi = min_max_band([t[metric] for t in trials])
                for row in zip(epochs, mean, lo, hi):
                    w.writerow([label, metric, int(row[0]), len(trials)] + [f'{v:.6g}' for v in row[1:]])
    plot_curve_bands(groups, str(OUT / 'width_bands.png'),
                     title='digits S-Mixers at Ω = 2^18 pairs: mean and min–max over 5 seeds (dashed: RP)')


if __name__ == '__main__':
    main()
