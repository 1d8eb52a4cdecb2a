"""After pip install, timm finds the models in any fresh interpreter; the hook is stdlib only and can be switched
off; importing timm or the package adds registry entries and changes nothing in torch or timm; the
registry covers every family, and registers once timm is imported, whatever is imported first."""
import importlib.metadata
import json
import os
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest
import timm

from timm_pkmixer.catalog import list_pkmixer_models

from conftest import MODELS, ROOT, run_python, small


def test_fresh_interpreter_sees_models_without_import():
    code = '''
import sys
assert "torch" not in sys.modules and "timm" not in sys.modules, "startup hook imported torch/timm"
assert "_timm_pkmixer_autoload" in sys.modules, "startup hook did not run"
import timm
m = timm.create_model("s_mixer_rp_s64c64_32")  # a small RP model: Mixer-B-W proves nothing more
ours = [n for n in timm.list_models() if timm.models.model_entrypoint(n).__module__.startswith("timm_pkmixer.")]
print(type(m).__module__, *ours)
'''
    out = run_python(code, env_extra={'TIMM_PKMIXER_AUTOLOAD': '1'}).stdout.split()
    # every model the explicit import registers (read from the registry), found through the hook alone
    assert out[0] == 'timm_pkmixer.models.pk_mixer'
    assert sorted(out[1:]) == list_pkmixer_models()


def test_switched_off_by_environment_variable():
    code = '''
import timm
assert timm.list_models("rp_mixer*") == [], timm.list_models("rp_mixer*")
import timm_pkmixer
print(len(timm.list_models("rp_mixer*")))
'''
    assert run_python(code, env_extra={'TIMM_PKMIXER_AUTOLOAD': '0'}).stdout.strip() == str(
        len(timm.list_models("rp_mixer*")))


def test_a_probe_for_timm_before_its_import_does_not_disarm_the_hook():
    """Libraries ask whether timm is installed before importing it (transformers' is_timm_available:
    importlib.util.find_spec): the startup hook still registers the models when timm is then imported."""
    code = 'import importlib.util; importlib.util.find_spec("timm"); import timm; print(timm.is_model("rp_mixer_b_w"))'
    assert run_python(code, env_extra={'TIMM_PKMIXER_AUTOLOAD': '1'}).stdout.strip() == 'True'


def test_explicit_import_before_timm():
    out = run_python('import timm_pkmixer, timm; print(timm.is_model("pk_mixer_b_w"))').stdout.strip()
    assert out == 'True'


def test_pth_and_pep829_start_files_installed():
    files = {Path(str(f)).name: f for f in importlib.metadata.files('timm-pkmixer')}
    pth = files['timm_pkmixer.pth'].locate().read_text().strip()
    start = files['timm_pkmixer.start'].locate().read_text().strip()
    assert pth == ("import os; os.environ.get('TIMM_PKMIXER_AUTOLOAD', '1').strip().lower() in "
                   "('0', 'false', 'no', 'off') or __import__('_timm_pkmixer_autoload').install()")
    assert start == '_timm_pkmixer_autoload:install'
    assert callable(pkgutil.resolve_name(start))  # the PEP 829 form of the entry point resolves


def test_startup_imports_nothing_of_ours_when_switched_off_and_only_the_hook_when_on():
    code = 'import sys; print(" ".join(sorted(sys.modules)))'
    off = set(run_python(code, env_extra={'TIMM_PKMIXER_AUTOLOAD': '0'}).stdout.split())
    on = set(run_python(code, env_extra={'TIMM_PKMIXER_AUTOLOAD': '1'}).stdout.split())
    assert not {m for m in off if 'pkmixer' in m}  # switched off: the .pth line reads the switch first
    assert on - off == {'_timm_pkmixer_autoload'}  # on: the hook module alone, which imports nothing else


# What importing may change: modules and classes of torch and timm whose attributes are compared, by identity,
# before and after the import. New attributes are allowed only where they are submodules (an import side effect).
_PURITY_CHECK = '''
import importlib, inspect, json, sys, types
import torch, torch.nn, torch.nn.parallel, torch.distributed, torch.nn.functional, torch.fx, torch.utils.data
import timm, timm.models, timm.layers, timm.data, timm.utils, timm.optim, timm.scheduler
from torch.nn.parallel import DistributedDataParallel
MODULES = [torch, torch.nn, torch.nn.parallel, torch.distributed, torch.nn.functional, torch.utils.data, timm,
           timm.models, timm.layers, timm.data, timm.utils, timm.optim, timm.scheduler]
CLASSES = [DistributedDataParallel, torch.nn.Module, torch.nn.Linear, torch.nn.LayerNorm, torch.Tensor]
def snapshot():
    out = {}
    for m in MODULES:
        out[m.__name__] = dict(vars(m))
    for c in CLASSES:
        out[c.__qualname__] = dict(vars(c))
    return out
before = snapshot()
registry = set(timm.list_models())
importlib.import_module(sys.argv[1])
after = snapshot()
changed, added = [], []
for owner, attrs in before.items():
    for name, value in attrs.items():
        if after[owner].get(name, object()) is not value:
            changed.append(f"{owner}.{name}")
    for name in set(after[owner]) - set(attrs):
        if not isinstance(after[owner][name], types.ModuleType):
            added.append(f"{owner}.{name}")
new_models = sorted(set(timm.list_models()) - registry)
print(json.dumps({"changed": changed, "added": added, "new_models": new_models}))
'''


def _import_effects(module: str) -> dict:
    import subprocess
    import sys
    proc = subprocess.run([sys.executable, '-c', _PURITY_CHECK, module], capture_output=True, text=True,
                          env={**__import__('os').environ, 'TIMM_PKMIXER_AUTOLOAD': '0'}, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_importing_the_package_changes_nothing_but_the_registry():
    effects = _import_effects('timm_pkmixer')
    assert effects['changed'] == [] and effects['added'] == []
    assert effects['new_models'] == list_pkmixer_models()


def test_the_ddp_hooks_change_torch_only_when_imported():
    # the opt-in modules do change DistributedDataParallel.__init__ (and only that), so the check above can fail
    for module in ('timm_pkmixer.replica_check', 'timm_pkmixer.cpu_ddp'):
        effects = _import_effects(module)
        assert effects['changed'] == ['DistributedDataParallel.__init__'], (module, effects)


@pytest.mark.parametrize('first', ['from timm_pkmixer.layers import gather', 'import timm_pkmixer.catalog',
                                   'import timm_pkmixer', 'import timm_pkmixer.cli'])
def test_the_models_register_once_timm_is_imported(first):
    code = f'{first}\nimport timm\nprint(timm.is_model("rp_mixer_b_w"), timm.is_model("sw_mlp_o18_32"))'
    env = dict(os.environ, PYTHONPATH=str(ROOT), TIMM_PKMIXER_AUTOLOAD='0')
    out = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, env=env, check=True).stdout
    assert out.split() == ['True', 'True']


def test_the_registry_covers_every_family():
    families = {small(name).describe().family for name in MODELS}
    assert {'MLP-Mixer', 'RP MLP-Mixer', 'S-Mixer', 'RP S-Mixer', 'Mixed RP S-Mixer', 'SW-MLP', 'Shallow Monarch',
            'Shallow Kronecker'} <= families


_MINIMAL_FINDER = '''
import sys
from importlib.util import spec_from_file_location


class _EditableFinder:
    @classmethod
    def find_spec(cls, fullname, path=None, target=None):
        return spec_from_file_location('timm', TIMM_INIT) if fullname == 'timm' else None


def install():
    sys.meta_path.append(_EditableFinder)
'''


def _site_without_timm(root: Path) -> Path:
    """A folder standing in for site-packages where timm is installed the way setuptools' editable installs (and
    other meta-path finders) serve a package: every entry of this interpreter's site-packages linked, except timm;
    a meta-path finder module that serves `timm` from its real folder (setuptools' own template where setuptools
    is installed)."""
    timm_dir = Path(timm.__file__).parent
    site = root / 'site'
    site.mkdir()
    for entry in sys.path:
        path = Path(entry)
        if not path.is_dir() or not {'site-packages', 'dist-packages'} & set(path.parts):
            continue
        for item in path.iterdir():
            name = item.name.lower()
            if name == 'timm' or name.startswith('timm-') or item.suffix == '.pth' or (site / item.name).exists():
                continue
            (site / item.name).symlink_to(item)
    try:
        from setuptools.command.editable_wheel import _finder_template
        finder = _finder_template('__editable___timm_finder', {'timm': str(timm_dir)}, {})
    except ImportError:  # the same finder, reduced to what serves timm
        finder = _MINIMAL_FINDER.replace('TIMM_INIT', repr(str(timm_dir / '__init__.py')))
    (site / '__editable___timm_finder.py').write_text(finder)
    return site


@pytest.mark.parametrize('first', ['import timm_pkmixer', 'autoload', 'autoload; import timm_pkmixer'])
def test_the_models_register_when_a_meta_path_finder_serves_timm(first, tmp_path):
    """timm installed in editable mode (setuptools' meta-path finder, not a path entry): registration finds timm
    the way the import system does, after `import timm_pkmixer`, through the startup hook, or both."""
    site = _site_without_timm(tmp_path)
    lines = ['import importlib.machinery, sys',
             'import __editable___timm_finder; __editable___timm_finder.install()  # what its .pth line does',
             'assert importlib.machinery.PathFinder.find_spec("timm") is None  # only the meta-path finder has timm']
    for step in first.split('; '):
        lines.append('import _timm_pkmixer_autoload; _timm_pkmixer_autoload.install()' if step == 'autoload' else step)
    lines.append('import timm; print(timm.is_model("rp_mixer_b_w"), timm.is_model("sw_mlp_o18_32"), timm.__file__)')
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(site)]), TIMM_PKMIXER_AUTOLOAD='1')
    proc = subprocess.run([sys.executable, '-S', '-c', '\n'.join(lines)], capture_output=True, text=True, env=env,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr
    registered, swmlp, timm_file = proc.stdout.split()
    assert (registered, swmlp) == ('True', 'True')
    assert Path(timm_file) == Path(timm.__file__)  # the real timm, served by the finder
