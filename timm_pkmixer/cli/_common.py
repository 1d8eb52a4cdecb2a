"""Argument groups shared by several commands, defined once; the helper that registers a command; the parser every
command uses (:class:`CommandParser`: a typo'd flag, choice or model name answered with the closest one, before
torch is imported); :func:`in_flag_terms`, the one way a library argument's name becomes the command's flag; and
:func:`progress`, the way a command says a step of its own, through the same logger as the library's progress
(:mod:`._stderr`)."""
import argparse
import ast
import contextlib
import difflib
import logging
import re
from typing import Any, Callable, Dict, Iterator, Optional, Sequence

from ..errors import ArgumentValueError, InvalidArgumentError, UserInputError
from ..validation import cli_type, closest_flags, did_you_mean_flags, positive_int, positive_real, unknown_model

__all__ = ['CommandParser', 'ParseKwargs', 'add_command', 'add_model_options', 'add_width_options', 'in_flag_terms',
           'progress', 'unrecognized', 'MODEL_NAME', 'POSITIVE_INT', 'POSITIVE_REAL']

POSITIVE_INT = cli_type(positive_int)
POSITIVE_REAL = cli_type(positive_real, parse=float)


def _did_you_mean(word: str, choices: Sequence[str]) -> str:
    """`` (did you mean X?)`` with the choice closest to `word`, or '' when none is close."""
    close = difflib.get_close_matches(word, choices, n=1, cutoff=0.6)
    return f' (did you mean {close[0]}?)' if close else ''


class CommandParser(argparse.ArgumentParser):
    """argparse's parser, which also names the closest choice of an invalid one (``invalid choice: 'dpth' (choose
    from …) (did you mean depth?)``; Python 3.14's ``suggest_on_error``, for every Python). `pkmixer` and every
    subcommand are of this class (argparse makes a subcommand's parser of its parent's)."""

    def _check_value(self, action: argparse.Action, value: Any) -> None:
        try:
            super()._check_value(action, value)
        except argparse.ArgumentError as e:
            hint = _did_you_mean(str(value), [str(c) for c in action.choices or ()])
            raise argparse.ArgumentError(action, f'{e.message}{hint}') from None


def unrecognized(parser: argparse.ArgumentParser, rest: Sequence[str]) -> str:
    """argparse's message for the arguments `rest` that `parser` does not know, with the closest flag of `parser` to
    each flag among them: ``unrecognized arguments: --experimnt depth (did you mean --experiment?)``."""
    hint = did_you_mean_flags(closest_flags(rest, sorted(parser._option_string_actions), cutoff=0.6))
    return f'unrecognized arguments: {" ".join(rest)}{hint}'


def _model_name(text: str) -> str:
    """A model name, refused at once (before torch is imported) when it is named as one of this package's families
    but not registered, with the closest registered names (:func:`timm_pkmixer.validation.unknown_model`); any
    other name is the command's to judge (timm's registry tells a timm model that is not one of ours)."""
    problem = unknown_model(text)
    if problem:
        raise argparse.ArgumentTypeError(problem)
    return text


MODEL_NAME = _model_name


_logger = logging.getLogger(__name__)


def progress(message: str) -> None:
    """One progress line of the command's own (a step of push, expand, analyze), logged as the library logs its own:
    on stderr at once while the command runs (stdout keeps the results, so ``> file`` and pipes get only those)."""
    _logger.info(message)


class ParseKwargs(argparse.Action):
    """``key=value …`` as train.py reads ``--model-kwargs`` (values by ``ast.literal_eval``, else strings), but an
    item without ``=`` or with an empty key is a usage error, not a traceback."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Sequence[str],
                 option_string: Any = None) -> None:
        kwargs: Dict[str, Any] = {}
        for item in values:
            key, sep, text = item.partition('=')
            if not sep or not key.isidentifier():
                raise argparse.ArgumentError(self, f'expected key=value with a Python name as key, got {item!r}')
            try:
                kwargs[key] = ast.literal_eval(text)
            except (ValueError, SyntaxError):
                kwargs[key] = text  # a plain string, as timm's ParseKwargs reads it
        setattr(namespace, self.dest, kwargs)


def add_command(subparsers: argparse._SubParsersAction, name: str, run: Callable[[argparse.Namespace], int],
                **kwargs: Any) -> argparse.ArgumentParser:
    """A subcommand whose handler is `run(args) -> exit status` (user errors are raised, not printed)."""
    parser = subparsers.add_parser(name, **kwargs)
    parser.set_defaults(run=run, prog=parser.prog, flags=_Flags(parser))
    return parser


def add_model_options(parser: argparse.ArgumentParser, required: bool = True, help: str = '') -> None:
    """--model NAME and --model-kwargs k=v … (timm's format, as in train.py)."""
    parser.add_argument('--model', required=required, type=MODEL_NAME,
                        help=help or 'a registered timm-pkmixer model, e.g. rp_mixer_b_w')
    parser.add_argument('--model-kwargs', nargs='*', default={}, action=ParseKwargs,
                        help='key=value model arguments, as train.py takes them (e.g. perm_seed=3 num_blocks=4)')


def add_width_options(parser: argparse.ArgumentParser) -> None:
    """The options of a fixed-Ω width curve (eq. 14-15, S.42, S.44): Ω, γ, C points, mirrored pairs, patches."""
    parser.add_argument('--omega', type=cli_type(positive_real, float, 'omega'),
                        help='Ω, average connections per layer (e.g. 290217984)')
    parser.add_argument('--gamma', type=cli_type(positive_real, float, 'gamma'),
                        help='expansion factor γ (default 1: S-Mixer)')
    parser.add_argument('--C', type=POSITIVE_INT, nargs='+', help='channels C to place on the curve (S from eq. 14)')
    parser.add_argument('--mirror', action='store_true', help='with --C: add (C, S) = (S, C) too (same Ω, App. C.4)')
    parser.add_argument('--patch', type=POSITIVE_INT, nargs='+', help='patch sizes P: C = in_chans·P², S from eq. S.44')
    parser.add_argument('--in-chans', type=POSITIVE_INT, default=3, help='input channels for --patch (default 3)')


class _Flags:
    """The options of a command's parser by argument name (``dest``): ``repo_id`` → ``--repo-id``, read when asked
    (the parser gets its arguments after :func:`add_command`)."""

    def __init__(self, parser: argparse.ArgumentParser) -> None:
        self.parser = parser

    def get(self, name: str) -> Optional[str]:
        for action in self.parser._actions:
            if action.dest == name and action.option_strings:
                return next((o for o in action.option_strings if o.startswith('--')), action.option_strings[0])
        return None


@contextlib.contextmanager
def in_flag_terms(args: argparse.Namespace, *names: str) -> Iterator[None]:
    """Say the library's errors about the arguments `names` in the command's terms, with the option the user typed
    for each (read from the command's parser: ``repo_id`` → ``--repo-id``): an :class:`ArgumentValueError` by its
    `argument` (or by the option strings it carries: train.py's ``-b/--batch-size``), any other
    :class:`UserInputError` whose message starts with one of `names` (``repo_id must be …`` → ``--repo-id must be …``),
    and in any such message a name given a string (``executor='slurm'`` → ``--executor slurm``) or quoted
    (```partition``` → ``--partition``).
    The library speaks in arguments, the command in flags; this is the one place that turns one into the other."""
    try:
        yield
    except UserInputError as e:
        flags = {n: f for n in names if (f := args.flags.get(n))}
        if isinstance(e, ArgumentValueError):
            flag = '/'.join(e.options) or flags.get(e.argument)
            if flag:
                raise InvalidArgumentError(f'{flag} {e.problem}') from None
            raise
        message = str(e)
        for name, flag in flags.items():
            message = re.sub(rf"(?<![\w-]){re.escape(name)}=('[^'\\]*'|\"[^\"\\]*\")",
                             lambda m, f=flag: f'{f} {ast.literal_eval(m.group(1))}', message)
            if message.startswith((f'{name} ', f'{name}:')):
                message = flag + message[len(name):]
            message = message.replace(f'`{name}`', flag)
        if message != str(e):
            raise type(e)(message) from e
        raise
