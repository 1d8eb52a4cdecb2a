"""One rank of the distributed tests (run under torchrun by tests/test_distributed.py; gloo on CPU).

Usage: torchrun --nproc_per_node=2 tests/dist_worker.py MODE OUT_DIR
  sync        DDP the way train.py does it (ClassificationTask.prepare_distributed(device_ids=[cpu]) with
              timm_pkmixer.cpu_ddp), train STEPS steps of AdamW on each rank's shard of one global batch,
              and record what every rank holds.
  wrong_seed  each rank asks for another perm_seed: creating the model works, wrapping it in DDP the way
              train.py does must fail on every rank.
  solo        rank 0 alone creates an RP model (export, push, evaluation): it must return at once.
  raw_ddp     without timm_pkmixer.cpu_ddp, train.py's DDP call must fail with PyTorch's CPU error.
"""
import json
import sys
from pathlib import Path

import timm
import torch
import torch.distributed as dist

import timm_pkmixer  # noqa: F401

MODEL = 's_mixer_rp_s64c64_32'
MODEL_KWARGS = dict(num_classes=4, perm_seed=7, num_blocks=2)
STEPS = 3
GLOBAL_BATCH = 8


def global_batch() -> tuple:
    gen = torch.Generator().manual_seed(2024)
    x = torch.randn(STEPS, GLOBAL_BATCH, 3, 32, 32, generator=gen)
    y = torch.randint(0, 4, (STEPS, GLOBAL_BATCH), generator=gen)
    return x, y


def flat(tensors) -> torch.Tensor:
    return torch.cat([t.detach().reshape(-1).double() for t in tensors])


def same_on_all_ranks(t: torch.Tensor) -> bool:
    gathered = [torch.empty_like(t) for _ in range(dist.get_world_size())]
    dist.all_gather(gathered, t)
    return all(torch.equal(g, gathered[0]) for g in gathered)


def run_sync(out: Path) -> dict:
    from timm.optim import create_optimizer_v2
    from timm.task import ClassificationTask

    import timm_pkmixer.cpu_ddp  # noqa: F401  (what --device-modules timm_pkmixer.cpu_ddp does)

    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(42 + rank)  # train.py seeds every rank differently: initial weights differ
    model = timm.create_model(MODEL, **MODEL_KWARGS)
    report = {'init_weights_differ': not same_on_all_ranks(flat(model.parameters()))}
    task = ClassificationTask(model, torch.nn.CrossEntropyLoss(), device=torch.device('cpu'), verbose=False)
    task.prepare_distributed(device_ids=[torch.device('cpu')], broadcast_buffers=True)  # train.py's call
    ddp = task.get_trainable_module()
    report['ddp_class'] = type(ddp).__name__
    perms = flat([b for n, b in model.named_buffers() if n.endswith(('.index', '.inverse', '.digest'))])
    report['perms_same'] = same_on_all_ranks(perms)
    report['params_same_at_start'] = same_on_all_ranks(flat(model.parameters()))
    if rank == 0:
        torch.save({k: v.clone() for k, v in model.state_dict().items()}, out / 'start.pt')

    optimizer = create_optimizer_v2(model, 'adamw', lr=1e-3, weight_decay=0.05)
    x, y = global_batch()
    shard = GLOBAL_BATCH // world
    report['losses'], report['grads_same'] = [], []
    for step in range(STEPS):
        xs, ys = x[step, rank * shard:(rank + 1) * shard], y[step, rank * shard:(rank + 1) * shard]
        optimizer.zero_grad()
        loss = task(xs, ys)['loss']
        loss.backward()
        report['grads_same'].append(same_on_all_ranks(flat(p.grad for p in model.parameters())))
        optimizer.step()
        mean_loss = loss.detach().clone()
        dist.all_reduce(mean_loss)
        report['losses'].append(mean_loss.item() / world)
    report['params_same_at_end'] = same_on_all_ranks(flat(model.parameters()))
    report['perms_same_at_end'] = same_on_all_ranks(
        flat([b for n, b in model.named_buffers() if n.endswith(('.index', '.inverse', '.digest'))]))
    if rank == 0:
        torch.save({k: v.clone() for k, v in model.state_dict().items()}, out / 'end.pt')
    return report


def run_wrong_seed(out: Path) -> dict:
    from timm.task import ClassificationTask

    import timm_pkmixer.cpu_ddp  # noqa: F401
    rank = dist.get_rank()
    model = timm.create_model(MODEL, **dict(MODEL_KWARGS, perm_seed=rank))  # no communication here
    task = ClassificationTask(model, torch.nn.CrossEntropyLoss(), device=torch.device('cpu'), verbose=False)
    try:
        task.prepare_distributed(device_ids=[torch.device('cpu')], broadcast_buffers=False)  # train.py --no-ddp-bb
    except RuntimeError as e:
        return {'refused': True, 'message': str(e), 'created': True}
    return {'refused': False, 'message': '', 'created': True}


def run_solo(out: Path) -> dict:
    import time
    report = {}
    if dist.get_rank() == 0:
        start = time.perf_counter()
        timm.create_model(MODEL, **MODEL_KWARGS)
        report['seconds'] = time.perf_counter() - start
    dist.barrier()
    return report


def run_raw_ddp(out: Path) -> dict:
    from timm.task import ClassificationTask
    model = timm.create_model('s_mixer_s64c64_32', num_classes=4, num_blocks=1)
    task = ClassificationTask(model, torch.nn.CrossEntropyLoss(), device=torch.device('cpu'), verbose=False)
    try:
        task.prepare_distributed(device_ids=[torch.device('cpu')])
    except ValueError as e:
        return {'refused': True, 'message': str(e)}
    return {'refused': False, 'message': ''}


def main() -> None:
    mode, out = sys.argv[1], Path(sys.argv[2])
    dist.init_process_group('gloo')
    torch.set_num_threads(1)
    report = {'sync': run_sync, 'wrong_seed': run_wrong_seed, 'solo': run_solo, 'raw_ddp': run_raw_ddp}[mode](out)
    report['world_size'] = dist.get_world_size()
    (out / f'rank{dist.get_rank()}.json').write_text(json.dumps(report))
    dist.destroy_process_group()


if __name__ == '__main__':
    main()
