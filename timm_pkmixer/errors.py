"""The exceptions this package raises for bad input.

Every refusal of a user's input (a model argument, a checkpoint, a recipe, a command-line value) is a
:class:`UserInputError`: the ``pkmixer`` command prints it as ``pkmixer CMD: error: …`` and exits with
status 2, without a traceback. Anything else is a bug and keeps its traceback.

Each class also derives from the builtin that Python code already expects at that place, so
``except ValueError`` / ``except TypeError`` / ``except RuntimeError`` keep working.
"""

__all__ = ['UserInputError', 'InvalidArgumentError', 'ArgumentTypeError', 'CheckpointError',
           'CheckpointMismatchError', 'NotMaterializedError', 'MissingDependencyError', 'InputShapeError',
           'ModelTooLargeError']


class UserInputError(Exception):
    """Bad input from the user (reported without a traceback by the CLI)."""


class InvalidArgumentError(UserInputError, ValueError):
    """An argument has an impossible value; the message names the argument."""


class ArgumentTypeError(UserInputError, TypeError):
    """An argument has the wrong type (e.g. a float seed); the message names the argument."""


class CheckpointError(UserInputError, ValueError):
    """A file that is not a usable checkpoint (unreadable, unsafe to unpickle, no state dict, non-finite
    weights where finite ones are required); the message names the file."""


class CheckpointMismatchError(CheckpointError, RuntimeError):
    """A state dict does not fit the model it is loaded into (architecture, shapes, permutations, masks,
    dtypes). A ValueError for timm's checkpoint filters and a RuntimeError as ``load_state_dict`` raises."""


class NotMaterializedError(UserInputError, RuntimeError):
    """A model built on the meta device was moved to a real device but its derived buffers
    (permutations, masks) were never computed."""


class MissingDependencyError(UserInputError, ImportError):
    """An optional dependency (matplotlib, scikit-learn) is not installed; the message says what to install."""


class InputShapeError(UserInputError, ValueError, AssertionError):
    """A forward input of the wrong rank, channels or size; the message states the expected (B, C, H, W).
    Also an AssertionError, as timm's own size check raises."""


class ModelTooLargeError(InvalidArgumentError, MemoryError):
    """Model arguments that ask for more parameter and buffer memory than the device has (refused before
    anything is allocated; :mod:`timm_pkmixer.sizes`); the message names the arguments and the bytes needed."""


class ArgumentValueError(InvalidArgumentError):
    """An argument's value refused, kept apart from its name so that a caller can name the argument its own way
    (the command line by its flag): `argument` (the library's name), `problem` (the message after the name) and
    `options` (option strings it is known by elsewhere, e.g. train.py's ``-b/--batch-size``; may be empty)."""

    def __init__(self, argument: str, problem: str, options=()):
        super().__init__(f'{argument} {problem}')
        self.argument, self.problem, self.options = argument, problem, tuple(options)



__all__ += ['ArgumentValueError']
