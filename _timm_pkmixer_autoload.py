"""Registers timm-pkmixer's models whenever `timm` is imported (installed as a startup hook).

Run at interpreter start by ``timm_pkmixer.pth`` (Python < 3.15 style ``import`` line) or by
``timm_pkmixer.start`` (PEP 829 entry point, Python >= 3.15; its presence makes 3.15+ skip the
.pth import line). It uses the standard library only and imports neither torch nor timm: it adds
a meta-path finder that, once `timm` has been imported, imports `timm_pkmixer` (which registers
the models). Set TIMM_PKMIXER_AUTOLOAD=0 to switch it off; ``import timm_pkmixer`` still works.
"""
import importlib
import importlib.abc
import os
import sys

ENV_VAR = 'TIMM_PKMIXER_AUTOLOAD'


def enabled() -> bool:
    return os.environ.get(ENV_VAR, '1').strip().lower() not in ('0', 'false', 'no', 'off')


def _register() -> None:
    try:
        importlib.import_module('timm_pkmixer')
    except Exception as e:  # never break `import timm` for the user
        sys.stderr.write(f'timm-pkmixer: models not registered ({type(e).__name__}: {e}); '
                         f'set {ENV_VAR}=0 to silence\n')


class _TimmImportHook(importlib.abc.MetaPathFinder):
    """Wraps the loader of the top-level `timm` module so that its models are registered after it runs."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname != 'timm':
            return None
        sys.meta_path.remove(self)  # one shot; also keeps the lookup below from recursing
        import importlib.util
        spec = importlib.util.find_spec('timm')
        if spec is None or spec.loader is None:
            return spec
        exec_module = spec.loader.exec_module

        def exec_then_register(module):
            exec_module(module)
            _register()

        spec.loader.exec_module = exec_then_register
        return spec


def install() -> None:
    """Entry point of the startup hook: idempotent, cheap, stdlib only."""
    if not enabled():
        return
    if 'timm' in sys.modules:
        _register()
    elif not any(isinstance(f, _TimmImportHook) for f in sys.meta_path):
        sys.meta_path.insert(0, _TimmImportHook())
