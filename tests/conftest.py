import os
import subprocess
import sys

import pytest
import torch

import timm_pkmixer  # noqa: F401  (explicit registration; the startup hook is tested separately)


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
