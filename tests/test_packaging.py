"""What the wheel and the sdist carry: the recipes inside the package, the license (PEP 639), the startup hook, and
everything the tests need (the sdist's tests run from the unpacked sdist)."""
import os
import subprocess
import sys
import sysconfig
import tarfile
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope='module')
def dist(tmp_path_factory):
    pytest.importorskip('hatchling')
    out = tmp_path_factory.mktemp('dist')
    proc = subprocess.run([sys.executable, '-m', 'hatchling', 'build', '-t', 'sdist', '-t', 'wheel', '-d', str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    return next(out.glob('*.whl')), next(out.glob('*.tar.gz'))


def test_wheel_carries_recipes_license_and_hook(dist, tmp_path):
    wheel, _ = dist
    names = zipfile.ZipFile(wheel).namelist()
    recipes = sorted(n for n in names if n.startswith('timm_pkmixer/train_recipes/') and n.endswith('.yaml'))
    assert len(recipes) == len(list((ROOT / 'train_recipes').glob('*/*.yaml')))
    assert any(n.endswith('.dist-info/licenses/LICENSE') for n in names)
    assert {'_timm_pkmixer_autoload.py', 'timm_pkmixer.pth', 'timm_pkmixer.start'} <= set(names)
    metadata = zipfile.ZipFile(wheel).read(next(n for n in names if n.endswith('.dist-info/METADATA'))).decode()
    assert 'License-Expression: Apache-2.0' in metadata and 'License-File: LICENSE' in metadata
    assert 'Project-URL: Paper, https://arxiv.org/abs/2306.01470' in metadata
    # installed from the wheel, the package finds its recipes by name
    zipfile.ZipFile(wheel).extractall(tmp_path / 'site')
    code = ('import sys; sys.path[:0] = [sys.argv[1], sys.argv[2]]; import timm_pkmixer.sweeps.recipes as r; '
            'print(r.recipe_root()); print(r.resolve_recipe("imagenet/rp_mixer_b_w"))')
    out = subprocess.run([sys.executable, '-S', '-c', code, str(tmp_path / 'site'), sysconfig.get_paths()['purelib']],
                         capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    root, recipe = out.stdout.split()
    assert root == str(tmp_path / 'site' / 'timm_pkmixer' / 'train_recipes') and recipe.startswith(root)


def test_sdist_carries_what_the_tests_use(dist):
    _, sdist = dist
    names = {n.split('/', 1)[1] for n in tarfile.open(sdist).getnames() if '/' in n}
    assert {'LICENSE', 'README.md', 'pyproject.toml', 'benchmarks/digits/width_trend.py', 'tests/mini_train_py.py',
            'tests/conftest.py', 'tests/slurm/cluster.sh', 'train_recipes/train_py_args.txt',
            'docs/ARCHITECTURE.md'} <= names
    for test in (ROOT / 'tests').glob('*.py'):
        assert f'tests/{test.name}' in names
    assert not any('width_trend_results' in n for n in names)  # results stay in the repository
    assert os.path.getsize(sdist) < 5_000_000
