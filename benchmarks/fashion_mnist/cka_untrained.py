"""Fig. 2's CKA before any training: the untrained control of (d).

Each run of the committed Fig. 2 experiment (``fig2/epochs.csv``: the Mixer S = C = 32, L = 3, γ = 2 and the SW-MLPs
at six densities, three seeds) is built again at its initialisation, as timm's train.py builds it (``random_seed(
seed, rank 0)``, then ``create_model`` with the run's recorded arguments), and saved as a run folder (``args.yaml``
and ``last.pth.tar``); then ``pkmixer analyze cka`` computes each seed's Mixer against that seed's SW-MLPs exactly as
(d) did for the trained ones (the 10,000 test images, 40 random batches of 256, batch seed 0). The difference
between ``fig2/cka_summary.csv`` and the summary this writes is what training did.

    python benchmarks/fashion_mnist/cka_untrained.py --data-dir data/fmnist \
        --out-dir benchmarks/fashion_mnist/fig2_untrained

Writes ``cka_summary.csv`` (the columns of ``pkmixer analyze cka``'s) into `--out-dir`; the models and the per-seed
matrices go to a scratch folder (``--work-dir``). ``--seeds 0`` rebuilds one seed only: a rerun to set beside the
committed rows of that seed (the build and the CKA are deterministic on one machine and thread count).
"""
import argparse
import csv
import subprocess
import sys
from pathlib import Path

import timm
import torch
import yaml
from timm.utils import random_seed

import timm_pkmixer  # noqa: F401  (registers the models)
from timm_pkmixer.runs.epochs_csv import read_epochs_csv

HERE = Path(__file__).resolve().parent


def build_initial(args: dict, out: Path) -> Path:
    """The run's model at initialisation (train.py's seeding and model arguments), saved as a run folder."""
    random_seed(int(args['seed']), 0)
    model = timm.create_model(args['model'], pretrained=False, in_chans=args.get('in_chans'),
                              num_classes=args.get('num_classes'), drop_rate=args.get('drop', 0.0),
                              drop_path_rate=args.get('drop_path'), drop_block_rate=args.get('drop_block'),
                              **(args.get('model_kwargs') or {}))
    out.mkdir(parents=True, exist_ok=True)
    (out / 'args.yaml').write_text(yaml.safe_dump(args, sort_keys=False), encoding='utf-8')
    torch.save(dict(epoch=-1, arch=args['model'], state_dict=model.state_dict(), args=None), out / 'last.pth.tar')
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    p.add_argument('--epochs-csv', default=str(HERE / 'fig2' / 'epochs.csv'), help="the trained experiment's runs")
    p.add_argument('--data-dir', required=True, help='the prepared Fashion-MNIST (pkmixer prepare-fashion-mnist)')
    p.add_argument('--out-dir', required=True, help='where cka_summary.csv goes')
    p.add_argument('--work-dir', default='cka_untrained_work', help='scratch: the initial models, per-seed CKA')
    p.add_argument('--threads', type=int, default=1)
    p.add_argument('--seeds', type=int, nargs='+', default=None, help="only these seeds (default: the experiment's)")
    a = p.parse_args()
    work = Path(a.work_dir)
    runs = read_epochs_csv(a.epochs_csv)
    seeds = sorted({int(r.seed) for r in runs})
    if a.seeds is not None:
        missing = sorted(set(a.seeds) - set(seeds))
        if missing:
            p.error(f'seeds {missing} are not in {a.epochs_csv} (its seeds: {seeds})')
        seeds = sorted(set(a.seeds))
    rows = []
    for seed in seeds:
        mine = [r for r in runs if int(r.seed) == seed]
        mixer = [r for r in mine if not r.model.startswith('sw_mlp')]
        sw = sorted((r for r in mine if r.model.startswith('sw_mlp')), key=lambda r: -float(r.model_kwargs['density']))
        assert len(mixer) == 1 and sw, (seed, [r.name for r in mine])
        folders = [build_initial(dict(r.args), work / 'models' / Path(r.name).name) for r in mixer + sw]
        out = work / f'cka_seed{seed}'
        subprocess.run([sys.executable, '-m', 'timm_pkmixer', 'analyze', 'cka', *map(str, folders),
                        '--data-dir', a.data_dir, '--threads', str(a.threads), '--no-figures', '--out-dir', str(out)],
                       check=True)
        with open(out / 'cka_summary.csv', newline='') as f:
            rows += list(csv.DictReader(f))
    Path(a.out_dir).mkdir(parents=True, exist_ok=True)
    with open(Path(a.out_dir) / 'cka_summary.csv', 'w', newline='') as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    print(f'wrote {Path(a.out_dir) / "cka_summary.csv"} ({len(rows)} rows)')
    return 0


if __name__ == '__main__':
    sys.exit(main())
