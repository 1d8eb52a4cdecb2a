"""`pkmixer sweep`: one train.py recipe per point of one of the paper's experiments, and per seed.

Experiments (the base recipe's model decides the family and the defaults):

* ``width`` (Fig. 5, 6, S.2, 4): ``*_mixer_b_w`` recipes give the ImageNet sweep of Fig. 6 (d) (P ∈ {7, 8, 14, 16,
  28, 32}, C = 3P², S from eq. S.44, γ = 4, Ω = 290217984); ``s_mixer_*`` recipes the C.4 (C, S) pairs at ``omega``
  (2^18, 2^21 or 2^27) and, at Ω = 2^18, the SW-MLP arm of Fig. 5 (1 − p ∈ {0.1, …, 0.9}: m = 540 … 1619);
  other MLP-Mixer recipes (CIFAR's Mixer-SS) the sweep of D.2 / Fig. S.2: C ∈ {16, 32, 48, 64, 83, 113, 173}
  (``dims``), S from eq. 14 at ``omega`` (2^18) and ``gamma`` (4), with the SW-MLP arm of MLP blocks of the same γ
  (Fig. 4 left is ``dims`` 4 … 64, ``omega`` 2^19, ``gamma`` 2).
* ``depth`` (Fig. 7): L ∈ {4, 8, 12, 16, 20}.
* ``rp-block`` (Fig. S.4): one model per block position with that block alone random, and the all-normal and
  all-random references.
* ``gamma`` (Fig. S.3): MLP-Mixers at fixed m = S·C and Ω, C over the divisors of m, γ = 2Ω/(m(C + m/C)) (eq. S.46).
* ``patch`` (Fig. S.5): S = C = 64, 4 blocks, lr 0.1; P ∈ {1, 2, 4, 8, 16, 32} on 32 px, or {1, 3, 6, 10, 18, 30}
  on STL-10 resized to 90 px.

``depth``, ``rp-block``, ``gamma`` and ``patch`` are run for normal and RP models (``permutations``). Each recipe is
the base recipe with ``model``, ``model_kwargs``, ``seed`` and ``experiment`` (the run's name: the point and the
seed, ``<point>_seed<N>``) set, so train.py's ``args.yaml`` records which point and seed a run is; RP models use
the training seed as ``perm_seed``, SW-MLPs as ``mask_seed``.
"""
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence

import yaml

from .errors import InvalidArgumentError
from .recipes import (
    IMAGENET_SWEEP_OMEGA,
    SweepPoint,
    cifar_width_sweep,
    imagenet_width_sweep,
    load_recipe,
    resolve_recipe,
)
from .validation import choice
from .width import sw_mlp_width

__all__ = ['EXPERIMENTS', 'DEPTHS', 'SW_MLP_DENSITIES', 'GAMMA_OMEGA', 'GAMMA_WIDTH', 'PATCHES_32', 'PATCHES_90',
           'ExperimentPoint', 'experiment_points', 'gamma_points', 'sweep_points_for', 'write_sweep']

EXPERIMENTS = ('width', 'depth', 'rp-block', 'gamma', 'patch')
DEPTHS = (4, 8, 12, 16, 20)                         # C.6, Fig. 7
SW_MLP_DENSITIES = (0.9, 0.7, 0.5, 0.3, 0.1)       # C.4 (ii): 1 - p = 0.1 … 0.9
GAMMA_OMEGA, GAMMA_WIDTH = 2 ** 20, 4096            # Fig. S.3: γ = 4 at S = C = 64
MLP_MIXER_DIMS = (16, 32, 48, 64, 83, 113, 173)     # D.2, Fig. S.2
PATCHES_32 = (1, 2, 4, 8, 16, 32)                   # D.6, CIFAR
PATCHES_90 = (1, 3, 6, 10, 18, 30)                  # D.6, STL-10 at 90 px


@dataclass(frozen=True)
class ExperimentPoint:
    """One point of an experiment: the model to build and the recipe keys it changes."""
    experiment: str
    name: str                                   # the run name without the seed
    model: str
    model_kwargs: Dict[str, Any]
    recipe: Dict[str, Any] = field(default_factory=dict)   # other train.py keys the point sets (lr, img_size)
    seeded: str = ''                            # the model argument the training seed also sets: perm_seed, mask_seed


def sweep_points_for(model: str, permutation: str, omega: Optional[int] = None) -> List[SweepPoint]:
    """The Mixer width sweep that matches a recipe's model (``*_mixer_b_w``: ImageNet, ``s_mixer_*``: C.4)."""
    if model.endswith('_mixer_b_w'):
        if omega not in (None, IMAGENET_SWEEP_OMEGA):
            raise InvalidArgumentError(f'the ImageNet sweep is defined at Ω = {IMAGENET_SWEEP_OMEGA} only, '
                                       f'got omega {omega}')
        return imagenet_width_sweep(permutation=permutation)
    if model.startswith('s_mixer_'):
        return cifar_width_sweep(2 ** 18 if omega is None else omega, permutation=permutation)
    raise InvalidArgumentError(f'no fixed width sweep for model {model!r}: use a recipe of pk_mixer_b_w / '
                               'rp_mixer_b_w (ImageNet, Fig. 6d) or of an s_mixer_* model (C.4 pairs)')


# model arguments an SW-MLP shares with the S-Mixer of the same sweep (input, patches, depth)
_SHARED_WITH_SW_MLP = ('img_size', 'in_chans', 'patch_size', 'num_blocks', 'act_layer', 'drop_rate')


def _width(base: Mapping[str, Any], kwargs: Mapping[str, Any], permutations: Sequence[str],
           omega: Optional[int]) -> List[ExperimentPoint]:
    points = []
    for permutation in permutations:
        for p in sweep_points_for(base['model'], permutation, omega):
            points.append(ExperimentPoint('width', p.name, p.model, {**kwargs, **p.model_kwargs},
                                          seeded='perm_seed' if permutation == 'random' else ''))
    if base['model'].startswith('s_mixer_') and omega in (None, 2 ** 18):  # the SW-MLP arm of Fig. 5
        shared = {k: v for k, v in kwargs.items() if k in _SHARED_WITH_SW_MLP}
        for p in SW_MLP_DENSITIES:
            m = sw_mlp_width(2 ** 18, p)
            points.append(ExperimentPoint('width', f'sw_mlp_o18_32_p{p:g}_m{m}', 'sw_mlp_o18_32',
                                          dict(shared, density=p), seeded='mask_seed'))
    return points


def _mlp_mixer_width(base, kwargs, permutations, omega, gamma, dims) -> List[ExperimentPoint]:
    """D.2 (Fig. S.2): MLP-Mixers at C ∈ dims, S = round(S(C)) at (Ω, γ), and SW-MLPs of MLP blocks (γ)."""
    from .width import width_point
    omega = 2 ** 18 if omega is None else omega
    gamma = 4.0 if gamma is None else gamma
    points = []
    for perm in permutations:
        for c in dims or MLP_MIXER_DIMS:
            pt = width_point(c, omega, gamma)
            points.append(ExperimentPoint(
                'width', f'width_c{pt.dim}_s{pt.num_tokens}_{perm}', base['model'],
                {**kwargs, 'num_tokens': pt.num_tokens, 'embed_dim': pt.dim, 'gamma': gamma, 'mlp_ratio': None,
                 'permutation': perm}, seeded='perm_seed' if perm == 'random' else ''))
    shared = {k: v for k, v in kwargs.items() if k in _SHARED_WITH_SW_MLP}
    for p in SW_MLP_DENSITIES:
        m = sw_mlp_width(omega, p, gamma)
        points.append(ExperimentPoint('width', f'sw_mlp_g{gamma:g}_p{p:g}_m{m}', 'sw_mlp_o18_32',
                                      dict(shared, density=p, gamma=gamma, omega=omega), seeded='mask_seed'))
    return points


def _default_depth(model: str, kwargs: Mapping[str, Any]) -> int:
    from .catalog import summarize
    return summarize(model, **kwargs).depth


def _depth(base, kwargs, permutations) -> List[ExperimentPoint]:
    return [ExperimentPoint('depth', f'depth_L{depth}_{perm}', base['model'],
                            dict(kwargs, num_blocks=depth, permutation=perm),
                            seeded='perm_seed' if perm == 'random' else '')
            for perm in permutations for depth in DEPTHS]


def _rp_block(base, kwargs, permutations) -> List[ExperimentPoint]:
    depth = int(kwargs.get('num_blocks') or _default_depth(base['model'], kwargs))
    points = [ExperimentPoint('rp-block', f'rpblock_{perm}', base['model'], dict(kwargs, permutation=perm),
                              seeded='perm_seed' if perm == 'random' else '') for perm in ('normal', 'random')]
    for block in range(depth):
        pattern = ['normal'] * depth
        pattern[block] = 'random'
        points.append(ExperimentPoint('rp-block', f'rpblock_b{block}', base['model'],
                                      dict(kwargs, permutation=pattern), seeded='perm_seed'))
    return points


def gamma_points(omega: float = GAMMA_OMEGA, width: int = GAMMA_WIDTH) -> List[Dict[str, Any]]:
    """(C, S, γ) at fixed m = S·C and Ω: C over the divisors of m from m^(1/4) to m^(3/4), γ = 2Ω/(m(C + m/C))
    (eq. S.46), largest at C = S = √m."""
    lo, hi = width ** 0.25, width ** 0.75
    out = []
    for c in range(1, width + 1):
        if width % c == 0 and lo <= c <= hi:
            out.append(dict(C=c, S=width // c, gamma=2 * omega / (width * (c + width / c))))
    return out


def _gamma(base, kwargs, permutations, omega) -> List[ExperimentPoint]:
    summary_kwargs = dict(kwargs)
    from .catalog import summarize
    if summarize(base['model'], **summary_kwargs).block_type != 'mlp':
        raise InvalidArgumentError(f"the gamma experiment varies the MLP-Mixer's γ: {base['model']} has no hidden "
                                   f"layer (use an MLP-Mixer recipe, e.g. cifar10/pk_mixer_ss_w_32)")
    omega = GAMMA_OMEGA if omega is None else omega
    points = []
    for perm in permutations:
        for pt in gamma_points(omega, GAMMA_WIDTH):
            gamma = round(pt['gamma'], 6)
            points.append(ExperimentPoint(
                'gamma', f'gamma_c{pt["C"]}_s{pt["S"]}_g{gamma:.3g}_{perm}', base['model'],
                dict(kwargs, num_tokens=pt['S'], embed_dim=pt['C'], gamma=gamma, permutation=perm,
                     **({'mlp_ratio': None} if 'mlp_ratio' in kwargs else {})),
                seeded='perm_seed' if perm == 'random' else ''))
    return points


def _patch(base, kwargs, permutations) -> List[ExperimentPoint]:
    img = int(base.get('img_size') or 32)
    patches, img = (PATCHES_90, 90) if img == 90 or 'stl10' in str(base.get('data_dir', '')) else (PATCHES_32, 32)
    geometry = dict(num_tokens=64, embed_dim=64, num_blocks=4)  # D.6: S = C = 64, four blocks
    return [ExperimentPoint('patch', f'patch_p{p}_{perm}', base['model'],
                            dict(kwargs, img_size=img, patch_size=p, skip_layer=True, permutation=perm, **geometry),
                            recipe=dict(lr=0.1, img_size=img), seeded='perm_seed' if perm == 'random' else '')
            for perm in permutations for p in patches]


def experiment_points(
        base: Mapping[str, Any],
        experiment: str = 'width',
        permutations: Sequence[str] = ('random', 'normal'),
        omega: Optional[int] = None,
        model_kwargs: Optional[Mapping[str, Any]] = None,
        gamma: Optional[float] = None,
        dims: Optional[Sequence[int]] = None,
) -> List[ExperimentPoint]:
    """The points of `experiment` for a base recipe (a dict with at least ``model``).

    Args:
        base: The base recipe.
        experiment: One of :data:`EXPERIMENTS`.
        permutations: 'random' and/or 'normal' models.
        omega: Ω of the width (C.4 pairs) or gamma experiment.
        model_kwargs: Model arguments added to the base recipe's (e.g. D.5's text setting ``num_tokens=64,
            embed_dim=64, num_blocks=4``); the experiment's own variable wins over them.
        gamma: γ of an MLP-Mixer width sweep (default 4).
        dims: The channels C of an MLP-Mixer width sweep (default D.2's).
    """
    choice('experiment', experiment, EXPERIMENTS)
    for p in permutations:
        choice('permutation', p, ('random', 'normal'))
    if 'model' not in base:
        raise InvalidArgumentError('the base recipe has no `model`')
    kwargs = {**(base.get('model_kwargs') or {}), **(model_kwargs or {})}
    if experiment == 'width':
        if base['model'].endswith('_mixer_b_w') or base['model'].startswith('s_mixer_'):
            if gamma is not None or dims:
                raise InvalidArgumentError('gamma and dims set the MLP-Mixer width sweep (D.2); this recipe\'s sweep '
                                           'is the paper\'s fixed one')
            return _width(base, kwargs, permutations, omega)
        from .catalog import summarize
        summary = summarize(base['model'], **kwargs)
        if summary.block_type != 'mlp' or summary.img_size != 32:
            raise InvalidArgumentError(
                f"no width sweep for model {base['model']!r}: use a recipe of pk_mixer_b_w / rp_mixer_b_w (ImageNet, "
                f"Fig. 6d), of an s_mixer_* model (C.4 pairs) or of a CIFAR MLP-Mixer (D.2, e.g. "
                f"cifar10/pk_mixer_ss_w_32)")
        return _mlp_mixer_width(base, kwargs, permutations, omega, gamma, dims)
    if experiment == 'depth':
        return _depth(base, kwargs, permutations)
    if experiment == 'rp-block':
        return _rp_block(base, kwargs, permutations)
    if experiment == 'gamma':
        return _gamma(base, kwargs, permutations, omega)
    return _patch(base, kwargs, permutations)


def write_sweep(recipe: str, out_dir: str, permutations: Sequence[str] = ('random', 'normal'),
                seeds: Sequence[int] = (0,), omega: Optional[int] = None, experiment: str = 'width',
                model_kwargs: Optional[Mapping[str, Any]] = None, gamma: Optional[float] = None,
                dims: Optional[Sequence[int]] = None) -> List[Path]:
    """Write the recipes of `experiment` (one per point and seed) into `out_dir`; returns their paths in order.

    Every recipe is checked to build its model (on the meta device) before anything is written.
    """
    from .catalog import summarize
    path = resolve_recipe(recipe)
    base = load_recipe(path)
    points = experiment_points(base, experiment, permutations, omega, model_kwargs, gamma, dims)
    for point in points:
        summarize(point.model, **point.model_kwargs)  # refuses an impossible point before writing anything
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for point in points:
        for seed in seeds:
            kwargs = dict(point.model_kwargs)
            if point.seeded:
                kwargs[point.seeded] = seed
            name = f'{point.name}_seed{seed}'
            cfg = {**base, **point.recipe, 'model': point.model, 'model_kwargs': kwargs, 'seed': seed,
                   'experiment': name}
            target = out / f'{name}.yaml'
            header = (f'# {point.experiment} experiment, point {point.name}, seed {seed}.\n'
                      f'# Written by `pkmixer sweep {recipe} --experiment {experiment}` from that base recipe.\n')
            target.write_text(header + yaml.safe_dump(cfg, sort_keys=False, allow_unicode=True))
            paths.append(target)
    return paths
