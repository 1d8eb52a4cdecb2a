"""Data-parallel training with 2 gloo processes under torchrun: replicas stay identical and match one process;
check_replicas refuses bad arguments by name."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import timm
import torch
from timm.optim import create_optimizer_v2

from timm_pkmixer.distributed import check_replicas
from timm_pkmixer.errors import ArgumentTypeError, InvalidArgumentError

from conftest import RP, small

sys.path.insert(0, str(Path(__file__).parent))
import dist_worker  # noqa: E402

WORKER = Path(__file__).parent / 'dist_worker.py'


def torchrun(mode: str, out: Path, env_extra: dict = None) -> list:
    env = dict(os.environ, OMP_NUM_THREADS='1', **(env_extra or {}))
    cmd = [sys.executable, '-m', 'torch.distributed.run', '--standalone', '--nproc_per_node=2', str(WORKER), mode,
           str(out)]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, f'torchrun failed:\n{proc.stdout}\n{proc.stderr}'
    return [json.loads((out / f'rank{r}.json').read_text()) for r in range(2)]


@pytest.fixture(scope='module')
def sync_run(tmp_path_factory):
    out = tmp_path_factory.mktemp('ddp')
    return out, torchrun('sync', out)


def test_ranks_hold_identical_permutations_and_parameters(sync_run):
    _, reports = sync_run
    for r in reports:
        assert r['world_size'] == 2
        assert r['ddp_class'] == 'DistributedDataParallel'  # torch's own class: nothing replaced it
        assert r['init_weights_differ']  # each rank initialised its own weights (seed + rank, as train.py)...
        assert r['params_same_at_start']  # ...and DDP made them rank 0's
        assert r['perms_same'] and r['perms_same_at_end']
        assert r['grads_same'] == [True] * dist_worker.STEPS  # gradients are synchronised at every step
        assert r['params_same_at_end']
    assert reports[0]['losses'] == reports[1]['losses']


def one_process(start: dict) -> tuple:
    """The reference: STEPS AdamW steps in one process on the whole global batch; (model, losses)."""
    model = timm.create_model(dist_worker.MODEL, **dist_worker.MODEL_KWARGS)
    model.load_state_dict(start)
    optimizer = create_optimizer_v2(model, 'adamw', lr=1e-3, weight_decay=0.05)
    x, y = dist_worker.global_batch()
    losses = []
    for step in range(dist_worker.STEPS):
        optimizer.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x[step]), y[step])
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return model, losses


def test_ddp_matches_one_process_on_the_same_global_batch(sync_run):
    out, reports = sync_run
    start, end = torch.load(out / 'start.pt'), torch.load(out / 'end.pt')
    model, losses = one_process(start)
    assert losses == pytest.approx(reports[0]['losses'], rel=1e-5, abs=1e-6)
    moved = 0.
    for name, value in model.state_dict().items():
        torch.testing.assert_close(value, end[name], rtol=1e-5, atol=1e-6, msg=name)
        if value.is_floating_point():
            moved = max(moved, (value - start[name]).abs().max().item())
    assert moved > 1e-4  # the comparison is not between untrained models


def test_ranks_with_different_permutation_seeds_are_refused(tmp_path):
    reports = torchrun('wrong_seed', tmp_path)
    for r in reports:
        assert r['created']  # creating a model does no communication...
        assert r['refused'], 'a rank wrapped a model whose permutations differ from the other rank'  # ...DDP does
        assert 'ranks hold different permutations' in r['message']
        assert 'ranks [0]' in r['message'] and 'ranks [1]' in r['message']


def two_processes(mode: str, out: Path) -> list:
    """The ranks as two plain processes (no torchrun agent, which would kill the one rank when the other fails):
    (exit status, report or None) per rank."""
    import socket
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        port = s.getsockname()[1]
    procs = []
    for rank in range(2):
        env = dict(os.environ, OMP_NUM_THREADS='1', MASTER_ADDR='127.0.0.1', MASTER_PORT=str(port), RANK=str(rank),
                   LOCAL_RANK=str(rank), WORLD_SIZE='2')
        procs.append(subprocess.Popen([sys.executable, str(WORKER), mode, str(out)], env=env,
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    codes = [p.wait(timeout=600) for p in procs]
    return [(code, json.loads(path.read_text()) if path.is_file() else None)
            for code, path in zip(codes, (out / f'rank{r}.json' for r in range(2)))]


def test_a_replica_check_on_one_rank_only_says_it_is_missing_on_the_other(tmp_path):
    """timm_pkmixer.replica_check imported by rank 0 alone, the same perm_seed on both ranks: rank 0 must not
    blame the seeds (or a wait) but say that the check is missing on the other rank and how to run it there."""
    (code0, report0), (code1, report1) = two_processes('half_checked', tmp_path)
    assert report0 is not None and report0['refused'], report0
    assert report0['type'] == 'ReplicaCheckMissingError', report0
    assert 'the replica check' in report0['message'] and 'missing on' in report0['message']
    assert 'import timm_pkmixer.replica_check in every process' in report0['message']
    assert 'different perm' not in report0['message'] and 'waited' not in report0['message']
    assert code1 != 0 or report1['refused']  # rank 1 (no check) cannot wrap the model alone either


def test_what_differs_between_ranks_is_named():
    """The verdict on the gathered messages (None: a rank whose message was no replica check's)."""
    from timm_pkmixer.distributed.replicas import ReplicaCheckMissingError, ReplicaMismatchError, _refuse_differences
    _refuse_differences(['ab', 'ab'], 'PKMixer')  # the same structure: nothing to say
    with pytest.raises(ReplicaCheckMissingError, match=r'^PKMixer: the replica check is missing on ranks \[1, 2\]: '
                                                       r'ranks \[0\] ran it'):
        _refuse_differences(['ab', None, None], 'PKMixer')
    with pytest.raises(ReplicaMismatchError, match=r'ranks hold different permutations.*ranks \[0\]: ab; '
                                                   r'ranks \[1\]: cd'):
        _refuse_differences(['ab', 'cd'], 'PKMixer')


def test_one_rank_alone_creates_a_model_at_once(tmp_path):
    reports = torchrun('solo', tmp_path)
    # no wait for the other rank: the wait it replaced was check_replicas's 300 s; half of that tells them apart
    # on any machine, however busy (a wall-clock bound near the idle time failed under load)
    assert reports[0]['seconds'] < 150 and 'seconds' not in reports[1]


def test_check_replicas_called_on_one_rank_alone_says_so_after_its_timeout(tmp_path):
    reports = torchrun('lonely', tmp_path)
    for rank, r in enumerate(reports):
        assert r['refused'] and r['type'] == 'ReplicaCheckTimeoutError', r
        assert 2 <= r['seconds'] < 900  # the given timeout, not the process group's 1800 s (a margin for any load)
        assert f'waited 2 s on rank {rank}' in r['message']
        assert 'every rank of the group must call check_replicas' in r['message']
        assert r['together']  # a call by every rank still passes


def test_the_check_can_be_switched_off(tmp_path):
    reports = torchrun('wrong_seed', tmp_path, {'TIMM_PKMIXER_CHECK_REPLICAS': '0'})
    assert [r['refused'] for r in reports] == [False, False]


def test_without_the_check_ddp_broadcast_gives_rank_0s_permutations(tmp_path):
    """What the README says of DDP without the replica check: its initial buffer broadcast (train.py's default)
    makes every rank hold rank 0's permutations; with --no-ddp-bb the ranks keep different ones, silently."""
    for r in torchrun('unchecked', tmp_path):
        assert r['perms_same_broadcast_True'] is True
        assert r['perms_same_broadcast_False'] is False


def test_train_py_ddp_call_fails_on_cpu_without_cpu_ddp(tmp_path):
    # What timm_pkmixer.cpu_ddp fixes: train.py's DDP(model, device_ids=[cpu]) is refused by PyTorch.
    reports = torchrun('raw_ddp', tmp_path)
    for r in reports:
        assert r['refused'] and 'device_ids' in r['message']


def test_fsdp2_on_a_meta_model_trains_like_one_process(tmp_path):
    """FSDP2 (fully_shard) on a model built on the meta device, 2 gloo processes: after to_empty the permutations
    are refused until computed; then 3 AdamW steps equal one process on the same global batch, and no FSDP2
    warning about blocks returning views."""
    reports = torchrun('fsdp2', tmp_path)
    for r in reports:
        assert 'init_non_persistent_buffers()' in r['forgotten_init']
        assert r['perms_correct']
        assert not [w for w in r['warnings'] if 'view' in w], r['warnings']
    start = dist_worker.initial_state_dict()
    model, losses = one_process(start)
    assert losses == pytest.approx(reports[0]['losses'], rel=1e-5, abs=1e-6)
    end = torch.load(tmp_path / 'fsdp2_end.pt')
    for name, value in model.state_dict().items():
        torch.testing.assert_close(end[name], value, rtol=1e-5, atol=1e-6, msg=name)
    assert max((model.state_dict()[k] - start[k]).abs().max().item() for k in start
               if start[k].is_floating_point()) > 1e-4  # the weights moved


@pytest.mark.parametrize('model,group,timeout,error,match', [
    (None, None, 300, ArgumentTypeError, r'model must be the torch\.nn\.Module .*got NoneType'),
    ('rp_mixer_b_w', None, 300, ArgumentTypeError, r'model must be the torch\.nn\.Module .*got str'),
    ('state_dict', None, 300, ArgumentTypeError, r'model must be .*got OrderedDict \(a state dict\? pass the model'),
    ([1, 2], None, 300, ArgumentTypeError, r'model must be .*got list'),
    ('model', 'not a group', 300, ArgumentTypeError, r"group must be a torch\.distributed\.ProcessGroup .*"
                                                     r"got 'not a group' \(str\)"),
    ('model', 3, 300, ArgumentTypeError, r'group must be a torch\.distributed\.ProcessGroup .*got 3 \(int\)'),
    ('model', None, -1, InvalidArgumentError, 'timeout must be positive, got -1'),
    ('model', None, '5', ArgumentTypeError, r"timeout must be a number, got '5' \(str\)"),
])
def test_d_check_replicas_refuses_bad_arguments_by_name(model, group, timeout, error, match):
    rp = small(RP)
    if model in ('state_dict', 'model'):
        model = rp.state_dict() if model == 'state_dict' else rp
    with pytest.raises(error, match=match):
        check_replicas(model, group=group, timeout=timeout)
