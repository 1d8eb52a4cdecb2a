"""Resume as train.py does (CheckpointSaver → resume_task_checkpoint): same permutations, same next losses."""
import argparse
import json
import textwrap

import pytest
import timm
import torch
from timm.optim import create_optimizer_v2
from timm.utils import CheckpointSaver

from conftest import run_python

task_api = pytest.importorskip('timm.task', reason='timm.task (train.py\'s resume path) needs timm >= 1.0.25')

MODEL = 's_mixer_rp_s64c64_32'
KWARGS = dict(num_classes=4, perm_seed=11, num_blocks=3)
SETUP = textwrap.dedent(f'''
    import torch, timm
    import timm_pkmixer
    from timm.optim import create_optimizer_v2
    from timm.task import ClassificationTask
    MODEL, KWARGS = {MODEL!r}, {KWARGS!r}
    gen = torch.Generator().manual_seed(7)
    BATCHES = [(torch.randn(8, 3, 32, 32, generator=gen), torch.randint(0, 4, (8,), generator=gen)) for _ in range(4)]

    def train(model, optimizer, batches):
        task = ClassificationTask(model, torch.nn.CrossEntropyLoss(), device=torch.device('cpu'), verbose=False)
        losses = []
        for x, y in batches:
            optimizer.zero_grad()
            loss = task(x, y)['loss']
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        return losses
''')
namespace: dict = {}
exec(SETUP, namespace)


def fresh(seed: int):
    torch.manual_seed(seed)
    model = timm.create_model(MODEL, **KWARGS)
    return model, create_optimizer_v2(model, 'adamw', lr=1e-3, weight_decay=0.05)


def test_resumed_run_continues_like_an_uninterrupted_one(tmp_path):
    train, batches = namespace['train'], namespace['BATCHES']
    model, optimizer = fresh(0)
    losses = train(model, optimizer, batches)  # the uninterrupted run
    torch.save(model.state_dict(), tmp_path / 'uninterrupted.pt')

    model, optimizer = fresh(0)
    first = train(model, optimizer, batches[:2])
    assert first == losses[:2]
    saver = CheckpointSaver(model, optimizer, args=argparse.Namespace(model=MODEL, model_kwargs=KWARGS),
                            checkpoint_dir=str(tmp_path), recovery_dir=str(tmp_path), max_history=1)
    saver.save_checkpoint(epoch=0, metric=first[-1])
    perms = {n: b for n, b in model.named_buffers() if n.endswith('.index')}
    assert len(perms) == 4 * 3  # J1 and J2 of the token and the channel layer of each block
    torch.save(perms, tmp_path / 'perms.pt')

    # A new interpreter (permutations rebuilt from perm_seed, other initial weights), resumed as train.py does.
    code = SETUP + textwrap.dedent(f'''
        import json
        from timm.task import resume_task_checkpoint
        torch.manual_seed(999)
        model = timm.create_model(MODEL, **KWARGS)
        optimizer = create_optimizer_v2(model, 'adamw', lr=1e-3, weight_decay=0.05)
        task = ClassificationTask(model, torch.nn.CrossEntropyLoss(), device=torch.device('cpu'), verbose=False)
        epoch = resume_task_checkpoint(task, {str(tmp_path / 'last.pth.tar')!r}, optimizer=optimizer, log_info=False)
        saved = torch.load({str(tmp_path / 'perms.pt')!r})
        same_perms = all(torch.equal(b, saved[n]) for n, b in model.named_buffers() if n.endswith('.index'))
        losses = train(model, optimizer, BATCHES[2:])
        final = torch.load({str(tmp_path / 'uninterrupted.pt')!r})
        max_diff = max((v - final[k]).abs().max().item() for k, v in model.state_dict().items()
                       if v.is_floating_point())
        print(json.dumps(dict(epoch=epoch, same_perms=same_perms, losses=losses, max_diff=max_diff)))
    ''')
    result = json.loads(run_python(code).stdout.strip().splitlines()[-1])
    assert result['epoch'] == 1  # train.py resumes at the next epoch
    assert result['same_perms']
    assert result['losses'] == pytest.approx(losses[2:], rel=1e-6)
    assert result['max_diff'] < 1e-6


def test_resuming_into_other_permutations_is_refused(tmp_path):
    model, optimizer = fresh(0)
    CheckpointSaver(model, optimizer, checkpoint_dir=str(tmp_path), recovery_dir=str(tmp_path),
                    max_history=1).save_checkpoint(epoch=0, metric=0.)
    other = timm.create_model(MODEL, **dict(KWARGS, perm_seed=12))
    task = task_api.ClassificationTask(other, torch.nn.CrossEntropyLoss(), device=torch.device('cpu'), verbose=False)
    with pytest.raises(RuntimeError, match=r'blocks\.0\.mlp_tokens\.perm_in\.digest: .* expected for perm_seed=12'):
        task_api.resume_task_checkpoint(task, str(tmp_path / 'last.pth.tar'), log_info=False)
