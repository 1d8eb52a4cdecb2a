"""The launch wing's exceptions: every one is a :class:`~timm_pkmixer.errors.UserInputError` whose message names
the folder, file, recipe or option (the command line prints it as ``pkmixer CMD: error: …``, exit 2)."""
import shlex
from pathlib import Path
from typing import Callable, List

from ..errors import UserInputError

__all__ = ['LaunchError', 'LaunchLockedError', 'StateFileError', 'state_file', 'RunFolderTakenError',
           'TrainArgsChangedError', 'TrainArgsRefusedError', 'SlurmUnreachableError']


class LaunchError(UserInputError, ValueError):
    """A folder that cannot be launched (no recipes, a file that is not a recipe, an executor that is not there,
    a batch system's refusal); the message names the file or option."""


class LaunchLockedError(LaunchError):
    """The folder is being launched already (the holder is named)."""


class StateFileError(LaunchError):
    """One of the launcher's own files (the lock, a run record, the recorded train.py arguments, a run folder's
    launch marker, a log) that cannot be used: not a regular file, not JSON, not of its shape; the message names the
    file and what to do."""


def state_file(path: Path, what: str, remedy: str) -> Callable[[str], StateFileError]:
    """What is wrong with the launcher's file `path` (for :mod:`timm_pkmixer.state_files`' readers) as a
    :class:`StateFileError`: ``PATH is not WHAT (WHY): REMEDY``."""
    return lambda why: StateFileError(f'{path} is not {what} ({why}): {remedy}')


class RunFolderTakenError(LaunchError):
    """A recipe's run folder belongs to another run (another recipe, model or launched folder: named)."""


class TrainArgsChangedError(LaunchError):
    """A relaunch given other train.py arguments than the folder's launches recorded: `folder`, the record `path`,
    the `recorded` and `given` arguments and each of the `differences`; :meth:`explain` says it with the way to
    change them on purpose."""

    def __init__(self, folder: Path, path: Path, recorded: List[str], given: List[str], differences: List[str]):
        self.folder, self.path, self.recorded, self.given, self.differences = folder, path, recorded, given, differences
        super().__init__(self.explain('new_train_args=True'))

    def explain(self, change: str) -> str:
        """The message; `change` names the way to change the arguments on purpose."""
        return (f'{self.folder} was launched with the train.py arguments {shlex.join(self.recorded) or "(none)"} '
                f'(recorded in {self.path}), and these differ: {"; ".join(self.differences)}. Relaunch with no '
                f'train.py arguments to reuse them, or with {change} to change them on purpose (finished runs '
                f'trained with the old ones become stale)')


class TrainArgsRefusedError(LaunchError):
    """train.py's parser refuses the launch's train.py arguments (checked on a recipe before anything is recorded or
    started): `refusal` says so, `hint` is train.py's closest flag to each it did not know (or ''); the message is the
    two together."""

    def __init__(self, refusal: str, hint: str = '') -> None:
        super().__init__(f'{refusal}{hint}')
        self.refusal, self.hint = refusal, hint


class SlurmUnreachableError(LaunchError):
    """SLURM's client commands cannot reach slurmctld (after retries): whether a job is in the queue is unknown, and
    the message says so rather than taking the job for ended."""
