"""timm-pkmixer: the PK family of Hayase & Karakida, "Understanding MLP-Mixer as a Wide and Sparse MLP"
(ICML 2024), as timm models. Importing this package registers ``pk_mixer_*``, ``rp_mixer_*``,
``s_mixer_*``, ``sw_mlp_*`` and ``shallow_*`` in timm's model registry (after ``pip install`` this happens
automatically whenever timm is imported). It adds registry entries and changes nothing in torch or timm: the
data-parallel replica check and the CPU DDP fix are opt-in (``timm_pkmixer.replica_check``,
``timm_pkmixer.cpu_ddp``).

The registration needs torch and timm, so it happens as soon as timm is imported: at once if it already is,
else right after ``import timm`` runs. Importing the package alone (as the ``pkmixer`` command does before
it knows which subcommand it runs) imports neither; the public names below are imported on first use.
"""
__version__ = '0.2.0'

import importlib
import sys
from typing import Any, List

from .errors import (
    ArgumentTypeError,
    CheckpointMismatchError,
    InvalidArgumentError,
    NotMaterializedError,
    UserInputError,
)

# public name -> submodule that defines it (imported on first access, PEP 562)
_LAZY = {
    'ModelDescription': 'description', 'describe_mixer': 'description', 'describe_sw_mlp': 'description',
    'check_replicas': 'distributed', 'install_cpu_ddp': 'distributed', 'install_ddp_replica_check': 'distributed',
    'expand_resolution': 'models.expand',
    'FixedPermutation': 'layers', 'MaskedLinear': 'layers', 'PKMlp': 'layers', 'SkipLayer': 'layers',
    'make_pk_mlp': 'layers',
    'PKMixer': 'models', 'PKMixerBlock': 'models', 'SparseBlock': 'models', 'SwMlp': 'models',
    'check_state_dict': 'models',
}
__all__ = ['ArgumentTypeError', 'CheckpointMismatchError', 'InvalidArgumentError', 'NotMaterializedError',
           'UserInputError', *_LAZY]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(f'.{_LAZY[name]}', __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f'module {__name__!r} has no attribute {name!r}')


def __dir__() -> List[str]:
    return sorted(set(globals()) | set(_LAZY))


def _register() -> None:
    """Register the models in timm's registry (their ``@register_model`` decorators run on import)."""
    from . import models  # noqa: F401


class _RegisterAfterTimm:
    """A meta-path finder that registers the models once `timm` has been imported, and not in the middle of
    importing one of our modules (a submodule that imports timm first would otherwise meet the models'
    imports half-initialised): it wraps the loaders of `timm` and of this package's submodules, and registers
    when the outermost of them has run. It removes itself once the models are registered."""

    def __init__(self) -> None:
        self.depth = 0          # our submodules being executed, nested
        self.timm_ready = False
        self.searching = set()  # names being looked up by the finders after this one (no recursion into it)

    def _find_elsewhere(self, fullname, path, target):
        """The spec the import system would find without this finder: the other finders of ``sys.meta_path``,
        in order (path entries and meta-path finders alike, e.g. setuptools' editable installs)."""
        self.searching.add(fullname)
        try:
            for finder in list(sys.meta_path):
                find_spec = getattr(finder, 'find_spec', None)
                if finder is self or find_spec is None:
                    continue
                spec = find_spec(fullname, path, target)
                if spec is not None:
                    return spec
            return None
        finally:
            self.searching.discard(fullname)

    def find_spec(self, fullname, path=None, target=None):
        if fullname != 'timm' and not fullname.startswith(__name__ + '.') or fullname in self.searching:
            return None
        spec = self._find_elsewhere(fullname, path, target)
        if spec is None or spec.loader is None or not hasattr(spec.loader, 'exec_module'):
            return spec
        exec_module, is_timm = spec.loader.exec_module, fullname == 'timm'

        def exec_then_register(module):
            self.depth += 0 if is_timm else 1
            try:
                exec_module(module)
            finally:
                self.depth -= 0 if is_timm else 1
            self.timm_ready |= is_timm
            if self.timm_ready and self.depth == 0 and self in sys.meta_path:
                sys.meta_path.remove(self)
                _register()

        spec.loader.exec_module = exec_then_register
        return spec

    def invalidate_caches(self) -> None:
        pass


if 'timm' in sys.modules:
    _register()
else:
    sys.meta_path.insert(0, _RegisterAfterTimm())
