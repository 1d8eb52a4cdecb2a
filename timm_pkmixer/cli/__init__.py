"""The ``pkmixer`` command (also ``python -m timm_pkmixer``): one module per subcommand, on top of the library.

A command whose parser sets a default ``rest`` (``pkmixer train``) gets the arguments it does not know there,
in order (train.py's); every other command refuses them as argparse does, with its own usage and the closest flag
of its own (``did you mean --json?``). Every command reads its arguments before it imports torch or timm: a refusal
of them comes at once.

Convention: a user error (bad value, missing file, a checkpoint that does not fit, …) is printed as
``pkmixer CMD: error: …`` on stderr and the command exits with status 2, without a traceback; any other
exception is a bug and keeps its traceback. The library raises, the commands print; the library's progress
(``logging``, the ``timm_pkmixer`` logger) goes to stderr while a command runs (:mod:`._stderr`).
"""
import argparse
import os
import sys
from typing import List, Optional

from ..errors import UserInputError
from . import analyze, data, demo, expand, launch, models, push, recipes, report, research, status, sweep, train
from ._common import CommandParser, unrecognized
from ._stderr import progress_on_stderr, stderr_or_devnull

__all__ = ['main', 'build_parser', 'USER_ERRORS']

# what a command reports as `pkmixer CMD: error: …` (exit 2) instead of a traceback
USER_ERRORS = (UserInputError, FileNotFoundError, IsADirectoryError, NotADirectoryError, PermissionError,
               FileExistsError)
_COMMANDS = (models, demo, recipes, train, sweep, launch, status, report, data, push, expand, research, analyze)


def build_parser() -> argparse.ArgumentParser:
    from .. import __version__
    parser = CommandParser(
        prog='pkmixer', description='PK-family Mixers (normal and Random-Permuted MLP-Mixers, S-Mixers, SW-MLP) '
                                    'of "Understanding MLP-Mixer as a Wide and Sparse MLP" for timm.')
    parser.add_argument('--version', action='version', version=f'%(prog)s {__version__}')
    sub = parser.add_subparsers(dest='command', metavar='COMMAND')
    for module in _COMMANDS:
        module.add_commands(sub)
    return parser


def main(argv: Optional[List[str]] = None) -> int:
    """Run ``pkmixer`` with `argv` (default: the command line); returns the exit status."""
    stderr_or_devnull()
    parser = build_parser()
    try:
        args, rest = parser.parse_known_args(argv)
        if rest and not hasattr(args, 'rest'):  # only a command that hands its unknown arguments on takes them
            own = args.flags.parser if hasattr(args, 'flags') else parser  # the command's parser: its usage, flags
            own.error(unrecognized(own, rest))
    except SystemExit as e:  # --help, --version, argparse's own usage errors (exit 2)
        return int(e.code or 0)
    if rest:
        args.rest = rest
    if args.command is None:
        parser.print_help()
        return 0
    try:
        with progress_on_stderr():
            status = int(args.run(args) or 0)
        sys.stdout.flush()  # a reader that has gone (`pkmixer recipes | head -1`) shows here, not at exit
        return status
    except BrokenPipeError:  # nobody reads the rest: stop quietly, as `cat` does (Python's recommended way)
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except USER_ERRORS as e:
        message = str(e) if not isinstance(e, OSError) or not e.filename else f'{e.strerror}: {e.filename}'
        print(f'{args.prog}: error: {message}', file=sys.stderr)
        return 2


if __name__ == '__main__':
    sys.exit(main())
