"""One rank of the distributed tests (run under torchrun by tests/test_distributed.py; gloo on CPU).

Usage: torchrun --nproc_per_node=2 tests/dist_worker.py MODE OUT_DIR
  sync        DDP the way train.py does it (ClassificationTask.prepare_distributed(device_ids=[cpu]) with
              timm_pkmixer.cpu_ddp), train STEPS steps of AdamW on each rank's shard of one global batch,
              and record what every rank holds.
  wrong_seed  each rank asks for another perm_seed: creating the model works, wrapping it in DDP the way
              train.py does must fail on every rank.
  solo        rank 0 alone creates an RP model (export, push, evaluation): it must return at once.
  fsdp2       FSDP2 as large-model users run it: the model built on the meta device, fully_shard per block and
              at the root, to_empty, init_non_persistent_buffers, rank 0's initial weights broadcast, STEPS
              steps of AdamW on each rank's shard of one global batch; warnings recorded.
  raw_ddp     without timm_pkmixer.cpu_ddp, train.py's DDP call must fail with PyTorch's CPU error.
  lonely      check_replicas called by one rank alone (each rank on its own group): a clear error after the
              timeout, naming the fault; then both ranks call it together and it passes.
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
    import timm_pkmixer.replica_check  # noqa: F401  (what every recipe's device_modules does)

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
    import timm_pkmixer.replica_check  # noqa: F401
    rank = dist.get_rank()
    model = timm.create_model(MODEL, **dict(MODEL_KWARGS, perm_seed=rank))  # no communication here
    task = ClassificationTask(model, torch.nn.CrossEntropyLoss(), device=torch.device('cpu'), verbose=False)
    try:
        task.prepare_distributed(device_ids=[torch.device('cpu')], broadcast_buffers=False)  # train.py --no-ddp-bb
    except RuntimeError as e:
        return {'refused': True, 'message': str(e), 'created': True}
    return {'refused': False, 'message': '', 'created': True}


def run_unchecked(out: Path) -> dict:
    """Ranks with different perm_seed and no replica check: what DDP's own buffer broadcast does."""
    from timm.task import ClassificationTask

    import timm_pkmixer.cpu_ddp  # noqa: F401  (the replica check is not installed)
    rank, report = dist.get_rank(), {}
    for broadcast in (True, False):
        model = timm.create_model(MODEL, **dict(MODEL_KWARGS, perm_seed=rank))
        task = ClassificationTask(model, torch.nn.CrossEntropyLoss(), device=torch.device('cpu'), verbose=False)
        task.prepare_distributed(device_ids=[torch.device('cpu')], broadcast_buffers=broadcast)
        perms = flat([b for n, b in model.named_buffers() if n.endswith(('.index', '.inverse'))])
        report[f'perms_same_broadcast_{broadcast}'] = same_on_all_ranks(perms)
    return report


def run_half_checked(out: Path) -> dict:
    """The replica check installed on rank 0 only (``--device-modules timm_pkmixer.replica_check`` given to one
    process), both ranks with the same perm_seed: rank 0 must say that the check is missing on rank 1."""
    from timm.task import ClassificationTask

    import timm_pkmixer.cpu_ddp  # noqa: F401
    rank = dist.get_rank()
    if rank == 0:
        timm_pkmixer.install_ddp_replica_check()
    model = timm.create_model(MODEL, **MODEL_KWARGS)
    task = ClassificationTask(model, torch.nn.CrossEntropyLoss(), device=torch.device('cpu'), verbose=False)
    try:
        task.prepare_distributed(device_ids=[torch.device('cpu')], broadcast_buffers=True)
    except Exception as e:  # noqa: BLE001  (rank 1's error is DDP's own, whatever it is)
        return {'refused': True, 'message': str(e), 'type': type(e).__name__}
    return {'refused': False, 'message': ''}


def run_solo(out: Path) -> dict:
    import time
    report = {}
    if dist.get_rank() == 0:
        start = time.perf_counter()
        timm.create_model(MODEL, **MODEL_KWARGS)
        report['seconds'] = time.perf_counter() - start
    dist.barrier()
    return report


def run_lonely(out: Path) -> dict:
    """Each rank alone calls check_replicas on a group of both ranks (rank 0 on one group, rank 1 on another):
    each must give up after its timeout with an error saying that every rank must call it; a call by both
    ranks on the default group still passes."""
    import time
    rank = dist.get_rank()
    groups = [dist.new_group([0, 1]), dist.new_group([0, 1])]  # every rank creates both, in the same order
    model = timm.create_model(MODEL, **MODEL_KWARGS)
    start = time.perf_counter()
    try:
        timm_pkmixer.check_replicas(model, group=groups[rank], timeout=2)
        report = {'refused': False, 'message': ''}
    except RuntimeError as e:
        report = {'refused': True, 'message': str(e), 'type': type(e).__name__}
    report['seconds'] = time.perf_counter() - start
    dist.barrier()  # both ranks start the next call together, however unevenly a busy machine ran them so far
    timm_pkmixer.check_replicas(model, timeout=60)  # both ranks: passes
    report['together'] = True
    return report


def initial_state_dict() -> dict:
    """The weights both the FSDP2 run and the one-process reference start from."""
    torch.manual_seed(1234)
    return timm.create_model(MODEL, **MODEL_KWARGS).state_dict()


def run_fsdp2(out: Path) -> dict:
    import warnings

    from timm.optim import create_optimizer_v2
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict, set_model_state_dict
    from torch.distributed.fsdp import fully_shard
    rank, world = dist.get_rank(), dist.get_world_size()
    report = {}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        model = timm.create_model(MODEL, device='meta', **MODEL_KWARGS)
        for block in model.blocks:
            fully_shard(block)
        fully_shard(model)
        model.to_empty(device='cpu')
        perm = model.blocks[0].mlp_tokens.perm_in  # (a layer below FSDP2's hooks: a failed forward of the
        try:                                        # wrapped model would leave its parameters unsharded)
            perm(torch.zeros(1, perm.num))
            report['forgotten_init'] = 'no error'
        except RuntimeError as e:  # the derived buffers were never computed: a clear error says what to call
            report['forgotten_init'] = str(e)
        model.init_non_persistent_buffers()
        timm_pkmixer.check_replicas(model)  # the FSDP2 path has no DDP hook: check the replicas explicitly
        full = initial_state_dict() if rank == 0 else {}
        set_model_state_dict(model, full, options=StateDictOptions(full_state_dict=True, broadcast_from_rank0=True))
        optimizer = create_optimizer_v2(model, 'adamw', lr=1e-3, weight_decay=0.05)
        x, y = global_batch()
        shard = GLOBAL_BATCH // world
        report['losses'] = []
        for step in range(STEPS):
            xs, ys = x[step, rank * shard:(rank + 1) * shard], y[step, rank * shard:(rank + 1) * shard]
            optimizer.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(xs), ys)
            loss.backward()
            optimizer.step()
            mean_loss = loss.detach().clone()
            dist.all_reduce(mean_loss)
            report['losses'].append(mean_loss.item() / world)
        end = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
    report['warnings'] = [str(w.message) for w in caught]
    report['perms_correct'] = all(
        torch.equal(m.index.long(), m.permutation()) for m in model.modules() if hasattr(m, 'permutation')
        and callable(m.permutation))
    if rank == 0:
        torch.save(end, out / 'fsdp2_end.pt')
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
    report = {'sync': run_sync, 'wrong_seed': run_wrong_seed, 'solo': run_solo, 'fsdp2': run_fsdp2,
              'unchecked': run_unchecked, 'half_checked': run_half_checked,
              'raw_ddp': run_raw_ddp, 'lonely': run_lonely}[mode](out)
    report['world_size'] = dist.get_world_size()
    (out / f'rank{dist.get_rank()}.json').write_text(json.dumps(report))
    # no rank tears gloo down while another still works (rank 0 saves the FSDP2 end state alone): CI once saw
    # rank 1 abort in teardown with 'terminate called without an active exception'
    dist.barrier()
    dist.destroy_process_group()


if __name__ == '__main__':
    main()
