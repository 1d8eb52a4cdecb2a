"""`pkmixer sweep RECIPE --out-dir DIR`: one train.py recipe per point of a width sweep at fixed Ω.

The sweep follows the recipe's model: ``*_mixer_b_w`` gives the ImageNet sweep of Fig. 6 (d)
(P ∈ {7, 8, 14, 16, 28, 32}, C = 3P², S from eq. S.44, γ = 4, Ω = 290217984); ``s_mixer_*`` gives the
C.4 (C, S) pairs of the S-Mixer sweeps at ``--omega`` (2^18, 2^21 or 2^27). Each output recipe is the base
recipe with ``model``, ``model_kwargs`` (the geometry, plus ``perm_seed`` for RP), ``seed`` and
``experiment`` set.
"""
from pathlib import Path
from typing import Dict, List, Optional, Sequence

import yaml

from .errors import InvalidArgumentError
from .recipes import IMAGENET_SWEEP_OMEGA, SweepPoint, cifar_width_sweep, imagenet_width_sweep, load_recipe

__all__ = ['sweep_points_for', 'write_sweep']


def sweep_points_for(model: str, permutation: str, omega: Optional[int] = None) -> List[SweepPoint]:
    """The sweep that matches a recipe's model (see the module docstring)."""
    if model.endswith('_mixer_b_w'):
        if omega not in (None, IMAGENET_SWEEP_OMEGA):
            raise InvalidArgumentError(f'the ImageNet sweep is defined at Ω = {IMAGENET_SWEEP_OMEGA} only, '
                                       f'got --omega {omega}')
        return imagenet_width_sweep(permutation=permutation)
    if model.startswith('s_mixer_'):
        return cifar_width_sweep(2 ** 18 if omega is None else omega, permutation=permutation)
    raise InvalidArgumentError(f'no width sweep for model {model!r}: use a recipe of pk_mixer_b_w / rp_mixer_b_w '
                     '(ImageNet, Fig. 6d) or of an s_mixer_* model (C.4 pairs)')


def write_sweep(recipe: str, out_dir: str, permutations: Sequence[str] = ('random', 'normal'),
                seeds: Sequence[int] = (0,), omega: Optional[int] = None) -> List[Path]:
    """Write the sweep's recipes into ``out_dir``; returns their paths (in order)."""
    base = load_recipe(recipe)
    if 'model' not in base:
        raise InvalidArgumentError(f'{recipe}: the base recipe has no `model`')
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
