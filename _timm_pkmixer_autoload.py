"""Registers timm-pkmixer's models whenever `timm` is imported (installed as a startup hook).

Run at interpreter start by ``timm_pkmixer.pth`` (Python < 3.15 style ``import`` line, which reads the switch
first and imports nothing of ours when it is off) or by ``timm_pkmixer.start`` (PEP 829 entry point, Python
>= 3.15; its presence makes 3.15+ skip the .pth import line). Importing this module costs next to nothing:
it imports no other module, neither torch nor timm. `install` adds a meta-path finder that, once `timm` has
been imported, imports `timm_pkmixer` (which registers the models). Set TIMM_PKMIXER_AUTOLOAD=0 to switch it
off; ``import timm_pkmixer`` still works.
"""
import os
import sys

ENV_VAR = 'TIMM_PKMIXER_AUTOLOAD'
OFF = ('0', 'false', 'no', 'off')


def enabled() -> bool:
    return os.environ.get(ENV_VAR, '1').strip().lower() not in OFF


def _register() -> None:
    try:
        __import__('timm_pkmixer')
    except Exception as e:  # never break `import timm` for the user
        sys.stderr.write(f'timm-pkmixer: models not registered ({type(e).__name__}: {e}); '
                         f'set {ENV_VAR}=0 to silence\n')


class _TimmImportHook:
    """A meta-path finder (duck-typed: no importlib.abc import at start-up) that wraps the loader of the top-level
    `timm` module so that the models are registered right after it runs. It finds timm as the import system does
    (the other finders, in order) and stays until timm has run: a look-up that imports nothing
    (``importlib.util.find_spec('timm')``, as transformers' ``is_timm_available`` does) does not disarm it."""

    def __init__(self) -> None:
        self.searching = False  # the look-up below asks the finders again: not this one

    def find_spec(self, fullname, path=None, target=None):
        if fullname != 'timm' or self.searching:
            return None
        import importlib.util
        self.searching = True
        try:
            spec = importlib.util.find_spec('timm')
        finally:
            self.searching = False
        if spec is None or spec.loader is None or not hasattr(spec.loader, 'exec_module'):
            return spec
        exec_module = spec.loader.exec_module

        def exec_then_register(module):
            exec_module(module)
            if self in sys.meta_path:  # timm has run: one registration is all it takes
                sys.meta_path.remove(self)
            _register()

        spec.loader.exec_module = exec_then_register
        return spec

    def invalidate_caches(self) -> None:
        pass


def install() -> None:
    """Entry point of the startup hook: idempotent, cheap, stdlib only."""
    if not enabled():
        return
    if 'timm' in sys.modules:
        _register()
    elif not any(isinstance(f, _TimmImportHook) for f in sys.meta_path):
        sys.meta_path.insert(0, _TimmImportHook())
