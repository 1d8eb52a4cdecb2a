"""`pkmixer train RECIPE [train.py args…]`: run timm's own train.py with a recipe and this plugin registered."""
import argparse
import hashlib
import traceback

from ..errors import InvalidArgumentError, UserInputError
from ..validation import cli_type, positive_int
from ._common import add_command, in_flag_terms

__all__ = ['add_commands']

TRAIN_PY_ENV = 'TIMM_TRAIN_PY'  # as timm_pkmixer.training.train_py (not imported here: it is not needed for --help)


def _list_train_args(args: argparse.Namespace) -> int:
    from ..training.train_py import find_train_py, format_train_args, load_train_py, train_py_arguments
    path = find_train_py(args.train_py)
    module = load_train_py(path)
    digest = hashlib.sha256(path.read_bytes()).hexdigest()[:16]
    print(format_train_args(train_py_arguments(module), f'train.py sha256 {digest}…'), end='')
    return 0


def _in_flags(args: argparse.Namespace, error: BaseException) -> str:
    """One problem of a plan, said as the flags the user typed (as a single one is raised)."""
    from ..training.train_py import problem_text
    try:
        with in_flag_terms(args, 'global_batch', 'threads'):
            raise error
    except UserInputError as e:
        return problem_text(e)
    except OSError as e:
        return problem_text(e)


def _prepare(args: argparse.Namespace):
    """The checked plan (train.py, the model, the data: every problem named), in the command's flags."""
    from ..training.train_py import TrainPlanError, prepare_train
    from ..training.train_py_parsers import check_train_args
    from ..validation import unknown_model
    try:
        with in_flag_terms(args, 'global_batch', 'threads'):  # said as the flags the user typed
            checked = check_train_args(args.recipe, args.rest, args.train_py)  # refused before torch is imported:
            problem = unknown_model(checked.args.model) if checked and isinstance(checked.args.model, str) else None
            if problem:  # a mistyped flag above, a model of this package's families not registered here
                raise InvalidArgumentError(problem)
            return prepare_train(args.recipe, args.rest, args.train_py, args.global_batch, args.threads, check=True)
    except TrainPlanError as e:
        raise InvalidArgumentError(f'the run would fail, for {len(e.problems)} reasons:\n'
                                   + '\n'.join(f'- {_in_flags(args, p)}' for p in e.problems)) from None


def run(args: argparse.Namespace) -> int:
    from ..training.train_py import TrainPyError, missing_train_py_message
    try:
        if args.list_train_args:
            return _list_train_args(args)
        if not args.recipe:
            raise InvalidArgumentError(f'a RECIPE is required (e.g. train_recipes/imagenet/rp_mixer_b_w.yaml); '
                                       f'train.py from --train-py or ${TRAIN_PY_ENV}')
        from ..training.env import env_int
        from ..training.train_py import check_fetched_data, run_train
        rank = env_int('RANK', 0)
        plan = _prepare(args)
    except TrainPyError as e:
        raise InvalidArgumentError(f'{e.reason}\n{missing_train_py_message("pass --train-py PATH/train.py")}') from None
    if rank == 0:
        for line in plan.describe():
            print(line, flush=True)
        if args.dry_run:
            print('[pkmixer] dry run: the plan above was checked (train.py, the model, the data); train.py was not '
                  'started', flush=True)
    if not args.dry_run:
        if plan.data is not None:
            from ..data.datasets import fetch_data
            fetch_data(plan.data)  # a download done, or refused in one line, before train.py starts
            check_fetched_data(plan)  # what was downloaded, checked as the data there were
        try:
            run_train(plan)
        except Exception:  # train.py's own failure, whatever its type: its traceback, as train.py prints it
            traceback.print_exc()
            return 1
    return 0


def add_commands(subparsers: argparse._SubParsersAction) -> None:
    p = add_command(
        subparsers, 'train', run, allow_abbrev=False, usage='%(prog)s [options] [RECIPE [train.py arguments …]]',
        help="run timm's train.py with a recipe (works under torchrun: -m timm_pkmixer train …)",
        description="Run timm's own train.py with a recipe and this plugin registered.",
        epilog="This command's own options may come before or after the recipe; every other argument after the "
               'recipe goes to train.py unchanged.')
    p.set_defaults(rest=[])  # the arguments this parser does not know: train.py's (see cli.main)
    p.add_argument('recipe', nargs='?', help='a YAML recipe, e.g. train_recipes/imagenet/rp_mixer_b_w.yaml')
    p.add_argument('--train-py', default=None, help=f"path of timm's train.py (default: ${TRAIN_PY_ENV})")
    p.add_argument('--global-batch', type=cli_type(positive_int, name='global batch'), default=None,
                   help='set grad_accum_steps so that batch_size × processes × steps equals this')
    p.add_argument('--threads', type=cli_type(positive_int, name='threads'), default=None,
                   help='CPU threads per process (default: $OMP_NUM_THREADS, else the idle cores divided among the '
                        "processes of this machine: on a busy machine fewer threads run much faster)")
    p.add_argument('--dry-run', action='store_true',
                   help='check what the run will meet (train.py, the model, the data: every problem named, exit '
                        'status 2) and print the resolved plan, and stop')
    p.add_argument('--list-train-args', action='store_true',
                   help="print train.py's argument names (the data file train_recipes/train_py_args.txt)")
