"""Run timm's own model test-suite (tests/test_models.py of the installed timm version) on our models.

timm ships its tests in the source distribution on PyPI, not in the wheel. This script downloads the sdist
of the *installed* timm version (`pip download --no-deps --no-binary :all: timm==<version>`) into
``.cache/timm-sdist/`` (nothing of it is committed), and runs its ``tests/test_models.py`` with
``TORCH_BACKEND=timm_pkmixer`` (imported by the suite before collection, which registers our models) and
``GITHUB_ACTIONS=true`` (as timm's CI: no pretrained downloads), selecting with ``-k`` exactly the models this
package registers (read from timm's registry, whatever their names).

On a machine other jobs share, timm's per-test timeouts (120-360 s, pytest-timeout) were exceeded by
``rp_mixer_l16_224`` when torch's threads fought those jobs. The suite therefore runs with the package's thread
policy (``OMP_NUM_THREADS`` = the idle cores, `choose_threads`, unless set) and, when the machine is oversubscribed
(1-minute load + 1 above the cores), with timm's own ``TIMEOUT`` knob scaled by that ratio (unless set). What the
tests check is unchanged; both choices are printed.

Usage: python tests/timm_suite.py [extra pytest args]
"""
import math
import os
import re
import subprocess
import sys
import tarfile
from pathlib import Path

import timm

from timm_pkmixer.catalog import list_pkmixer_models
from timm_pkmixer.training.threads import available_cores, choose_threads

ROOT = Path(__file__).resolve().parent.parent


def timm_tests_dir(version: str) -> Path:
    cache = ROOT / '.cache' / 'timm-sdist'
    target = cache / f'timm-{version}'
    if (target / 'tests' / 'test_models.py').exists():
        return target / 'tests'
    cache.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, '-m', 'pip', 'download', '-q', '--no-deps', '--no-binary', ':all:',
                    f'timm=={version}', '-d', str(cache)], check=True)
    sdist = next(cache.glob(f'timm-{version}.tar.gz'))
    with tarfile.open(sdist) as tar:
        members = [m for m in tar.getmembers() if m.name.startswith(f'timm-{version}/tests/')]
        tar.extractall(cache, members=members, filter='data')
    return target / 'tests'


# pytest's own marks; every other `pytest.mark.NAME` of timm's test file is one of its CI marks
_BUILTIN_MARKS = {'parametrize', 'skip', 'skipif', 'xfail', 'usefixtures', 'filterwarnings'}


def timm_marks(test_file: Path) -> list:
    """The marks timm's test file uses (`base`, `cfg`, `torchscript`, `features`, `fxforward`, ...), registered
    on the command line: timm declares them in its own pytest config, which is not in the sdist's tests folder, and
    pytest otherwise warns once per use (95 PytestUnknownMarkWarnings)."""
    used = set(re.findall(r'pytest\.mark\.([A-Za-z_]\w*)', test_file.read_text(encoding='utf-8')))
    return sorted(used - _BUILTIN_MARKS)


TIMM_LONGEST_TIMEOUT = 360  # test_models.py's timeout360; its TIMEOUT variable sets all of timeout120/240/360


def load_env(environ: dict, cores: int, load: float) -> dict:
    """The variables that keep timm's suite within its timeouts on a busy machine: ``OMP_NUM_THREADS`` (the
    package's thread policy) and, when ``load + 1 > cores``, ``TIMEOUT`` = 360 s × ⌈(load + 1) / cores⌉. A value
    already in `environ` is kept."""
    env = {}
    if 'OMP_NUM_THREADS' not in environ:
        env['OMP_NUM_THREADS'] = str(choose_threads()[0])
    share = (load + 1) / cores
    if 'TIMEOUT' not in environ and share > 1:
        env['TIMEOUT'] = str(TIMM_LONGEST_TIMEOUT * math.ceil(share))
    return env


def main() -> int:
    tests = timm_tests_dir(timm.__version__)
    select = ' or '.join(list_pkmixer_models())
    cores, load = available_cores(), os.getloadavg()[0] if hasattr(os, 'getloadavg') else 0.
    machine = load_env(os.environ, cores, load)
    env = dict(os.environ, TORCH_BACKEND='timm_pkmixer', GITHUB_ACTIONS='true', **machine)
    markers = '\n'.join(f'{m}: timm CI mark' for m in timm_marks(tests / 'test_models.py'))
    cmd = [sys.executable, '-m', 'pytest', str(tests / 'test_models.py'), '-k', select, '-q', '-p', 'no:cacheprovider',
           '--rootdir', str(tests), '-o', f'markers={markers}', *sys.argv[1:]]
    print(f'timm {timm.__version__}: running its tests/test_models.py on our {len(list_pkmixer_models())} models '
          f'(-k "{select}")', flush=True)
    if machine:
        print(f'{cores} cores, load average {load:.1f}: ' + ', '.join(f'{k}={v}' for k, v in machine.items()),
              flush=True)
    return subprocess.run(cmd, env=env, cwd=str(tests)).returncode


if __name__ == '__main__':
    sys.exit(main())
