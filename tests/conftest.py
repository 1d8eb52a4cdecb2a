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


@torch.no_grad()
def randomize_(model: torch.nn.Module, std: float = 0.02) -> torch.nn.Module:
    """Perturb every parameter (the head is zero-initialised: outputs would otherwise be constant)."""
    gen = torch.Generator().manual_seed(1234)
    for p in model.parameters():
        p.add_(torch.randn(p.shape, generator=gen, dtype=p.dtype) * std)
    return model
