import contextlib
import inspect
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterator, List, Tuple

import pytest
import timm
import torch

import timm_pkmixer  # noqa: F401  (explicit registration; the startup hook is tested separately)
from timm_pkmixer.catalog import list_pkmixer_models
from timm_pkmixer.errors import InvalidArgumentError

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
MINI_TRAIN_PY = TESTS / 'mini_train_py.py'  # the stand-in for timm's train.py that trains for real
RP = 's_mixer_rp_s64c64_32'  # the small RP S-Mixer most tests build
MODELS = list_pkmixer_models()  # every registered model: a model added to the registry is tested too


def run_python(code: str, env_extra: dict = None, cwd: str = None) -> subprocess.CompletedProcess:
    """Run `code` in a fresh interpreter; raise with its stderr if it fails."""
    env = dict(os.environ, **(env_extra or {}))
    proc = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, env=env, cwd=cwd,
                          timeout=600)
    if proc.returncode != 0:
        raise AssertionError(f'subprocess failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}')
    return proc


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


@torch.no_grad()
def randomize_(model: torch.nn.Module, std: float = 0.02) -> torch.nn.Module:
    """Perturb every parameter (the head is zero-initialised: outputs would otherwise be constant)."""
    gen = torch.Generator().manual_seed(1234)
    for p in model.parameters():
        p.add_(torch.randn(p.shape, generator=gen, dtype=p.dtype) * std)
    return model


def small(name: str, **kwargs) -> torch.nn.Module:
    """`name` at a small size: 2 blocks and C = 16, where its class takes those arguments (a registered per-block
    permutation list keeps its depth)."""
    params = inspect.signature(type(timm.create_model(name, device='meta')).__init__).parameters
    size = {k: v for k, v in dict(num_blocks=2, embed_dim=16).items() if k in params}
    try:
        return timm.create_model(name, **size, **kwargs)
    except InvalidArgumentError as e:  # a registered per-block permutation list of its own depth keeps it
        assert 'permutation lists' in str(e), e
        size.pop('num_blocks')
        return timm.create_model(name, **size, **kwargs)


def images(model: torch.nn.Module, batch: int) -> torch.Tensor:
    """Random images of the size `model` takes: (batch, in_chans, H, W)."""
    return torch.randn(batch, model.in_chans, *model.img_size)


def command_messages(err: str, prog: str = 'pkmixer') -> str:
    """A command's stderr from its first own line (``pkmixer CMD: …``, an error or a note) on: the progress lines
    before it (what it was doing, tests/test_progress.py) dropped, so a test can compare the message whole."""
    lines = err.splitlines(keepends=True)
    first = next((i for i, line in enumerate(lines) if line.startswith(f'{prog} ')), len(lines))
    return ''.join(lines[first:])


@pytest.fixture
def logged(caplog) -> Callable[[], List[str]]:
    """The library's progress as it logs it (``logging``, INFO on the ``timm_pkmixer`` loggers, read by pytest's
    `caplog`): ``logged()`` -> the lines so far, in order (``caplog.clear()`` forgets them)."""
    caplog.set_level(logging.INFO, logger='timm_pkmixer')
    return lambda: [r.getMessage() for r in caplog.records if r.name.partition('.')[0] == 'timm_pkmixer']


@pytest.fixture
def cli(capsys) -> Callable[..., Tuple[int, str, str]]:
    """`pkmixer ARGV` in this process: ``cli(*argv) -> (exit status, stdout, stderr)``; a traceback on stderr fails
    the test (a subprocess is kept only where it is the point: import-time behaviour, console scripts, torchrun)."""
    from timm_pkmixer.cli import main

    def run(*argv) -> Tuple[int, str, str]:
        code = main([str(a) for a in argv])
        out, err = capsys.readouterr()
        assert 'Traceback' not in err, err
        return code, out, err
    return run


@pytest.fixture
def launch_env(monkeypatch):
    """No train.py or torchrun variables from the calling shell, and torch's thread count restored afterwards
    (`pkmixer train` sets it for train.py)."""
    for var in ('TIMM_TRAIN_PY', 'WORLD_SIZE', 'RANK', 'LOCAL_WORLD_SIZE', 'LOCAL_RANK'):
        monkeypatch.delenv(var, raising=False)
    threads, omp = torch.get_num_threads(), os.environ.get('OMP_NUM_THREADS')
    yield monkeypatch
    torch.set_num_threads(threads)
    if omp is None:
        os.environ.pop('OMP_NUM_THREADS', None)
    else:
        os.environ['OMP_NUM_THREADS'] = omp


@pytest.fixture
def files(tmp_path, launch_env):
    """A fresh folder (`tmp_path`) as the working directory, with `launch_env`'s clean environment and
    OMP_NUM_THREADS at torch's thread count; a test file adds what its commands read by overriding it."""
    launch_env.setenv('OMP_NUM_THREADS', str(torch.get_num_threads()))
    launch_env.chdir(tmp_path)
    return tmp_path


DPKG_FRONTEND_LOCK = '/var/lib/dpkg/lock-frontend'  # what apt-get install takes first
needs_apt_root = pytest.mark.skipif(not hasattr(os, 'geteuid') or os.geteuid() != 0 or not shutil.which('apt-get')
                                    or not Path(DPKG_FRONTEND_LOCK).is_file(), reason='needs root, apt-get and dpkg')


@contextlib.contextmanager
def dpkg_lock_held() -> Iterator[subprocess.Popen]:
    """A process holding dpkg's frontend lock as apt holds it (an fcntl write lock), from when the block starts (it
    holds the lock by then) until ``.release()`` or the block's end (killed): it never lets go by itself, so how long
    it holds the lock is the test's to say, under any load (it ends with the test's process, whose pipe it reads, so a
    killed test leaves no lock behind); ``.who`` is how apt names it."""
    code = ('import fcntl, os, sys\n'
            f'fd = os.open({DPKG_FRONTEND_LOCK!r}, os.O_RDWR)\n'
            'fcntl.lockf(fd, fcntl.LOCK_EX)\n'
            'print("held", flush=True)\n'
            'sys.stdin.read()\n')
    with subprocess.Popen([sys.executable, '-c', code], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                          text=True) as holder:

        def release() -> None:  # the lock is free once the holder is reaped (the kernel drops it as the process ends)
            holder.kill()
            holder.wait()
        try:
            assert holder.stdout.readline().strip() == 'held'
            holder.who = f'process {holder.pid} ({Path(f"/proc/{holder.pid}/comm").read_text().strip()})'
            holder.release = release
            yield holder
        finally:
            release()


def run_releasing_when_said(argv: List[str], said: str, holder: subprocess.Popen, env: dict = None,
                            timeout: float = 600) -> subprocess.CompletedProcess:
    """Run `argv` while `holder` (:func:`dpkg_lock_held`) holds the lock, and release it once a line of the command's
    stderr holds `said` (it has met the lock and waits for it): the command cannot miss the lock however slowly it
    starts, nor the holder outlast the wait. stdout and stderr as ``subprocess.run(capture_output=True)`` gives
    them; the command is killed after `timeout` seconds."""
    with tempfile.TemporaryFile('w+') as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.PIPE, text=True, env=env)
        timed_out = threading.Event()
        timer = threading.Timer(timeout, lambda: (timed_out.set(), proc.kill()))
        timer.start()
        err = ''
        try:
            for line in proc.stderr:
                err += line
                if said in line:
                    holder.release()
            proc.wait()
        finally:
            timer.cancel()
            if proc.returncode is None:  # a failed test's: not left running
                proc.kill()
                proc.wait()
        out.seek(0)
        if timed_out.is_set():
            raise subprocess.TimeoutExpired(argv, timeout, out.read(), err)
        return subprocess.CompletedProcess(argv, proc.returncode, out.read(), err)


def until(condition: Callable[[], Any], what: str, seconds: float = 1800) -> None:
    """Poll `condition` until it holds (a state other processes reach in their own time, however busy the machine:
    a launch, a run's start and first epoch took 7 minutes on 2 cores at load 17); fail naming `what` after
    `seconds`, a bound for a hung process only, never a timing a test asserts."""
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f'still waiting after {seconds:g} s: {what}'
        time.sleep(0.3)


def keep_figures(monkeypatch, *modules: Any) -> List[Any]:
    """Every matplotlib Figure the figure functions of `modules` make from now on (each module asks
    ``require_matplotlib()`` for the class), kept in the returned list for inspection; they are saved as usual."""
    pytest.importorskip('matplotlib')
    from matplotlib.figure import Figure
    made = []

    class Kept(Figure):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            made.append(self)

    for module in modules:
        monkeypatch.setattr(module, 'require_matplotlib', lambda: Kept)
    return made
