"""`pkmixer plot {weights,width,run}`: the paper's figures as PNG files, computed from the real models."""
import argparse
import sys

__all__ = ['add_plot_command']


def _cmd_weights(args: argparse.Namespace) -> None:
    from .figures import plot_weights, require_matplotlib
    from .weights import fig_s9_weights
    require_matplotlib()
    plot_weights(fig_s9_weights(args.size, args.seed), args.out)


def _cmd_width(args: argparse.Namespace) -> None:
    from ..width import patch_sweep, width_curve
    from .figures import plot_width, require_matplotlib
    from .model_width import model_width, models_near_omega
    require_matplotlib()
    if args.C and args.patch:
        raise ValueError('give --C or --patch, not both')
    if args.patch:
        points = patch_sweep(args.omega, args.gamma, args.patch, in_chans=args.in_chans)
    else:
        points = width_curve(args.omega, args.gamma, args.C, args.mirror) if args.C else []
    models = [] if args.no_models else models_near_omega(args.omega, args.model_tol)
    models += [model_width(name) for name in args.model or [] if name not in {m.name for m in models}]
    if any(m.dim is None for m in models):
        raise ValueError('only Mixers (with S and C) can be placed on the width curve, not the SW-MLP')
    plot_width(args.omega, args.gamma, args.out, points, models)


def _cmd_run(args: argparse.Namespace) -> None:
    from .figures import plot_runs, require_matplotlib
    require_matplotlib()
    plot_runs(args.summary, args.out, args.label)


def _run(args: argparse.Namespace) -> int:
    try:
        args.plot_func(args)
    except (ImportError, ValueError, FileNotFoundError) as e:
        print(f'pkmixer plot {args.figure}: error: {e}', file=sys.stderr)
        return 1
    print(f'wrote {args.out}')
    return 0


def add_plot_command(subparsers: argparse._SubParsersAction) -> None:
    """Add the `plot` subcommand (matplotlib: ``pip install 'timm-pkmixer[plot]'``)."""
    plot = subparsers.add_parser('plot', help="the paper's figures as PNG: weights (Fig. S.9), width (Fig. 3), "
                                              'run (train/val curves of timm train.py runs)')
    figs = plot.add_subparsers(dest='figure', required=True)

    p = figs.add_parser('weights', help='Fig. S.9: effective weights of SW-MLP, S-Mixer and RP S-Mixer layers')
    p.add_argument('--size', type=int, default=8, help='S = C (m = size², p = 1/size; default 8 as the paper)')
    p.add_argument('--seed', type=int, default=0, help='weight, mask and permutation seed')
    p.set_defaults(plot_func=_cmd_weights)

    p = figs.add_parser('width', help='Fig. 3: m and p against C at fixed Ω, optimum and registered models')
    p.add_argument('--omega', type=float, required=True, help='Ω, average connections per layer')
    p.add_argument('--gamma', type=float, default=1.0, help='expansion factor γ (default 1)')
    p.add_argument('--C', type=int, nargs='+', help='mark these C (S from eq. 14)')
    p.add_argument('--mirror', action='store_true', help='with --C: also mark (C, S) = (S, C)')
    p.add_argument('--patch', type=int, nargs='+', help='mark a patch sweep: C = in_chans·P², S from eq. S.44')
    p.add_argument('--in-chans', type=int, default=3)
    p.add_argument('--model', nargs='+', help='also place these registered Mixers')
    p.add_argument('--model-tol', type=float, default=0.05,
                   help='place registered Mixers whose Ω is within this relative tolerance (default 0.05)')
    p.add_argument('--no-models', action='store_true', help='do not place registered models automatically')
    p.set_defaults(plot_func=_cmd_width)

    p = figs.add_parser('run', help='train/val loss and val top-1 of timm train.py runs (summary.csv files)')
    p.add_argument('summary', nargs='+', help="summary.csv files written by timm's train.py")
    p.add_argument('--label', nargs='+', help='one label per file; runs with the same label are averaged '
                                              '(band: min to max). Default: the run folder name without a '
                                              'trailing -seed<N>, so seeds of one setting are averaged')
    p.set_defaults(plot_func=_cmd_run)

    for sub in (figs.choices['weights'], figs.choices['width'], figs.choices['run']):
        sub.add_argument('--out', required=True, help='output PNG file')
    plot.set_defaults(func=_run)
