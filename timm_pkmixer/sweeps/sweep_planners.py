"""The points of a sweep, one planner per kind of sweep: :data:`PLANNERS` (keyed by the figure's ``kind``) holds
each planner, one small function from a :class:`SweepInput` to its :class:`ExperimentPoint` records, with the options
it refuses (Ω, γ, C, depths, densities, permutations) and why.

Every point is a record (:class:`ExperimentPoint`: model, model arguments, the recipe keys it sets, the model argument
the training seed also sets and its coordinates in the figure). RP models use the training seed as ``perm_seed``,
SW-MLPs as ``mask_seed``. Experiments (:data:`~timm_pkmixer.sweeps.sweep_tables.EXPERIMENTS`): ``width``
(Fig. 4 left, 5, 6, S.1 left, S.2, S.6, S.7, S.8), ``depth`` (Fig. 7), ``rp-block`` (Fig. S.4), ``gamma``
(Fig. S.3), ``patch`` (Fig. S.5), ``density`` (Fig. 2), ``seeds`` (Fig. 2 (d)).
"""
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from ..errors import InvalidArgumentError
from ..permutation_kinds import PERMUTATION_KINDS
from ..width import patch_sweep, sw_mlp_width, tokens_for_omega, width_point
from .sweep_tables import (
    CIFAR_SWEEP_PAIRS,
    DEPTHS,
    GAMMA_OMEGA,
    GAMMA_WIDTH,
    IMAGENET_SWEEP_OMEGA,
    IMAGENET_SWEEP_PATCHES,
    PATCHES_32,
    PATCHES_90,
)

__all__ = ['ExperimentPoint', 'SweepInput', 'Planner', 'PLANNERS', 'gamma_points']

# model arguments an SW-MLP shares with the Mixers of its sweep (input, patches)
_SHARED_WITH_SW_MLP = ('img_size', 'in_chans', 'patch_size', 'act_layer', 'drop_rate')


_SW_MODEL = 'sw_mlp_o18_32'


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
    own: Tuple[str, ...] = ()                   # model arguments the point sets over the base recipe's and the given


@dataclass
class SweepInput:
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


def _perm(perm: str) -> Tuple[Dict[str, Any], str]:
    return {'permutation': perm}, ('perm_seed' if PERMUTATION_KINDS[perm].seeded else '')


def _summary(model: str, kwargs: Mapping[str, Any]) -> Any:
    from ..catalog import summarize
    return summarize(model, **kwargs)


def _require_mlp_mixer(model: str, kwargs: Mapping[str, Any], what: str) -> None:
    if _summary(model, kwargs).block_type != 'mlp':
        raise InvalidArgumentError(f'{what} is of MLP-Mixers: {model} has no hidden layer (use an MLP-Mixer recipe)')


def _mixer(sw: SweepInput, experiment: str, name: str, model: str, perm: str, mk: Dict[str, Any],
           coords: Dict[str, Any], skip_layer: bool = True, **recipe: Any) -> ExperimentPoint:
    """A Mixer point; `skip_layer` (A.2.4) wherever the sweep varies S."""
    extra, seeded = _perm(perm)
    own = {**mk, **({'skip_layer': True} if skip_layer else {}), **extra}
    return ExperimentPoint(experiment, f'{name}_{perm}', model, {**sw.kwargs, **own}, recipe=recipe, seeded=seeded,
                           coords=dict(coords, permutation=perm), own=tuple(own))


def _sw_mlp(sw: SweepInput, name: str, mk: Dict[str, Any], coords: Dict[str, Any],
            experiment: str = 'width') -> ExperimentPoint:
    shared = {k: v for k, v in sw.kwargs.items() if k in _SHARED_WITH_SW_MLP}
    own = {**mk, **sw.sw_kwargs}
    return ExperimentPoint(experiment, name, _SW_MODEL, {**shared, **own}, seeded='mask_seed', coords=coords,
                           own=tuple(own))


def _sw_arm(sw: SweepInput, arm: Mapping[str, Any], omega: float, gamma: Optional[float]) -> List[ExperimentPoint]:
    """SW-MLPs at the arm's densities p (or the sweep's `densities`), m = √(Ω/(γp)) (eq. S.43; D.2)."""
    points = []
    for p in sw.densities or arm['densities']:
        m = sw_mlp_width(omega, p, gamma or 1.0)
        mk = dict(num_blocks=arm['num_blocks'], density=p, omega=omega, **({'gamma': gamma} if gamma else {}))
        points.append(_sw_mlp(sw, f'sw_mlp_p{p:.4g}_m{m}', mk,
                              dict(density=p, width=m, hidden=round((gamma or 1.0) * m), omega=omega)))
    return points


def _paired_sw(sw: SweepInput, mixers: Sequence[Tuple[int, int]], omega: float, gamma: float,
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


def _plan_pairs(sw: SweepInput) -> List[ExperimentPoint]:
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


def _plan_dims(sw: SweepInput) -> List[ExperimentPoint]:
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


def _plan_dims_fc(sw: SweepInput) -> List[ExperimentPoint]:
    """S-Mixers at C ∈ dims, S = round(S(C)) at the figure's Ω (eq. S.42)."""
    omega = sw.params['omega']
    return [_mixer(sw, 'width', f'width_c{c}_s{s}', sw.base['model'], perm, dict(num_tokens=s, embed_dim=c),
                   dict(C=c, S=s, omega=omega))
            for perm in sw.perms for c in (sw.dims or sw.params['dims'])
            for s in (round(tokens_for_omega(c, omega, 1.0)),)]


def _plan_imagenet(sw: SweepInput) -> List[ExperimentPoint]:
    """Fig. 6 (d): P ∈ C.5's patches, C = 3P², S from eq. S.44 at Mixer-B/16's Ω, γ = 4."""
    if sw.omega not in (None, IMAGENET_SWEEP_OMEGA):
        raise InvalidArgumentError(f'omega does not apply to the ImageNet width experiment (C.5 defines it at '
                                   f'Ω = {IMAGENET_SWEEP_OMEGA} only)')
    return [ExperimentPoint('width', f'{PERMUTATION_KINDS[perm].name_prefix}_mixer_b_w_p{pt.patch}_s{pt.num_tokens}'
                                     f'_c{pt.dim}', sw.base['model'],
                            {**sw.kwargs, 'patch_size': pt.patch, 'embed_dim': pt.dim, 'num_tokens': pt.num_tokens,
                             'gamma': 4., 'skip_layer': True, **_perm(perm)[0]}, seeded=_perm(perm)[1],
                            coords=dict(P=pt.patch, C=pt.dim, S=pt.num_tokens, permutation=perm),
                            own=('patch_size', 'embed_dim', 'num_tokens', 'gamma', 'skip_layer', 'permutation'))
            for perm in sw.perms for pt in patch_sweep(IMAGENET_SWEEP_OMEGA, 4., IMAGENET_SWEEP_PATCHES)]


def _plan_sw(sw: SweepInput) -> List[ExperimentPoint]:
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


def _plan_gamma(sw: SweepInput) -> List[ExperimentPoint]:
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


def _plan_depth(sw: SweepInput) -> List[ExperimentPoint]:
    """Fig. 7: the base model at each depth L (S and C fixed)."""
    return [_mixer(sw, 'depth', f'depth_L{depth}', sw.base['model'], perm, dict(num_blocks=depth), dict(L=depth),
                   skip_layer=False)
            for perm in sw.perms for depth in (sw.depths or sw.params.get('depths', DEPTHS))]


def _plan_density(sw: SweepInput) -> List[ExperimentPoint]:
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


def _plan_seeds(sw: SweepInput) -> List[ExperimentPoint]:
    """The base recipe's model as it is, once per seed: a Mixer as each of the permutations, any other model
    (the shallow MLPs of Fig. 2 (d), an SW-MLP) alone."""
    model = sw.base['model']
    d = _summary(model, sw.kwargs)
    if d.block_type in ('mlp', 'fc'):  # named by what is built: the base model's arguments may reshape it
        name = f'{"mixer" if d.block_type == "mlp" else "s_mixer"}_s{d.num_tokens}c{d.dim}_L{d.depth}'
        return [_mixer(sw, 'seeds', name, model, perm, {}, dict(C=d.dim, S=d.num_tokens, L=d.depth),
                       skip_layer=False) for perm in sw.perms]
    if sw.perms_given:
        raise InvalidArgumentError(f'permutations: {model} ({d.family}) has no permutation to choose')
    return [ExperimentPoint('seeds', model, model, dict(sw.kwargs), seeded='mask_seed' if d.block_type == 'sparse'
                            else '', coords={})]


def _plan_rp_block(sw: SweepInput) -> List[ExperimentPoint]:
    """Fig. S.4: all normal, all random, and each block alone random."""
    model, kwargs = sw.base['model'], sw.kwargs
    depth = int(kwargs.get('num_blocks') or _summary(model, kwargs).depth)
    points = [ExperimentPoint('rp-block', f'rpblock_{perm}', model, dict(kwargs, permutation=perm),
                              seeded=_perm(perm)[1], coords=dict(random_block='all' if perm == 'random' else 'none'),
                              own=('permutation',))
              for perm in ('normal', 'random')]
    for block in range(depth):
        pattern = ['normal'] * depth
        pattern[block] = 'random'
        points.append(ExperimentPoint('rp-block', f'rpblock_b{block}', model, dict(kwargs, permutation=pattern),
                                      seeded='perm_seed', coords=dict(random_block=block), own=('permutation',)))
    return points


def _plan_patch(sw: SweepInput) -> List[ExperimentPoint]:
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
    build: Callable[[SweepInput], List[ExperimentPoint]]
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
