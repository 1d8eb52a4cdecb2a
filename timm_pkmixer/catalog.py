"""Summaries of the registered models (the table printed by ``pkmixer models``)."""
from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

import timm
import torch
from torch.utils.flop_counter import FlopCounterMode

from .models import PKMixer, SwMlp

__all__ = ['FAMILY_PATTERNS', 'ModelSummary', 'list_pkmixer_models', 'summarize']

FAMILY_PATTERNS = ['pk_mixer_*', 'rp_mixer_*', 's_mixer_*', 'sw_mlp_*']


def list_pkmixer_models() -> List[str]:
    """Every model name this package registers in timm."""
    return timm.list_models(FAMILY_PATTERNS)


@dataclass(frozen=True)
class ModelSummary:
    name: str
    family: str
    params: int
    gmacs: float          # multiply-accumulates of one forward pass at the default input size
    img_size: int
    num_tokens: Optional[int]   # S
    dim: Optional[int]          # C
    depth: int
    gamma: str
    width: int            # effective width m
    density: float        # p, ratio of non-zero entries of the effective weights
    pretrained_tags: Tuple[str, ...] = ()   # tags with published weights (timm.list_pretrained)

    def row(self) -> Dict[str, str]:
        return {
            'model': self.name, 'family': self.family, 'params (M)': f'{self.params / 1e6:.2f}',
            'GMACs': f'{self.gmacs:.3f}', 'img': str(self.img_size),
            'S': '-' if self.num_tokens is None else str(self.num_tokens),
            'C': '-' if self.dim is None else str(self.dim),
            'depth': str(self.depth), 'γ (tok/ch)': self.gamma, 'm = S·C': str(self.width),
            'p': f'{self.density:.4f}', 'sparsity 1-p': f'{1 - self.density:.4f}',
            'weights': f'{len(self.pretrained_tags)} tags' if self.pretrained_tags else 'none',
        }


def _family(model: torch.nn.Module) -> str:
    if isinstance(model, SwMlp):
        return 'SW-MLP'
    rp = 'RP ' if model.permutation == 'random' else ''
    return f'{rp}S-Mixer' if model.block_type == 'fc' else f'{rp}MLP-Mixer'


def summarize(name: str, **kwargs) -> ModelSummary:
    """Build `name` on the meta device (no memory, no init cost) and count its params and MACs."""
    model = timm.create_model(name, device='meta', **kwargs)
    input_size = model.pretrained_cfg['input_size']
    if 'img_size' in kwargs:
        input_size = (input_size[0], *timm.layers.to_2tuple(kwargs['img_size']))
    with FlopCounterMode(display=False) as counter:
        model(torch.empty(1, *input_size, device='meta'))
    common = dict(
        name=name, family=_family(model), params=sum(p.numel() for p in model.parameters()),
        gmacs=counter.get_total_flops() / 2e9, img_size=input_size[-1],
        pretrained_tags=tuple(n.split('.', 1)[1] for n in timm.list_pretrained(f'{name}.*')),
    )
    if isinstance(model, PKMixer):
        g = model.geometry
        gamma = '1 (FC)' if model.block_type == 'fc' else f'{g.gamma_tokens:.3g}/{g.gamma_channels:.3g}'
        return ModelSummary(num_tokens=g.num_tokens, dim=g.dim, depth=g.depth, gamma=gamma,
                            width=g.width, density=g.density, **common)
    if isinstance(model, SwMlp):
        hidden = model.blocks[0].fc2 is not None
        gamma = f'{model.blocks[0].fc1.out_features / model.width:.3g}' if hidden else '1 (FC)'
        return ModelSummary(num_tokens=None, dim=None, depth=len(model.blocks), gamma=gamma,
                            width=model.width, density=model.density, **common)
    raise TypeError(f'{name} is not a timm-pkmixer model')
