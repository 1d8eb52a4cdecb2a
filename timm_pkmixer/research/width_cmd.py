"""`pkmixer width`: the optimum width at fixed Ω (eq. 15), the (P, C, S, m, p) table along the curve (eq. 14,
S.42, S.44), γ of a given (S, C, Ω), and the numbers of a registered model. Every number comes from
`timm_pkmixer.width`, the functions the models use."""
import argparse
import json
import sys
from typing import List, Optional

from ..width import WidthPoint, gamma_for_omega, mixer_omega, optimal_width, patch_sweep, width_curve
from .model_width import model_width

__all__ = ['add_width_command', 'width_report']


def _optimum(omega: float, gamma: float) -> dict:
    c_star, m_max = optimal_width(omega, gamma)
    return dict(C=c_star, S=c_star, m=m_max, p=omega / (gamma * m_max ** 2))


def _point_row(pt: WidthPoint, m_max: float) -> dict:
    return dict(pt.as_dict(), width_fraction=pt.width / m_max)


def width_report(
        omega: Optional[float] = None,
        gamma: Optional[float] = None,
        dims: Optional[List[int]] = None,
        patches: Optional[List[int]] = None,
        num_tokens: Optional[int] = None,
        in_chans: int = 3,
        models: Optional[List[str]] = None,
        mirror: bool = False,
) -> dict:
    """The numbers `pkmixer width` prints, as a dict (its `--json` output).

    Modes: `models` (registered models); `num_tokens` with one C in `dims` (solve γ from Ω, or Ω from γ);
    `omega` with `patches` (C = in_chans·P², S from eq. S.44), with `dims` (S from eq. S.42/14 per C), or
    alone (the curve around the optimum); `mirror` adds (S, C) for each (C, S) of `dims`.
    """
    if models:
        if any(v is not None for v in (omega, gamma, dims, patches, num_tokens)):
            raise ValueError('--model cannot be combined with --omega, --gamma, --C, --S or --patch')
        return {'models': [model_width(name).as_dict() for name in models]}
    if num_tokens is not None:
        if not dims or len(dims) != 1 or patches:
            raise ValueError('--S needs exactly one --C (and no --patch)')
        if omega is not None and gamma is not None:
            raise ValueError('with --S and --C give --omega (to solve γ) or --gamma (to compute Ω), not both')
        dim = dims[0]
        if omega is not None:
            gamma = gamma_for_omega(num_tokens, dim, omega)
        else:
            gamma = 1.0 if gamma is None else gamma
            omega = mixer_omega(num_tokens, dim, gamma)
        pt = WidthPoint(dim, num_tokens, gamma)
        opt = _optimum(omega, gamma)
        return dict(mode='point', omega=omega, gamma=gamma, optimum=opt, points=[_point_row(pt, opt['m'])])
    if omega is None:
        raise ValueError('give --omega (with --gamma, --C or --patch), --S and --C, or --model')
    gamma = 1.0 if gamma is None else gamma
    if patches and dims:
        raise ValueError('give --C or --patch, not both')
    opt = _optimum(omega, gamma)
    if patches:
        points, mode = patch_sweep(omega, gamma, patches, in_chans=in_chans), 'patch'
    else:
        points, mode = width_curve(omega, gamma, dims, mirror), 'dims' if dims else 'curve'
    return dict(mode=mode, omega=omega, gamma=gamma, optimum=opt, points=[_point_row(pt, opt['m']) for pt in points])


def _fmt_num(x: float) -> str:
    return f'{x:.0f}' if float(x).is_integer() else f'{x:.6g}'


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


def _cmd_width(args: argparse.Namespace) -> int:
    try:
        report = width_report(omega=args.omega, gamma=args.gamma, dims=args.C, patches=args.patch,
                              num_tokens=args.S, in_chans=args.in_chans, models=args.model,
                              mirror=args.mirror)
    except ValueError as e:
        print(f'pkmixer width: error: {e}', file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        _print_text(report)
    return 0


def add_width_command(subparsers: argparse._SubParsersAction) -> None:
    """Add the `width` subcommand."""
    p = subparsers.add_parser(
        'width', help='width calculator: optimum C* = S* at fixed Ω, the (P, C, S, m, p) curve, γ of (S, C, Ω)',
        description='Width and sparsity of Mixers at a fixed number Ω of connections per layer (§4.1, eq. 14-15).')
    p.add_argument('--omega', type=float, help='Ω, average connections per layer (e.g. 290217984, 262144)')
    p.add_argument('--gamma', type=float, help='expansion factor γ (default 1: S-Mixer)')
    p.add_argument('--C', type=int, nargs='+', help='channels C to place on the curve (S from eq. 14)')
    p.add_argument('--mirror', action='store_true', help='with --C: add (C, S) = (S, C) too (same Ω, App. C.4)')
    p.add_argument('--patch', type=int, nargs='+', help='patch sizes P: C = in_chans·P², S from eq. S.44')
    p.add_argument('--in-chans', type=int, default=3, help='input channels for --patch (default 3)')
    p.add_argument('--S', type=int, help='tokens S, with one --C: solve γ (with --omega) or Ω (with --gamma)')
    p.add_argument('--model', nargs='+', help="registered models: their Ω, m, p, γ and parameters")
    p.add_argument('--json', action='store_true', help='print JSON')
    p.set_defaults(func=_cmd_width)
