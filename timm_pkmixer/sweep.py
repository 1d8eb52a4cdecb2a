"""`pkmixer sweep RECIPE --out-dir DIR`: one train.py recipe per point of a width sweep at fixed Ω.

The sweep follows the recipe's model: ``*_mixer_b_w`` gives the ImageNet sweep of Fig. 6 (d)
(P ∈ {7, 8, 14, 16, 28, 32}, C = 3P², S from eq. S.44, γ = 4, Ω = 290217984); ``s_mixer_*`` gives the
C.4 (C, S) pairs of the S-Mixer sweeps at ``--omega`` (2^18, 2^21 or 2^27). Each output recipe is the base
recipe with ``model``, ``model_kwargs`` (the geometry, plus ``perm_seed`` for RP), ``seed`` and
``experiment`` set.
"""
import argparse
import shlex
import sys
from pathlib import Path
from typing import Dict, List, Optional, Sequence

import yaml

from .recipes import IMAGENET_SWEEP_OMEGA, SweepPoint, cifar_width_sweep, imagenet_width_sweep, load_recipe

__all__ = ['sweep_points_for', 'write_sweep', 'add_sweep_command']


def sweep_points_for(model: str, permutation: str, omega: Optional[int] = None) -> List[SweepPoint]:
    """The sweep that matches a recipe's model (see the module docstring)."""
    if model.endswith('_mixer_b_w'):
        if omega not in (None, IMAGENET_SWEEP_OMEGA):
            raise ValueError(f'the ImageNet sweep is defined at Ω = {IMAGENET_SWEEP_OMEGA} only, got --omega {omega}')
        return imagenet_width_sweep(permutation=permutation)
    if model.startswith('s_mixer_'):
        return cifar_width_sweep(2 ** 18 if omega is None else omega, permutation=permutation)
    raise ValueError(f'no width sweep for model {model!r}: use a recipe of pk_mixer_b_w / rp_mixer_b_w '
                     '(ImageNet, Fig. 6d) or of an s_mixer_* model (C.4 pairs)')


def write_sweep(recipe: str, out_dir: str, permutations: Sequence[str] = ('random', 'normal'),
                seeds: Sequence[int] = (0,), omega: Optional[int] = None) -> List[Path]:
    """Write the sweep's recipes into ``out_dir``; returns their paths (in order)."""
    base = load_recipe(recipe)
    if 'model' not in base:
        raise ValueError(f'{recipe}: the base recipe has no `model`')
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    base_kwargs: Dict = dict(base.get('model_kwargs') or {})
    paths = []
    for permutation in permutations:
        for point in sweep_points_for(base['model'], permutation, omega):
            for seed in seeds:
                kwargs = {**base_kwargs, **point.model_kwargs}
                if permutation == 'random':
                    kwargs['perm_seed'] = seed
                name = f'{point.name}_seed{seed}'
                cfg = {**base, 'model': point.model, 'model_kwargs': kwargs, 'seed': seed, 'experiment': name}
                path = out / f'{name}.yaml'
                header = (f'# {point.name}: S={point.S}, C={point.C}, m={point.S * point.C}, seed {seed}.\n'
                          f'# Written by `pkmixer sweep {recipe}` from that base recipe.\n')
                path.write_text(header + yaml.safe_dump(cfg, sort_keys=False, allow_unicode=True))
                paths.append(path)
    return paths


def _cmd_sweep(args: argparse.Namespace) -> int:
    try:
        paths = write_sweep(args.recipe, args.out_dir, args.permutation, args.seeds, args.omega)
    except (FileNotFoundError, ValueError) as e:
        print(f'pkmixer sweep: {e}', file=sys.stderr)
        return 2
    print(f'# {len(paths)} recipes in {args.out_dir}; run each with (add --data-dir … where the data lives):')
    for p in paths:
        print(f'pkmixer train {shlex.quote(str(p))}')
    return 0


def add_sweep_command(subparsers) -> None:
    p = subparsers.add_parser('sweep', help='write one train.py recipe per point of a width sweep at fixed Ω',
                              description=__doc__.splitlines()[0])
    p.add_argument('recipe', help='base recipe, e.g. train_recipes/imagenet/rp_mixer_b_w.yaml')
    p.add_argument('--out-dir', required=True, help='folder for the generated recipes')
    p.add_argument('--permutation', nargs='+', choices=('random', 'normal'), default=['random', 'normal'],
                   help='RP and/or normal Mixers (default: both, as in the paper)')
    p.add_argument('--seeds', nargs='+', type=int, default=[0], help='training (and permutation) seeds')
    p.add_argument('--omega', type=int, default=None, help='Ω of the S-Mixer sweep (2^18 = 262144 by default)')
    p.set_defaults(func=_cmd_sweep)
