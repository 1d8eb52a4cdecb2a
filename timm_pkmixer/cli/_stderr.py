"""Where a command's progress goes: the library logs it (``logging.getLogger(__name__)`` in each module, as timm
does, and never configures logging); while a command runs, one handler on the ``timm_pkmixer`` logger writes each
line, the plain message, to stderr at once, so stdout keeps only the results. A closed stderr (``2>&-``) drops
progress, notes and errors: they never take stdout's place."""
import contextlib
import logging
import os
import sys
from typing import Iterator

__all__ = ['StderrHandler', 'progress_on_stderr', 'stderr_or_devnull']

PACKAGE_LOGGER = 'timm_pkmixer'


class StderrHandler(logging.Handler):
    """Each record's plain message as one line on ``sys.stderr`` as it is when the line is written (pytest's capture
    included), flushed at once; once its reader has gone (``2>&1 | head -1``) fd 2 is pointed at /dev/null and the
    command goes on saying nothing more there."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.setFormatter(logging.Formatter('%(message)s'))

    def emit(self, record: logging.LogRecord) -> None:
        line = self.format(record)
        stream = sys.stderr
        try:
            stream.write(line + '\n')
            stream.flush()
        except (BrokenPipeError, ValueError):  # ValueError: the stream is closed
            with contextlib.suppress(OSError, ValueError):
                os.dup2(os.open(os.devnull, os.O_WRONLY), stream.fileno())


@contextlib.contextmanager
def progress_on_stderr() -> Iterator[None]:
    """While a command runs: the ``timm_pkmixer`` logger at INFO with one :class:`StderrHandler`, not propagating
    (a handler timm's train.py puts on the root logger does not print each line twice); restored afterwards, so
    repeated commands in one process (the tests) neither add handlers nor leave the logger changed. Nested, the
    outer one's handler stays the only one."""
    logger = logging.getLogger(PACKAGE_LOGGER)
    if any(isinstance(h, StderrHandler) for h in logger.handlers):
        yield
        return
    handler, level, propagate = StderrHandler(), logger.level, logger.propagate
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
        logger.propagate = propagate


def _is_open(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:
        return False
    return True


def stderr_or_devnull() -> None:
    """A process started with stderr closed (``2>&-``) has ``sys.stderr`` None, and ``print(…, file=None)`` (argparse's
    usage included) writes to stdout: point fd 2 and ``sys.stderr`` at /dev/null instead, so what goes to stderr is
    dropped, and no file the command opens later becomes fd 2 (which a child process would take as its stderr)."""
    if sys.stderr is not None:
        return
    if not _is_open(2):
        fd = os.open(os.devnull, os.O_WRONLY)  # the lowest free descriptor: 2
        if fd != 2:
            os.dup2(fd, 2)
            os.close(fd)
    sys.stderr = open(os.devnull, 'w', encoding='utf-8')
