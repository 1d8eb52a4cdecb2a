"""`pkmixer width` (the width calculator) and `pkmixer plot` (the paper's figures as PNG files)."""
import argparse
import json
import sys

from ..errors import InvalidArgumentError
from ..validation import cli_type, non_negative_real
from ._common import MODEL_NAME, POSITIVE_INT, add_command, add_width_options, in_flag_terms

__all__ = ['add_commands']


_WIDTH_ARGUMENTS = ('omega', 'gamma', 'C', 'S', 'in_chans')  # the width library's arguments, said as flags


def _fmt_num(x: float) -> str:
    return f'{x:.0f}' if float(x).is_integer() and abs(x) < 1e15 else f'{x:.6g}'


def _print_text(report: dict, out=None) -> None:
    out = out or sys.stdout
    if 'models' in report:
        for r in report['models']:
            print(f"{r['name']} ({r['family']}): {r['params'] / 1e6:.2f} M params, depth {r['depth']}", file=out)
            if r['dim'] is not None:
                print(f"  S = {r['num_tokens']}, C = {r['dim']}, m = S·C = {r['width']}, p = {r['density']:.6f}",
                      file=out)
                print(f"  Ω = {_fmt_num(r['omega'])} connections per layer (γ = {r['gamma']:.4g} by eq. 14)",
                      file=out)
                from ..width import optimal_width
                c_star, m_max = optimal_width(r['omega'], r['gamma'])
                print(f"  at this Ω and γ: C* = S* = {c_star:.2f}, max m = {m_max:.0f}; "
                      f"m is {100 * r['width_fraction']:.1f} % of it", file=out)
            else:
                print(f"  m = {r['width']}, p = {r['density']:.6f}, Ω = p·γ·m² = {_fmt_num(r['omega'])} "
                      f"(γ = {r['gamma']:.4g})", file=out)
        return
    opt = report['optimum']
    gamma_note = ' (solved from Ω, S, C by eq. 14)' if report['mode'] == 'point' else ''
    print(f"Ω = {_fmt_num(report['omega'])}, γ = {report['gamma']:.6g}{gamma_note}", file=out)
    print(f"optimum (eq. 15): C* = S* = (Ω/γ)^(1/3) = {opt['C']:.2f}, max m = (Ω/γ)^(2/3) = {opt['m']:.0f}, "
          f"min p = {opt['p']:.6f}", file=out)
    cols = ('P', 'C', 'S', 'm', 'p', 'Ω(S,C)', 'm/max m')
    rows = [('-' if r['P'] is None else str(r['P']), str(r['C']), str(r['S']), str(r['m']), f"{r['p']:.6f}",
             _fmt_num(r['omega']), f"{100 * r['width_fraction']:.1f}%") for r in report['points']]
    widths = [max(len(c), *(len(row[i]) for row in rows)) for i, c in enumerate(cols)]
    print('  '.join(c.rjust(w) for c, w in zip(cols, widths)), file=out)
    for row in rows:
        print('  '.join(v.rjust(w) for v, w in zip(row, widths)), file=out)



def _check_width_flags(args: argparse.Namespace) -> None:
    """The combinations of flags `pkmixer width` accepts (the library checks the same in its own terms)."""
    if args.model and any(v is not None for v in (args.omega, args.gamma, args.C, args.patch, args.S)):
        raise InvalidArgumentError('--model cannot be combined with --omega, --gamma, --C, --S or --patch')
    if args.S is not None:
        if not args.C or len(args.C) != 1 or args.patch:
            raise InvalidArgumentError('--S needs exactly one --C (and no --patch)')
        if args.omega is not None and args.gamma is not None:
            raise InvalidArgumentError('with --S and --C give --omega (to solve γ) or --gamma (to compute Ω), not both')
    elif not args.model:
        if args.omega is None:
            raise InvalidArgumentError('give --omega (with --gamma, --C or --patch), --S and --C, or --model')
        if args.C and args.patch:
            raise InvalidArgumentError('give --C or --patch, not both')


def run_width(args: argparse.Namespace) -> int:
    from ..analysis.width_table import width_report
    _check_width_flags(args)
    with in_flag_terms(args, *_WIDTH_ARGUMENTS):
        report = width_report(omega=args.omega, gamma=args.gamma, dims=args.C, patches=args.patch,
                              num_tokens=args.S, in_chans=args.in_chans, models=args.model, mirror=args.mirror)
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        _print_text(report)
    return 0


def _plot_weights(args: argparse.Namespace) -> None:
    from ..analysis._matplotlib import require_matplotlib
    from ..analysis.weights import fig_s9_weights
    from ..analysis.width_figures import plot_weights
    require_matplotlib()
    plot_weights(fig_s9_weights(args.size, args.seed), args.out)


def _plot_width(args: argparse.Namespace) -> None:
    from ..analysis._matplotlib import require_matplotlib
    from ..analysis.width_figures import plot_width
    from ..catalog import models_near_omega, summarize
    from ..width import patch_sweep, width_curve
    require_matplotlib()
    if args.omega is None:
        raise InvalidArgumentError('--omega is required')
    if args.C and args.patch:
        raise InvalidArgumentError('give --C or --patch, not both')
    gamma = 1.0 if args.gamma is None else args.gamma
    if args.patch:
        points = patch_sweep(args.omega, gamma, args.patch, in_chans=args.in_chans)
    else:
        points = width_curve(args.omega, gamma, args.C, args.mirror) if args.C else []
    models = [] if args.no_models else models_near_omega(args.omega, args.model_tol)
    models += [summarize(name) for name in args.model or [] if name not in {m.name for m in models}]
    if any(m.dim is None for m in models):
        raise InvalidArgumentError('only Mixers (with S and C) can be placed on the width curve, not the SW-MLP')
    plot_width(args.omega, gamma, args.out, points, models)


def _plot_run(args: argparse.Namespace) -> None:
    from ..analysis._matplotlib import require_matplotlib
    from ..reports.figures import plot_runs
    require_matplotlib()
    plot_runs(args.summary, args.out, args.label)


def run_plot(args: argparse.Namespace) -> int:
    with in_flag_terms(args, *_WIDTH_ARGUMENTS):
        args.plot(args)
    print(f'wrote {args.out}')
    return 0


def add_commands(subparsers: argparse._SubParsersAction) -> None:
    p = add_command(
        subparsers, 'width', run_width,
        help='width calculator: optimum C* = S* at fixed Ω, the (P, C, S, m, p) curve, γ of (S, C, Ω)',
        description='Width and sparsity of Mixers at a fixed number Ω of connections per layer (§4.1, eq. 14-15).')
    add_width_options(p)
    p.add_argument('--S', type=POSITIVE_INT, help='tokens S, with one --C: solve γ (with --omega) or Ω (with --gamma)')
    p.add_argument('--model', nargs='+', type=MODEL_NAME, help='registered models: their Ω, m, p, γ and parameters')
    p.add_argument('--json', action='store_true', help='print JSON')

    plot = subparsers.add_parser('plot', help="the paper's figures as PNG: weights (Fig. S.9), width (Fig. 3), "
                                              'run (train/val curves of timm train.py runs)')
    figs = plot.add_subparsers(dest='figure', required=True, metavar='FIGURE')

    p = add_command(figs, 'weights', run_plot,
                    help='Fig. S.9: effective weights of SW-MLP, S-Mixer and RP S-Mixer layers')
    p.add_argument('--size', type=POSITIVE_INT, default=8, help='S = C (m = size², p = 1/size; default 8 as the paper)')
    p.add_argument('--seed', type=int, default=0, help='weight, mask and permutation seed')
    p.set_defaults(plot=_plot_weights)

    p = add_command(figs, 'width', run_plot, help='Fig. 3: m and p against C at fixed Ω, optimum and registered models')
    add_width_options(p)
    p.add_argument('--model', nargs='+', type=MODEL_NAME, help='also place these registered Mixers')
    p.add_argument('--model-tol', type=cli_type(non_negative_real, float, 'model_tol'), default=0.05,
                   help='place registered Mixers whose Ω is within this relative tolerance (default 0.05)')
    p.add_argument('--no-models', action='store_true', help='do not place registered models automatically')
    p.set_defaults(plot=_plot_width)

    p = add_command(figs, 'run', run_plot,
                    help='train/val loss and val top-1 of timm train.py runs (summary.csv files)')
    p.add_argument('summary', nargs='+', help="summary.csv files written by timm's train.py")
    p.add_argument('--label', nargs='+', help='one label per file; runs with the same label are averaged '
                                              '(band: min to max). Default: the run folder name without a '
                                              'trailing -seed<N>, so seeds of one setting are averaged')
    p.set_defaults(plot=_plot_run)

    for sub in (figs.choices['weights'], figs.choices['width'], figs.choices['run']):
        sub.add_argument('--out', required=True, help='output PNG file')
