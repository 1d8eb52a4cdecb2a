"""`pkmixer sweep`: one train.py recipe per point of one of the paper's experiments, and per seed.

The figure a sweep reproduces is chosen by what the base recipe says, not by its name: a packaged recipe names the
figures it is the base of on ``# figure: KEY`` lines (``figure`` picks one explicitly; the keys and every figure's
settings with their sources are in :mod:`timm_pkmixer.experiments.sweep_tables`). A recipe of no figure gets the
experiment's points around its own model, with no SW-MLP arm.

Experiments: ``width`` (Fig. 4 left, 5, 6, S.2, S.6), ``depth`` (Fig. 7), ``rp-block`` (Fig. S.4), ``gamma``
(Fig. S.3), ``patch`` (Fig. S.5). Every point is a record (:class:`ExperimentPoint`: model, model arguments, the
recipe keys it sets, and its coordinates); each recipe is the base recipe with ``model``, ``model_kwargs``,
``seed`` and ``experiment`` (the run's name, for people) set, plus the figure's training overrides. RP models use
the training seed as ``perm_seed``, SW-MLPs as ``mask_seed``. Beside the recipes the sweep writes ``sweep.json``
(the figure, every setting with its value and source, every point with its coordinates and files) and ``SWEEP.md``
(:func:`explain`'s table).
"""
import json
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import yaml

from ..errors import InvalidArgumentError
from ..validation import choice
from ..width import patch_sweep, sw_mlp_width, tokens_for_omega, width_point
from .recipes import load_recipe, resolve_recipe
from .run_folder import SEED_RANGE, read_sweep_record
from .sweep_tables import (
    CIFAR_SWEEP_PAIRS,
    DEPTHS,
    EXPERIMENTS,
    FIGURES,
    GAMMA_OMEGA,
    GAMMA_WIDTH,
    IMAGENET_SWEEP_OMEGA,
    IMAGENET_SWEEP_PATCHES,
    MLP_MIXER_DIMS,
    PATCHES_32,
    PATCHES_90,
    Figure,
    Setting,
)
from .train_py import WANDB_GROUP_LINE

__all__ = ['EXPERIMENTS', 'SWEEP_RECORD', 'SWEEP_EXPLAINED', 'ExperimentPoint', 'SweepPlan', 'recipe_figures',
           'gamma_points', 'plan_sweep', 'experiment_points', 'explain', 'figures_markdown', 'write_sweep',
           'check_seeds']

SWEEP_RECORD, SWEEP_EXPLAINED = 'sweep.json', 'SWEEP.md'  # not *.yaml: `for r in DIR/*.yaml` trains recipes only
_FIGURE_LINE = re.compile(r'^#\s*figure:\s*(\S+)\s*$')
# model arguments an SW-MLP shares with the Mixers of its sweep (input, patches)
_SHARED_WITH_SW_MLP = ('img_size', 'in_chans', 'patch_size', 'act_layer', 'drop_rate')


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


def _sw_arm(kwargs: Mapping[str, Any], arm: Mapping[str, Any]) -> List[ExperimentPoint]:
    shared = {k: v for k, v in kwargs.items() if k in _SHARED_WITH_SW_MLP}
    points = []
    for p in arm['densities']:
        m = sw_mlp_width(arm['omega'], p, arm['gamma'])
        mk = dict(shared, num_blocks=arm['num_blocks'], density=p, omega=arm['omega'])
        if arm['gamma'] != 1.0:
            mk['gamma'] = arm['gamma']
        points.append(ExperimentPoint('width', f'sw_mlp_p{p:.4g}_m{m}', 'sw_mlp_o18_32', mk, seeded='mask_seed',
                                      coords=dict(density=p, width=m, hidden=round(arm['gamma'] * m))))
    return points


def _pairs_points(base, kwargs, permutations, omega, params) -> List[ExperimentPoint]:
    if omega not in CIFAR_SWEEP_PAIRS:
        raise InvalidArgumentError(f'omega: the paper lists (C, S) pairs for Ω in {sorted(CIFAR_SWEEP_PAIRS)}, not '
                                   f'{omega} (C.4)')
    points = []
    for perm in permutations:
        extra, seeded = _perm(perm)
        for c, s in CIFAR_SWEEP_PAIRS[omega]:
            points.append(ExperimentPoint('width', f'width_c{c}_s{s}_{perm}', base['model'],
                                          {**kwargs, 'num_tokens': s, 'embed_dim': c, **extra}, seeded=seeded,
                                          coords=dict(C=c, S=s, permutation=perm, omega=omega)))
    return points


def _dims_points(base, kwargs, permutations, omega, gamma, dims, model=None) -> List[ExperimentPoint]:
    """MLP-Mixers (``gamma``) or S-Mixers (None) at C ∈ dims, S = round(S(C)) at (Ω, γ) (eq. 14)."""
    points = []
    for perm in permutations:
        extra, seeded = _perm(perm)
        for c in dims:
            if gamma is None:
                s = round(tokens_for_omega(c, omega, 1.0))
                mk = {**kwargs, 'num_tokens': s, 'embed_dim': c, **extra}
            else:
                s = width_point(c, omega, gamma).num_tokens
                mk = {**kwargs, 'num_tokens': s, 'embed_dim': c, 'gamma': gamma, 'mlp_ratio': None, **extra}
            points.append(ExperimentPoint('width', f'width_c{c}_s{s}_{perm}', model or base['model'], mk,
                                          seeded=seeded, coords=dict(C=c, S=s, permutation=perm, omega=omega)))
    return points


def _imagenet_points(base, kwargs, permutations) -> List[ExperimentPoint]:
    points = []
    for perm in permutations:
        extra, seeded = _perm(perm)
        for pt in patch_sweep(IMAGENET_SWEEP_OMEGA, 4., IMAGENET_SWEEP_PATCHES):
            points.append(ExperimentPoint(
                'width', f'{"rp" if perm == "random" else "pk"}_mixer_b_w_p{pt.patch}_s{pt.num_tokens}_c{pt.dim}',
                base['model'],
                {**kwargs, 'patch_size': pt.patch, 'embed_dim': pt.dim, 'num_tokens': pt.num_tokens, 'gamma': 4.,
                 **extra}, seeded=seeded, coords=dict(P=pt.patch, C=pt.dim, S=pt.num_tokens, permutation=perm)))
    return points


def gamma_points(omega: float = GAMMA_OMEGA, width: int = GAMMA_WIDTH) -> List[Dict[str, Any]]:
    """(C, S, γ) at fixed m = S·C and Ω: C over the divisors of m from m^(1/4) to m^(3/4), γ = 2Ω/(m(C + m/C))
    (eq. S.46), largest at C = S = √m."""
    lo, hi = width ** 0.25, width ** 0.75
    return [dict(C=c, S=width // c, gamma=2 * omega / (width * (c + width / c)))
            for c in range(1, width + 1) if width % c == 0 and lo <= c <= hi]


def _gamma_points(model, kwargs, permutations, omega) -> List[ExperimentPoint]:
    if _summary(model, kwargs).block_type != 'mlp':
        raise InvalidArgumentError(f"the gamma experiment varies the MLP-Mixer's γ: {model} has no hidden layer "
                                   f"(use an MLP-Mixer recipe, or a recipe of figure figS3)")
    points = []
    for perm in permutations:
        extra, seeded = _perm(perm)
        for pt in gamma_points(omega, GAMMA_WIDTH):
            gamma = round(pt['gamma'], 6)
            points.append(ExperimentPoint(
                'gamma', f'gamma_c{pt["C"]}_s{pt["S"]}_g{gamma:.3g}_{perm}', model,
                dict(kwargs, num_tokens=pt['S'], embed_dim=pt['C'], gamma=gamma, mlp_ratio=None, **extra),
                seeded=seeded, coords=dict(C=pt['C'], S=pt['S'], gamma=gamma, permutation=perm, omega=omega)))
    return points


def _depth_points(base, kwargs, permutations, depths) -> List[ExperimentPoint]:
    return [ExperimentPoint('depth', f'depth_L{depth}_{perm}', base['model'],
                            dict(kwargs, num_blocks=depth, **_perm(perm)[0]), seeded=_perm(perm)[1],
                            coords=dict(L=depth, permutation=perm))
            for perm in permutations for depth in depths]


def _rp_block_points(base, kwargs) -> List[ExperimentPoint]:
    depth = int(kwargs.get('num_blocks') or _summary(base['model'], kwargs).depth)
    points = [ExperimentPoint('rp-block', f'rpblock_{perm}', base['model'], dict(kwargs, permutation=perm),
                              seeded=_perm(perm)[1], coords=dict(random_block='all' if perm == 'random' else 'none'))
              for perm in ('normal', 'random')]
    for block in range(depth):
        pattern = ['normal'] * depth
        pattern[block] = 'random'
        points.append(ExperimentPoint('rp-block', f'rpblock_b{block}', base['model'],
                                      dict(kwargs, permutation=pattern), seeded='perm_seed',
                                      coords=dict(random_block=block)))
    return points


def _patch_points(base, kwargs, permutations, patches, img) -> List[ExperimentPoint]:
    geometry = dict(num_tokens=64, embed_dim=64, num_blocks=4)  # D.6: S = C = 64, four blocks
    return [ExperimentPoint('patch', f'patch_p{p}_{perm}', base['model'],
                            dict(kwargs, img_size=img, patch_size=p, skip_layer=True, **_perm(perm)[0], **geometry),
                            recipe=dict(img_size=img), seeded=_perm(perm)[1], coords=dict(P=p, permutation=perm))
            for perm in permutations for p in patches]


def _refuse(option: str, value: Any, experiment: str, why: str) -> None:
    if value is not None:
        raise InvalidArgumentError(f'{option} does not apply to the {experiment} experiment ({why})')


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
) -> SweepPlan:
    """The points, seeds and settings of a sweep (see the module docstring). None means the figure's (or the
    experiment's) default; an option the experiment does not use is refused, by name.

    Args:
        recipe: The base recipe (a file or a packaged name).
        experiment: One of :data:`EXPERIMENTS` (default: the figure's, else width).
        permutations: 'random' and/or 'normal' models (default both; not for rp-block).
        seeds: Training seeds (default: as many as the paper trains for the figure, from 0; one without a figure).
        omega: Ω of a width sweep at a choice of Ω, or of the gamma sweep.
        model_kwargs: Model arguments added to the base recipe's and the figure's (the point's own win).
        gamma: γ of an MLP-Mixer width sweep.
        dims: The channels C of an MLP-Mixer or S.6 width sweep.
        figure: A key of :data:`~timm_pkmixer.experiments.sweep_tables.FIGURES` (default: the recipe's
            ``# figure:`` line).
    """
    path = resolve_recipe(recipe)
    base = load_recipe(path)
    if 'model' not in base:
        raise InvalidArgumentError(f'{path}: the base recipe has no `model`')
    fig, experiment, fig_source = _pick_figure(path, experiment, figure)
    if experiment == 'rp-block':
        _refuse('permutations', permutations, experiment, 'it trains the all-normal, all-random and '
                'one-random-block models')
    perms = list(permutations) if permutations is not None else ['random', 'normal']
    for p in perms:
        choice('permutation', p, ('random', 'normal'))
    if seeds is not None:
        seeds = check_seeds(seeds)
    params = dict(fig.params) if fig else {}
    kind = params.get('kind')
    if experiment in ('depth', 'rp-block', 'patch'):
        _refuse('omega', omega, experiment, 'its points do not vary Ω')
    if not (experiment == 'width' and kind in ('dims', None)):
        _refuse('gamma', gamma, experiment, 'γ is set by an MLP-Mixer width sweep only (D.2, Fig. 4)')
    if not (experiment == 'width' and kind in ('dims', 'dims_fc', None)):
        _refuse('dims', dims, experiment, 'C is chosen by dims in an MLP-Mixer width sweep or Fig. S.6 only')
    kwargs = {**(base.get('model_kwargs') or {})}
    user_kwargs = dict(model_kwargs or {})
    settings: List[Setting] = []
    if experiment == 'width':
        if kind is None:  # no figure: by what the model is
            summary = _summary(base['model'], {**kwargs, **user_kwargs})
            if summary.block_type == 'sparse':
                raise InvalidArgumentError(f"no width sweep for model {base['model']!r}: the SW-MLP is an arm of a "
                                           f"Mixer sweep (use a Mixer recipe)")
            if summary.block_type == 'mlp' and summary.img_size == 224:
                if abs(summary.omega / IMAGENET_SWEEP_OMEGA - 1) > 0.05:
                    raise InvalidArgumentError(
                        f"no width sweep for model {base['model']!r}: its Ω = {summary.omega:.0f} is not the ImageNet "
                        f"sweep's {IMAGENET_SWEEP_OMEGA} (C.5; use imagenet/pk_mixer_b_w or rp_mixer_b_w)")
                kind = 'imagenet'
            elif summary.block_type == 'mlp':
                kind, params = 'dims', dict(dims=MLP_MIXER_DIMS, omega=2 ** 18, gamma=4.0, sw_mlp=None)
            else:
                kind, params = 'pairs', dict(omega=2 ** 18, sw_mlp=None)
            settings.append(Setting('points', kind, 'ours: no figure declared; chosen by the base model '
                                                    f'({summary.family}, {summary.img_size} px)'))
        if kind == 'imagenet':
            _refuse('omega', None if omega in (None, IMAGENET_SWEEP_OMEGA) else omega, 'ImageNet width',
                    f'C.5 defines it at Ω = {IMAGENET_SWEEP_OMEGA} only')
        if kind == 'dims_fc' or (fig and fig.key == 'fig4'):
            _refuse('omega', omega, f'{fig.title if fig else "this"} width', 'its Ω is the figure\'s')
    if 'num_blocks' in params:
        kwargs['num_blocks'] = params['num_blocks']
    if 'patch_size' in params:
        kwargs['patch_size'] = params['patch_size']
    kwargs.update(user_kwargs)

    arm = params.get('sw_mlp')
    if experiment == 'width':
        if kind == 'pairs':
            om = params['omega'] if omega is None else omega
            points = _pairs_points(base, kwargs, perms, om, params)
            if arm and om == arm['omega']:
                points += _sw_arm(kwargs, arm)
        elif kind == 'dims':
            om = params['omega'] if omega is None else omega
            g = params['gamma'] if gamma is None else gamma
            model = params.get('model', base['model'])
            if _summary(model, kwargs).block_type != 'mlp':
                raise InvalidArgumentError(f'{fig.key if fig else "this"} width sweep is of MLP-Mixers: {model} has '
                                           f'no hidden layer (use an MLP-Mixer recipe)')
            points = _dims_points(base, kwargs, perms, om, g, dims or params['dims'], model)
            if arm:
                points += _sw_arm(kwargs, dict(arm, omega=om, gamma=g))
        elif kind == 'dims_fc':
            points = _dims_points(base, kwargs, perms, params['omega'], None, dims or params['dims'])
        else:
            points = _imagenet_points(base, kwargs, perms)
    elif experiment == 'depth':
        points = _depth_points(base, kwargs, perms, params.get('depths', DEPTHS))
    elif experiment == 'rp-block':
        points = _rp_block_points(base, kwargs)
    elif experiment == 'gamma':
        model = params.get('model', base['model'])
        gkw = {**kwargs, **params.get('model_kwargs', {}), **user_kwargs} if 'model' in params else kwargs
        points = _gamma_points(model, gkw, perms, params.get('omega', GAMMA_OMEGA) if omega is None else omega)
    else:
        img = params.get('img_size') or (90 if int(base.get('img_size') or 32) == 90 else 32)
        patches = params.get('patches') or (PATCHES_90 if img == 90 else PATCHES_32)
        points = _patch_points(base, kwargs, perms, patches, img)
    overrides = {s.name: s.value for s in (fig.overrides if fig else ())}
    if overrides:
        points = [ExperimentPoint(p.experiment, p.name, p.model, p.model_kwargs, {**overrides, **p.recipe},
                                  p.seeded, p.coords) for p in points]
    if seeds is None:
        seeds = list(range(fig.seeds.value)) if fig else [0]
        settings.insert(0, Setting('seeds', ' '.join(map(str, seeds)), fig.seeds.source if fig else
                                   'ours: one seed (no figure declared)'))
    else:
        paper = f' (the paper: {fig.seeds.value}, {fig.seeds.source})' if fig else ''
        settings.insert(0, Setting('seeds', ' '.join(map(str, seeds)), f'given{paper}'))
    differs: List[str] = []
    if fig:
        settings += list(fig.model)
        for s in fig.expects:
            value = overrides.get(s.name, base.get(s.name))
            if value == s.value:
                settings.append(Setting(s.name, value, s.source))
            else:
                settings.append(Setting(s.name, value, f'the base recipe; DIFFERS from the paper\'s {s.value!r} '
                                                       f'({s.source})'))
                differs.append(f'{s.name}: {value!r} in the base recipe, {s.value!r} in the paper ({s.source})')
        for s in fig.overrides:
            if s.name not in {e.name for e in fig.expects}:
                settings.append(s)
    stated = {s.name for s in settings}
    for key, value in base.items():
        if key not in stated and key not in ('model', 'model_kwargs', 'seed', 'experiment'):
            settings.append(Setting(key, value, f'ours: the base recipe {path.name} (the paper states none for '
                                                f'this figure)' if fig else f'the base recipe {path.name}'))
    for key, value in user_kwargs.items():
        settings.append(Setting(f'model_kwargs.{key}', value, 'given (model_kwargs)'))
    return SweepPlan(str(recipe), experiment, fig, fig_source, points, list(seeds), settings, differs)


def experiment_points(base_recipe: str, experiment: Optional[str] = None, **kwargs: Any) -> List[ExperimentPoint]:
    """The points of a sweep of `base_recipe` (see :func:`plan_sweep` for the arguments)."""
    return plan_sweep(base_recipe, experiment, **kwargs).points


def explain(plan: SweepPlan) -> str:
    """Every setting of the sweep with its value and source, and its points (a Markdown table)."""
    head = (f'# {plan.experiment} sweep of {plan.recipe}: ' +
            (f'{plan.figure.title} (figure {plan.figure.key}, from {plan.figure_source})' if plan.figure
             else f'no figure ({plan.figure_source})'))
    lines = [head, '', '| setting | value | source |', '|---|---|---|']
    lines += [f'| {s.name} | {s.value} | {s.source} |' for s in plan.settings]
    lines += ['', f'{len(plan.points)} points × {len(plan.seeds)} seeds = {len(plan.points) * len(plan.seeds)} '
                  f'recipes: ' + ', '.join(p.name for p in plan.points)]
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
        lines += [f'| {s.name} | {s.value} | {s.source} |' for s in settings] + ['']
    return '\n'.join(lines)


def _record(plan: SweepPlan, files: Dict[str, List[str]]) -> Dict[str, Any]:
    return dict(
        recipe=plan.recipe, experiment=plan.experiment, figure=plan.figure.key if plan.figure else None,
        figure_source=plan.figure_source, seeds=plan.seeds,
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


def write_sweep(recipe: str, out_dir: str, add: bool = False, log_wandb: bool = False,
                wandb_project: Optional[str] = None, **kwargs: Any) -> List[Path]:
    """Write the recipes of a sweep (one per point and seed) and ``sweep.yaml`` into `out_dir`; returns the recipes.

    Every recipe is checked to build its model (on the meta device) before anything is written. A folder that
    already holds a sweep (or other YAML files) is refused unless `add`; even then no file is overwritten.
    `log_wandb`: every recipe logs to W&B (`wandb_project`), grouped by the figure (else the experiment), tagged
    with its point and seed. Other arguments: :func:`plan_sweep`.
    """
    plan = plan_sweep(recipe, **kwargs)
    for point in plan.points:
        _summary(point.model, point.model_kwargs)  # refuses an impossible point before writing anything
    out = Path(out_dir)
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
    record_path.write_text(json.dumps({'sweeps': sweeps}, indent=1, ensure_ascii=False, default=str) + '\n',
                           encoding='utf-8')
    explained = out / SWEEP_EXPLAINED
    previous = explained.read_text(encoding='utf-8') + '\n' if explained.is_file() else ''
    explained.write_text(previous + explain(plan), encoding='utf-8')
    return paths
