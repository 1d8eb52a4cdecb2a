"""A sweep in words (Markdown): :func:`explain`, every setting of a planned sweep with its value and source, its
disagreements and its points (``pkmixer sweep --explain``, and ``SWEEP.md`` beside the recipes); and
:func:`figures_markdown`, every figure's sweep with its base recipes (``train_recipes/README.md``'s list).
"""
from typing import Dict, List

from ..markdown import markdown_table
from .sweep_plan import SweepPlan
from .sweep_tables import FIGURES

__all__ = ['explain', 'figures_markdown']

_SETTING_COLUMNS = ('setting', 'value', 'source')

def explain(plan: SweepPlan) -> str:
    """Every setting of the sweep with its value and source, its disagreements, and its points (Markdown)."""
    head = (f'# {plan.experiment} sweep of {plan.recipe}: ' +
            (f'{plan.figure.title} (figure {plan.figure.key}, from {plan.figure_source})' if plan.figure
             else f'no figure ({plan.figure_source})'))
    lines = [head, '', markdown_table(_SETTING_COLUMNS, ((s.name, s.value, s.source) for s in plan.settings))]
    lines += ['', f'{len(plan.points)} points × {len(plan.seeds)} seeds = {len(plan.points) * len(plan.seeds)} '
                  f'recipes: ' + ', '.join(p.name for p in plan.points)]
    if plan.figure and plan.figure.disagreements:
        lines += ['', "Disagreements of the paper's text with its tables or captions (the reading used is marked; "
                      'the other is one option away):']
        for d in plan.figure.disagreements:
            lines.append(f'- {d.key} ({d.what}): ' + '; '.join(
                f'{"**" + r.name + "** (used)" if r.name == plan.readings[d.key] else r.name}: {r.says} ({r.source})'
                + ('' if r.name == plan.readings[d.key] else f' → `--reading {d.key}={r.name}`') for r in d.readings))
    lines += ['', 'Claims declared before the runs (judged by `pkmixer report`):'] + (
        [f'- **{c.name}** ({c.kind}, {c.source}): {c.says}' for c in plan.claims] if plan.claims else
        ['- none: declare one with `pkmixer sweep … --claim JSON` (docs/research_tools.md, "Claims and verdicts")'])
    if plan.differs:
        lines += ['', 'The base recipe differs from the paper for this figure:'] + [f'- {d}' for d in plan.differs]
    if plan.notes:
        lines += ['', f'The base recipe\'s own notes (its comments, as written in {plan.recipe}: what it '
                      'takes from the paper, and where and why it differs):', '', '```text', *plan.notes, '```']
    return '\n'.join(lines) + '\n'


def figures_markdown() -> str:
    """Every figure's sweep with its base recipes and its settings with sources (train_recipes/README.md's list)."""
    from .recipes import list_recipes
    bases: Dict[str, List[str]] = {}
    for info in list_recipes():
        for key in info.figures:
            bases.setdefault(key, []).append(info.name)
    lines = []
    for fig in FIGURES.values():
        lines += [f'### {fig.title}', '',
                  f'`--figure {fig.key}` (`--experiment {fig.experiment}`), base recipe'
                  f'{"s" if len(bases.get(fig.key, [])) > 1 else ""}: '
                  + ', '.join(f'`{b}`' for b in bases.get(fig.key, [])), '']
        settings = [fig.seeds] + list(fig.model) + list(fig.expects) + [
            s for s in fig.overrides if s.name not in {e.name for e in fig.expects}]
        rows = [(s.name, s.value, s.source) for s in settings]
        rows += [(f'reading {d.key}', d.readings[0].name, f'DISAGREEMENT, {d.what}: '
                  + '; '.join(f'{r.name}: {r.says} ({r.source})' for r in d.readings)
                  + f'; the other: `--reading {d.key}={d.readings[1].name}`') for d in fig.disagreements]
        lines += [markdown_table(_SETTING_COLUMNS, rows), '']
    return '\n'.join(lines)
