"""`pkmixer sweep`: one train.py recipe per point of one of the paper's experiments, and per seed.

The figure a sweep reproduces is chosen by what the base recipe says, not by its name: a packaged recipe names the
figures it is the base of on ``# figure: KEY`` lines (``figure`` picks one explicitly; the keys and every figure's
settings with their sources are in :mod:`timm_pkmixer.experiments.sweep_tables`). A recipe of no figure gets the
experiment's points around its own model, with no SW-MLP arm.

Experiments (:data:`~timm_pkmixer.experiments.sweep_tables.EXPERIMENTS`): ``width`` (Fig. 4 left, 5, 6, S.1 left,
S.2, S.6, S.7, S.8), ``depth`` (Fig. 7), ``rp-block`` (Fig. S.4), ``gamma`` (Fig. S.3), ``patch`` (Fig. S.5).
The points are built by a planner per kind of sweep (:data:`PLANNERS`, keyed by the figure's ``kind``): each is
one small function, and the table says which options (Ω, γ, C, permutations) it takes. Every point is a record
(:class:`ExperimentPoint`: model, model arguments, the recipe keys it sets, and its coordinates); each recipe is the
base recipe with ``model``, ``model_kwargs``, ``seed`` and ``experiment`` (the run's name, for people) set, plus
the figure's training overrides. RP models use the training seed as ``perm_seed``, SW-MLPs as ``mask_seed``.

Planning checks every point (it builds its model on the meta device), so ``--explain`` and writing refuse the same
sweeps with the same message. Where the paper's text and its tables disagree, the figure's
:class:`~timm_pkmixer.experiments.sweep_tables.Disagreement` records both readings; the first is used unless
``readings={KEY: NAME}`` picks the other, and the explanation says which. Beside the recipes the sweep writes
``sweep.json`` (the figure, every setting with its value and source, every point with its coordinates and files)
and ``SWEEP.md`` (:func:`explain`'s table).
"""
import json
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

import yaml

from ..errors import InvalidArgumentError
from ..validation import choice
from ..width import patch_sweep, sw_mlp_width, tokens_for_omega, width_point
from .atomic_json import write_json
from .recipes import load_recipe, resolve_recipe
from .run_folder import SEED_RANGE, PathLike, RunFileError
from .sweep_tables import (
    CIFAR_SWEEP_PAIRS,
    DEPTHS,
    EXPERIMENTS,
    FIG2_DENSITIES,
    FIGS2_OMEGA,
    FIGURES,
    GAMMA_OMEGA,
    GAMMA_WIDTH,
    IMAGENET_SWEEP_OMEGA,
    IMAGENET_SWEEP_PATCHES,
    MLP_MIXER_DIMS,
    PATCHES_32,
    PATCHES_90,
    SKIP_LAYER,
    Figure,
    Reading,
    Setting,
)
from .train_py import WANDB_GROUP_LINE

__all__ = ['SWEEP_RECORD', 'SWEEP_EXPLAINED', 'PLANNERS', 'ExperimentPoint', 'SweepPlan', 'Planner',
           'recipe_figures', 'gamma_points', 'plan_sweep', 'experiment_points', 'explain', 'figures_markdown',
           'write_sweep', 'read_sweep_record', 'check_seeds']

SWEEP_RECORD, SWEEP_EXPLAINED = 'sweep.json', 'SWEEP.md'  # not *.yaml: `for r in DIR/*.yaml` trains recipes only
_FIGURE_LINE = re.compile(r'^#\s*figure:\s*(\S+)\s*$')
# model arguments an SW-MLP shares with the Mixers of its sweep (input, patches)
_SHARED_WITH_SW_MLP = ('img_size', 'in_chans', 'patch_size', 'act_layer', 'drop_rate')
_SW_MODEL = 'sw_mlp_o18_32'
_BUILT: set = set()  # (model, model_kwargs as JSON) that built on the meta device
_ACCEPTED: set = set()  # (model, argument names) the model takes


@dataclass(frozen=True)
class ExperimentPoint:
    """One point of an experiment: the model to build, the recipe keys it changes and where it sits."""
    experiment: str
    name: str                                   # the run name without the seed (for people)
    model: str
    model_kwargs: Dict[str, Any]
    recipe: Dict[str, Any] = field(default_factory=dict)   # other train.py keys the point sets (lr, img_size)
    seeded: str = ''                            # the model argument the training seed also sets: perm_seed, mask_seed
    coords: Dict[str, Any] = field(default_factory=dict)   # the point's coordinates in the figure (C, S, L, p, P …)


@dataclass
class SweepPlan:
    """What a sweep writes: the points and seeds, and every setting with its value and source."""
    recipe: str
    experiment: str
    figure: Optional[Figure]
    figure_source: str
    points: List[ExperimentPoint]
    seeds: List[int]
    settings: List[Setting]
    differs: List[str]      # settings of the base recipe that differ from the paper's for this figure
    readings: Dict[str, str] = field(default_factory=dict)  # disagreement key → the reading used


@dataclass
class _Sweep:
    """What a planner reads: the base recipe, the figure's params (with the chosen readings'), the model arguments
    (base recipe, figure, reading, given: the last wins) and the options given (None: the figure's)."""
    base: Dict[str, Any]
    params: Dict[str, Any]
    kwargs: Dict[str, Any]
    perms: List[str]
    omega: Optional[int]
    gamma: Optional[float]
    dims: Optional[Sequence[int]]
    sw_kwargs: Dict[str, Any]
    title: str
    depths: Optional[Sequence[int]] = None
    densities: Optional[Sequence[float]] = None
    perms_given: bool = False


def recipe_figures(path: Path) -> List[str]:
    """The figure keys a recipe declares on its ``# figure: KEY`` lines."""
    out = []
    for line in Path(path).read_text(encoding='utf-8').splitlines():
        m = _FIGURE_LINE.match(line)
        if m:
            if m.group(1) not in FIGURES:
                raise InvalidArgumentError(f'{path}: unknown figure {m.group(1)!r} (known: {", ".join(FIGURES)})')
            out.append(m.group(1))
    return out


def check_seeds(seeds: Sequence[Any]) -> List[int]:
    """Distinct integers train.py accepts (timm's ``random_seed`` seeds numpy with seed + rank: 0 … 2^32 − 1)."""
    lo, hi = SEED_RANGE
    bad = [s for s in seeds if isinstance(s, bool) or not isinstance(s, int) or not lo <= s <= hi]
    if not seeds or bad:
        raise InvalidArgumentError(f'seeds must be integers in {lo} … {hi} (timm\'s random_seed seeds numpy with '
                                   f'seed + rank), got {list(seeds) if not bad else bad}')
    repeated = sorted({s for s in seeds if list(seeds).count(s) > 1})
    if repeated:
        raise InvalidArgumentError(f'seeds must be distinct: {repeated} repeated (each point would be trained twice '
                                   f'with the same seed)')
    return list(seeds)


def _perm(perm: str) -> Tuple[Dict[str, Any], str]:
    return {'permutation': perm}, ('perm_seed' if perm == 'random' else '')


def _summary(model: str, kwargs: Mapping[str, Any]) -> Any:
    from ..catalog import summarize
    return summarize(model, **kwargs)


def _require_mlp_mixer(model: str, kwargs: Mapping[str, Any], what: str) -> None:
    if _summary(model, kwargs).block_type != 'mlp':
        raise InvalidArgumentError(f'{what} is of MLP-Mixers: {model} has no hidden layer (use an MLP-Mixer recipe)')


# ---------------------------------------------------------------------------------------------- planners, one per kind

def _mixer(sw: _Sweep, experiment: str, name: str, model: str, perm: str, mk: Dict[str, Any],
           coords: Dict[str, Any], skip_layer: bool = True, **recipe: Any) -> ExperimentPoint:
    """A Mixer point; `skip_layer` (A.2.4) wherever the sweep varies S."""
    extra, seeded = _perm(perm)
    mk = {**sw.kwargs, **mk, **({'skip_layer': True} if skip_layer else {}), **extra}
    return ExperimentPoint(experiment, f'{name}_{perm}', model, mk, recipe=recipe, seeded=seeded,
                           coords=dict(coords, permutation=perm))


def _sw_mlp(sw: _Sweep, name: str, mk: Dict[str, Any], coords: Dict[str, Any],
            experiment: str = 'width') -> ExperimentPoint:
    shared = {k: v for k, v in sw.kwargs.items() if k in _SHARED_WITH_SW_MLP}
    return ExperimentPoint(experiment, name, _SW_MODEL, {**shared, **mk, **sw.sw_kwargs}, seeded='mask_seed',
                           coords=coords)


def _sw_arm(sw: _Sweep, arm: Mapping[str, Any], omega: float, gamma: Optional[float]) -> List[ExperimentPoint]:
    """SW-MLPs at the arm's densities p (or the sweep's `densities`), m = √(Ω/(γp)) (eq. S.43; D.2)."""
    points = []
    for p in sw.densities or arm['densities']:
        m = sw_mlp_width(omega, p, gamma or 1.0)
        mk = dict(num_blocks=arm['num_blocks'], density=p, omega=omega, **({'gamma': gamma} if gamma else {}))
        points.append(_sw_mlp(sw, f'sw_mlp_p{p:.4g}_m{m}', mk,
                              dict(density=p, width=m, hidden=round((gamma or 1.0) * m), omega=omega)))
    return points


def _paired_sw(sw: _Sweep, mixers: Sequence[Tuple[int, int]], omega: float, gamma: float,
               num_blocks: int) -> List[ExperimentPoint]:
    """One SW-MLP per Mixer (C, S): m = S·C, the same Ω and γ, p = Ω/(γm²) (C.2, eq. 13), C per-patch channels."""
    points = []
    for c, s in mixers:
        m = s * c
        p = omega / (gamma * m * m)
        if p > 1:
            raise InvalidArgumentError(f'omega: the SW-MLP paired with C = {c}, S = {s} would need density '
                                       f'Ω/(γm²) = {p:.3g} > 1 at Ω = {omega:g}, γ = {gamma:g}')
        mk = dict(embed_dim=c, num_blocks=num_blocks, width=m, density=p, gamma=gamma)
        points.append(_sw_mlp(sw, f'sw_mlp_c{c}_s{s}_p{p:.4g}_m{m}', mk,
                              dict(C=c, S=s, density=p, width=m, hidden=round(gamma * m), omega=omega)))
    return points


def _plan_pairs(sw: _Sweep) -> List[ExperimentPoint]:
    """S-Mixers at C.4's printed (C, S) pairs of Ω, or at C ∈ `dims` with S = round(S(C)) at Ω (eq. S.42); the
    SW-MLP arm at the arm's own Ω only (C.4 (ii))."""
    omega = sw.params['omega'] if sw.omega is None else sw.omega
    if sw.dims:
        pairs: Sequence[Tuple[int, int]] = [(c, round(tokens_for_omega(c, omega, 1.0))) for c in sw.dims]
    elif omega in CIFAR_SWEEP_PAIRS:
        pairs = CIFAR_SWEEP_PAIRS[omega]
    else:
        raise InvalidArgumentError(f'omega: the paper lists (C, S) pairs for Ω in {sorted(CIFAR_SWEEP_PAIRS)}, not '
                                   f'{omega} (C.4); give dims to choose C at this Ω')
    points = [_mixer(sw, 'width', f'width_c{c}_s{s}', sw.base['model'], perm, dict(num_tokens=s, embed_dim=c),
                     dict(C=c, S=s, omega=omega))
              for perm in sw.perms for c, s in pairs]
    arm = sw.params.get('sw_mlp')
    if arm and omega == arm['omega']:
        points += _sw_arm(sw, arm, arm['omega'], None if arm['gamma'] == 1.0 else arm['gamma'])
    return points


def _plan_dims(sw: _Sweep) -> List[ExperimentPoint]:
    """MLP-Mixers at C ∈ dims, S = round(S(C)) at (Ω, γ) (eq. 14); the SW-MLP arm paired per (C, S) or by p."""
    omega = sw.params['omega'] if sw.omega is None else sw.omega
    gamma = sw.params['gamma'] if sw.gamma is None else sw.gamma
    model = sw.params.get('model', sw.base['model'])
    _require_mlp_mixer(model, sw.kwargs, f'{sw.title} width sweep')
    pairs = [(c, width_point(c, omega, gamma).num_tokens) for c in (sw.dims or sw.params['dims'])]
    points = [_mixer(sw, 'width', f'width_c{c}_s{s}', model, perm,
                     dict(num_tokens=s, embed_dim=c, gamma=gamma, mlp_ratio=None), dict(C=c, S=s, omega=omega))
              for perm in sw.perms for c, s in pairs]
    arm = sw.params.get('sw_mlp')
    if arm and arm.get('paired') and sw.densities:
        raise InvalidArgumentError(f'densities do not apply to {sw.title}: its SW-MLPs are paired with its Mixers, '
                                   f'p = Ω/(γm²) (eq. 13)')
    if arm and arm.get('paired'):
        points += _paired_sw(sw, pairs, omega, gamma, arm['num_blocks'])
    elif arm:
        points += _sw_arm(sw, arm, omega, gamma)
    return points


def _plan_dims_fc(sw: _Sweep) -> List[ExperimentPoint]:
    """S-Mixers at C ∈ dims, S = round(S(C)) at the figure's Ω (eq. S.42)."""
    omega = sw.params['omega']
    return [_mixer(sw, 'width', f'width_c{c}_s{s}', sw.base['model'], perm, dict(num_tokens=s, embed_dim=c),
                   dict(C=c, S=s, omega=omega))
            for perm in sw.perms for c in (sw.dims or sw.params['dims'])
            for s in (round(tokens_for_omega(c, omega, 1.0)),)]


def _plan_imagenet(sw: _Sweep) -> List[ExperimentPoint]:
    """Fig. 6 (d): P ∈ C.5's patches, C = 3P², S from eq. S.44 at Mixer-B/16's Ω, γ = 4."""
    if sw.omega not in (None, IMAGENET_SWEEP_OMEGA):
        raise InvalidArgumentError(f'omega does not apply to the ImageNet width experiment (C.5 defines it at '
                                   f'Ω = {IMAGENET_SWEEP_OMEGA} only)')
    return [ExperimentPoint('width', f'{"rp" if perm == "random" else "pk"}_mixer_b_w_p{pt.patch}_s{pt.num_tokens}'
                                     f'_c{pt.dim}', sw.base['model'],
                            {**sw.kwargs, 'patch_size': pt.patch, 'embed_dim': pt.dim, 'num_tokens': pt.num_tokens,
                             'gamma': 4., 'skip_layer': True, **_perm(perm)[0]}, seeded=_perm(perm)[1],
                            coords=dict(P=pt.patch, C=pt.dim, S=pt.num_tokens, permutation=perm))
            for perm in sw.perms for pt in patch_sweep(IMAGENET_SWEEP_OMEGA, 4., IMAGENET_SWEEP_PATCHES)]


def _plan_sw(sw: _Sweep) -> List[ExperimentPoint]:
    """Fig. S.1 (left): SW-MLPs alone at fixed Ω over the densities p."""
    omega = sw.params['omega'] if sw.omega is None else sw.omega
    gamma = sw.params.get('gamma') if sw.gamma is None else sw.gamma
    sw.kwargs.setdefault('patch_size', sw.params['patch_size'])
    return _sw_arm(sw, sw.params, omega, gamma)


def gamma_points(omega: float = GAMMA_OMEGA, width: int = GAMMA_WIDTH) -> List[Dict[str, Any]]:
    """(C, S, γ) at fixed m = S·C and Ω: C over the divisors of m from m^(1/4) to m^(3/4), γ = 2Ω/(m(C + m/C))
    (eq. S.46), largest at C = S = √m."""
    lo, hi = width ** 0.25, width ** 0.75
    return [dict(C=c, S=width // c, gamma=2 * omega / (width * (c + width / c)))
            for c in range(1, width + 1) if width % c == 0 and lo <= c <= hi]


def _plan_gamma(sw: _Sweep) -> List[ExperimentPoint]:
    """Fig. S.3: MLP-Mixers at fixed m and Ω, γ from eq. S.46."""
    model = sw.params.get('model', sw.base['model'])
    omega = sw.params.get('omega', GAMMA_OMEGA) if sw.omega is None else sw.omega
    _require_mlp_mixer(model, sw.kwargs, "the gamma experiment (it varies the MLP-Mixer's γ; or a recipe of figure "
                                         "figS3)")
    points = []
    for perm in sw.perms:
        for pt in gamma_points(omega, sw.params.get('width', GAMMA_WIDTH)):
            gamma = round(pt['gamma'], 6)
            points.append(_mixer(sw, 'gamma', f'gamma_c{pt["C"]}_s{pt["S"]}_g{gamma:.3g}', model, perm,
                                 dict(num_tokens=pt['S'], embed_dim=pt['C'], gamma=gamma, mlp_ratio=None),
                                 dict(C=pt['C'], S=pt['S'], gamma=gamma, omega=omega)))
    return points


def _plan_depth(sw: _Sweep) -> List[ExperimentPoint]:
    """Fig. 7: the base model at each depth L (S and C fixed)."""
    return [_mixer(sw, 'depth', f'depth_L{depth}', sw.base['model'], perm, dict(num_blocks=depth), dict(L=depth),
                   skip_layer=False)
            for perm in sw.perms for depth in (sw.depths or sw.params.get('depths', DEPTHS))]


def _plan_density(sw: _Sweep) -> List[ExperimentPoint]:
    """Fig. 2 (C.1): the base MLP-Mixer (L, γ, S, C) and SW-MLPs at its width m = S·C and hidden width γm, of
    density p each, with one SW-MLP block per token and channel MLP (2L blocks) and the Mixer's per-patch FC."""
    model = sw.base['model']
    _require_mlp_mixer(model, sw.kwargs, 'Fig. 2\'s density sweep')
    d = _summary(model, sw.kwargs)
    points = [_mixer(sw, 'density', f'mixer_s{d.num_tokens}c{d.dim}', model, perm, {},
                     dict(C=d.dim, S=d.num_tokens, density=d.density, width=d.width), skip_layer=False)
              for perm in sw.perms]
    for p in sw.densities or sw.params['densities']:
        mk = dict(embed_dim=d.dim, num_blocks=2 * d.depth, width=d.width, density=p, gamma=d.gamma)
        points.append(_sw_mlp(sw, f'sw_mlp_p{p:.4g}_m{d.width}', mk,
                              dict(C=d.dim, S=d.num_tokens, density=p, width=d.width, hidden=round(d.gamma * d.width)),
                              experiment='density'))
    return points


def _plan_seeds(sw: _Sweep) -> List[ExperimentPoint]:
    """The base recipe's model as it is, once per seed: a Mixer as each of the permutations, any other model
    (the shallow MLPs of Fig. 2 (d), an SW-MLP) alone."""
    model = sw.base['model']
    d = _summary(model, sw.kwargs)
    if d.block_type in ('mlp', 'fc'):
        return [_mixer(sw, 'seeds', model, model, perm, {}, {}, skip_layer=False) for perm in sw.perms]
    if sw.perms_given:
        raise InvalidArgumentError(f'permutations: {model} ({d.family}) has no permutation to choose')
    return [ExperimentPoint('seeds', model, model, dict(sw.kwargs), seeded='mask_seed' if d.block_type == 'sparse'
                            else '', coords={})]


def _plan_rp_block(sw: _Sweep) -> List[ExperimentPoint]:
    """Fig. S.4: all normal, all random, and each block alone random."""
    model, kwargs = sw.base['model'], sw.kwargs
    depth = int(kwargs.get('num_blocks') or _summary(model, kwargs).depth)
    points = [ExperimentPoint('rp-block', f'rpblock_{perm}', model, dict(kwargs, permutation=perm),
                              seeded=_perm(perm)[1], coords=dict(random_block='all' if perm == 'random' else 'none'))
              for perm in ('normal', 'random')]
    for block in range(depth):
        pattern = ['normal'] * depth
        pattern[block] = 'random'
        points.append(ExperimentPoint('rp-block', f'rpblock_b{block}', model, dict(kwargs, permutation=pattern),
                                      seeded='perm_seed', coords=dict(random_block=block)))
    return points


def _plan_patch(sw: _Sweep) -> List[ExperimentPoint]:
    """Fig. S.5: S = C = 64, four blocks (D.6), at each patch size P; the skip layer maps S0 = (H/P)² to 64."""
    img = sw.params.get('img_size') or (90 if int(sw.base.get('img_size') or 32) == 90 else 32)
    patches = sw.params.get('patches') or (PATCHES_90 if img == 90 else PATCHES_32)
    return [_mixer(sw, 'patch', f'patch_p{p}', sw.base['model'], perm,
                   dict(img_size=img, patch_size=p, num_tokens=64, embed_dim=64, num_blocks=4), dict(P=p),
                   img_size=img)
            for perm in sw.perms for p in patches]


@dataclass(frozen=True)
class Planner:
    """How one kind of sweep builds its points, and the options it refuses (option → why)."""
    build: Callable[[_Sweep], List[ExperimentPoint]]
    refuses: Mapping[str, str]


_NO_OMEGA = 'its points do not vary Ω'
_NO_GAMMA = 'γ is set by an MLP-Mixer width sweep (D.2, Fig. 4) or an SW-MLP sweep (Fig. S.1) only'
_NO_DIMS = 'C is chosen by dims in a width sweep of Mixers (Figs. 4, 5, S.2, S.6, S.7, S.8) only'
_NO_DEPTHS = 'L is chosen by depths in the depth experiment (Fig. 7) only'
_NO_DENSITIES = 'p is chosen by densities where a sweep has SW-MLPs (Figs. 2, 4, 5, S.1) only'
_FIXED = dict(omega=_NO_OMEGA, gamma=_NO_GAMMA, dims=_NO_DIMS, depths=_NO_DEPTHS, densities=_NO_DENSITIES)
PLANNERS: Dict[str, Planner] = {
    'pairs': Planner(_plan_pairs, dict(gamma=_NO_GAMMA, depths=_NO_DEPTHS)),
    'dims': Planner(_plan_dims, dict(depths=_NO_DEPTHS)),
    'dims_fc': Planner(_plan_dims_fc, dict(omega="its Ω is the figure's", gamma=_NO_GAMMA, depths=_NO_DEPTHS,
                                           densities=_NO_DENSITIES)),
    'imagenet': Planner(_plan_imagenet, dict(gamma=_NO_GAMMA, dims=_NO_DIMS, depths=_NO_DEPTHS,
                                             densities=_NO_DENSITIES)),
    'sw': Planner(_plan_sw, dict(dims=_NO_DIMS, depths=_NO_DEPTHS,
                                 permutations='its points are SW-MLPs, which have no permutation')),
    'gamma': Planner(_plan_gamma, dict(gamma=_NO_GAMMA, dims=_NO_DIMS, depths=_NO_DEPTHS, densities=_NO_DENSITIES)),
    'depth': Planner(_plan_depth, {k: v for k, v in _FIXED.items() if k != 'depths'}),
    'rp-block': Planner(_plan_rp_block, dict(
        _FIXED, permutations='it trains the all-normal, all-random and one-random-block models')),
    'patch': Planner(_plan_patch, _FIXED),
    'density': Planner(_plan_density, {k: v for k, v in _FIXED.items() if k != 'densities'}),
    'seeds': Planner(_plan_seeds, _FIXED),
}


# ---------------------------------------------------------------------------------------------- planning

def _pick_figure(path: Path, experiment: Optional[str], figure: Optional[str]) -> Tuple[Optional[Figure], str, str]:
    """(figure, experiment, where the figure came from)."""
    if figure is not None:
        choice('figure', figure, tuple(FIGURES))
        fig = FIGURES[figure]
        if experiment is not None and experiment != fig.experiment:
            raise InvalidArgumentError(f'figure {figure} is a {fig.experiment} experiment, not {experiment}')
        return fig, fig.experiment, 'the figure option'
    experiment = experiment or 'width'
    choice('experiment', experiment, EXPERIMENTS)
    declared = [FIGURES[k] for k in recipe_figures(path) if FIGURES[k].experiment == experiment]
    if declared:
        others = f' (also declared: {", ".join(f.key for f in declared[1:])}; pick one with figure)' \
            if len(declared) > 1 else ''
        return declared[0], experiment, f'the recipe\'s `# figure: {declared[0].key}` line{others}'
    return None, experiment, 'none: the recipe declares no figure of this experiment'


def _kind_without_figure(experiment: str, base: Mapping[str, Any],
                         kwargs: Mapping[str, Any]) -> Tuple[str, Dict[str, Any], List[Setting]]:
    """(kind, params, settings) of a recipe that declares no figure: by the experiment, and for width by its model."""
    if experiment == 'density':
        return experiment, dict(densities=FIG2_DENSITIES), []
    if experiment != 'width':
        return experiment, {}, []
    summary = _summary(base['model'], kwargs)
    if summary.block_type == 'sparse':
        raise InvalidArgumentError(f"no width sweep for model {base['model']!r}: the SW-MLP is an arm of a Mixer "
                                   f"sweep (use a Mixer recipe)")
    if summary.block_type == 'mlp' and summary.img_size == 224:
        if abs(summary.omega / IMAGENET_SWEEP_OMEGA - 1) > 0.05:
            raise InvalidArgumentError(
                f"no width sweep for model {base['model']!r}: its Ω = {summary.omega:.0f} is not the ImageNet "
                f"sweep's {IMAGENET_SWEEP_OMEGA} (C.5; use imagenet/pk_mixer_b_w or rp_mixer_b_w)")
        kind, params = 'imagenet', {}
    elif summary.block_type == 'mlp':
        kind, params = 'dims', dict(dims=MLP_MIXER_DIMS, omega=FIGS2_OMEGA, gamma=4.0, sw_mlp=None)
    else:
        kind, params = 'pairs', dict(omega=2 ** 18, sw_mlp=None)
    source = f'ours: no figure declared; chosen by the base model ({summary.family}, {summary.img_size} px)'
    return kind, params, [Setting('points', kind, source)] + ([SKIP_LAYER] if kind != 'imagenet' else [])


def _readings(fig: Optional[Figure], given: Mapping[str, str]) -> Dict[str, Reading]:
    """The reading used for each of the figure's disagreements; an unknown key or name is refused by name."""
    known = {d.key: d for d in (fig.disagreements if fig else ())}
    for key, name in given.items():
        if key not in known:
            raise InvalidArgumentError(f'readings: {fig.key if fig else "this sweep"} has no disagreement {key!r} '
                                       f'(it has: {", ".join(map(repr, known)) or "none"})')
        choice(f'readings[{key!r}]', name, tuple(r.name for r in known[key].readings))
    return {key: d.reading(given.get(key)) for key, d in known.items()}


def _disagreement_settings(fig: Figure, used: Mapping[str, Reading], given: Mapping[str, str]) -> List[Setting]:
    out = []
    for d in fig.disagreements:
        chosen = used[d.key]
        both = '; '.join(f'{r.name}: {r.says} ({r.source})' for r in d.readings)
        others = ', '.join(f'--reading {d.key}={r.name}' for r in d.readings if r is not chosen)
        why = 'given' if d.key in given else d.why
        out.append(Setting(f'reading {d.key}', chosen.name,
                           f'DISAGREEMENT, {d.what} — {both}. Used: {chosen.name} ({why}); the other: {others}'))
    return out


def _check_options(kind: str, params: Mapping[str, Any], experiment: str, title: str, **given: Any) -> None:
    refuses = {**PLANNERS[kind].refuses, **params.get('refuses', {})}
    for option, value in given.items():
        if value is not None and option in refuses:
            where = title if experiment == 'width' else experiment
            raise InvalidArgumentError(f'{option} does not apply to the {where} experiment ({refuses[option]})')


def _check_choices(depths: Optional[Sequence[int]], densities: Optional[Sequence[float]]) -> None:
    """Depths are distinct positive integers, densities distinct probabilities in (0, 1]."""
    for name, values, ok, what in (
            ('depths', depths, lambda v: isinstance(v, int) and not isinstance(v, bool) and v > 0, 'positive integers'),
            ('densities', densities, lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and 0 < v <= 1,
             'numbers in (0, 1]')):
        if values is None:
            continue
        bad = [v for v in values if not ok(v)]
        if not values or bad or len(set(values)) != len(values):
            raise InvalidArgumentError(f'{name} must be distinct {what}, got {list(values)}')


def _check_points(points: Sequence[ExperimentPoint], progress: Optional[Callable[[str], None]] = None) -> None:
    """Build every point's model on the meta device: an impossible point is refused, by name, before anything.
    A configuration that built once is not built again (:data:`_BUILT`). `progress` gets a line per point built."""
    import timm

    from ..catalog import check_model_kwargs
    for i, point in enumerate(points):
        key = (point.model, json.dumps(point.model_kwargs, sort_keys=True, default=repr))
        if key in _BUILT:
            continue
        if progress is not None:
            progress(f'point {i + 1}/{len(points)}: building {point.name} ({point.model}) on the meta device')
        try:
            names = (point.model, frozenset(point.model_kwargs))
            if names not in _ACCEPTED:  # the model takes these arguments (it builds a default model to know)
                check_model_kwargs(point.model, point.model_kwargs)
                _ACCEPTED.add(names)
            timm.create_model(point.model, device='meta', **point.model_kwargs)
        except InvalidArgumentError as e:
            raise InvalidArgumentError(f'point {point.name} ({point.model}): {e}') from e
        _BUILT.add(key)


def _training(fig: Optional[Figure], used: Mapping[str, Reading], base: Mapping[str, Any], points, path: Path):
    """(points with the figure's and readings' training overrides, settings, differences from the paper)."""
    chosen = [s for r in used.values() for s in r.overrides]
    overrides = {s.name: s.value for s in (fig.overrides if fig else ())} | {s.name: s.value for s in chosen}
    if overrides:
        points = [ExperimentPoint(p.experiment, p.name, p.model, p.model_kwargs, {**overrides, **p.recipe},
                                  p.seeded, p.coords) for p in points]
    settings: List[Setting] = []
    differs: List[str] = []
    if fig:
        replaced = {s.name: s for s in chosen}
        expects = [replaced.pop(s.name, s) for s in fig.expects] + list(replaced.values())
        for s in expects:
            value = overrides.get(s.name, base.get(s.name))
            if value == s.value:
                settings.append(Setting(s.name, value, s.source))
            else:
                settings.append(Setting(s.name, value, f'the base recipe; DIFFERS from the paper\'s {s.value!r} '
                                                       f'({s.source})'))
                differs.append(f'{s.name}: {value!r} in the base recipe, {s.value!r} in the paper ({s.source})')
        settings += [s for s in fig.overrides if s.name not in {e.name for e in expects}]
    stated = {s.name for s in settings}
    for key, value in base.items():
        if key not in stated and key not in ('model', 'model_kwargs', 'seed', 'experiment'):
            settings.append(Setting(key, value, f'ours: the base recipe {path.name} (the paper states none for '
                                                f'this figure)' if fig else f'the base recipe {path.name}'))
    return points, settings, differs


def _seed_setting(fig: Optional[Figure], seeds: Optional[Sequence[int]]) -> Tuple[List[int], Setting]:
    if seeds is None:
        seeds = list(range(fig.seeds.value)) if fig else [0]
        return seeds, Setting('seeds', ' '.join(map(str, seeds)), fig.seeds.source if fig else
                              'ours: one seed (no figure declared)')
    seeds = check_seeds(seeds)
    paper = f' (the paper: {fig.seeds.value}, {fig.seeds.source})' if fig else ''
    return seeds, Setting('seeds', ' '.join(map(str, seeds)), f'given{paper}')


def plan_sweep(
        recipe: str,
        experiment: Optional[str] = None,
        permutations: Optional[Sequence[str]] = None,
        seeds: Optional[Sequence[int]] = None,
        omega: Optional[int] = None,
        model_kwargs: Optional[Mapping[str, Any]] = None,
        gamma: Optional[float] = None,
        dims: Optional[Sequence[int]] = None,
        figure: Optional[str] = None,
        readings: Optional[Mapping[str, str]] = None,
        progress: Optional[Callable[[str], None]] = None,
        depths: Optional[Sequence[int]] = None,
        densities: Optional[Sequence[float]] = None,
) -> SweepPlan:
    """The points, seeds and settings of a sweep (see the module docstring), every point checked to build. None
    means the figure's (or the experiment's) default; an option the experiment does not use is refused, by name.

    Args:
        recipe: The base recipe (a file or a packaged name).
        experiment: One of :data:`EXPERIMENTS` (default: the figure's, else width).
        permutations: 'random' and/or 'normal' models (default: the figure's, else both; not for rp-block).
        seeds: Training seeds (default: as many as the paper trains for the figure, from 0; one without a figure).
        omega: Ω of a width sweep at a choice of Ω, or of the gamma sweep.
        model_kwargs: Model arguments added to the base recipe's and the figure's (the point's own win).
        gamma: γ of an MLP-Mixer width sweep or an SW-MLP sweep.
        dims: The channels C of a width sweep of Mixers (an MLP-Mixer's, Fig. 5's S-Mixers at any Ω, Fig. S.6's).
        depths: The depths L of the depth experiment (default Fig. 7's).
        densities: The densities p of the SW-MLPs of a sweep that has them (default the figure's).
        figure: A key of :data:`~timm_pkmixer.experiments.sweep_tables.FIGURES` (default: the recipe's
            ``# figure:`` line).
        readings: For a disagreement of the paper's text and tables, the reading to follow instead of the first
            (disagreement key → reading name, e.g. ``{'omega': 'text'}``; :attr:`Figure.disagreements`).
        progress: Receives a line per point as it is checked (built on the meta device); None: silent.
    """
    path = resolve_recipe(recipe)
    base = load_recipe(path)
    if 'model' not in base:
        raise InvalidArgumentError(f'{path}: the base recipe has no `model`')
    fig, experiment, fig_source = _pick_figure(path, experiment, figure)
    given_readings = dict(readings or {})
    used = _readings(fig, given_readings)
    user_kwargs = dict(model_kwargs or {})
    kwargs = {**(base.get('model_kwargs') or {})}
    for r in used.values():
        kwargs.update(r.model_kwargs)
    if fig:
        kind, params, settings = fig.kind, dict(fig.params), []
        for r in used.values():
            params.update(r.params)
    else:
        kind, params, settings = _kind_without_figure(experiment, base, {**kwargs, **user_kwargs})
    title = f'{fig.key} width' if fig else 'width'
    _check_options(kind, params, experiment, title, omega=omega, gamma=gamma, dims=dims, permutations=permutations,
                   depths=depths, densities=densities)
    _check_choices(depths, densities)
    perms = list(permutations) if permutations is not None else list(params.get('permutations', ('random', 'normal')))
    for p in perms:
        choice('permutation', p, ('random', 'normal'))
    seeds, seed_setting = _seed_setting(fig, seeds)
    kwargs.update({k: params[k] for k in ('num_blocks', 'patch_size') if k in params})
    kwargs.update(params.get('model_kwargs', {}))
    kwargs.update(user_kwargs)
    sw_kwargs = {k: v for r in used.values() for k, v in r.sw_kwargs.items()}
    points = PLANNERS[kind].build(_Sweep(base, params, kwargs, perms, omega, gamma, dims, sw_kwargs, title, depths,
                                         densities, permutations is not None))
    _check_points(points, progress)
    points, training, differs = _training(fig, used, base, points, path)
    settings = [seed_setting] + settings + (list(fig.model) if fig else []) + training
    if fig:
        settings += _disagreement_settings(fig, used, given_readings)
    settings += [Setting(name, ' '.join(map(str, v)) if isinstance(v, (list, tuple)) else v, f'given ({name})')
                 for name, v in dict(omega=omega, gamma=gamma, dims=dims, depths=depths, densities=densities).items()
                 if v is not None]
    settings += [Setting(f'model_kwargs.{k}', v, 'given (model_kwargs)') for k, v in user_kwargs.items()]
    return SweepPlan(str(recipe), experiment, fig, fig_source, points, list(seeds), settings, differs,
                     {k: r.name for k, r in used.items()})


def experiment_points(base_recipe: str, experiment: Optional[str] = None, **kwargs: Any) -> List[ExperimentPoint]:
    """The points of a sweep of `base_recipe` (see :func:`plan_sweep` for the arguments)."""
    return plan_sweep(base_recipe, experiment, **kwargs).points


def explain(plan: SweepPlan) -> str:
    """Every setting of the sweep with its value and source, its disagreements, and its points (Markdown)."""
    head = (f'# {plan.experiment} sweep of {plan.recipe}: ' +
            (f'{plan.figure.title} (figure {plan.figure.key}, from {plan.figure_source})' if plan.figure
             else f'no figure ({plan.figure_source})'))
    lines = [head, '', '| setting | value | source |', '|---|---|---|']
    lines += [f'| {s.name} | {s.value} | {s.source} |' for s in plan.settings]
    lines += ['', f'{len(plan.points)} points × {len(plan.seeds)} seeds = {len(plan.points) * len(plan.seeds)} '
                  f'recipes: ' + ', '.join(p.name for p in plan.points)]
    if plan.figure and plan.figure.disagreements:
        lines += ['', "Disagreements of the paper's text with its tables or captions (the reading used is marked; "
                      'the other is one option away):']
        for d in plan.figure.disagreements:
            lines.append(f'- {d.key} ({d.what}): ' + '; '.join(
                f'{"**" + r.name + "** (used)" if r.name == plan.readings[d.key] else r.name}: {r.says} ({r.source})'
                + ('' if r.name == plan.readings[d.key] else f' → `--reading {d.key}={r.name}`') for r in d.readings))
    if plan.differs:
        lines += ['', 'The base recipe differs from the paper for this figure:'] + [f'- {d}' for d in plan.differs]
    return '\n'.join(lines) + '\n'


def figures_markdown() -> str:
    """Every figure's sweep with its base recipes and its settings with sources (train_recipes/README.md's list)."""
    from .recipes import list_recipes
    bases: Dict[str, List[str]] = {}
    for info in list_recipes():
        for key in recipe_figures(info.path):
            bases.setdefault(key, []).append(info.name)
    lines = []
    for fig in FIGURES.values():
        lines += [f'### {fig.title}', '',
                  f'`--figure {fig.key}` (`--experiment {fig.experiment}`), base recipe'
                  f'{"s" if len(bases.get(fig.key, [])) > 1 else ""}: '
                  + ', '.join(f'`{b}`' for b in bases.get(fig.key, [])), '',
                  '| setting | value | source |', '|---|---|---|',
                  f'| seeds | {fig.seeds.value} | {fig.seeds.source} |']
        settings = list(fig.model) + list(fig.expects) + [s for s in fig.overrides
                                                          if s.name not in {e.name for e in fig.expects}]
        lines += [f'| {s.name} | {s.value} | {s.source} |' for s in settings]
        lines += [f'| reading {d.key} | {d.readings[0].name} | DISAGREEMENT, {d.what}: '
                  + '; '.join(f'{r.name}: {r.says} ({r.source})' for r in d.readings)
                  + f'; the other: `--reading {d.key}={d.readings[1].name}` |' for d in fig.disagreements] + ['']
    return '\n'.join(lines)


def read_sweep_record(path: PathLike) -> Dict[str, Any]:
    """A sweep's ``sweep.json`` (``{"sweeps": [...]}``, as ``pkmixer sweep`` writes it).

    Raises:
        RunFileError: not JSON, or not an object whose ``sweeps`` is a list.
    """
    path = Path(path)
    try:
        record = json.loads(path.read_text(encoding='utf-8'))
    except json.JSONDecodeError as e:
        raise RunFileError(f'{path}: not JSON ({e.msg} at line {e.lineno}, column {e.colno}); '
                           f'`pkmixer sweep` writes it, move it away to start a new record') from None
    except UnicodeDecodeError:
        raise RunFileError(f'{path}: not JSON (not a text file)') from None
    if not isinstance(record, dict) or not isinstance(record.get('sweeps', []), list):
        raise RunFileError(f'{path}: not a sweep record (a JSON object with a list of sweeps)')
    return record


def _record(plan: SweepPlan, files: Dict[str, List[str]]) -> Dict[str, Any]:
    return dict(
        recipe=plan.recipe, experiment=plan.experiment, figure=plan.figure.key if plan.figure else None,
        figure_source=plan.figure_source, seeds=plan.seeds, readings=plan.readings,
        settings=[dict(setting=s.name, value=s.value, source=s.source) for s in plan.settings],
        differs_from_paper=plan.differs,
        points=[dict(asdict(p), files=files[p.name]) for p in plan.points])


def _wandb_keys(group: str, point: str, seed: int, project: Optional[str]) -> Dict[str, Any]:
    """train.py's own W&B arguments: the point and seed as tags (with the group: train.py has no group argument;
    `pkmixer train` hands the recipe's ``# wandb group:`` line to W&B as ``WANDB_RUN_GROUP``)."""
    keys: Dict[str, Any] = dict(log_wandb=True, wandb_tags=[group, point, f'seed{seed}'])
    if project:
        keys['wandb_project'] = project
    return keys


def _existing(out: Path, plan: SweepPlan, add: bool) -> Dict[str, List[str]]:
    """The recipe files of each point; refuses a folder that holds a sweep (unless `add`) or any of these files."""
    if out.exists() and not out.is_dir():
        raise InvalidArgumentError(f'out_dir {out} is a file')
    existing = sorted(p.name for p in out.glob('*.yaml')) if out.is_dir() else []
    if out.is_dir() and (out / SWEEP_RECORD).is_file():
        existing.insert(0, SWEEP_RECORD)
    if existing and not add:
        raise InvalidArgumentError(f'out_dir {out} already holds a sweep ({len(existing)} YAML files, e.g. '
                                   f'{existing[0]}); choose another folder or add to it with add=True')
    names = {p.name: [f'{p.name}_seed{s}.yaml' for s in plan.seeds] for p in plan.points}
    clash = sorted(set(existing) & {f for fs in names.values() for f in fs})
    if clash:
        raise InvalidArgumentError(f'out_dir {out} already holds {", ".join(clash[:3])}'
                                   f'{" …" if len(clash) > 3 else ""}: adding would overwrite them')
    return names


def write_sweep(recipe: str, out_dir: str, add: bool = False, log_wandb: bool = False,
                wandb_project: Optional[str] = None, **kwargs: Any) -> List[Path]:
    """Write the recipes of a sweep (one per point and seed) and ``sweep.yaml`` into `out_dir`; returns the recipes.

    The plan is :func:`plan_sweep`'s (every point checked to build before anything is written), so a sweep that
    ``explain`` shows is one this writes. A folder that already holds a sweep (or other YAML files) is refused
    unless `add`; even then no file is overwritten. `log_wandb`: every recipe logs to W&B (`wandb_project`),
    grouped by the figure (else the experiment), tagged with its point and seed. Other arguments (`progress`
    among them): :func:`plan_sweep`.
    """
    plan = plan_sweep(recipe, **kwargs)
    out = Path(out_dir)
    names = _existing(out, plan, add)
    base = load_recipe(resolve_recipe(recipe))
    record_path = out / SWEEP_RECORD
    record = read_sweep_record(record_path) if record_path.is_file() else {}  # refused before anything is written
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for point in plan.points:
        for seed in plan.seeds:
            mk = dict(point.model_kwargs)
            if point.seeded:
                mk[point.seeded] = seed
            name = f'{point.name}_seed{seed}'
            cfg = {**base, **point.recipe, 'model': point.model, 'model_kwargs': mk, 'seed': seed,
                   'experiment': name}
            group = plan.figure.key if plan.figure else plan.experiment
            cfg.update(_wandb_keys(group, point.name, seed, wandb_project) if log_wandb else {})
            target = out / f'{name}.yaml'
            header = (f'# {point.experiment} experiment, point {point.name}, seed {seed}'
                      f'{f" ({plan.figure.title})" if plan.figure else ""}.\n'
                      f'# Written by `pkmixer sweep {recipe}`; every setting and its source: {SWEEP_RECORD}.\n'
                      + (f'{WANDB_GROUP_LINE} {group}\n' if log_wandb else ''))
            target.write_text(header + yaml.safe_dump(cfg, sort_keys=False, allow_unicode=True), encoding='utf-8')
            paths.append(target)
    sweeps = record.get('sweeps', []) + [_record(plan, names)]
    write_json(record_path, {'sweeps': sweeps}, ensure_ascii=False, default=str)
    explained = out / SWEEP_EXPLAINED
    previous = explained.read_text(encoding='utf-8') + '\n' if explained.is_file() else ''
    explained.write_text(previous + explain(plan), encoding='utf-8')
    return paths
