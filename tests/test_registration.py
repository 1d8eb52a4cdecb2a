"""After pip install, timm finds the models in any fresh interpreter; the hook is stdlib only and can be switched
off."""
import importlib.metadata
import pkgutil
from pathlib import Path

from conftest import run_python


def test_fresh_interpreter_sees_models_without_import():
    code = '''
import sys
assert "torch" not in sys.modules and "timm" not in sys.modules, "startup hook imported torch/timm"
assert "_timm_pkmixer_autoload" in sys.modules, "startup hook did not run"
import timm
m = timm.create_model("rp_mixer_b_w")
print(type(m).__module__, len(timm.list_models("s_mixer*")), len(timm.list_models("sw_mlp*")))
'''
    out = run_python(code, env_extra={'TIMM_PKMIXER_AUTOLOAD': '1'}).stdout.split()
    assert out == ['timm_pkmixer.models.pk_mixer', '5', '1']


def test_switched_off_by_environment_variable():
    code = '''
import timm
assert timm.list_models("rp_mixer*") == [], timm.list_models("rp_mixer*")
import timm_pkmixer
print(len(timm.list_models("rp_mixer*")))
'''
    assert run_python(code, env_extra={'TIMM_PKMIXER_AUTOLOAD': '0'}).stdout.strip() == '6'


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
