"""timm's own train.py, run unmodified with a recipe and this plugin registered (`pkmixer train`).

train.py is not in the timm wheel; it is found from an explicit path or ``$TIMM_TRAIN_PY``, imported as a
module (its ``main()`` is not run on import), and run in this process, so that
``torchrun --nproc_per_node=8 -m timm_pkmixer train …`` starts one trainer per GPU. Its arguments are
``[train.py, --config RECIPE, *args]``: the recipe gives the defaults, the remaining arguments override
them, exactly as ``train.py --config RECIPE …`` would. Before training, the recipe's keys are checked
against train.py's parser (train.py ignores unknown keys silently) and the plan is resolved with train.py's
own parser.
"""
import argparse
import contextlib
import importlib.util
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Dict, Iterator, List, Optional

from .errors import InvalidArgumentError, UserInputError
from .recipes import BatchAndLr, check_recipe_keys, load_recipe, resolve_batch_and_lr, resolve_recipe

__all__ = ['TRAIN_PY_ENV', 'TrainArgumentError', 'find_train_py', 'missing_train_py_message', 'load_train_py',
           'train_py_arguments', 'format_train_args', 'TrainPlan', 'prepare_train', 'run_train']

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


def load_train_py(path: Path) -> ModuleType:
    """Import timm's train.py as a module (its ``main()`` is not run)."""
    spec = importlib.util.spec_from_file_location('_timm_train_py', path)
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(path.parent))  # train.py may import modules beside it
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(path.parent))
    return module


def train_py_arguments(module: ModuleType) -> Dict[str, List[str]]:
    """{dest: option strings} of every argument of train.py (both of its parsers)."""
    out: Dict[str, List[str]] = {}
    for parser in (module.config_parser, module.parser):
        for action in parser._actions:
            if action.dest != 'help':
                out.setdefault(action.dest, list(action.option_strings))
    return out


def format_train_args(arguments: Dict[str, List[str]], source: str) -> str:
    """The data file ``train_recipes/train_py_args.txt``: one ``dest: options`` line per train.py argument."""
    import timm
    lines = [f'# Arguments of timm train.py ({source}; timm {timm.__version__}): "dest: option strings".',
             '# Recipe keys must be dests listed here. Refresh for a new timm version with',
             '#   pkmixer train --list-train-args --train-py PATH/train.py > train_recipes/train_py_args.txt']
    lines += [f'{dest}: {" ".join(opts)}' for dest, opts in sorted(arguments.items())]
    return '\n'.join(lines) + '\n'


@contextlib.contextmanager
def _argv(argv: List[str]) -> Iterator[None]:
    """train.py reads ``sys.argv``: set it for the duration."""
    old = sys.argv
    sys.argv = argv
    try:
        yield
    finally:
        sys.argv = old


class TrainArgumentError(UserInputError, ValueError):
    """train.py's parser refused its arguments."""


def _resolve(module: ModuleType, argv: List[str]) -> argparse.Namespace:
    """train.py's own two-stage parse (config file defaults, then the command line); its usage errors are raised
    as :class:`TrainArgumentError` instead of printing train.py's whole usage and exiting."""
    def error(message: str) -> None:
        raise TrainArgumentError(f'train.py refuses its arguments: {message}')

    parsers = (module.config_parser, module.parser)
    saved = [p.error for p in parsers]
    try:
        for p in parsers:
            p.error = error
        with _argv(argv):
            return module._parse_args()[0]
    finally:
        for p, e in zip(parsers, saved):
            p.error = e


@dataclass
class TrainPlan:
    """What ``pkmixer train`` is about to run."""
    module: ModuleType          # the imported train.py
    argv: List[str]             # its sys.argv
    args: argparse.Namespace    # as train.py resolves them
    batch: BatchAndLr
    world_size: int

    def describe(self) -> List[str]:
        """The plan in two lines: the model, and the global batch and learning rate."""
        import timm

        from .catalog import check_model_kwargs, is_pkmixer_model
        args, plan = self.args, self.batch
        kwargs = dict(args.model_kwargs or {})
        if args.num_classes is not None:
            kwargs['num_classes'] = args.num_classes
        if is_pkmixer_model(args.model):
            check_model_kwargs(args.model, kwargs)
        model = timm.create_model(args.model, device='meta', **kwargs)  # a name, or local-dir: / hf-hub: config
        params = sum(p.numel() for p in model.parameters())
        if hasattr(model, 'describe'):
            s = model.describe()
            geometry = (f'S={s.num_tokens} C={s.dim}' if s.num_tokens is not None else f'L={s.depth}') + f' m={s.width}'
        else:
            geometry = f'({type(model).__name__}, not a timm-pkmixer model)'
        return [f'[pkmixer] model {args.model} {kwargs or ""}: {geometry} params={params / 1e6:.2f}M',
                f'[pkmixer] global batch {plan.global_batch} = {plan.per_device_batch} per process × '
                f'{self.world_size} processes × {plan.grad_accum_steps} accumulation steps; lr {plan.lr:.6g} '
                f'({plan.rule}); {args.opt}, {args.sched} schedule, {args.epochs} epochs']


def prepare_train(recipe: str, train_args: List[str], train_py: Optional[str] = None,
                  global_batch: Optional[int] = None) -> TrainPlan:
    """Import train.py, check the recipe's keys against its parser and resolve the plan.

    `recipe` is a file or the name of a packaged recipe (``imagenet/rp_mixer_b_w``).

    Raises FileNotFoundError for a missing train.py or recipe, and a UserInputError for an unknown recipe key
    or an impossible ``global_batch``.
    """
    import timm_pkmixer  # noqa: F401  (registers the models even with TIMM_PKMIXER_AUTOLOAD=0)
    path = find_train_py(train_py)
    recipe = str(resolve_recipe(recipe))
    cfg = load_recipe(recipe)
    module = load_train_py(path)
    check_recipe_keys(cfg, train_py_arguments(module), recipe)
    world_size = int(os.environ.get('WORLD_SIZE', '1'))
    argv = [str(path), '--config', str(recipe), *train_args]
    args = _resolve(module, argv)
    if global_batch is not None:
        per_step = args.batch_size * world_size
        if global_batch % per_step:
            raise InvalidArgumentError(f'--global-batch {global_batch} is not a multiple of batch_size '
                                       f'{args.batch_size} × {world_size} processes = {per_step}')
        argv += ['--grad-accum-steps', str(global_batch // per_step)]
        args = _resolve(module, argv)
    return TrainPlan(module, argv, args, resolve_batch_and_lr(vars(args), world_size), world_size)


def run_train(plan: TrainPlan) -> None:
    """Run train.py's ``main()`` with its ``sys.argv``; its exceptions propagate unchanged."""
    with _argv(plan.argv):
        plan.module.main()
