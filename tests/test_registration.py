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
m = timm.create_model("rp_mixer_b_w")
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
