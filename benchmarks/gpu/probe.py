"""The timing probe of `run_all.py`: every run of the plan started at once, as its own process, for a few seconds of
training, so that the schedule is chosen from what the runs will really get when they share the device.

One process per recipe (a YAML that `pkmixer sweep` wrote): the recipe's model and optimiser (benchmarks/speed/
rp_cost.py's `Stepper`, train.py's step) and its training loader (rp_cost.py's `epoch_loader`: timm's create_loader
over the prepared Fashion-MNIST, `--workers` processes), at one CPU thread. Each process warms up, writes a ready file
into `--barrier` and waits until all `--count` are ready (so that every measurement overlaps every other), then counts
the training steps it makes in `--seconds` seconds, the device synchronized at both ends, and writes them as JSON:

    python benchmarks/gpu/probe.py RECIPE.yaml --device cuda --data-dir DATA --barrier DIR --count 27 --out X.json

`plan_epochs` turns the probe's rates into the number of epochs that fit the time left.
"""
import argparse
import json
import math
import sys
import time
from pathlib import Path
from typing import Any, Dict, Iterator, Optional, Sequence, Tuple

HERE = Path(__file__).resolve().parent
TRAIN_IMAGES, VAL_IMAGES = 60000, 10000  # Fashion-MNIST's splits: train.py drops the last partial training batch
# an epoch of train.py beyond its training steps: the evaluation pass (10,000 images forward only, about a third of a
# step each: 79 batches ≈ 0.06 of an epoch's 468 steps), the checkpoint and the loaders' restart; a plan's margin
EPOCH_OVERHEAD = 1.16
MEAN_SAFETY = 1.25  # --pace mean: the margin on the work-conserving estimate
READY_TIMEOUT_S = 60.0  # a probe waits this long for the others before it measures (well inside the phase's time)


def recipe_stepper_args(recipe: Dict[str, Any]) -> Tuple[Dict[str, Any], str]:
    """(the recipe without `permutation` in its model_kwargs, the permutation): the arguments of rp_cost.py's
    `Stepper`, which passes the permutation itself."""
    kwargs = dict(recipe.get('model_kwargs') or {})
    permutation = kwargs.pop('permutation', 'normal')
    return dict(recipe, model_kwargs=kwargs), permutation


def _batches(loader) -> Iterator:
    """The loader's batches, epoch after epoch."""
    while True:
        yield from loader


def _wait_for_all(barrier: Path, count: int, timeout: float) -> int:
    """Wait until `count` ready files are in `barrier` (or `timeout` seconds); how many there were."""
    end = time.time() + timeout
    while True:
        ready = sum(1 for _ in barrier.glob('*.ready'))
        if ready >= count or time.time() > end:
            return ready
        time.sleep(0.05)


def probe(recipe_path: str, device_name: str, data_dir: str, barrier: Path, count: int, seconds: float,
          warmup: int, workers: int) -> Dict[str, Any]:
    """Steps per second of one recipe's training while the other probes train beside it (see the module's doc)."""
    started = time.time()
    import torch
    sys.path.insert(0, str(HERE.parent / 'speed'))
    import rp_cost  # benchmarks/speed/rp_cost.py: the step and loader of the RP cost benchmark

    from timm_pkmixer.sweeps.recipes import load_recipe
    torch.set_num_threads(1)
    device = torch.device(device_name)
    recipe = load_recipe(recipe_path)
    stepper_recipe, permutation = recipe_stepper_args(recipe)
    batch = recipe['batch_size']
    stepper = rp_cost.Stepper(stepper_recipe, permutation, 'eager', batch, device)
    loader = rp_cost.epoch_loader(recipe, batch, data_dir, workers, device)
    batches = _batches(loader)
    for _ in range(warmup):
        x, y = next(batches)
        stepper.step(x.to(device), y.to(device))
    rp_cost.synchronize(device)
    ready_at = time.time()
    name = Path(recipe_path).stem
    (barrier / f'{name}.ready').write_text(str(ready_at), encoding='utf-8')
    together = _wait_for_all(barrier, count, READY_TIMEOUT_S)
    rp_cost.synchronize(device)
    start, steps = time.perf_counter(), 0
    while time.perf_counter() - start < seconds:
        x, y = next(batches)
        stepper.step(x.to(device), y.to(device))
        steps += 1
    rp_cost.synchronize(device)
    elapsed = time.perf_counter() - start
    return dict(recipe=name, model=recipe['model'], model_kwargs=recipe.get('model_kwargs') or {}, steps=steps,
                seconds=elapsed, steps_per_s=steps / elapsed, ready_s=ready_at - started, ready_at=ready_at,
                measured_with=together,
                batch=batch)


def plan_epochs(probes: Sequence[Dict[str, Any]], seconds_left: float, startup_s: float, batch: int,
                max_epochs: int, min_epochs: int = 1, train_images: int = TRAIN_IMAGES,
                pace: str = 'slowest') -> Dict[str, Any]:
    """The epochs every run gets when all of them share the device for `seconds_left` seconds, after `startup_s` of
    starting; at most `max_epochs`, at least `min_epochs`. An epoch is `train_images` // `batch` steps at the probed
    rates, ×EPOCH_OVERHEAD for evaluation and checkpoint. `pace`: ``slowest``, the slowest run's rate under full
    sharing (every run sure to finish: the runs that end first leave their share unused in the estimate); ``mean``,
    the device shared work-conservingly (the mean of the runs' times per step, ×MEAN_SAFETY): more epochs, and the
    tail of the slowest runs at risk of the deadline. With the arithmetic, as a sentence."""
    steps = max(1, train_images // batch)
    slowest = min(probes, key=lambda p: p['steps_per_s'])
    step_s = (1 / slowest['steps_per_s'] if pace == 'slowest' else
              MEAN_SAFETY * sum(1 / p['steps_per_s'] for p in probes) / len(probes))
    epoch_s = steps * step_s * EPOCH_OVERHEAD
    fit = math.floor(max(0.0, seconds_left - startup_s) / epoch_s)
    epochs = max(min_epochs, min(max_epochs, fit))
    capped = 'the cap' if fit > max_epochs else 'the floor' if fit < min_epochs else 'the time left'
    rate = (f'the slowest, {slowest["recipe"]}, made {slowest["steps_per_s"]:.2f} steps/s in the probe' if
            pace == 'slowest' else f'their mean time a step ×{MEAN_SAFETY} is {step_s:.3f} s in the probe (the '
                                   f'slowest, {slowest["recipe"]}, {slowest["steps_per_s"]:.2f} steps/s)')
    reason = (f'{len(probes)} runs at once; {rate}: {steps} steps an epoch ×{EPOCH_OVERHEAD} (evaluation, '
              f'checkpoint) = {epoch_s:.1f} s an epoch; {seconds_left:.0f} s left for training, {startup_s:.0f} s '
              f'of it to start: {fit} epochs fit; {epochs} chosen (set by {capped}, cap {max_epochs}, floor '
              f'{min_epochs})')
    return dict(epochs=epochs, fit=fit, epoch_s=epoch_s, pace=pace, slowest=slowest['recipe'],
                steps_per_epoch=steps, estimated_training_s=startup_s + epochs * epoch_s, reason=reason)


def main(argv: Optional[Sequence[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('recipe')
    parser.add_argument('--device', default='cuda')
    parser.add_argument('--data-dir', required=True)
    parser.add_argument('--barrier', required=True, help='a folder the probes of one plan share')
    parser.add_argument('--count', type=int, required=True, help='how many probes run at once')
    parser.add_argument('--seconds', type=float, default=15.0, help='how long each probe counts steps')
    parser.add_argument('--warmup', type=int, default=5, help='steps before the count (the loader started)')
    parser.add_argument('--workers', type=int, default=1, help='data-loading workers (train.py --workers)')
    parser.add_argument('--out', required=True)
    args = parser.parse_args(argv)
    result = probe(args.recipe, args.device, args.data_dir, Path(args.barrier), args.count, args.seconds,
                   args.warmup, args.workers)
    Path(args.out).write_text(json.dumps(result, indent=1), encoding='utf-8')


if __name__ == '__main__':
    main()
