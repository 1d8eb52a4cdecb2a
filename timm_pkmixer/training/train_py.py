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
import ast
import contextlib
import importlib.util
import logging
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, Dict, Iterator, List, Optional, Sequence, Set, Tuple

from ..data.datasets import DataNeeds, DataSource, check_data, data_source
from ..errors import ArgumentValueError, InvalidArgumentError, UserInputError
from ..sweeps.recipes import (
    BatchAndLr,
    check_recipe_keys,
    load_recipe,
    read_recipe_comments,
    resolve_batch_and_lr,
    resolve_recipe,
)
from ..validation import closest_flags, did_you_mean_flags, positive_int
from .env import env_int

__all__ = ['TRAIN_PY_ENV', 'TrainArgumentError', 'TrainPyError', 'find_train_py', 'missing_train_py_message',
           'load_train_py', 'train_py_arguments', 'format_train_args', 'LaunchArgumentError', 'ModelInfo', 'TrainPlan',
           'prepare_train', 'run_folder', 'run_train', 'TrainPlanError', 'known_train_py', 'check_fetched_data']

TRAIN_PY_ENV = 'TIMM_TRAIN_PY'
_logger = logging.getLogger(__name__)


def missing_train_py_message(how: str = 'pass its path as train_py') -> str:
    """How to get timm's train.py; `how` says how to hand it over (the command line names its flag). timm's version
    is read from its installed metadata: importing timm imports torch, seconds before a refusal."""
    from importlib.metadata import PackageNotFoundError, version
    try:
        v = version('timm')
    except PackageNotFoundError:  # timm importable without being installed (a checkout on the path)
        import timm
        v = timm.__version__
    return (
        "timm's train.py is not part of the timm wheel. Get the one of your timm version (" + v + "), e.g.\n"
        f"  curl -LO https://raw.githubusercontent.com/huggingface/pytorch-image-models/v{v}/train.py\n"
        f"or: git clone --depth 1 --branch v{v} https://github.com/huggingface/pytorch-image-models\n"
        f"then {how} or set {TRAIN_PY_ENV}=PATH/train.py.")


class TrainPyError(UserInputError, FileNotFoundError):
    """No train.py given, none at the path, or a file that is not timm's train.py; `reason` says which."""

    def __init__(self, reason: str):
        super().__init__(f'train_py: {reason}\n{missing_train_py_message()}')
        self.reason = reason


def find_train_py(option: Optional[str] = None) -> Path:
    """``option``, else ``$TIMM_TRAIN_PY``; :class:`TrainPyError` (a FileNotFoundError) with instructions when
    neither is a file."""
    candidate = option or os.environ.get(TRAIN_PY_ENV)
    if not candidate:
        raise TrainPyError('no train.py given')
    path = Path(candidate).expanduser()
    if not path.is_file():
        raise TrainPyError(f'no train.py at {path}')
    return path


_TRAIN_PY_NAMES = ('config_parser', 'parser', '_parse_args', 'main')


def load_train_py(path: Path) -> ModuleType:
    """Import timm's train.py as a module (its ``main()`` is not run). A file that does not define train.py's
    ``config_parser``, ``parser``, ``_parse_args`` and ``main`` is refused (:class:`TrainPyError`), without
    running it."""
    path = Path(path)
    try:
        source = path.read_text(encoding='utf-8')
    except UnicodeDecodeError:
        raise TrainPyError(f"{path} is not timm's train.py (not a text file)") from None
    missing = [n for n in _TRAIN_PY_NAMES if f'def {n}(' not in source and f'{n} =' not in source]
    if missing:
        raise TrainPyError(f"{path} is not timm's train.py (it defines no {', '.join(missing)})")
    spec = importlib.util.spec_from_file_location('_timm_train_py', path)
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(path.parent))  # train.py may import modules beside it
    try:
        spec.loader.exec_module(module)
    except SyntaxError as e:
        raise TrainPyError(f"{path} is not timm's train.py (not Python: {e.msg}, line {e.lineno})") from None
    except ImportError as e:  # the train.py of another timm version asks for names this timm lacks
        import timm
        raise TrainPyError(f'{path} does not import with the installed timm {timm.__version__} ({type(e).__name__}: '
                           f'{e}): it is the train.py of another timm version') from None
    finally:
        sys.path.remove(str(path.parent))
    missing = [n for n in _TRAIN_PY_NAMES if not hasattr(module, n)]
    if missing:
        raise TrainPyError(f"{path} is not timm's train.py (it defines no {', '.join(missing)})")
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
    """train.py's parser refused its arguments: `refusal` is what it said, `hint` the closest of its flags to each
    flag it did not know (`` (did you mean --workers?)``, or ''); the message is the two together."""

    def __init__(self, refusal: str, hint: str = '') -> None:
        super().__init__(f'{refusal}{hint}')
        self.refusal, self.hint = refusal, hint


class LaunchArgumentError(ArgumentValueError):
    """A value the launch refuses, in argument terms: `argument` is a train.py argument (its dest, e.g.
    ``batch_size``, with its train.py `options`) or one of :func:`prepare_train`'s own (``global_batch``)."""


def _resolve(module: ModuleType, argv: List[str]) -> argparse.Namespace:
    """train.py's own two-stage parse (config file defaults, then the command line); its usage errors are raised
    as :class:`TrainArgumentError` instead of printing train.py's whole usage and exiting."""
    def error(message: str) -> None:
        hint = ''
        if message.startswith('unrecognized arguments:'):
            flags = [o for a in module.parser._actions for o in a.option_strings]
            hint = did_you_mean_flags(closest_flags(message.split(':', 1)[1].split(), flags, cutoff=0.8))
        raise TrainArgumentError(f'train.py refuses its arguments: {message}', hint)

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


_UNSET = object()


def _given(module: ModuleType, train_args: List[str]) -> Set[str]:
    """The dests of the train.py arguments given in `train_args` (not from the recipe or train.py's defaults)."""
    parser = module.parser
    namespace = argparse.Namespace(**{a.dest: _UNSET for a in parser._actions if a.dest != 'help'})
    saved = parser.error
    parser.error = lambda message: None  # a bad value is reported by the real parse
    try:
        namespace, _ = parser.parse_known_args(train_args, namespace)
    except (SystemExit, TypeError, ValueError):
        return set()
    finally:
        parser.error = saved
    return {dest for dest, value in vars(namespace).items() if value is not _UNSET}


@dataclass(frozen=True)
class ModelInfo:
    """The model train.py will build, as read from a meta-device copy."""
    name: str
    kwargs: Dict[str, Any]
    geometry: str                   # S, C, m (or L, m) of a timm-pkmixer model, else its class
    params: int
    input_size: Tuple[int, ...]     # (C, H, W) the model's own config expects
    fixed_input_size: bool          # True: it takes no other size (Mixers: the token count is fixed)
    seeded_args: Tuple[str, ...] = ()  # its model arguments that follow train.py's --seed when not given (mask_seed)
    num_classes: Optional[int] = None  # its outputs
    pretrained_cfg: Dict[str, Any] = field(default_factory=dict)  # its config's mean, std, … (train.py's data config)


def _model_info(args: argparse.Namespace) -> ModelInfo:
    """Build train.py's model on the meta device (no memory, no download): refuses an unknown model or bad model
    arguments here, before training starts."""
    import timm

    from ..catalog import check_model_kwargs, is_pkmixer_model
    name = args.model
    kwargs = dict(args.model_kwargs or {})
    if args.num_classes is not None:
        kwargs['num_classes'] = args.num_classes
    if getattr(args, 'in_chans', None) is not None:
        kwargs['in_chans'] = args.in_chans
    prefixed = name.startswith(('hf-hub:', 'local-dir:'))
    if not prefixed and not timm.is_model(name):
        raise InvalidArgumentError(f'model {name!r} is neither a registered timm model nor a local-dir:/hf-hub: '
                                   f'one; `pkmixer models` lists the timm-pkmixer models')
    if is_pkmixer_model(name):
        check_model_kwargs(name, kwargs)
    try:
        model = timm.create_model(name, device='meta', **kwargs)  # a name, or local-dir: / hf-hub: config
    except RuntimeError as e:
        if 'Unknown model' not in str(e):
            raise
        raise InvalidArgumentError(f'model {name!r}: {e}') from None
    except FileNotFoundError as e:  # local-dir: without its config.json
        raise FileNotFoundError(f'model {name}: {e.strerror or e} (a local-dir: folder is what `pkmixer expand` '
                                f'or `pkmixer push` writes)') from None
    params = sum(p.numel() for p in model.parameters())
    if hasattr(model, 'describe'):
        s = model.describe()
        geometry = (f'S={s.num_tokens} C={s.dim}' if s.num_tokens is not None else f'L={s.depth}') + f' m={s.width}'
    else:
        geometry = f'({type(model).__name__}, not a timm-pkmixer model)'
    cfg = model.pretrained_cfg or {}
    size = getattr(model, 'img_size', None) or getattr(getattr(model, 'stem', None), 'img_size', None)
    input_size = tuple(cfg.get('input_size') or (3, 224, 224))
    if size is not None:
        input_size = (input_size[0], *size)
    seeded = tuple(k for k in SEEDED_MODEL_ARGS if k in (getattr(model, 'model_args', None) or {}))
    return ModelInfo(name, kwargs, geometry, params, input_size, bool(cfg.get('fixed_input_size')), seeded,
                     getattr(model, 'num_classes', None), dict(cfg))


# model arguments that follow train.py's --seed unless given: an SW-MLP's masks differ from seed to seed, as its
# weights do (a sweep writes the same: mask_seed = seed); an explicit mask_seed fixes them
SEEDED_MODEL_ARGS = ('mask_seed',)


def _follow_the_seed(args: argparse.Namespace, options: Dict[str, List[str]], model: ModelInfo
                     ) -> Tuple[List[str], List[str]]:
    """train.py's arguments that set each of the model's :data:`SEEDED_MODEL_ARGS` not given to ``--seed`` (the
    model kwargs again, whole: train.py's ``--model-kwargs`` replaces the recipe's), and a line saying so."""
    given = dict(getattr(args, 'model_kwargs', None) or {})
    missing = [k for k in model.seeded_args if k not in given]
    seed = getattr(args, 'seed', None)
    if not missing or 'model_kwargs' not in options or not isinstance(seed, int):
        return [], []
    kwargs = {**given, **{k: seed for k in missing}}
    items = [f'{k}={v!r}' for k, v in kwargs.items()]
    if any(_literal(item.split('=', 1)[1]) != kwargs[k] for item, k in zip(items, kwargs)):
        raise LaunchArgumentError('model_kwargs', f'{given} cannot be passed on again with {missing[0]} = seed '
                                  f'{seed}: give {missing[0]}=N yourself', options['model_kwargs'])
    names = ', '.join(missing)
    return [options['model_kwargs'][-1], *items], [
        f'{names} {seed}: train.py\'s --seed (the masks differ from seed to seed; '
        f'{options["model_kwargs"][-1]} {missing[0]}=N fixes them)']


def _literal(text: str) -> Any:
    """``text`` as train.py's ``--model-kwargs`` reads a value (``ast.literal_eval``, else the string)."""
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def _data_input_size(args: argparse.Namespace, model: ModelInfo) -> Tuple[int, ...]:
    """The input size train.py will feed: its ``resolve_data_config`` of these arguments for this model."""
    return tuple(_data_config(args, model)['input_size'])


def _data_config(args: argparse.Namespace, model: ModelInfo) -> Dict[str, Any]:
    """train.py's ``resolve_data_config`` of these arguments for this model (input size, interpolation, crop), with the
    model's own mean and std (the given ones are checked by :func:`_check_normalisation`: timm asserts on them)."""
    from timm.data import resolve_data_config
    return resolve_data_config({**vars(args), 'mean': None, 'std': None},
                               pretrained_cfg={**model.pretrained_cfg, 'input_size': model.input_size})


def _fmt_size(size: Sequence[int]) -> str:
    return f'{size[1]}×{size[2]} px, {size[0]} channel{"s" if size[0] != 1 else ""}'


@dataclass
class TrainPlan:
    """What ``pkmixer train`` is about to run."""
    module: ModuleType          # the imported train.py
    argv: List[str]             # its sys.argv
    args: argparse.Namespace    # as train.py resolves them
    batch: BatchAndLr
    world_size: int
    model: Optional[ModelInfo] = None
    input_size: Tuple[int, ...] = ()
    input_size_from: str = ''   # where the input size comes from
    threads: Optional[int] = None
    threads_why: str = ''
    machine: List[str] = field(default_factory=list)  # what was chosen for this machine (device, workers), and why
    data: Optional[DataSource] = None  # where train.py reads the data (None: this train.py takes no --data-dir)
    train_py: str = ''          # which train.py this is (:func:`known_train_py`)
    data_found: List[str] = field(default_factory=list)  # what the data hold (checked: `prepare_train(check=True)`)

    def describe(self) -> List[str]:
        """The plan: train.py, the model and its input size, the global batch and learning rate, the data, the
        threads."""
        args, plan, m = self.args, self.batch, self.model
        processes = f'{self.world_size} process{"es" if self.world_size != 1 else ""}'
        steps = f'{plan.grad_accum_steps} accumulation step{"s" if plan.grad_accum_steps != 1 else ""}'
        lines = [f'[pkmixer] {self.train_py}'] if self.train_py else []
        lines += [f'[pkmixer] model {m.name} {m.kwargs or ""}: {m.geometry} params={m.params / 1e6:.2f}M',
                 f'[pkmixer] input {_fmt_size(self.input_size)} ({self.input_size_from})',
                 f'[pkmixer] global batch {plan.global_batch} = {plan.per_device_batch} per process × '
                 f'{processes} × {steps}; lr {plan.lr:.6g} ({plan.rule}); {args.opt}, {args.sched} schedule, '
                 f'{args.epochs} epochs']
        if self.data is not None:
            lines.append(f'[pkmixer] {self.data.describe()}')
        lines += [f'[pkmixer] {line}' for line in self.data_found + self.machine]
        if self.threads is not None:
            lines.append(f'[pkmixer] {self.threads} CPU thread{"s" if self.threads != 1 else ""} per process '
                         f'({self.threads_why})')
        return lines


def _positive(args: argparse.Namespace, dest: str, options: Dict[str, List[str]]) -> None:
    value = getattr(args, dest, None)
    if value is None:
        return
    try:
        positive_int(dest, value)
    except UserInputError:
        raise LaunchArgumentError(dest, f'must be a positive integer, got {value!r}', options.get(dest, ())) from None


# the device types train.py's `init_distributed_device` knows (timm.utils.distributed), and whether torch has one
_DEVICE_TYPES = ('cpu', 'cuda', 'mps', 'xpu', 'npu', 'hpu')
_DEVICES_ALLOWED = 'cpu, cuda or cuda:N (where CUDA is available), mps, xpu, npu or hpu (where torch has one)'


def _device_available(device: Any) -> bool:
    """Whether torch on this machine has `device` (a ``torch.device``; an index must be one of its devices)."""
    import torch
    if device.type == 'cpu':
        return True
    backend = getattr(torch, device.type, None) or getattr(torch.backends, device.type, None)
    try:
        if backend is None or not backend.is_available():
            return False
        return device.index is None or device.index < backend.device_count()
    except (AttributeError, RuntimeError):  # a backend without device_count (mps): index 0 only
        return device.index in (None, 0)


def _check_device_and_workers(args: argparse.Namespace, options: Dict[str, List[str]]) -> None:
    """Refuse a ``--device`` train.py cannot train on (not a torch device, ``meta``, a type train.py does not set up,
    or one this machine lacks) and a negative ``-j/--workers``, naming the flag and the allowed values. A CUDA
    device on a machine without CUDA is left to :func:`_fit_the_machine` (it may be train.py's default)."""
    import torch
    device = getattr(args, 'device', None)
    if 'device' in options and device is not None:
        flag = options['device']
        try:
            parsed = torch.device(device) if isinstance(device, str) and device.strip() == device else None
        except RuntimeError:
            parsed = None
        if parsed is None or parsed.type not in _DEVICE_TYPES:
            what = 'holds no data, so nothing can train on it' if parsed is not None and parsed.type == 'meta' \
                else 'is not a device train.py can train on'
            raise LaunchArgumentError('device', f'{device!r} {what}; use {_DEVICES_ALLOWED} (lowercase)', flag)
        if parsed.type != 'cuda' and not _device_available(parsed):
            raise LaunchArgumentError('device', f'{device} is not available on this machine (torch sees no such '
                                      f'device); use cpu', flag)
        if parsed.type == 'cuda' and parsed.index is not None and torch.cuda.is_available() and \
                parsed.index >= torch.cuda.device_count():
            raise LaunchArgumentError('device', f'{device}: this machine has {torch.cuda.device_count()} CUDA '
                                      f'device(s), cuda:0 … cuda:{torch.cuda.device_count() - 1}', flag)
    workers = getattr(args, 'workers', None)
    if 'workers' in options and workers is not None and (not isinstance(workers, int) or workers < 0):
        raise LaunchArgumentError('workers', f'must be a non-negative integer (0 loads in the main process), got '
                                  f'{workers!r}', options['workers'])


def _check_rank(world_size: int) -> None:
    """torchrun's ``RANK`` is one of the ``WORLD_SIZE`` ranks, 0 … WORLD_SIZE − 1."""
    rank = env_int('RANK', 0)
    if rank >= world_size:
        raise InvalidArgumentError(f'environment variable RANK={rank} is not a rank of WORLD_SIZE={world_size}: it '
                                   f'must be 0 … {world_size - 1} (as torchrun sets them)')


def _fit_the_machine(args: argparse.Namespace, options: Dict[str, List[str]], set_by_user: Set[str]
                     ) -> Tuple[List[str], List[str]]:
    """train.py's arguments that fit this machine, and a line saying each: ``--device cpu`` when CUDA is absent
    and neither the recipe nor the command line names a device, and no more data-loading workers than the cores
    available per process (:func:`choose_workers`) unless the user gave them. A CUDA device the user asked for on
    a machine without CUDA is refused (train.py would stop on an ``AssertionError``)."""
    import torch

    from .threads import choose_workers
    extra: List[str] = []
    notes: List[str] = []
    device = getattr(args, 'device', None)
    if 'device' in options and isinstance(device, str) and device.startswith('cuda') and \
            not torch.cuda.is_available():
        if 'device' in set_by_user:
            raise LaunchArgumentError('device', f'{device} asks for CUDA, which this machine does not have (torch '
                                      f'sees no CUDA device); use cpu', options['device'])
        extra += [options['device'][-1], 'cpu']
        notes.append(f'device cpu: CUDA is not available on this machine (train.py\'s default is {device}; pass '
                     f'{options["device"][-1]} to choose)')
    workers = getattr(args, 'workers', None)
    if 'workers' in options and 'workers' not in set_by_user and isinstance(workers, int) and workers > 1:
        fitted, why = choose_workers(workers)
        if fitted < workers:
            extra += [options['workers'][-1], str(fitted)]
            notes.append(f'{fitted} data-loading worker{"s" if fitted != 1 else ""} per process ({why}; train.py\'s '
                         f'default is {workers}; pass {options["workers"][-1]} to choose)')
    return extra, notes


class TrainPlanError(UserInputError, ValueError):
    """More than one reason the run would fail, each named (`problems`: the errors, in the order found); a single
    one is raised as itself."""

    def __init__(self, problems: Sequence[BaseException]):
        self.problems = tuple(problems)
        super().__init__(f'the run would fail, for {len(self.problems)} reasons:\n'
                         + '\n'.join(f'- {problem_text(p)}' for p in self.problems))


def problem_text(error: BaseException) -> str:
    """An error's message as the command line says it (a file error by its reason and file)."""
    if isinstance(error, OSError) and error.filename:
        return f'{error.strerror}: {error.filename}'
    return str(error)


class _Problems:
    """The refusals of the checks run so far, kept so that every one is named, not only the first."""

    def __init__(self):
        self.errors: List[BaseException] = []

    def attempt(self, check: Any, *args: Any) -> Tuple[bool, Any]:
        """(True, check(*args)), or (False, None) with its refusal kept."""
        try:
            return True, check(*args)
        except (UserInputError, FileNotFoundError) as e:
            self.errors.append(e)
            return False, None

    def add(self, error: BaseException) -> None:
        self.errors.append(error)

    def raise_them(self) -> None:
        if len(self.errors) == 1:
            raise self.errors[0]
        if self.errors:
            raise TrainPlanError(self.errors)


class DataProblemError(InvalidArgumentError):
    """The run's data are not what the run needs (:func:`~timm_pkmixer.data.datasets.check_data`'s problems)."""


def _check_global_batch(args: argparse.Namespace, global_batch: int, world_size: int, batch_ok: bool) -> List[str]:
    """train.py's arguments for `global_batch` (``--grad-accum-steps``), refused unless a positive multiple of
    batch_size × processes."""
    try:
        positive_int('global_batch', global_batch)
    except UserInputError:
        raise LaunchArgumentError('global_batch', f'must be a positive integer, got {global_batch!r}') from None
    if not batch_ok:
        return []
    per_step = args.batch_size * world_size
    if global_batch % per_step:
        raise LaunchArgumentError('global_batch', f'{global_batch} is not a multiple of batch_size '
                                  f'{args.batch_size} × {world_size} process{"es" if world_size != 1 else ""} = '
                                  f'{per_step}')
    return ['--grad-accum-steps', str(global_batch // per_step)]


def _size_for_model(args: argparse.Namespace, options: Dict[str, List[str]], cfg: Dict[str, Any], given: Set[str],
                    model: ModelInfo) -> Tuple[List[str], str]:
    """(train.py's arguments that give another model than the recipe's its own input size, where the input size
    comes from): the recipe's size belongs to the recipe's model."""
    size_keys = [k for k in ('input_size', 'img_size') if k in options]
    other_model = 'model' in given and args.model != cfg.get('model')
    if other_model and not any(k in given for k in size_keys) and any(cfg.get(k) for k in size_keys):
        c, h, w = model.input_size
        square = h == w and 'img_size' in options
        extra = [options['img_size'][-1], str(h)] if square else [options['input_size'][-1], str(c), str(h), str(w)]
        return extra, f"the model's config; the recipe's {next(k for k in size_keys if cfg.get(k))} is for its own " \
                      f'model'
    if any(k in given for k in size_keys):
        return [], 'given'
    return [], 'from the recipe' if any(cfg.get(k) for k in size_keys) else "the model's config"


def _fitting_input_size(args: argparse.Namespace, options: Dict[str, List[str]], model: ModelInfo, source: str
                        ) -> Tuple[int, ...]:
    """The input size train.py will feed; refused where a fixed-size model does not take it."""
    input_size = _data_input_size(args, model)
    if model.fixed_input_size and tuple(input_size[1:]) != tuple(model.input_size[1:]):
        size_keys = [k for k in ('input_size', 'img_size') if k in options]
        key = next((k for k in size_keys if getattr(args, k, None) is not None), 'img_size')
        value = getattr(args, key)
        shown = ' '.join(map(str, value)) if isinstance(value, (list, tuple)) else str(value)
        (h, w), (mh, mw) = input_size[1:], model.input_size[1:]
        factor = h // mh if h % mh == 0 and w % mw == 0 and h // mh == w // mw > 1 else None
        expand = f', or expand the model {factor}× first (`pkmixer expand`)' if factor else ''
        raise LaunchArgumentError(
            key, f'{shown} ({source}) does not fit model {model.name}: it is built for {mh}×{mw} px and takes no '
                 f'other input size. Leave the size to the model{expand}', options.get(key, ()))
    return input_size


def _in_chans(args: argparse.Namespace) -> Tuple[int, str]:
    """The input channels train.py builds the model with (its ``in_chans``: --in-chans, else --input-size's first,
    else 3), and where they come from."""
    if getattr(args, 'in_chans', None):
        return args.in_chans, f'in_chans {args.in_chans}'
    if getattr(args, 'input_size', None):
        return args.input_size[0], f'input_size {" ".join(map(str, args.input_size))}'
    return 3, "train.py's default in_chans"


def _check_normalisation(args: argparse.Namespace, options: Dict[str, List[str]], model: ModelInfo, channels: int,
                         key: str) -> None:
    """train.py normalises each of the `channels` by `key` (``mean`` or ``std``, given or the model's): one value, or
    one per channel (timm repeats a single given value; a given list of another length fails its assertion, the
    model's fails the first batch)."""
    given = getattr(args, key, None)
    values = tuple(given if given is not None else _data_config(args, model).get(key) or ())
    if len(values) not in (1, channels):
        given = 'given' if given is not None else "the model's config"
        raise LaunchArgumentError(key, f'has {len(values)} values ({given}) for {channels} input channel'
                                  f'{"s" if channels != 1 else ""}: train.py would stop at its first batch; '
                                  f'give one value, or one per channel', options.get(key, ()))


def _data_needs(args: argparse.Namespace, model: Optional[ModelInfo], input_size: Tuple[int, ...],
                world_size: int, batch_ok: bool) -> DataNeeds:
    """What this run asks of its data (:class:`~timm_pkmixer.data.datasets.DataNeeds`)."""
    channels, channels_from = _in_chans(args)
    if getattr(args, 'num_classes', None) is not None:
        classes, classes_from = args.num_classes, f'num_classes {args.num_classes}'
    elif model is not None and model.num_classes is not None:
        classes, classes_from = model.num_classes, "the model's default; no num_classes given"
    else:
        classes, classes_from = None, ''
    return DataNeeds(channels, channels_from, classes, classes_from, args.batch_size if batch_ok else None,
                     world_size, tuple(input_size), getattr(args, 'input_img_mode', None),
                     getattr(args, 'class_map', '') or '')


def prepare_train(recipe: str, train_args: List[str], train_py: Optional[str] = None,
                  global_batch: Optional[int] = None, threads: Optional[int] = None, check: bool = False
                  ) -> TrainPlan:
    """Import train.py, check the recipe's keys against its parser, build the model on the meta device and
    resolve the plan: everything the real run would refuse before training is refused here.

    `recipe` is a file or the name of a packaged recipe (``imagenet/rp_mixer_b_w``). When `train_args` name
    another model than the recipe's and no input size (``img_size``, ``input_size``), the input size is the
    model's own (its config), not the recipe's. `threads`: CPU threads per process (default: `choose_threads`).
    `check`: also check what the run will meet: its data (:func:`~timm_pkmixer.data.datasets.check_data`: there,
    of the model's channels and classes, a training batch, the splits where timm will read them) and the
    normalisation's values per channel (what ``pkmixer train`` does before a dry run or a run).

    Raises FileNotFoundError for a missing train.py or recipe, and a UserInputError for a file that is not
    train.py, an unknown recipe key or model, a batch size or `global_batch` that is not possible, an input size
    the model does not take, or (`check`) data the run cannot train on as meant. Once train.py has parsed its
    arguments every problem is looked for: more than one is raised as a :class:`TrainPlanError` naming each.
    """
    import timm_pkmixer  # noqa: F401  (registers the models even with TIMM_PKMIXER_AUTOLOAD=0)

    from .threads import choose_threads
    path = find_train_py(train_py)
    recipe = str(resolve_recipe(recipe))
    cfg = load_recipe(recipe)
    module = load_train_py(path)
    options = train_py_arguments(module)
    check_recipe_keys(cfg, options, recipe)
    world_size = env_int('WORLD_SIZE', 1, minimum=1)
    _check_rank(world_size)
    argv = [str(path), '--config', str(recipe), *train_args]
    args = _resolve(module, argv)
    problems = _Problems()
    batch_ok = all([problems.attempt(_positive, args, dest, options)[0] for dest in ('batch_size', 'grad_accum_steps')])
    problems.attempt(_check_device_and_workers, args, options)
    if global_batch is not None:
        ok, extra = problems.attempt(_check_global_batch, args, global_batch, world_size, batch_ok)
        if extra:
            argv += extra
            args = _resolve(module, argv)
    given = _given(module, train_args)
    ok, fitted = problems.attempt(_fit_the_machine, args, options, set(cfg) | given)
    extra, machine = fitted if ok else ([], [])
    if extra:
        argv += extra
        args = _resolve(module, argv)
    ok, model = problems.attempt(_model_info, args)
    input_size, source = (), ''
    if model is not None:
        ok, seeded = problems.attempt(_follow_the_seed, args, options, model)
        if ok and seeded[0]:
            argv += seeded[0]
            args = _resolve(module, argv)
            model, machine = _model_info(args), machine + seeded[1]
        extra, source = _size_for_model(args, options, cfg, given, model)
        if extra:
            argv += extra
            args = _resolve(module, argv)
        input_size = problems.attempt(_fitting_input_size, args, options, model, source)[1] or ()
    data = _data_source(args, options)
    found: List[str] = []
    if check:
        for key in ('mean', 'std') if model is not None else ():
            problems.attempt(_check_normalisation, args, options, model, _in_chans(args)[0], key)
        if data is not None:
            result = check_data(data, _data_needs(args, model, input_size, world_size, batch_ok))
            for problem in result.problems:
                problems.add(DataProblemError(problem))
            found = list(result.found)
    ok, chosen = problems.attempt(choose_threads, threads)
    problems.raise_them()
    n_threads, why = chosen
    return TrainPlan(module, argv, args, resolve_batch_and_lr(vars(args), world_size), world_size, model,
                     input_size, source, n_threads, why, machine, data, known_train_py(path, options), found)


def check_fetched_data(plan: TrainPlan) -> None:
    """After a download (:func:`~timm_pkmixer.data.datasets.fetch_data`), the data checked as the plan checked the
    data that were there: refused (every problem named) before train.py starts."""
    if plan.data is None or plan.data.present:
        return
    source = data_source(plan.data.name, plan.data.root, plan.data.download, plan.data.splits)
    result = check_data(source, _data_needs(plan.args, plan.model, plan.input_size, plan.world_size, True))
    problems = _Problems()
    for problem in result.problems:
        problems.add(DataProblemError(problem))
    problems.raise_them()
    plan.data, plan.data_found = source, list(result.found)


def _args_file_header() -> Tuple[Optional[str], Optional[str], Set[str]]:
    """(the sha256 prefix, the timm version, the argument names) of the train.py that
    ``train_recipes/train_py_args.txt`` was written from: the one the packaged recipes are checked against."""
    import re

    from ..state_files import read_text
    from ..sweeps.recipes import recipe_root
    try:
        text = read_text(recipe_root() / 'train_py_args.txt', OSError) or ''
    except OSError:
        return None, None, set()
    found = re.search(r'train\.py sha256 ([0-9a-f]+)…; timm ([^)\s]+)\)', text)
    names = {line.split(':', 1)[0] for line in text.splitlines() if line and not line.startswith('#')}
    return (found.group(1), found.group(2), names) if found else (None, None, names)


def known_train_py(path: Path, options: Dict[str, List[str]]) -> str:
    """A line saying which train.py `path` is: the one the packaged recipes were checked against
    (``train_recipes/train_py_args.txt``: timm's train.py of the version written there, by its sha256), or another
    (the recipe's keys are all its arguments: checked before), with the arguments of the known one it lacks."""
    import hashlib
    digest = hashlib.sha256(Path(path).read_bytes()).hexdigest()
    known, version, names = _args_file_header()
    if known is None:
        return f'train.py: {path} (sha256 {digest[:16]}…)'
    if digest.startswith(known):
        return (f"train.py: {path} (sha256 {digest[:16]}…): timm {version}'s, the one the packaged recipes were "
                f'checked against')
    lacks = sorted(names - set(options))
    missing = f'; it lacks {len(lacks)} of its arguments ({", ".join(lacks[:3])}{", …" if len(lacks) > 3 else ""})' \
        if lacks else ''
    return (f"train.py: {path} (sha256 {digest[:16]}…): not timm {version}'s, the train.py the packaged recipes were "
            f'checked against (sha256 {known}…){missing}; this recipe\'s keys are all its arguments')


def _data_source(args: argparse.Namespace, options: Dict[str, List[str]]) -> Optional[DataSource]:
    """Where this train.py reads the run's data (its ``--dataset``, ``--data-dir``/``--data``, the download and the
    splits, as its ``create_dataset`` calls take them); None for a train.py without ``--data-dir``."""
    if 'data_dir' not in options:
        return None
    root = getattr(args, 'data_dir', None) or getattr(args, 'data', None)
    splits = (getattr(args, 'train_split', 'train'), getattr(args, 'val_split', 'validation'))
    return data_source(getattr(args, 'dataset', ''), root, bool(getattr(args, 'dataset_download', False)), splits)


def run_folder(args: argparse.Namespace) -> Optional[Path]:
    """The run folder train.py writes into for `args` (``--output`` / ``--experiment``, train.py's default output
    ``./output/train``), or None when train.py names it itself (no ``--experiment``: a time stamp)."""
    experiment = getattr(args, 'experiment', None)
    if not experiment:
        return None
    return Path(getattr(args, 'output', None) or './output/train') / str(experiment)


def _new_run_folder(args: argparse.Namespace, since: float) -> Optional[Path]:
    """The one folder under train.py's output that got an args.yaml since `since` (train.py named it), else None."""
    base = Path(getattr(args, 'output', None) or './output/train')
    try:
        found = [d for d in base.iterdir()
                 if (d / 'args.yaml').is_file() and (d / 'args.yaml').stat().st_mtime >= since]
    except OSError:
        return None
    return found[0] if len(found) == 1 else None


def _epochs_there(folder: Optional[Path]) -> int:
    """The epochs a run folder's summary.csv holds (0: none, or no folder)."""
    from ..runs.run_folder import SUMMARY_CSV, RunFileError, read_summary
    try:
        return len(read_summary(folder / SUMMARY_CSV).epochs) if folder and (folder / SUMMARY_CSV).is_file() else 0
    except (RunFileError, OSError):
        return 0


def _record(plan: TrainPlan, folder: Optional[Path], started: str, earlier: int) -> None:
    """What this run trains with, into its folder's pkmixer_env.json (rank 0 only; `earlier`: the epochs the folder
    held before this start); a folder that cannot be written is logged, and the training goes on."""
    from ..runs.provenance import record_provenance
    from .provenance import collect_environment
    if folder is None or env_int('RANK', 0) != 0:
        return
    try:
        environment = collect_environment(Path(plan.argv[0]), getattr(plan.args, 'device', None), plan.world_size,
                                          started)
        record_provenance(folder, environment, earlier)
    except OSError as e:
        _logger.warning(f'{folder}: what made the run (pkmixer_env.json) is not recorded ({e.strerror or e})')


def run_train(plan: TrainPlan) -> None:
    """Run train.py's ``main()`` with its ``sys.argv`` and the plan's CPU threads; its exceptions propagate
    unchanged. With ``log_wandb``, the recipe's W&B group (its ``# wandb group:`` line, read by
    :func:`~timm_pkmixer.sweeps.recipes.read_recipe_comments`; train.py has no group argument) goes to W&B as
    ``WANDB_RUN_GROUP`` unless that is set.

    What the run trains with (:mod:`timm_pkmixer.training.provenance`) goes into its run folder's
    ``pkmixer_env.json`` (:mod:`timm_pkmixer.runs.provenance`) from rank 0: before train.py starts, and again
    when it ends (the flags as train.py set them: it allows TF32 on CUDA); a resumed run adds its own start."""
    import time
    from datetime import datetime, timezone

    from .threads import set_threads
    if plan.threads is not None:
        set_threads(plan.threads)
    group = read_recipe_comments(plan.argv[2]).wandb_group if getattr(plan.args, 'log_wandb', False) else None
    if group and 'WANDB_RUN_GROUP' not in os.environ:
        os.environ['WANDB_RUN_GROUP'] = group
    started, since = datetime.now(timezone.utc).strftime('%Y-%m-%dT%H:%M:%S.%fZ'), time.time() - 1
    folder = run_folder(plan.args)
    earlier = _epochs_there(folder)
    _record(plan, folder, started, earlier)  # before train.py starts: a run that fails is recorded too
    try:
        with _argv(plan.argv):
            plan.module.main()
    finally:
        _record(plan, folder if folder is not None else _new_run_folder(plan.args, since), started, earlier)
