"""How long each long-running command stays silent: wall time, seconds to its first stderr line, and the longest
gap between two lines (or between the last line and the end), per command, as a user runs it.

Runs, each in a fresh process (``python -m timm_pkmixer …``), with the package's thread policy:
`pkmixer models`, `sweep` of the ImageNet Fig. 6(d) recipe, `plot width` at the paper's Ω, `report` on
`--runs` synthetic run folders (timm's own ``update_summary``, two seeds per depth), and `push` and `expand`
(factor 2) of an RP Mixer-L/16 checkpoint (830 MB, written once). The time before the first line is mostly the
import of torch and timm (about 5 s here), which no progress line can precede.

    python benchmarks/harness/progress_gaps.py                  # prints the table; --csv FILE writes it
    python benchmarks/harness/progress_gaps.py --model rp_mixer_s16_224 --runs 40
"""
import argparse
import csv
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List

COLUMNS = ('command', 'wall_s', 'first_line_s', 'longest_silence_s', 'lines')


def timed(label: str, argv: List[str]) -> Dict[str, object]:
    """Run ``pkmixer ARGV``; the times of its stderr lines as they arrive."""
    start = time.perf_counter()
    proc = subprocess.Popen([sys.executable, '-m', 'timm_pkmixer', *argv], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    stamps = [time.perf_counter() - start for _ in iter(proc.stderr.readline, '')]
    if proc.wait() != 0:
        raise SystemExit(f'pkmixer {" ".join(argv)} failed with status {proc.returncode}')
    wall = time.perf_counter() - start
    edges = [0.0, *stamps, wall]
    return dict(command=label, wall_s=round(wall, 1), first_line_s=round(stamps[0], 1) if stamps else None,
                longest_silence_s=round(max(b - a for a, b in zip(edges, edges[1:])), 1), lines=len(stamps))


def write_runs(root: Path, runs: int) -> None:
    """`runs` train.py run folders: depths 2, 3, … with two seeds each, three epochs."""
    import yaml
    from timm.utils import update_summary
    for i in range(runs):
        blocks, seed = 2 + i // 2, i % 2
        out = root / f'depth{blocks}-seed{seed}'
        out.mkdir(parents=True)
        (out / 'args.yaml').write_text(yaml.safe_dump(dict(
            model='s_mixer_s64c64_32', model_kwargs={'num_blocks': blocks}, seed=seed, epochs=3, cooldown_epochs=0,
            warmup_epochs=0, sched='cosine', lr=0.02, experiment=out.name)))
        for epoch in range(3):
            update_summary(epoch, {'loss': 1.0}, {'loss': 1.0 - 0.1 * epoch, 'top1': 50. + 10 * epoch, 'top5': 99.},
                           filename=str(out / 'summary.csv'), lr=0.01, write_header=epoch == 0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--model', default='rp_mixer_l16_224', help='the checkpoint pushed and expanded')
    parser.add_argument('--runs', type=int, default=40, help='run folders for the report')
    parser.add_argument('--csv', default=None, help='also write the table here')
    args = parser.parse_args()
    import timm
    import torch

    import timm_pkmixer  # noqa: F401
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        ckpt = tmp / 'last.pth.tar'
        torch.save({'state_dict': timm.create_model(args.model).state_dict(), 'epoch': 1, 'arch': args.model}, ckpt)
        write_runs(tmp / 'runs', args.runs)
        for label, argv in (
                ('models', ['models']),
                ('sweep imagenet/rp_mixer_b_w', ['sweep', 'imagenet/rp_mixer_b_w', '--out-dir', str(tmp / 'sweep')]),
                ('plot width', ['plot', 'width', '--omega', '290217984', '--out', str(tmp / 'width.png')]),
                (f'report ({args.runs} runs)', ['report', str(tmp / 'runs'), '--out-dir', str(tmp / 'report')]),
                (f'push {args.model}', ['push', str(ckpt), '--model', args.model, '--repo-id', 'org/name',
                                        '--out-dir', str(tmp / 'push')]),
                (f'expand {args.model} 2x', ['expand', str(ckpt), '--model', args.model, '--factor', '2',
                                             '--out-dir', str(tmp / 'expand')])):
            rows.append(timed(label, argv))
            print('  '.join(f'{k}={v}' for k, v in rows[-1].items()), flush=True)
    if args.csv:
        with open(args.csv, 'w', newline='') as f:
            writer = csv.DictWriter(f, fieldnames=COLUMNS)
            writer.writeheader()
            writer.writerows(rows)


if __name__ == '__main__':
    main()
