"""tests/slurm/cluster.sh, the SLURM tests' cluster: with root and apt-get, an apt/dpkg lock another process holds is
waited for (bounded, said on stderr), and an install that still cannot run fails (exit 1): the SLURM tests are never
skipped silently for it. Exit 3 (skip) is kept for machines without root or apt-get. Against the real apt-get and
the real lock file (held here as apt holds it: an fcntl write lock)."""
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

CLUSTER = Path(__file__).resolve().parent / 'slurm' / 'cluster.sh'
FRONTEND = '/var/lib/dpkg/lock-frontend'  # what apt-get install takes first

pytestmark = pytest.mark.skipif(not hasattr(os, 'geteuid') or os.geteuid() != 0 or not shutil.which('apt-get')
                                or not Path(FRONTEND).is_file(), reason='needs root, apt-get and dpkg')


def _hold_lock(seconds: float) -> subprocess.Popen:
    """A process holding dpkg's frontend lock for `seconds` (returns once it holds it); `.who` is how apt names it."""
    code = ('import fcntl, os, sys, time\n'
            f'fd = os.open({FRONTEND!r}, os.O_RDWR)\n'
            'fcntl.lockf(fd, fcntl.LOCK_EX)\n'
            'print("held", flush=True)\n'
            f'time.sleep({seconds})\n')
    holder = subprocess.Popen([sys.executable, '-c', code], stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == 'held'
    holder.who = f'process {holder.pid} ({Path(f"/proc/{holder.pid}/comm").read_text().strip()})'
    return holder


def _install(wait_s: int) -> subprocess.CompletedProcess:
    return subprocess.run(['bash', str(CLUSTER), 'install'], capture_output=True, text=True, timeout=600,
                          env=dict(os.environ, PKMIXER_APT_LOCK_WAIT=str(wait_s)))


def test_install_waits_for_a_lock_another_process_holds():
    holder = _hold_lock(5)
    try:
        proc = _install(120)
    finally:
        holder.kill()
        holder.wait()
    assert proc.returncode == 0, proc.stderr
    said = (f'apt-get install: Could not get lock {FRONTEND}. It is held by {holder.who}; waiting up to 120 s for '
            f'it …')
    assert said in proc.stderr.splitlines()
    assert re.search(r'\n\d+ upgraded, \d+ newly installed', proc.stderr.split(said, 1)[1])  # apt-get's, after it


def test_install_that_cannot_get_the_lock_fails_and_does_not_skip():
    holder = _hold_lock(120)
    try:
        proc = _install(3)
    finally:
        holder.kill()
        holder.wait()
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
