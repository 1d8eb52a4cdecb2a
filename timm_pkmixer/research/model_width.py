"""Width numbers (Ω, m, p, γ) of registered models, read from the models themselves (built on the meta device)."""
from dataclasses import asdict, dataclass
from typing import List, Optional

import timm

from ..catalog import _family, list_pkmixer_models
from ..models import PKMixer
from ..width import gamma_for_omega, optimal_width

__all__ = ['ModelWidth', 'model_width', 'models_near_omega']


@dataclass(frozen=True)
class ModelWidth:
    """Ω, m, p of one registered model; `gamma` is the γ that gives its (S, C) its Ω by eq. 14."""
    name: str
    family: str
    params: int
    omega: float                # Ω, average connections per mixing layer
    width: int                  # m
    density: float             # p
    gamma: float                # effective γ (Mixers: 2Ω/(CS² + C²S); SW-MLP: its own γ)
    num_tokens: Optional[int] = None  # S (Mixers)
    dim: Optional[int] = None         # C (Mixers)
    depth: Optional[int] = None

    @property
    def width_fraction(self) -> Optional[float]:
        """m / max m at this Ω and γ (eq. 15); None for the SW-MLP, whose width is not S·C."""
        return None if self.dim is None else self.width / optimal_width(self.omega, self.gamma)[1]

    def as_dict(self) -> dict:
        return dict(asdict(self), width_fraction=self.width_fraction)


def model_width(name: str) -> ModelWidth:
    """Ω, m, p and parameters of registered model `name` (its `geometry`, or the SW-MLP's own numbers)."""
    if name not in list_pkmixer_models():
        raise ValueError(f'unknown model {name!r}: not a registered timm-pkmixer model (see `pkmixer models`)')
    model = timm.create_model(name, device='meta')
    params = sum(p.numel() for p in model.parameters())
    if isinstance(model, PKMixer):
        g = model.geometry
        return ModelWidth(name, _family(model), params, g.omega, g.width, g.density,
                          gamma_for_omega(g.num_tokens, g.dim, g.omega), g.num_tokens, g.dim, g.depth)
    gamma = model.omega / (model.density * model.width ** 2)
    return ModelWidth(name, _family(model), params, model.omega, model.width, model.density, gamma,
                      depth=len(model.blocks))


def models_near_omega(omega: float, rel_tol: float = 0.05) -> List[ModelWidth]:
    """Registered Mixers whose Ω is within `rel_tol` of `omega` (the models that belong on its width curve)."""
    found = []
    for name in list_pkmixer_models():
        info = model_width(name)
        if info.dim is not None and abs(info.omega / omega - 1) <= rel_tol:
            found.append(info)
    return found
