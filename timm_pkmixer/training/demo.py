"""`pkmixer demo`: train an RP S-Mixer and its normal twin on the CPU, on Fashion-MNIST whenever it can be had.

The data (:mod:`.demo_data`): Fashion-MNIST, prepared once under a cache folder (Debian's files, torchvision's
download) and trained on a class-balanced subset; Synthetic Shapes, drawn from the seed, where Fashion-MNIST cannot be
had; or any ImageFolder (``data_dir``). The first line says which. Training uses timm's own pieces: dataset, loader
and augmentation, AdamW, a warm-up cosine schedule and label smoothing. Each model is trained with `seeds` seeds
(``seed``, ``seed + 1``, …), so that the reading's noise covers the run-to-run variation as well as the validation
sample. Reproducible: Python's, numpy's and torch's generators are seeded per run and the data are a function of the
seed, so the same command and seed print the same numbers (with the same threads, which the first line shows).
Progress (the threads, the data, each run and epoch) is logged; the results' table, how long it trained, what RP
is, what the paper predicts and the reading are :func:`summary_lines`. A run whose loss is not finite or whose update
overflows (a learning rate far too large) is stopped there and shown as diverged; :func:`check_converged` names such
runs and what to do.
"""
import logging
import math
import random
import tempfile
import time
from dataclasses import dataclass
from typing import List, Optional, Sequence, Tuple

from ..data.demo_data import SHAPES, DemoData, choose_demo_data
from ..errors import InvalidArgumentError
from ..validation import positive_int
from .threads import choose_threads

__all__ = ['DEFAULT_MODELS', 'DATA_CHOICES', 'DemoResult', 'Noise', 'run_demo', 'summary_lines', 'learned_threshold',
           'accuracy_noise', 'reading', 'check_converged']

_logger = logging.getLogger(__name__)

DEFAULT_MODELS = ('s_mixer_rp_s64c64_32', 's_mixer_s64c64_32')
DEFAULT_LR = 2e-3
DATA_CHOICES = ('auto', 'fashion-mnist', 'shapes')  # auto: Fashion-MNIST when it can be had, else the shapes


@dataclass
class DemoResult:
    model: str
    params: int
    width: int
    train_loss: float
    val_acc: float
    seconds: float
    num_classes: int = len(SHAPES)
    val_images: int = 75 * len(SHAPES)  # the default shapes' validation set
    seed: int = 0
    data: str = ''  # what it trained and validated on (the demo data's description)
    family: str = ''  # the model's family: 'RP S-Mixer', 'S-Mixer', ...
    epochs: int = 0
    lr: float = 0.
    diverged: str = ''  # where and how the training diverged ('' when it did not): its loss and accuracy are NaN


def _seed_everything(seed: int) -> None:
    """Python's ``random`` (timm's crops), numpy's and torch's generators (weights, shuffling, flips)."""
    import numpy as np
    import torch
    random.seed(seed)
    np.random.seed(seed % 2 ** 32)
    torch.manual_seed(seed)


def _loaders(model, data: DemoData, batch_size: int):
    from timm.data import create_loader, resolve_data_config
    cfg = resolve_data_config(model=model)
    mean, std = data.mean or cfg['mean'], data.std or cfg['std']
    common = dict(input_size=cfg['input_size'], interpolation=cfg['interpolation'], mean=mean, std=std,
                  crop_pct=cfg['crop_pct'], num_workers=0, use_prefetcher=False, persistent_workers=False)
    train = create_loader(data.train, batch_size=batch_size, is_training=True, **data.augmentation, **common)
    val = create_loader(data.val, batch_size=2 * batch_size, is_training=False, **common)
    return train, val


def _train_one(name: str, data: DemoData, epochs: int, batch_size: int, lr: float, seed: int) -> DemoResult:
    """One run; stopped at the first step whose loss is not finite or whose update overflows (``diverged``)."""
    import timm
    from timm.loss import LabelSmoothingCrossEntropy
    from timm.optim import create_optimizer_v2
    from timm.scheduler import create_scheduler_v2

    _seed_everything(seed)
    model = timm.create_model(name, num_classes=data.num_classes, in_chans=data.in_chans)
    train_loader, val_loader = _loaders(model, data, batch_size)
    optimizer = create_optimizer_v2(model, 'adamw', lr=lr, weight_decay=0.05)
    scheduler, _ = create_scheduler_v2(optimizer, 'cosine', num_epochs=epochs, warmup_epochs=1, warmup_lr=lr / 10,
                                       min_lr=lr / 100, step_on_epochs=False, updates_per_epoch=len(train_loader))
    loss_fn = LabelSmoothingCrossEntropy(smoothing=0.1)
    params = sum(p.numel() for p in model.parameters())
    description = model.describe()
    _logger.info(f'[{name} seed {seed}] {params:,} params, effective width m = {description.width}')

    start, train_loss, val_acc, diverged = time.time(), math.nan, math.nan, ''
    for epoch in range(epochs):
        train_loss, diverged = _train_epoch(model, train_loader, loss_fn, optimizer, scheduler, epoch)
        if diverged:
            _logger.warning(f'[{name} seed {seed}] diverged at {diverged}: stopped')
            train_loss = math.nan
            break
        val_acc = _accuracy(model, val_loader)
        _logger.info(f'[{name} seed {seed}] epoch {epoch + 1}/{epochs}  train loss {train_loss:.4f}  val acc '
                     f'{val_acc:5.1f}%  ({time.time() - start:.1f} s)')
    return DemoResult(name, params, description.width, train_loss, math.nan if diverged else val_acc,
                      time.time() - start, data.num_classes, len(data.val), seed, data.says, description.family,
                      epochs, lr, diverged)


def _train_epoch(model, loader, loss_fn, optimizer, scheduler, epoch: int) -> Tuple[float, str]:
    """(the mean training loss of one epoch, '') or (NaN, where it diverged: a loss that is not finite, or an
    update too large for float32, as AdamW's overflow at a learning rate such as 1e308)."""
    import torch
    model.train()
    total, count = 0., 0
    updates = epoch * len(loader)
    for step, (x, y) in enumerate(loader, 1):
        where = f'epoch {epoch + 1}, step {step}'
        loss = loss_fn(model(x), y)
        if not torch.isfinite(loss):
            return math.nan, f'{where} (loss {loss.item():g})'
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        try:
            optimizer.step()
        except RuntimeError as e:  # the update's step size overflows float32: the values it would give are inf
            if 'overflow' not in str(e):
                raise
            return math.nan, f'{where} (its update overflowed float32)'
        scheduler.step_update(updates + step)  # warm-up over the first epoch, then cosine, step by step
        total, count = total + loss.item() * len(y), count + len(y)
    return total / count, ''


def _accuracy(model, loader) -> float:
    import torch
    model.eval()
    correct, count = 0, 0
    with torch.no_grad():
        for x, y in loader:
            correct += (model(x).argmax(-1) == y).sum().item()
            count += len(y)
    return 100. * correct / count


def _check(models: Sequence[str], data: str, data_dir: Optional[str], keep_data: Optional[str], **counts) -> None:
    import os

    from ..catalog import check_model_name
    from ..validation import choice
    for name in models:
        check_model_name(name)
    for key, value in counts.items():
        positive_int(key, value)
    choice('data', data, DATA_CHOICES)
    if data_dir is not None and keep_data is not None:
        raise InvalidArgumentError('keep_data writes the synthetic data set; with data_dir there is none to keep')
    if data_dir is not None and not os.path.isdir(data_dir):
        raise FileNotFoundError(2, 'no such data folder', data_dir)
    if keep_data is not None and os.path.exists(keep_data) and (not os.path.isdir(keep_data) or os.listdir(keep_data)):
        raise InvalidArgumentError(f'keep_data: {keep_data} exists and is not an empty folder')


def run_demo(
        models: Sequence[str] = DEFAULT_MODELS,
        data: str = 'auto',
        data_dir: Optional[str] = None,
        epochs: Optional[int] = None,
        batch_size: int = 64,
        lr: float = DEFAULT_LR,
        seed: int = 0,
        seeds: int = 2,
        train_per_class: Optional[int] = None,
        val_per_class: Optional[int] = None,
        keep_data: Optional[str] = None,
        cache_dir: Optional[str] = None,
        download: bool = True,
        threads: Optional[int] = None,
) -> List[DemoResult]:
    """Train each model with `seeds` seeds (`seed`, `seed` + 1, …) on the demo's data, logging the threads, the
    data and where they come from, and progress per run and epoch; returns the results, in order (their table and
    reading: :func:`summary_lines`).

    Args:
        data: ``auto`` (Fashion-MNIST when it can be had, else Synthetic Shapes), ``fashion-mnist`` or ``shapes``.
        epochs: Default: the data's (:attr:`~.demo_data.DemoData.epochs`: 4 on Fashion-MNIST, 15 on the shapes).
        data_dir: An ImageFolder with train/ and validation/, or a prepared Fashion-MNIST root, instead.
        train_per_class, val_per_class: Images per class of Fashion-MNIST's subset (default
            :data:`~.demo_data.FASHION_PER_CLASS`), or of the shapes' training set (default
            :data:`~.demo_data.SHAPES_PER_CLASS`; a quarter as many validate).
        keep_data: Write Synthetic Shapes into this new or empty folder, keep it and train on it.
        cache_dir: Where Fashion-MNIST is prepared (default: ``demo_cache_dir()``); `download`: torchvision may
            download it when neither the cache nor Debian's copy has it.
        threads: torch threads (default: the idle cores, see `choose_threads`).
    """
    import torch
    counts = dict(train_per_class=train_per_class, val_per_class=val_per_class)
    _check(models, data, data_dir, keep_data, batch_size=batch_size, seeds=seeds,
           **{k: v for k, v in dict(counts, epochs=epochs).items() if v is not None})
    n_threads, why = choose_threads(threads)
    torch.set_num_threads(n_threads)
    _logger.info(f'{n_threads} thread{"s" if n_threads > 1 else ""} ({why})')
    with tempfile.TemporaryDirectory(prefix='pkmixer-demo-') as tmp:
        chosen = choose_demo_data(data, data_dir, keep_data, tmp, seed, train_per_class, val_per_class, cache_dir,
                                  download)
        _logger.info(f'data: {chosen.says}')
        return [_train_one(m, chosen, epochs or chosen.epochs, batch_size, lr, s) for m in models
                for s in range(seed, seed + seeds)]


PAPER = ('The paper (Hayase & Karakida, ICML 2024, Fig. 7): at the same width m, the RP S-Mixer matches or beats '
         'the normal one as the depth grows, and trails it at limited depth (S = C = 128, 4 to 20 blocks, 200 epochs '
         'on CIFAR and STL-10).')
RP = ('RP: Random-Permuted. The RP S-Mixer rearranges its S·C features (S tokens × C channels) by fixed random '
      'permutations, drawn once from a seed, before and after each mixing layer, where the normal S-Mixer '
      'transposes them: the same parameters and the same effective width m = S·C, another sparse weight.')


def summary_lines(results: Sequence[DemoResult]) -> List[str]:
    """What the demo found: the data it trained on (``data: …``, when every run trained on the same), a row per run
    (model, seed, parameters, width m, train loss, validation accuracy, time; ``diverged`` in place of the loss and
    accuracy of a run that diverged), then how long it trained, what RP is (when an RP model ran) and, when the runs
    hold the default RP S-Mixer and its normal twin, what the paper predicts and the :func:`reading` (none when one
    of their runs diverged: :func:`check_converged` says which)."""
    data = {r.data for r in results}
    lines = ([f'data: {data.pop()}'] if len(data) == 1 and '' not in data else []) + _table(results) + ['']
    lines += [_trained(results)] + ([RP] if any('RP' in r.family.split() for r in results) else [])
    rp = [r for r in results if r.model == DEFAULT_MODELS[0]]
    normal = [r for r in results if r.model == DEFAULT_MODELS[1]]
    if rp and normal:
        lines.append(PAPER)
        if not any(r.diverged for r in rp + normal):
            lines.append(reading(rp, normal))
    return lines


def _trained(results: Sequence[DemoResult]) -> str:
    """``trained: 4 epochs per run, 2 seeds per model, AdamW at lr 0.002 …``: a short run, said as such."""
    epochs = sorted({r.epochs for r in results})
    seeds = sorted({sum(r.model == m for r in results) for m in {r.model for r in results}})
    lr = sorted({r.lr for r in results})
    return (f'trained: {"/".join(map(str, epochs))} epoch{"s" if epochs != [1] else ""} per run, '
            f'{"/".join(map(str, seeds))} seed{"s" if seeds != [1] else ""} per model, AdamW at lr '
            f'{"/".join(f"{x:g}" for x in lr)} with a warm-up cosine schedule: a short run')


def check_converged(results: Sequence[DemoResult]) -> None:
    """Raise :class:`InvalidArgumentError` (``lr …``) naming the runs that diverged and what to do, if any did."""
    diverged = [r for r in results if r.diverged]
    if not diverged:
        return
    lr = diverged[0].lr
    which = ', '.join(f'{r.model} seed {r.seed} at {r.diverged}' for r in diverged)
    smaller = f'the default, {DEFAULT_LR:g}' if lr > DEFAULT_LR else f'{lr / 10:g}'
    raise InvalidArgumentError(f'lr {lr:g}: {len(diverged)} of {len(results)} runs diverged: {which}; train with a '
                               f'smaller `lr`, such as {smaller}')


def _table(results: Sequence[DemoResult]) -> List[str]:
    lines = [f'{"model":<26} {"seed":>4} {"params":>9} {"width m":>8} {"train loss":>10} {"val acc":>8} {"time":>7}']
    for r in results:
        scores = (f'{"diverged":>10} {"-":>8}' if r.diverged else f'{r.train_loss:>10.4f} {r.val_acc:>7.1f}%')
        lines.append(f'{r.model:<26} {r.seed:>4} {r.params:>9,} {r.width:>8} {scores} {r.seconds:>6.1f}s')
    return lines


def learned_threshold(num_classes: int) -> float:
    """Validation accuracy (%) a model needs before the demo compares it: halfway from chance to 100 %."""
    chance = 100. / num_classes
    return chance + (100. - chance) / 2


@dataclass(frozen=True)
class Noise:
    """Two standard errors (points) of the difference of two models' mean validation accuracies: `seeds`, the
    run-to-run part, from the seeds' own spread (None with one seed per model: not measured), and `sample`, the
    validation sample's (each accuracy a binomial proportion over its images)."""
    seeds: Optional[float]
    sample: float

    @property
    def total(self) -> Optional[float]:
        return None if self.seeds is None else math.hypot(self.seeds, self.sample)


def _mean(results: Sequence[DemoResult]) -> float:
    return sum(r.val_acc for r in results) / len(results)


def accuracy_noise(a: Sequence[DemoResult], b: Sequence[DemoResult]) -> Noise:
    """The noise of ``mean(a) - mean(b)``: the seeds' pooled variance (in points²) over both models times
    (1/n_a + 1/n_b), and the binomial variance of each mean accuracy over its validation images."""
    dof = len(a) + len(b) - 2
    seeds = None
    if dof > 0:
        pooled = sum((r.val_acc - _mean(g)) ** 2 for g in (a, b) for r in g) / dof
        seeds = 2. * math.sqrt(pooled * (1 / len(a) + 1 / len(b)))
    var = sum((_mean(g) / 100) * (1 - _mean(g) / 100) / max(1, g[0].val_images) for g in (a, b))
    return Noise(seeds, 200. * math.sqrt(var))


DEPTH_STUDY = 'benchmarks/digits/paper_experiments_results/depth/report.md'  # the committed, measured comparison


def reading(rp: Sequence[DemoResult], normal: Sequence[DemoResult]) -> str:
    """One line on what the default comparison (RP S-Mixer runs, then its normal twin's) measured: both mean
    accuracies, their gap and its noise (`accuracy_noise`: the seeds' spread and the validation sample), nothing
    conclusive unless both models are well above chance (`learned_threshold`) and more than one seed measured the
    run-to-run variation. No cause: a short run measures none."""
    first, n = rp[0], min(len(rp), len(normal))
    same = f'Same parameters, same width m = {first.width}: '
    a, b = _mean(rp), _mean(normal)
    over = f', the mean of {len(rp)} seeds each' if len(rp) == len(normal) > 1 else (
        f', the mean of {len(rp)} and {len(normal)} seeds' if n > 1 or len(rp) != len(normal) else '')
    need = learned_threshold(first.num_classes)
    if min(a, b) < need:
        return (same + f'inconclusive. The models reached {a:.1f}% (RP) and {b:.1f}% (normal){over} against '
                f'{100 / first.num_classes:.0f}% by chance: they have not learned the task yet (the demo compares '
                f'them from {need:.1f}% each, halfway from chance to 100%). Train more epochs.')
    gap, noise = a - b, accuracy_noise(rp, normal)
    measured = (f'{a:.1f}% (RP) and {b:.1f}% (normal){over}: the RP S-Mixer '
                + (f'trails the normal one by {-gap:.1f} points' if gap < 0 else
                   f'matched or beat the normal one here (+{gap:.1f} points)'))
    sample = f'{first.val_images} validation images'
    if noise.seeds is None:
        return (same + f'{measured}; one seed per model does not measure the run-to-run variation (the {sample} '
                f'alone give ±{noise.sample:.1f} points), so no difference is shown: two or more seeds measure it.')
    noise_text = (f'the noise of ±{noise.total:.1f} points (two standard errors: ±{noise.seeds:.1f} from the seeds\' '
                  f'spread, ±{noise.sample:.1f} from the {sample})')
    if abs(gap) <= noise.total:
        return same + f'{measured}, within {noise_text}: no difference shown.'
    return (same + f'{measured}, beyond {noise_text}, in {n} seeds of a short run on this small task: a '
            f'measurement, not a cause. Over 5 seeds and depths 4-20 on the 8x8 digits, the committed depth study '
            f'({DEPTH_STUDY}) measured the RP S-Mixer ahead at every depth.')
