"""Planning a sweep: :func:`plan_sweep` turns a base recipe and the options given into a :class:`SweepPlan` (its
points, seeds and every setting with its value and source), which ``--explain`` shows and the writer writes.

The figure a sweep reproduces is chosen by what the base recipe says, not by its name: a packaged recipe names the
figures it is the base of on ``# figure: KEY`` lines (read by
:func:`~timm_pkmixer.sweeps.recipes.read_recipe_comments`; ``figure`` picks one explicitly; the keys and every
figure's settings with their sources are in :mod:`timm_pkmixer.sweeps.sweep_tables`). A recipe
of no figure gets the experiment's points around its own model, with no SW-MLP arm. The points come from the
planner of the figure's kind (:data:`~timm_pkmixer.sweeps.sweep_planners.PLANNERS`); each recipe is the base
recipe with ``model``, ``model_kwargs``, ``seed`` and ``experiment`` (the run's name, for people) set, plus the
figure's training overrides.

Planning checks every point (it builds its model on the meta device), so ``--explain`` and writing refuse the same
sweeps with the same message. Where the paper's text and its tables disagree, the figure's
:class:`~timm_pkmixer.sweeps.sweep_tables.Disagreement` records both readings; the first is used unless
``readings={KEY: NAME}`` picks the other, and the plan's settings say which.
"""
import json
import logging
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ..errors import InvalidArgumentError
from ..permutation_kinds import PERMUTATION_KINDS
from ..runs.run_folder import SEED_RANGE
from ..validation import choice
from .claims import Claim, parse_claim
from .recipes import load_recipe, read_recipe_comments, recipe_notes, resolve_recipe
from .sweep_planners import PLANNERS, ExperimentPoint, SweepInput
from .sweep_tables import (
    EXPERIMENTS,
    FIG2_DENSITIES,
    FIGS2_OMEGA,
    FIGURES,
    IMAGENET_SWEEP_OMEGA,
    MLP_MIXER_DIMS,
    MODEL_ROWS,
    SKIP_LAYER,
    Figure,
    Reading,
    Setting,
)

__all__ = ['SweepPlan', 'check_seeds', 'plan_sweep', 'experiment_points']

_logger = logging.getLogger(__name__)


_BUILT: set = set()  # (model, build arguments as JSON) that built on the meta device
_FACTS: Dict[Tuple[str, str], Dict[str, Any]] = {}  # the same key → what the built model is (_facts)
# train.py's arguments that reach timm.create_model beside --model-kwargs and change what is built
_TRAIN_BUILD_KEYS = ('num_classes', 'in_chans')


_ACCEPTED: set = set()  # (model, argument names) the model takes


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
    notes: List[str] = field(default_factory=list)  # the base recipe's comment lines (recipes.recipe_notes)
    claims: List[Claim] = field(default_factory=list)  # the figure's claims, then the user's (declared before runs)


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
    declared = [FIGURES[k] for k in read_recipe_comments(path).figures if FIGURES[k].experiment == experiment]
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
    from ..catalog import summarize
    summary = summarize(base['model'], **kwargs)
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


def _facts(model: Any) -> Dict[str, Any]:
    """What a built model is, in the terms of a figure's model rows (:data:`MODEL_ROWS`)."""
    d = model.describe()
    patch = dict(getattr(model, 'model_args', None) or {}).get('patch_size')
    return dict(sw=d.block_type == 'sparse', L=d.depth, S=d.num_tokens, C=d.dim, gamma=d.gamma, p=d.density,
                m=d.width, P=patch[0] if isinstance(patch, (tuple, list)) and len(set(patch)) == 1 else patch)


def _check_points(points: Sequence[ExperimentPoint], base: Mapping[str, Any]) -> Dict[str, Dict[str, Any]]:
    """Build every point's model on the meta device as train.py builds it (its model arguments, and the recipe's
    ``num_classes`` and ``in_chans``): an impossible point is refused, by name, before anything. A configuration
    that built once is not built again (:data:`_BUILT`). Logs a line per point built. Returns what each
    point built (point name → :func:`_facts`)."""
    import timm

    from ..catalog import check_model_kwargs
    built = {}
    for i, point in enumerate(points):
        recipe = {**base, **point.recipe}
        kwargs = {**{k: recipe[k] for k in _TRAIN_BUILD_KEYS if recipe.get(k) is not None}, **point.model_kwargs}
        key = (point.model, json.dumps(kwargs, sort_keys=True, default=repr))
        facts = _FACTS.get(key) if key in _BUILT else None
        if facts is None:
            _logger.info(f'point {i + 1}/{len(points)}: building {point.name} ({point.model}) on the meta device')
            try:
                names = (point.model, frozenset(kwargs))
                if names not in _ACCEPTED:  # the model takes these arguments (it builds a default model to know)
                    check_model_kwargs(point.model, kwargs)
                    _ACCEPTED.add(names)
                facts = _facts(timm.create_model(point.model, device='meta', **kwargs))
            except InvalidArgumentError as e:
                raise InvalidArgumentError(f'point {point.name} ({point.model}): {e}') from e
            _BUILT.add(key)
            _FACTS[key] = facts
        built[point.name] = facts
    return built


def _check_reach(points: Sequence[ExperimentPoint], given: Mapping[str, Any], experiment: str) -> None:
    """Refuse a given model argument that no point builds with (each point sets its own, or the point is an SW-MLP
    that does not share it): written into no recipe, it would be listed as a setting of models that ignore it."""
    unused = [k for k in given if not any(k in p.model_kwargs and k not in p.own for p in points)]
    if unused:
        said = ', '.join(f'{k}={given[k]!r}' for k in unused)
        raise InvalidArgumentError(f'model_kwargs {said}: no point of this {experiment} sweep is built with '
                                   f'{"it" if len(unused) == 1 else "them"} (each point sets its own '
                                   f'{", ".join(unused)}); leave {"it" if len(unused) == 1 else "them"} out, or '
                                   f'choose the points with the sweep\'s options')


def _row_values(fact: str, points: Sequence[ExperimentPoint],
                built: Mapping[str, Dict[str, Any]]) -> Optional[List[str]]:
    """The distinct values (as text, in the points' order) of a fact of :data:`MODEL_ROWS` over the built `points`;
    None when the points do not tell it (Ω of points without one)."""
    out: List[str] = []
    for p in points:
        f = built[p.name]
        value = {'L': f['L'], 'S': f['S'], 'C': f['C'], 'P': f['P'], 'm': f['m'], 'Ω': p.coords.get('omega'),
                 'S = C': f['S'] if f['S'] == f['C'] else f'S = {f["S"]}, C = {f["C"]}',
                 '(C, S)': f'({f["C"]}, {f["S"]})', 'γ': f'{f["gamma"]:.3g}', 'p': f'{f["p"]:.4g}',
                 '1 − p': f'{1 - f["p"]:.4g}',
                 'geometry': f'L = {f["L"]}, γ = {f["gamma"]:.3g}, P = {f["P"]}, S = {f["S"]}, C = {f["C"]}'}[fact]
        text = None if value is None else f'{value:g}' if isinstance(value, float) else str(value)
        if text is not None and text not in out:
            out.append(text)
    return out if out or not points else None


def _numbers(value: Any) -> Optional[List[float]]:
    """A row's value as numbers (``2**18``, ``'4, 8, 12'``), or None when it is words."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return [float(value)]
    try:
        return [float(x) for x in str(value).split(',')]
    except ValueError:
        return None


def _same(a: Sequence[float], b: Sequence[float]) -> bool:
    x, y = sorted(set(a)), sorted(set(b))
    return len(x) == len(y) and all(math.isclose(u, v, rel_tol=1e-3) for u, v in zip(x, y))


def _model_settings(rows: Sequence[Setting], points: Sequence[ExperimentPoint], built: Mapping[str, Dict[str, Any]],
                    causes: Sequence[Tuple[str, str]]) -> List[Setting]:
    """The figure's model rows as built: a row of :data:`MODEL_ROWS` whose built value differs from the paper's (or,
    for a row in words, that a given option, model argument or reading changes: `causes`, (key, what)) shows the
    value built and says what changed it (else the base recipe's model)."""
    settings: List[Setting] = []
    for s in rows:
        if s.name not in MODEL_ROWS:
            settings.append(s)
            continue
        group, fact, keys = MODEL_ROWS[s.name]
        sw = [p for p in points if built[p.name]['sw']]
        members = sw if group == 'sw' else [p for p in points if not built[p.name]['sw']] or list(points)
        values = _row_values(fact, members, built)
        by = list(dict.fromkeys(what for key, what in causes if key in keys))
        paper = _numbers(s.value)
        used = _numbers(', '.join(values)) if values else values  # [] for no such point, None when not told
        if paper is not None and used is not None:
            changed = not _same(paper, used)  # numbers: compared, whatever changed them
        else:
            changed = bool(by)  # words: changed when something that changes this row was given
        if not changed:
            settings.append(s)
            continue
        shown = ', '.join(values) if values else 'none: no such point' if values == [] else s.value
        cause = ', '.join(by) or "the base recipe's model"
        settings.append(Setting(s.name, shown, f'CHANGED by {cause}, in place of {s.value} ({s.source})'))
    return settings


def _causes(used: Mapping[str, Reading], fig: Optional[Figure], options: Mapping[str, Any],
            given: Mapping[str, Any]) -> List[Tuple[str, str]]:
    """(key, what changed it) for each option given, model argument given and param of a reading other than the
    figure's default: what can change a figure's model rows (:data:`MODEL_ROWS`)."""
    causes = [(name, f'given {name}') for name, v in options.items() if v is not None]
    causes += [(k, f'given model_kwargs {k}={v!r}') for k, v in given.items()]
    defaults = {d.key: d.readings[0] for d in (fig.disagreements if fig else ())}
    for key, r in used.items():
        if r is not defaults.get(key):
            causes += [(k, f'reading {key}={r.name}') for k in (*r.params, *r.model_kwargs, *r.sw_kwargs)]
    return causes


def _recipe_channels(setting: Setting, base: Mapping[str, Any]) -> Setting:
    """The paper's image size (its sources say ×3: its images are RGB) with the channels of a recipe that feeds
    another number (a gray dataset's ``in_chans: 1``)."""
    channels = base.get('in_chans') or (base.get('input_size') or [None])[0]
    if setting.name != 'img_size' or channels in (None, 3):
        return setting
    side = base.get('img_size', setting.value)
    return Setting(setting.name, setting.value, f'{setting.source}; this recipe: {side}×{side}×{channels} (in_chans '
                                                f'{channels})')


def _training(fig: Optional[Figure], used: Mapping[str, Reading], base: Mapping[str, Any], points, path: Path):
    """(points with the figure's and readings' training overrides, settings, differences from the paper)."""
    chosen = [s for r in used.values() for s in r.overrides]
    by_reading = {s.name: f'reading {key}={r.name}' for key, r in used.items() for s in r.overrides}
    overrides = {s.name: s.value for s in (fig.overrides if fig else ())} | {s.name: s.value for s in chosen}
    if overrides:
        points = [ExperimentPoint(p.experiment, p.name, p.model, p.model_kwargs, {**overrides, **p.recipe},
                                  p.seeded, p.coords) for p in points]
    settings: List[Setting] = []
    differs: List[str] = []
    if fig:
        replaced = {s.name: s for s in chosen}
        paper = {s.name: s for s in fig.expects}
        expects = [replaced.pop(s.name, s) for s in fig.expects] + list(replaced.values())
        for s in expects:
            value = overrides.get(s.name, base.get(s.name))
            if value == s.value and s.name in by_reading:  # a reading's value: say which, and what it replaces
                was = paper.get(s.name)
                settings.append(Setting(s.name, value, f'{by_reading[s.name]}: {s.source}' + (
                    f'; replaces {was.value!r} ({was.source})' if was is not None and was.value != s.value else '')))
            elif value == s.value:
                settings.append(Setting(s.name, value, s.source))
            else:
                settings.append(Setting(s.name, value, f'the base recipe; DIFFERS from the paper\'s {s.value!r} '
                                                       f'({s.source})'))
                differs.append(f'{s.name}: {value!r} in the base recipe, {s.value!r} in the paper ({s.source})')
        settings += [s for s in fig.overrides if s.name not in {e.name for e in expects}]
        settings = [_recipe_channels(s, base) for s in settings]
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
        depths: Optional[Sequence[int]] = None,
        densities: Optional[Sequence[float]] = None,
        claims: Sequence[Any] = (),
) -> SweepPlan:
    """The points, seeds and settings of a sweep (see the module docstring), every point checked to build (a line
    logged per point as it is built on the meta device). None means the figure's (or the experiment's) default; an
    option the experiment does not use is refused, by name.

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
        figure: A key of :data:`~timm_pkmixer.sweeps.sweep_tables.FIGURES` (default: the recipe's
            ``# figure:`` line).
        readings: For a disagreement of the paper's text and tables, the reading to follow instead of the first
            (disagreement key → reading name, e.g. ``{'omega': 'text'}``; :attr:`Figure.disagreements`).
        claims: The user's own claims (:class:`~timm_pkmixer.sweeps.claims.Claim`, or its JSON data or text),
            declared beside the figure's (:attr:`Figure.claims`); a name the figure's claims use is refused.
    """
    own = [c if isinstance(c, Claim) else parse_claim(c) for c in claims]  # refused before anything is built
    path = resolve_recipe(recipe)
    base = load_recipe(path)
    if 'model' not in base:
        raise InvalidArgumentError(f'{path}: the base recipe has no `model`')
    fig, experiment, fig_source = _pick_figure(path, experiment, figure)
    declared = _declared_claims(fig, own)
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
        choice('permutation', p, tuple(PERMUTATION_KINDS))
    seeds, seed_setting = _seed_setting(fig, seeds)
    kwargs.update({k: params[k] for k in ('num_blocks', 'patch_size') if k in params})
    kwargs.update(params.get('model_kwargs', {}))
    kwargs.update(user_kwargs)
    sw_kwargs = {k: v for r in used.values() for k, v in r.sw_kwargs.items()}
    points = PLANNERS[kind].build(SweepInput(base, params, kwargs, perms, omega, gamma, dims, sw_kwargs, title, depths,
                                         densities, permutations is not None))
    _check_reach(points, user_kwargs, experiment)
    built = _check_points(points, base)
    options = dict(omega=omega, gamma=gamma, dims=dims, depths=depths, densities=densities)
    model = _model_settings(fig.model if fig else (), points, built, _causes(used, fig, options, user_kwargs))
    points, training, differs = _training(fig, used, base, points, path)
    settings = [seed_setting] + settings + model + training
    if fig:
        settings += _disagreement_settings(fig, used, given_readings)
    settings += [Setting(name, ' '.join(map(str, v)) if isinstance(v, (list, tuple)) else v, f'given ({name})')
                 for name, v in options.items() if v is not None]
    settings += [Setting(f'model_kwargs.{k}', v, 'given (model_kwargs)') for k, v in user_kwargs.items()]
    return SweepPlan(str(recipe), experiment, fig, fig_source, points, list(seeds), settings, differs,
                     {k: r.name for k, r in used.items()}, recipe_notes(path), declared)


def _declared_claims(fig: Optional[Figure], own: Sequence[Claim]) -> List[Claim]:
    """The figure's claims then the user's, each name once."""
    figure_claims = list(fig.claims) if fig else []
    names = [c.name for c in figure_claims]
    for claim in own:
        if claim.name in names:
            whose = f'declared by {fig.key}' if fig and claim.name in [c.name for c in figure_claims] else \
                'the name of another one of yours'
            raise InvalidArgumentError(f'claims: {claim.name!r} is already {whose}: give yours another name')
        names.append(claim.name)
    return figure_claims + list(own)


def experiment_points(base_recipe: str, experiment: Optional[str] = None, **kwargs: Any) -> List[ExperimentPoint]:
    """The points of a sweep of `base_recipe` (see :func:`plan_sweep` for the arguments)."""
    return plan_sweep(base_recipe, experiment, **kwargs).points
