"""The registered models of this package, and a summary of each (the table printed by ``pkmixer models``)."""
import inspect
import logging
from dataclasses import asdict, dataclass
from typing import Any, Dict, List, Mapping, Sequence, Tuple

import timm
import torch
from timm.models import model_entrypoint
from torch.utils.flop_counter import FlopCounterMode

from .description import Describable, ModelDescription
from .errors import InvalidArgumentError
from .validation import non_negative_real, positive_real

__all__ = ['ModelSummary', 'list_pkmixer_models', 'is_pkmixer_model', 'check_model_name', 'check_model_kwargs',
           'summarize', 'summarize_all', 'models_near_omega']

_logger = logging.getLogger(__name__)


def is_pkmixer_model(name: str) -> bool:
    """True if `name` (no pretrained tag) is an architecture registered by this package."""
    if not timm.is_model(name):
        return False
    return model_entrypoint(name).__module__.split('.')[0] == __name__.split('.')[0]


def check_model_name(name: str) -> str:
    """`name` if it is an architecture of this package, else an error saying where to look."""
    if not isinstance(name, str) or not is_pkmixer_model(name):
        hint = ' (a timm model, but not one of timm-pkmixer)' if isinstance(name, str) and timm.is_model(name) else ''
        raise InvalidArgumentError(f'unknown model {name!r}{hint}: not a registered timm-pkmixer model '
                                   f'(see `pkmixer models`)')
    return name


# arguments timm.create_model and build_model_with_cfg take besides the model class's own
_FACTORY_ARGS = ('pretrained_cfg', 'pretrained_cfg_overlay', 'checkpoint_path', 'cache_dir', 'scriptable',
                 'exportable', 'no_jit', 'features_only', 'out_indices', 'feature_cls', 'feature_cfg', 'device',
                 'dtype')


def check_model_kwargs(name: str, kwargs: Mapping[str, Any]) -> None:
    """Refuse, naming them, keyword arguments that model `name` does not take (before building it)."""
    model_class = type(timm.create_model(check_model_name(name), device='meta'))
    accepted = set(inspect.signature(model_class.__init__).parameters) - {'self'} | set(_FACTORY_ARGS)
    unknown = sorted(set(kwargs) - accepted)
    if unknown:
        raise InvalidArgumentError(f'{name} has no argument{"s" if len(unknown) > 1 else ""} '
                                   f'{", ".join(map(repr, unknown))}; it takes: '
                                   f'{", ".join(sorted(accepted - set(_FACTORY_ARGS)))}')


def list_pkmixer_models() -> List[str]:
    """Every architecture this package registers in timm, read from timm's registry (whatever its name)."""
    return sorted(n for n in timm.list_models() if is_pkmixer_model(n))


@dataclass(frozen=True, kw_only=True)
class ModelSummary(ModelDescription):
    """A registered model's description, with its parameters and MACs counted at its default input size."""
    name: str
    params: int
    gmacs: float                         # multiply-accumulates of one forward pass
    img_size: int
    pretrained_tags: Tuple[str, ...] = ()  # tags with published weights (timm.list_pretrained)

    def row(self) -> Dict[str, str]:
        """The row of ``pkmixer models``."""
        return {
            'model': self.name, 'family': self.family, 'params (M)': f'{self.params / 1e6:.2f}',
            'GMACs': f'{self.gmacs:.3f}', 'img': str(self.img_size),
            'S': '-' if self.num_tokens is None else str(self.num_tokens),
            'C': '-' if self.dim is None else str(self.dim),
            'depth': str(self.depth), 'γ (tok/ch)': self.gamma_label, 'm = S·C': str(self.width),
            'p': f'{self.density:.4f}', 'sparsity 1-p': f'{1 - self.density:.4f}',
            'permutation': self.permutation_label or '-',
            'weights': f'{len(self.pretrained_tags)} tags' if self.pretrained_tags else 'none',
        }

    def as_dict(self) -> dict:
        return dict(super().as_dict(), name=self.name, params=self.params, gmacs=self.gmacs, img_size=self.img_size,
                    pretrained_tags=list(self.pretrained_tags))


def summarize(name: str, **kwargs) -> ModelSummary:
    """Build registered model `name` (with `kwargs`) on the meta device and count its params and MACs."""
    check_model_kwargs(name, kwargs)
    model = timm.create_model(name, device='meta', **kwargs)
    if not isinstance(model, Describable):
        raise TypeError(f'{name} has no describe(): not a timm-pkmixer model')
    input_size = model.pretrained_cfg['input_size']
    if 'img_size' in kwargs:
        input_size = (input_size[0], *timm.layers.to_2tuple(kwargs['img_size']))
    if 'in_chans' in kwargs:
        input_size = (kwargs['in_chans'], *input_size[1:])
    with FlopCounterMode(display=False) as counter:
        model(torch.empty(1, *input_size, device='meta'))
    fields = {k: v for k, v in asdict(model.describe()).items()}
    return ModelSummary(
        **fields, name=name, params=sum(p.numel() for p in model.parameters()),
        gmacs=counter.get_total_flops() / 2e9, img_size=input_size[-1],
        pretrained_tags=tuple(n.split('.', 1)[1] for n in timm.list_pretrained(f'{name}.*')))


def summarize_all(names: Sequence[str]) -> List[ModelSummary]:
    """:func:`summarize` of each registered model of `names`, in order; logs a line per model (a few hundred ms
    each: the whole registry takes seconds)."""
    summaries = []
    for i, name in enumerate(names):
        _logger.info(f'{name} ({i + 1}/{len(names)}): counting parameters and MACs on the meta device')
        summaries.append(summarize(name))
    return summaries


def models_near_omega(omega: float, rel_tol: float = 0.05) -> List[ModelSummary]:
    """Registered Mixers whose Ω is within `rel_tol` of `omega` (the models that belong on its width curve); logs
    :func:`summarize_all`'s lines, over every registered model."""
    omega, rel_tol = positive_real('omega', omega), non_negative_real('rel_tol', rel_tol)
    return [s for s in summarize_all(list_pkmixer_models())
            if s.dim is not None and abs(s.omega / omega - 1) <= rel_tol]
