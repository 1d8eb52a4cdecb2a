"""`cka_matrix`: mini-batch CKA between the mixing branches of two models (Fig. 2(b), (c); C.1), and
`random_batches`, the random mini-batches it averages over."""
import itertools
from dataclasses import dataclass
from typing import Any, Iterable, Iterator, List, Optional, Tuple

import numpy as np
import torch
import torch.nn as nn

from ..errors import InvalidArgumentError
from .cka import HsicAccumulator, check_self_hsic, gram
from .features import capture_branches, mixing_branches

__all__ = ['CkaMatrix', 'cka_matrix', 'random_batches', 'MIN_BATCH']

MIN_BATCH = 4  # the unbiased HSIC needs 4 examples a batch


@dataclass
class CkaMatrix:
    """CKA between each feature of model A (rows) and of model B (columns), in order from the input."""
    matrix: np.ndarray        # (len(names_a), len(names_b))
    names_a: List[str]
    names_b: List[str]
    examples: int             # examples seen
    batches: int

    @property
    def square(self) -> bool:
        """Whether the features pair one to one (as many of A as of B), so that the diagonal means something."""
        return self.matrix.shape[0] == self.matrix.shape[1]

    @property
    def mean_diagonal(self) -> float:
        """Mean of the diagonal entries (Fig. 2(a): feature k of A against feature k of B). Only for a square
        matrix: with unequal feature counts the k-th features are not counterparts, so this refuses."""
        if not self.square:
            rows, cols = self.matrix.shape
            raise InvalidArgumentError(f'mean_diagonal needs a square CKA matrix (features paired one to one); '
                                       f'this one is {rows} × {cols} ({rows} features of model A, {cols} of model B)')
        return float(np.mean(np.diagonal(self.matrix)))


def random_batches(count: int, batch_size: int, seed: int, num_samples: Optional[int] = None) -> List[List[int]]:
    """Random mini-batches of example indices for mini-batch CKA: a permutation of ``range(count)`` drawn with
    `seed` (torch's generator), cut to the first `num_samples`, split into batches of `batch_size`. Nguyen et al.
    average HSIC over random batches: batches read in dataset order (an image folder is sorted by class) each
    hold a few classes and bias the estimate. A last batch of fewer than 4 examples is dropped (unbiased HSIC).
    """
    if batch_size < MIN_BATCH:
        raise InvalidArgumentError(f'batch_size must be at least {MIN_BATCH} (the unbiased HSIC), got {batch_size}')
    if num_samples is not None and num_samples < 1:
        raise InvalidArgumentError(f'num_samples must be positive, got {num_samples}')
    n = count if num_samples is None else min(num_samples, count)
    if n < MIN_BATCH:
        raise InvalidArgumentError(f'mini-batch CKA needs at least {MIN_BATCH} examples, got {n}')
    order = torch.randperm(count, generator=torch.Generator().manual_seed(seed))[:n].tolist()
    batches = [order[i:i + batch_size] for i in range(0, n, batch_size)]
    return batches if len(batches[-1]) >= MIN_BATCH else batches[:-1]


def _inputs(batch: Any) -> torch.Tensor:
    if isinstance(batch, (tuple, list)) and batch:
        batch = batch[0]  # (input, target) as a DataLoader yields
    if not isinstance(batch, torch.Tensor):
        raise InvalidArgumentError(f'each batch must be an input tensor or an (input, target) pair, got '
                                   f'{type(batch).__name__}')
    return batch


def _paired(batches: Iterable[Any], batches_b: Iterable[Any]) -> Iterator[Tuple[Any, Any]]:
    """(batch, batch_b) pairs; refuses lists of different lengths (zip would drop the longer one's tail)."""
    end = object()
    for count, (a, b) in enumerate(itertools.zip_longest(batches, batches_b, fillvalue=end)):
        if a is end or b is end:
            short, long = ('batches', 'batches_b') if a is end else ('batches_b', 'batches')
            raise InvalidArgumentError(f'{short} ends after {count} batches while {long} has more: they must hold '
                                       f'the same examples, batch for batch')
        yield a, b


def _device(model: nn.Module) -> torch.device:
    return next(iter(model.parameters())).device


@torch.no_grad()
def _grams(model: nn.Module, names: List[str], x: torch.Tensor) -> Tuple[torch.Tensor, ...]:
    with capture_branches(model) as store:
        model(x.to(_device(model)))
    missing = [n for n in names if n not in store]
    if missing:
        raise InvalidArgumentError(f'the forward of {type(model).__name__} did not run its mixing branches {missing}')
    return tuple(gram(store[n].cpu()) for n in names)


def cka_matrix(
        model_a: nn.Module,
        model_b: nn.Module,
        batches: Iterable[Any],
        batches_b: Optional[Iterable[Any]] = None,
) -> CkaMatrix:
    """Mini-batch linear CKA (Nguyen et al. 2021, §3.1(2)) between every mixing branch of `model_a` and of
    `model_b`, each taken just before its skip connection (see `capture_branches`): an L-block Mixer gives 2L
    features, an SW-MLP one per block.

    Args:
        model_a: A PK-family Mixer or SW-MLP (run in eval mode, restored afterwards).
        model_b: Another (or the same) model.
        batches: Input batches (B, C, H, W), or (input, target) pairs; each batch needs B ≥ 4 (unbiased HSIC).
            The HSIC terms are summed over the batches, then the ratio is taken. The batches should be random
            draws of the data (`random_batches`), not consecutive runs of a class-sorted dataset.
        batches_b: The same examples, transformed for `model_b` (another normalisation); default `batches`.
    """
    names_a = [n for n, _ in mixing_branches(model_a)]
    names_b = [n for n, _ in mixing_branches(model_b)]
    acc = HsicAccumulator(len(names_a), len(names_b))
    modes = model_a.training, model_b.training
    model_a.eval()
    model_b.eval()
    try:
        pairs = _paired(batches, batches_b) if batches_b is not None else ((b, b) for b in batches)
        for batch_a, batch_b in pairs:
            x_a, x_b = _inputs(batch_a), _inputs(batch_b)
            if x_a.shape[0] != x_b.shape[0]:
                raise InvalidArgumentError(f'batches and batches_b disagree on the batch size: {x_a.shape[0]} != '
                                           f'{x_b.shape[0]}')
            grams_a = _grams(model_a, names_a, x_a)
            same = model_b is model_a and batches_b is None
            acc.update(grams_a, grams_a if same else _grams(model_b, names_b, x_b))
    finally:
        model_a.train(modes[0])
        model_b.train(modes[1])
    check_self_hsic(acc.xx, names_a, 'model_a', acc.xx_scale)
    check_self_hsic(acc.yy, names_b, 'model_b', acc.yy_scale)
    return CkaMatrix(acc.cka().numpy(), names_a, names_b, acc.examples, acc.batches)
