"""`pkmixer analyze cka A B…` (Fig. 2), `pkmixer analyze spectra` (Fig. 4 right, Fig. S.1, trained models) and
`pkmixer analyze cost` (Table S.3)."""
import argparse
import csv
import functools
import re
import time
from pathlib import Path
from typing import Any, Dict, List

from ..errors import InvalidArgumentError
from ..validation import cli_type, non_negative_int, positive_real, real
from ._common import POSITIVE_INT, add_command, add_model_options, in_flag_terms, progress

__all__ = ['add_commands']

# = timm_pkmixer.analysis.spectra.MAX_TRIALS (tests/test_analysis_inputs.py checks they agree); not imported here,
# since building the parser must not import torch (`pkmixer --help`, `pkmixer width`)
MAX_TRIALS = 1000


def _load(spec: str, args: argparse.Namespace):
    """The trained model of a run folder or checkpoint (:func:`~timm_pkmixer.publish.checkpoint_file.
    load_trained_model`), --model and --model-kwargs given."""
    from ..publish.checkpoint_file import load_trained_model
    with in_flag_terms(args, 'model'):
        return load_trained_model(spec, args.model, args.model_kwargs)


def _label(spec: str) -> str:
    """A run's label: the run folder's name, or the checkpoint file's without .pth(.tar)."""
    path = Path(spec)
    return path.name if path.is_dir() else path.stem.replace('.pth', '')


def _safe(label: str) -> str:
    return re.sub(r'[^\w.-]+', '_', label)


def _write_csv(path: Path, rows: List[Dict[str, Any]]) -> None:
    with open(path, 'w', newline='') as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        for row in rows:
            writer.writerow({k: f'{v:.6g}' if isinstance(v, float) else v for k, v in row.items()})


def _loader(args: argparse.Namespace, train_args: Dict[str, Any], config: Dict[str, Any]):
    """Random mini-batches of the evaluation split (:func:`~timm_pkmixer.analysis.eval_data.eval_loader` with
    --batch-seed): the same batches of the same examples for every model."""
    from ..analysis.eval_data import eval_loader
    with in_flag_terms(args, 'data_dir', 'split'):
        return eval_loader(train_args, config, args.batch_size, args.batch_seed, args.num_samples,
                           data_dir=args.data_dir, dataset=args.dataset, split=args.split)


def _output_labels(specs: List[str], what: str) -> List[str]:
    """File-name labels of run folders / checkpoints, distinct: the folder (or file) name, with as many parent
    folders as it takes to tell apart two runs of the same name; the same path given twice is refused."""
    paths = [Path(s) for s in specs]
    resolved = [p.resolve() for p in paths]
    for i, r in enumerate(resolved):
        if r in resolved[:i]:
            raise InvalidArgumentError(f'{what}: {specs[i]} is given twice')

    def label(path: Path, depth: int) -> str:
        parts = list(path.resolve().parts[-depth:])
        parts[-1] = parts[-1] if path.is_dir() else parts[-1].replace('.pth.tar', '').replace('.pth', '')
        return _safe('_'.join(parts))
    labels = [label(p, 1) for p in paths]
    depth = 1
    while len(set(labels)) < len(labels) and depth < 64:
        depth += 1
        labels = [label(p, depth) if labels.count(labels[i]) > 1 else labels[i] for i, p in enumerate(paths)]
    return labels


def _batches_with_progress(batches, label: str):
    """Yield `batches`, saying on stderr which batch of how many is being computed."""
    total = len(batches) if hasattr(batches, '__len__') else None
    for i, batch in enumerate(batches):
        progress(f'{label}: batch {i + 1}/{total if total is not None else "?"}')
        yield batch


def run_cka(args: argparse.Namespace) -> int:
    from ..analysis import cka_matrix
    from ..analysis.eval_data import eval_data_config
    if args.batch_size < 4:
        raise InvalidArgumentError('--batch-size must be at least 4 (the unbiased HSIC)')
    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    a = _load(args.model_a, args)
    model_a, train_a, label_a = a.model, a.train_args, _label(args.model_a)
    config_a = eval_data_config(train_a, model_a)
    batches_a = _loader(args, train_a, config_a)
    desc_a = model_a.describe()
    summary = []
    labels_b = _output_labels(args.models_b, 'B')
    for spec, label_b in zip(args.models_b, labels_b):
        b = _load(spec, args)
        model_b = b.model
        config_b = eval_data_config(b.train_args, model_b)
        batches_b = None if config_b == config_a else _loader(args, train_a, config_b)
        result = cka_matrix(model_a, model_b, _batches_with_progress(batches_a, f'{label_a} vs {label_b}'),
                            batches_b)
        rows = [dict(feature_a=name, **{n: float(v) for n, v in zip(result.names_b, line)})
                for name, line in zip(result.names_a, result.matrix)]
        _write_csv(out / f'cka_{_safe(label_b)}.csv', rows)
        desc_b = model_b.describe()
        diagonal = result.mean_diagonal if result.square else ''  # no counterpart features: no diagonal
        summary.append(dict(model_a=label_a, model_b=label_b, family_b=desc_b.family, density_b=float(desc_b.density),
                            mean_diagonal=diagonal, mean_all=float(result.matrix.mean()),
                            rows=len(result.names_a), cols=len(result.names_b),
                            examples=result.examples, batches=result.batches, batch_size=args.batch_size,
                            batch_seed=args.batch_seed))
        _write_csv(out / 'cka_summary.csv', summary)  # after each B: a later B that fails loses nothing before it
        said = f'mean diagonal CKA {diagonal:.4f}' if result.square else (
            f'{len(result.names_a)} × {len(result.names_b)} features, no diagonal; mean CKA {result.matrix.mean():.4f}')
        print(f'{label_a} vs {label_b} ({desc_b.family}, p = {desc_b.density:.4g}): {said} over {result.examples} '
              f'examples in {result.batches} random batches (seed {args.batch_seed})', flush=True)
        if not args.no_figures:
            from ..analysis.figures import plot_cka_matrix
            plot_cka_matrix(result, str(out / f'cka_{_safe(label_b)}.png'), label_a, label_b)
    square = [r for r in summary if r['mean_diagonal'] != '']
    if len(square) > 1 and not args.no_figures:
        from ..analysis.figures import plot_cka_vs_density
        plot_cka_vs_density([r['density_b'] for r in square], [r['mean_diagonal'] for r in square],
                            str(out / 'cka_vs_density.png'), label_a, float(desc_a.density),
                            families=[r['family_b'] for r in square])
    print(f'wrote {out} ({time.perf_counter() - start:.1f} s, {args.threads_used})')
    return 0


def _run_trained(args: argparse.Namespace, out: Path) -> None:
    import timm
    import torch

    from ..analysis import spectra_table
    everything = []
    for spec, label in zip(args.runs, _output_labels(args.runs, 'RUN')):
        trained = _load(spec, args)
        torch.manual_seed(int(trained.train_args.get('seed') or 0))
        init = timm.create_model(trained.name, **trained.kwargs)  # the same architecture, freshly initialised
        table = spectra_table(trained.model, init)
        _write_csv(out / f'spectra_{_safe(label)}.csv', table)
        everything += [dict(run=label, **row) for row in table]
        worst = max(table, key=lambda r: r['sv_max'] / r['edge_init'])
        print(f'{label}: {len(table)} mixing FCs; largest σ_max/edge {worst["sv_max"] / worst["edge_init"]:.3f} '
              f'({worst["layer"]})', flush=True)
        if not args.no_figures:
            from ..analysis.figures import plot_layer_spectra
            plot_layer_spectra(table, str(out / f'spectra_{_safe(label)}.png'), label)
    _write_csv(out / 'spectra_runs.csv', everything)


def _run_fig4(args: argparse.Namespace, out: Path) -> None:
    from ..analysis import FIG4_DIMS, FIG4_TOKENS, fig4_spectra
    omega = 2 ** 19 if args.omega is None else args.omega
    gamma = 2.0 if args.gamma is None else args.gamma
    dims = args.C or list(FIG4_DIMS)
    tokens = args.S
    if tokens is None and args.C is None and omega == 2 ** 19 and gamma == 2.0:
        tokens = list(FIG4_TOKENS)  # C.2's own S
    if tokens is not None and len(tokens) != len(dims):
        raise InvalidArgumentError(f'--S gives {len(tokens)} values for {len(dims)} values of --C')
    rows = fig4_spectra(omega, gamma, dims, tokens, trials=args.trials or 10)
    _write_csv(out / 'spectra.csv', rows)
    for r in rows:
        print(f"C={r['C']:3d} S={r['S']:3d} m={r['m']:5d} p={r['p']:.4f}: SW-MLP σ_max {r['sv_max_mean']:.4f} "
              f"± {r['sv_max_sd']:.4f} (√L+ {r['sqrt_L_plus']:.4f}, c_γ {r['c_gamma']:.4f}); Mixer W token "
              f"{r['mixer_token_sv_max_mean']:.4f}, channel {r['mixer_channel_sv_max_mean']:.4f}", flush=True)
    if not args.no_figures:
        from ..analysis.figures import plot_fig4
        plot_fig4(rows, gamma, str(out / 'spectra.png'))


def _run_fig_s1(args: argparse.Namespace, out: Path) -> None:
    import numpy as np

    from ..analysis import fig_s1_spectra
    if args.gamma is not None or args.C or args.S:
        raise InvalidArgumentError('--fig-s1 takes --omega, --a and --trials (not --gamma, --C, --S)')
    omega = 1e3 if args.omega is None else args.omega
    a_values = args.a if args.a is not None else [0, 0.25, 1 / 3, 0.5, 0.75, 1, 1.25, 1.5, 1.75, 2]
    rows, values = fig_s1_spectra(a_values, omega, trials=args.trials or 50, keep_values_at=args.hist_a)
    _write_csv(out / 'fig_s1.csv', rows)
    if values.size:
        counts, edges = np.histogram(values, bins=100)
        _write_csv(out / 'fig_s1_hist.csv', [dict(lo=float(lo), hi=float(hi), count=int(c))
                                             for lo, hi, c in zip(edges[:-1], edges[1:], counts)])
    for r in rows:
        print(f"a={r['a']:.3f} m={r['m']:6d} p={r['p']:.3g}: largest λ {r['sv_max_mean']:.4f} ± {r['sv_max_sd']:.4f}",
              flush=True)
    if not args.no_figures:
        from ..analysis.figures import plot_fig_s1
        plot_fig_s1(rows, values, args.hist_a, str(out / 'fig_s1.png'))


def run_spectra(args: argparse.Namespace) -> int:
    if args.runs and (args.fig_s1 or any(v is not None for v in (args.omega, args.gamma, args.C, args.S, args.a))):
        raise InvalidArgumentError('RUN folders take no --fig-s1, --omega, --gamma, --C, --S or --a (those make '
                                   'the random matrices of Fig. 4 and Fig. S.1)')
    if args.a is not None and not args.fig_s1:
        raise InvalidArgumentError('--a needs --fig-s1')
    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    if args.runs:
        _run_trained(args, out)
    elif args.fig_s1:
        _run_fig_s1(args, out)
    else:
        _run_fig4(args, out)
    print(f'wrote {out} ({time.perf_counter() - start:.1f} s, {args.threads_used})')
    return 0


def _apply_threads(args: argparse.Namespace) -> str:
    """The package's thread policy (`experiments.threads`): --threads, else $OMP_NUM_THREADS, else the idle
    cores, set for this process; returns what to say about it ('1 thread (…)')."""
    from ..training.threads import choose_threads, set_threads
    threads, why = choose_threads(args.threads)
    set_threads(threads)
    return f'{threads} thread{"s" if threads > 1 else ""} ({why})'


def _with_threads(run):
    """A subcommand's handler that first applies the thread policy."""
    @functools.wraps(run)
    def wrapped(args: argparse.Namespace) -> int:
        args.threads_used = _apply_threads(args)
        return run(args)
    return wrapped


def _device(text: str):
    """--device as a torch.device that exists here."""
    import torch
    try:
        device = torch.device(text)
    except (RuntimeError, ValueError):
        raise InvalidArgumentError(f'--device {text!r} is not a torch device (cpu, cuda, cuda:1, …)') from None
    if device.type == 'cuda' and not torch.cuda.is_available():
        raise InvalidArgumentError(f'--device {text}: CUDA is not available on this machine (use --device cpu)')
    if device.type not in ('cpu', 'cuda'):
        raise InvalidArgumentError(f'--device {text}: only cpu and cuda are measured')
    return device


def run_cost(args: argparse.Namespace) -> int:
    from ..analysis.cost import COST_MODELS, COST_SIZES, cost_markdown, table_s3
    device = _device(args.device)
    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    rows = table_s3([COST_SIZES[s] for s in dict.fromkeys(args.size)], args.models or COST_MODELS,
                    args.batch_size, args.steps, args.warmup, device)
    _write_csv(out / 'table_s3.csv', rows)
    (out / 'table_s3.md').write_text(cost_markdown(rows), encoding='utf-8')
    for r in rows:
        ratio = r['time_ratio_vs_mlp_mixer']
        timing = f'time/step {ratio:.3f}× the MLP-Mixer\'s' if ratio != '' else (r['note'] or 'not timed')
        print(f"{r['size']} {r['model']}: {r['params']:,} parameters, {r['param_bytes'] + r['buffer_bytes']:,} bytes "
              f"of parameters and buffers, {r['forward_flops_per_image']:,} forward FLOPs per image; {timing}",
              flush=True)
    print(f'wrote {out / "table_s3.csv"} and {out / "table_s3.md"} ({time.perf_counter() - start:.1f} s, '
          f'{args.threads_used})')
    return 0


def _needs_subcommand(args: argparse.Namespace) -> int:
    raise InvalidArgumentError('give a subcommand: cka, spectra or cost (pkmixer analyze --help)')


def _at_least_one(name: str, value: Any) -> float:
    return real(name, value, low=1.)


def _a_value(name: str, value: Any) -> float:
    value = real(name, value)
    if value < 0:
        raise InvalidArgumentError(f'{name} must be >= 0 (p = Ω^-a <= 1), got {value:g}')
    return value


def add_commands(subparsers: argparse._SubParsersAction) -> None:
    top = add_command(subparsers, 'analyze', _needs_subcommand,
                      help="the paper's analyses: CKA of hidden features (Fig. 2), spectra (Fig. 4 right, S.1), "
                           "costs (Table S.3)",
                      description="The paper's analyses, computed from the package's real layers.")
    sub = top.add_subparsers(dest='analysis', metavar='ANALYSIS')

    p = add_command(sub, 'cka', _with_threads(run_cka),
                    help='mini-batch CKA between the mixing branches of two models (Fig. 2)',
                    description='Mini-batch linear CKA (Nguyen et al. 2021) between the features of model A and '
                                'of each model B, taken just before every skip connection (C.1): the matrix (CSV '
                                'and heatmap, Fig. 2(b)/(c)) and its mean diagonal; with several B (SW-MLPs of '
                                'different density) also the mean diagonal against p (Fig. 2(a)).')
    p.add_argument('model_a', metavar='A', help='train.py run folder (args.yaml + last.pth.tar) or a checkpoint')
    p.add_argument('models_b', metavar='B', nargs='+', help='one or more run folders or checkpoints')
    add_model_options(p, required=False, help='model name for checkpoints that do not record it')
    p.add_argument('--data-dir', help="data folder (default: the run's data_dir)")
    p.add_argument('--dataset', default=None, help="timm dataset name (default: the run's, '' = image folder)")
    p.add_argument('--split', default=None, help="split to read (default: the run's val_split, else 'validation')")
    p.add_argument('--batch-size', type=POSITIVE_INT, default=256, help='mini-batch size (default 256)')
    p.add_argument('--num-samples', type=POSITIVE_INT, default=None,
                   help='use a random subset of N examples (drawn with --batch-seed)')
    p.add_argument('--batch-seed', type=cli_type(non_negative_int, int, 'batch-seed'), default=0,
                   help='seed of the random mini-batches (default 0; written to cka_summary.csv)')
    p.add_argument('--out-dir', required=True, help='where the CSV files and figures go')
    p.add_argument('--no-figures', action='store_true', help='write the CSV files only')
    _threads_option(p)

    p = add_command(sub, 'spectra', _with_threads(run_spectra),
                    help='largest singular values: Fig. 4 (right), Fig. S.1, or every mixing layer of trained runs',
                    description='Without RUN: Fig. 4 (right) — the largest singular value of the SW-MLP weight '
                                'M ⊙ A (γm × m) at fixed Ω against c_γ = 1 + √γ and √L+ (eq. 17), with the Mixers\' '
                                'W; default the paper\'s Ω = 2^19, γ = 2, C.2\'s (C, S). With --fig-s1: Fig. S.1 '
                                '(D.1). With RUN folders: every mixing FC of the trained models against its '
                                'initialisation.')
    p.add_argument('runs', metavar='RUN', nargs='*', help='train.py run folders or checkpoints (trained spectra)')
    add_model_options(p, required=False, help='model name for checkpoints that do not record it')
    p.add_argument('--omega', type=cli_type(_at_least_one, float, '--omega'),
                   help='Ω, at least 1 (default 2^19; 10^3 with --fig-s1)')
    p.add_argument('--gamma', type=cli_type(positive_real, float, 'gamma'), help='γ (default 2)')
    p.add_argument('--C', type=POSITIVE_INT, nargs='+', help='channels C (default C.2: 4 8 … 48 64)')
    p.add_argument('--S', type=POSITIVE_INT, nargs='+', help='tokens S, one per --C (default: S(C) at Ω, eq. 14)')
    p.add_argument('--trials', type=cli_type(_bounded(MAX_TRIALS, 1), int, '--trials'),
                   help=f'random draws per point (default 10; 50 with --fig-s1; at most {MAX_TRIALS}, 20x the paper\'s '
                        f'most)')
    p.add_argument('--fig-s1', action='store_true', help='Fig. S.1: Z = M ⊙ W, m = Ω^((1+a)/2), p = Ω^(−a)')
    p.add_argument('--a', type=cli_type(_a_value, float, 'a'), nargs='+',
                   help='--fig-s1: the exponents a (default 0 0.25 1/3 0.5 … 2)')
    p.add_argument('--hist-a', type=float, default=1.5, help='--fig-s1: a whose λ are histogrammed (default 1.5)')
    p.add_argument('--out-dir', required=True, help='where the CSV files and figures go')
    p.add_argument('--no-figures', action='store_true', help='write the CSV files only')
    _threads_option(p)
    _add_cost_command(sub)


def _threads_option(p: argparse.ArgumentParser) -> None:
    p.add_argument('--threads', type=POSITIVE_INT, default=None,
                   help='torch threads (default: $OMP_NUM_THREADS, else the idle cores: on a busy machine fewer '
                        'threads run much faster)')


def _add_cost_command(sub: argparse._SubParsersAction) -> None:
    p = add_command(sub, 'cost', _with_threads(run_cost),
                    help='Table S.3: memory, FLOPs and time per training step of the RP Mixer, MLP-Mixer, SW-MLP',
                    description='Table S.3 (D.9) from the package\'s models: parameters, parameter and buffer '
                                'memory, tensors saved for the backward, FLOPs (counted on the meta device), and '
                                'the time per training step (AdamW) measured in alternation, as a ratio to the '
                                'MLP-Mixer\'s. Writes OUT/table_s3.csv and OUT/table_s3.md.')
    p.add_argument('--size', nargs='+', type=cli_type(_cost_choice('COST_SIZES'), str, '--size'),
                   default=['table-s3-small'], metavar='SIZE',
                   help='table-s3-small: S=64, C=48, L=3, γ=2 (CIFAR, P=4); table-s3-large: S=256, C=588, L=8, '
                        'γ=4 (ImageNet, P=14). Default: table-s3-small')
    p.add_argument('--models', nargs='+', type=cli_type(_cost_choice('COST_MODELS'), str, '--models'),
                   default=None, metavar='MODEL',
                   help='rp_mixer, mlp_mixer, sw_mlp: models to count and time (default: all three; the MLP-Mixer is '
                        'always timed)')
    p.add_argument('--batch-size', type=cli_type(_bounded('MAX_BATCH_SIZE', 1), int, '--batch-size'), default=32,
                   help='images per training step (default 32)')
    p.add_argument('--steps', type=cli_type(_bounded('MAX_STEPS', 0), int, '--steps'), default=10,
                   help='timed steps per model after the warm-up (default 10, at most 1000; 0: count only)')
    p.add_argument('--warmup', type=cli_type(_bounded(100, 0), int, '--warmup'), default=2,
                   help='untimed steps per model first (default 2)')
    p.add_argument('--device', default='cpu', help='cpu (default) or cuda[:N]')
    _threads_option(p)
    p.add_argument('--out-dir', required=True, help='where table_s3.csv and table_s3.md go')


def _bounded(maximum: Any, minimum: int):
    """A check of an integer in [minimum, maximum] (the message says both bounds). `maximum` may name a constant of
    :mod:`timm_pkmixer.analysis.cost`, read when a value is checked: building the parser imports no torch."""
    def check(name: str, value: Any) -> int:
        from ..validation import integer
        value = integer(name, value, minimum=minimum)
        if isinstance(maximum, str):
            from ..analysis import cost
            limit = getattr(cost, maximum)
        else:
            limit = maximum
        if value > limit:
            raise InvalidArgumentError(f'{name} must be at most {limit}, got {value}')
        return value
    check.__name__ = 'int'
    return check


def _cost_choice(table: str):
    """A check of a name in a table of :mod:`timm_pkmixer.analysis.cost` (read when a value is checked)."""
    def check(name: str, value: Any) -> str:
        from ..analysis import cost
        names = getattr(cost, table)
        if value not in names:
            raise InvalidArgumentError(f'{name} must be one of {", ".join(names)}, got {value!r}')
        return value
    check.__name__ = 'str'
    return check

