"""`pkmixer sweep`: one train.py recipe per point of one of the paper's experiments, and per seed."""
import argparse
import re
import shlex
from pathlib import Path

from ..permutation_kinds import PERMUTATION_KINDS
from ._common import POSITIVE_INT, POSITIVE_REAL, ParseKwargs, add_command, in_flag_terms

__all__ = ['add_commands']


def _readings(items):
    """--reading KEY=NAME … as a dict; a malformed or repeated item is refused, in the command's terms (its
    message is not translated: its example names a reading's key, which is no flag)."""
    from ..errors import InvalidArgumentError
    out = {}
    for item in items or ():
        key, sep, name = item.partition('=')
        if not sep or not key or not name:
            raise InvalidArgumentError(f'--reading: {item!r} is not KEY=NAME (e.g. --reading omega=text)')
        if key in out:
            raise InvalidArgumentError(f'--reading: {key!r} given twice')
        out[key] = name
    return out


def run(args: argparse.Namespace) -> int:
    from ..errors import InvalidArgumentError
    from ..sweeps.sweep_plan import plan_sweep
    from ..sweeps.sweep_render import explain
    from ..sweeps.sweep_write import SWEEP_EXPLAINED, SWEEP_RECORD, check_wandb_project, write_sweep
    readings = _readings(args.reading)
    if args.wandb_project is not None:  # checked where it is given, before --explain
        if not args.log_wandb:
            raise InvalidArgumentError('--wandb-project names the W&B project of --log-wandb: add --log-wandb')
        with in_flag_terms(args, 'wandb_project'):  # (not the translation below: the name is the user's text)
            check_wandb_project(args.wandb_project)
    try:
        options = dict(experiment=args.experiment, permutations=args.permutation, seeds=args.seeds, omega=args.omega,
                       model_kwargs=args.model_kwargs, gamma=args.gamma, dims=args.dims, figure=args.figure,
                       readings=readings, depths=args.depths, densities=args.densities, claims=args.claim or ())
        if args.explain:
            print(explain(plan_sweep(args.recipe, **options)), end='')
            if not args.out_dir:
                return 0
        if not args.out_dir:
            raise InvalidArgumentError('--out-dir is required (or --explain alone to print the settings)')
        paths = write_sweep(args.recipe, args.out_dir, add=args.add, log_wandb=args.log_wandb,
                            wandb_project=args.wandb_project, **options)
    except InvalidArgumentError as e:  # the library speaks in argument names; here they are flags
        message = str(e)
        for name, flag in (('add=True', '--add'), ('model_kwargs', '--model-kwargs'), ('permutations', '--permutation'),
                           ('out_dir', '--out-dir'), ('seeds', '--seeds'), ('omega', '--omega'), ('gamma', '--gamma'),
                           ('dims', '--dims'), ('figure', '--figure'), ('readings', '--reading'),
                           ('depths', '--depths'), ('densities', '--densities'), ('wandb_project', '--wandb-project'),
                           ('log_wandb', '--log-wandb'), ('claims', '--claim')):
            message = re.sub(rf"(?<![\w'-]){re.escape(name)}(?![\w'])", flag, message)
        raise InvalidArgumentError(message) from e
    recipes = f'{len(paths)} recipe{"s" if len(paths) != 1 else ""}'
    print(f'# {recipes} in {args.out_dir}; run each with (add --data-dir … where the data lives):')
    for p in paths:
        print(f'pkmixer train {shlex.quote(str(p))}')
    print(f'# every setting with its value and source: {Path(args.out_dir) / SWEEP_EXPLAINED} (and {SWEEP_RECORD})')
    return 0


def add_commands(subparsers: argparse._SubParsersAction) -> None:
    from ..sweeps.sweep_tables import EXPERIMENTS, FIGURES
    p = add_command(subparsers, 'sweep', run,
                    help="write one train.py recipe per point (and seed) of one of the paper's experiments",
                    description="Write one train.py recipe per point and seed of one of the paper's experiments: "
                                'width (Fig. 4 left, 5, 6, S.1 left, S.2, S.6, S.7, S.8), depth (Fig. 7), rp-block '
                                '(Fig. S.4), gamma (Fig. S.3), patch (Fig. S.5), density (Fig. 2: SW-MLPs of '
                                "density p at a Mixer's width), seeds (the base recipe's model alone, with its RP "
                                'twin for a Mixer: Fig. 2 (d)). The figure comes from the recipe\'s '
                                '`# figure:` lines or --figure; --explain lists every setting with its value and '
                                'source, and where the paper disagrees with itself (--reading picks the other).')
    p.add_argument('recipe', help='base recipe: a file or a packaged name, e.g. cifar10/s_mixer_fig7')
    p.add_argument('--experiment', choices=EXPERIMENTS, default=None,
                   help="which experiment (default: the figure's, else width)")
    p.add_argument('--figure', choices=list(FIGURES), default=None,
                   help="which figure's sweep (default: the recipe's `# figure:` line for the experiment)")
    p.add_argument('--out-dir', default=None, help='folder for the generated recipes (a new one, or --add)')
    p.add_argument('--add', action='store_true', help='add to a folder that already holds a sweep')
    p.add_argument('--explain', action='store_true', help='print every setting, its value and its source')
    p.add_argument('--permutation', nargs='+', choices=tuple(PERMUTATION_KINDS), default=None,
                   help='RP and/or normal Mixers (default: both, as in the paper; not for rp-block)')
    p.add_argument('--seeds', nargs='+', type=int, default=None,
                   help="distinct training (and permutation / mask) seeds in 0 … 2^32 − 1 (default: as many as the "
                        "paper trains for the figure, from 0)")
    p.add_argument('--omega', type=POSITIVE_INT, default=None,
                   help='Ω of a width sweep at a choice of Ω (C.4 pairs: 2^18, 2^21, 2^27; D.2) or of the gamma sweep')
    p.add_argument('--gamma', type=POSITIVE_REAL, default=None, help='γ of an MLP-Mixer width sweep (D.2; Fig. 4)')
    p.add_argument('--dims', type=POSITIVE_INT, nargs='+', default=None,
                   help='channels C of a width sweep of Mixers (S from Ω: eq. 14, S.42), e.g. Fig. 5 at C = 4 16 64')
    p.add_argument('--depths', type=POSITIVE_INT, nargs='+', default=None,
                   help='depths L of the depth experiment (default Fig. 7\'s 4 8 12 16 20)')
    p.add_argument('--densities', type=float, nargs='+', default=None,
                   help="densities p in (0, 1] of a sweep's SW-MLPs (Figs. 2, 4, 5, S.1; default the figure's)")
    p.add_argument('--reading', nargs='+', default=None, metavar='KEY=NAME',
                   help='where the paper\'s text and tables disagree, follow the other reading (e.g. omega=text, '
                        'sw-block=c1); --explain lists each disagreement with both readings and their sources')
    p.add_argument('--model-kwargs', nargs='*', default={}, action=ParseKwargs,
                   help='model arguments added to the base recipe, e.g. num_tokens=64 embed_dim=64 num_blocks=4')
    p.add_argument('--claim', action='append', default=None, metavar='JSON',
                   help='declare a claim of your own before the runs, beside the figure\'s (repeatable), e.g. '
                        '\'{"name": "rp-wins", "kind": "direction", "a": {"permutation": "random"}, "b": '
                        '{"permutation": "normal"}, "expect": "lower", "says": "RP ends lower"}\'; `pkmixer report` '
                        'judges it (kinds and keys: docs/research_tools.md, "Claims and verdicts")')
    p.add_argument('--log-wandb', action='store_true',
                   help="every recipe logs to W&B (train.py's --log-wandb): grouped by the figure, tagged with its "
                        "point and seed (needs wandb: pip install wandb, or '.[track]' in a checkout)")
    p.add_argument('--wandb-project', default=None, help='the W&B project of --log-wandb')
