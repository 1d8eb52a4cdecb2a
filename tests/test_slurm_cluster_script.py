"""tests/slurm/cluster.sh, the SLURM tests' cluster: with root and apt-get, an apt/dpkg lock another process holds is
waited for (bounded, said on stderr), and an install that still cannot run fails (exit 1): the SLURM tests are never
skipped silently for it. Exit 3 (skip) is kept for machines without root or apt-get. Against the real apt-get and
the real lock file (held here as apt holds it: an fcntl write lock)."""
import os
import re
import subprocess
from pathlib import Path

from conftest import DPKG_FRONTEND_LOCK as FRONTEND
from conftest import dpkg_lock_held, needs_apt_root, run_releasing_when_said

CLUSTER = Path(__file__).resolve().parent / 'slurm' / 'cluster.sh'

pytestmark = needs_apt_root


def _env(wait_s: int) -> dict:
    return dict(os.environ, PKMIXER_APT_LOCK_WAIT=str(wait_s))


def _install(wait_s: int) -> subprocess.CompletedProcess:
    return subprocess.run(['bash', str(CLUSTER), 'install'], capture_output=True, text=True, timeout=600,
                          env=_env(wait_s))


def test_install_waits_for_a_lock_another_process_holds():
    """The lock is held until the install has met it and said so (the holder never lets go first, however busy the
    machine), then released: apt-get's next try installs."""
    with dpkg_lock_held() as holder:
        said = (f'apt-get install: Could not get lock {FRONTEND}. It is held by {holder.who}; waiting up to 120 s '
                f'for it …')
        proc = run_releasing_when_said(['bash', str(CLUSTER), 'install'], said, holder, env=_env(120))
    assert proc.returncode == 0, proc.stderr
    assert said in proc.stderr.splitlines()
    assert re.search(r'\n\d+ upgraded, \d+ newly installed', proc.stderr.split(said, 1)[1])  # apt-get's, after it


def test_install_that_cannot_get_the_lock_fails_and_does_not_skip():
    with dpkg_lock_held() as holder:
        proc = _install(3)
    assert proc.returncode == 1, proc.stderr  # not 3: the SLURM tests fail rather than skip
    assert proc.stderr.splitlines()[-1] == (
        f'cluster.sh: apt-get install -y slurm-wlm munge: the lock was still held after 3 s (Could not get lock '
        f'{FRONTEND}. It is held by {holder.who}); run again once that process is done '
        f'(PKMIXER_APT_LOCK_WAIT sets the wait, in seconds)')
    assert 'SLURM unavailable' not in proc.stderr


def test_install_refuses_a_wait_that_is_not_seconds():
    proc = _install('ten')
    assert (proc.returncode, proc.stderr.strip()) == (
        1, "cluster.sh: PKMIXER_APT_LOCK_WAIT must be a whole number of seconds, got 'ten'")
