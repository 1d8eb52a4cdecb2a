"""`pkmixer train RECIPE [train.py args…]`: run timm's own train.py with a recipe and this plugin registered.

timm's train.py is not in the timm wheel; it is found from ``--train-py`` or ``$TIMM_TRAIN_PY``. It runs in
this process (so ``torchrun --nproc_per_node=8 -m timm_pkmixer train …`` starts one trainer per GPU) after
``import timm_pkmixer``, with ``sys.argv = [train.py, --config RECIPE, *args]``: the recipe gives the
defaults, the remaining arguments override them, exactly as ``train.py --config RECIPE …`` would.
"""
import argparse
import hashlib
import os
import sys
from pathlib import Path
from typing import Dict, List, Optional

from .recipes import check_recipe_keys, load_recipe, load_train_py, resolve_batch_and_lr, train_py_arguments

__all__ = ['TRAIN_PY_ENV', 'find_train_py', 'missing_train_py_message', 'format_train_args', 'run_train',
           'add_train_command']

TRAIN_PY_ENV = 'TIMM_TRAIN_PY'


def missing_train_py_message() -> str:
    import timm
    v = timm.__version__
    return (
        "timm's train.py is not part of the timm wheel. Get the one of your timm version (" + v + "), e.g.\n"
        f"  curl -LO https://raw.githubusercontent.com/huggingface/pytorch-image-models/v{v}/train.py\n"
        f"or: git clone --depth 1 --branch v{v} https://github.com/huggingface/pytorch-image-models\n"
        f"then pass --train-py PATH/train.py or set {TRAIN_PY_ENV}=PATH/train.py.")


def find_train_py(option: Optional[str] = None) -> Path:
    """``option``, else ``$TIMM_TRAIN_PY``; FileNotFoundError with instructions when neither is a file."""
    candidate = option or os.environ.get(TRAIN_PY_ENV)
    if not candidate:
        raise FileNotFoundError(missing_train_py_message())
    path = Path(candidate).expanduser()
    if not path.is_file():
        raise FileNotFoundError(f'no train.py at {path}.\n' + missing_train_py_message())
    return path


def format_train_args(arguments: Dict[str, List[str]], source: str) -> str:
    """The data file ``train_recipes/train_py_args.txt``: one ``dest: options`` line per train.py argument."""
    import timm
    lines = [f'# Arguments of timm train.py ({source}; timm {timm.__version__}): "dest: option strings".',
             '# Recipe keys must be dests listed here. Refresh for a new timm version with',
             '#   pkmixer train --list-train-args --train-py PATH/train.py > train_recipes/train_py_args.txt']
    lines += [f'{dest}: {" ".join(opts)}' for dest, opts in sorted(arguments.items())]
    return '\n'.join(lines) + '\n'


def _resolve(module, argv: List[str]) -> argparse.Namespace:
    """train.py's own two-stage parse (config file defaults, then the command line)."""
    old = sys.argv
    sys.argv = argv
    try:
        if hasattr(module, '_parse_args'):
            return module._parse_args()[0]
        cfg_args, remaining = module.config_parser.parse_known_args()
        if cfg_args.config:
            module.parser.set_defaults(**load_recipe(cfg_args.config))
        return module.parser.parse_args(remaining)
    finally:
        sys.argv = old


def _print_plan(args: argparse.Namespace, world_size: int) -> None:
    from .catalog import summarize
    plan = resolve_batch_and_lr(vars(args), world_size)
    kwargs = dict(args.model_kwargs or {})
    if args.num_classes is not None:
        kwargs['num_classes'] = args.num_classes
    s = summarize(args.model, **kwargs)
    print(f'[pkmixer] model {args.model} {kwargs or ""}: S={s.num_tokens} C={s.dim} m={s.width} '
          f'params={s.params / 1e6:.2f}M', flush=True)
    print(f'[pkmixer] global batch {plan.global_batch} = {plan.per_device_batch} per process × {world_size} '
          f'processes × {plan.grad_accum_steps} accumulation steps; lr {plan.lr:.6g} ({plan.rule}); '
          f'{args.opt}, {args.sched} schedule, {args.epochs} epochs', flush=True)


def run_train(recipe: str, train_args: List[str], train_py: Optional[str] = None,
              global_batch: Optional[int] = None, dry_run: bool = False) -> int:
    """Check the recipe against train.py, print the resolved plan, then run train.py's ``main()``."""
    import timm_pkmixer  # noqa: F401  (registers the models even with TIMM_PKMIXER_AUTOLOAD=0)
    path = find_train_py(train_py)
    module = load_train_py(str(path))
    cfg = load_recipe(recipe)
    known = {a.dest for p in (module.config_parser, module.parser) for a in p._actions}
    check_recipe_keys(cfg, known, recipe)
    world_size = int(os.environ.get('WORLD_SIZE', '1'))
    argv = [str(path), '--config', recipe, *train_args]
    args = _resolve(module, argv)
    if global_batch is not None:
        per_step = args.batch_size * world_size
        if global_batch % per_step:
            raise ValueError(f'--global-batch {global_batch} is not a multiple of batch_size {args.batch_size} × '
                             f'{world_size} processes = {per_step}')
        argv += ['--grad-accum-steps', str(global_batch // per_step)]
        args = _resolve(module, argv)
    rank = int(os.environ.get('RANK', '0'))
    if rank == 0:
        _print_plan(args, world_size)
    if dry_run:
        return 0
    old = sys.argv
    sys.argv = argv
    try:
        module.main()
    finally:
        sys.argv = old
    return 0


def _cmd_train(args: argparse.Namespace) -> int:
    try:
        if args.list_train_args:
            path = find_train_py(args.train_py)
            digest = hashlib.sha256(path.read_bytes()).hexdigest()[:16]
            print(format_train_args(train_py_arguments(str(path)), f'train.py sha256 {digest}…'), end='')
            return 0
        if not args.recipe:
            print('pkmixer train: a RECIPE is required (e.g. train_recipes/imagenet/rp_mixer_b_w.yaml)',
                  file=sys.stderr)
            return 2
        return run_train(args.recipe, args.train_args, args.train_py, args.global_batch, args.dry_run)
    except (FileNotFoundError, ValueError) as e:
        print(f'pkmixer train: {e}', file=sys.stderr)
        return 2


def add_train_command(subparsers) -> None:
    p = subparsers.add_parser(
        'train', help="run timm's train.py with a recipe (works under torchrun: -m timm_pkmixer train …)",
        description=__doc__.splitlines()[0], epilog='Arguments after the recipe go to train.py unchanged.')
    p.add_argument('recipe', nargs='?', help='a YAML recipe, e.g. train_recipes/imagenet/rp_mixer_b_w.yaml')
    p.add_argument('train_args', nargs=argparse.REMAINDER, help='train.py arguments (override the recipe)')
    p.add_argument('--train-py', default=None, help=f"path of timm's train.py (default: ${TRAIN_PY_ENV})")
    p.add_argument('--global-batch', type=int, default=None,
                   help='set grad_accum_steps so that batch_size × processes × steps equals this')
    p.add_argument('--dry-run', action='store_true', help='print the resolved plan and stop')
    p.add_argument('--list-train-args', action='store_true',
                   help="print train.py's argument names (the data file train_recipes/train_py_args.txt)")
    p.set_defaults(func=_cmd_train)
