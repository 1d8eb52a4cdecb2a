"""What the fault suite found in the readers of run folders (issue 52, round 5), each refused by name or handled:
a restart into a run folder is not a resume; an abandoned start's rows go; NaN, ±inf and 1e400 are said, never left
out, and make a run failed that resuming cannot mend; rows past the schedule are a problem, not the result; an
args.yaml that is a symlink to nothing or a loop is named; symlinked run folders are followed, each folder read once,
and runs of the same name are named apart; an edited schedule record is not trusted; a checkpoint says its epoch and
arguments without running code."""
import argparse
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml
from test_run_folder import write_run

from timm_pkmixer.runs.run_folder import (
    LastEpoch,
    RunFileError,
    distinct_names,
    find_runs,
    last_epoch,
    read_checkpoint_info,
    read_run,
    read_summary,
    run_state,
    run_state_with_schedule,
    schedule_record,
    search_runs,
)

HEADER = 'epoch,train_loss,eval_loss,eval_top1,eval_top5,lr\n'


def _summary(folder: Path, *starts) -> Path:
    """summary.csv of one or more starts of train.py, each its header then its rows (epoch, top-1)."""
    text = ''.join(HEADER + ''.join(f'{e},1.0,0.5,{top1},100.0,0.01\n' for e, top1 in rows) for rows in starts)
    (folder / 'summary.csv').write_text(text)
    return folder


# ---------------------------------------------------------------------------------------------- summary.csv

def test_a_restart_is_not_a_resume_and_the_earlier_starts_rows_go(tmp_path):
    """last.pth.tar gone, train.py started over into the folder: its header again, then epoch 0. Not "resumed at
    epoch 0"; the first start's rows (a longer one's epoch 2 among them) are not mixed into the run's."""
    folder = write_run(tmp_path, 'r', rows=())
    _summary(folder, [(0, 50.), (1, 60.), (2, 70.)], [(0, 51.), (1, 61.)])
    summary = read_summary(folder / 'summary.csv')
    assert (summary.resumed_at, summary.restarts) == ((), 1)
    assert {e: r['eval_top1'] for e, r in summary.epochs.items()} == {0: 51., 1: 61.}  # epoch 2 was the first start's
    run = read_run(folder)
    assert not run.finished and run.missing == [2] and run.restarts == 1
    assert last_epoch(folder) == LastEpoch(1, 'top1', 61., 0.5, 1.0, (), True)


def test_a_resume_drops_the_abandoned_starts_later_rows(tmp_path):
    """Trained to epoch 3, resumed from the checkpoint of epoch 0: the rows of epochs 1-3 of the first start are not
    the run's (were they kept, epoch 3 would stand beside the resumed start's epochs)."""
    folder = write_run(tmp_path, 'r', rows=(), epochs=4)
    _summary(folder, [(0, 50.), (1, 60.), (2, 70.), (3, 80.)], [(1, 61.), (2, 71.)])
    summary = read_summary(folder / 'summary.csv')
    assert summary.resumed_at == (1,) and summary.restarts == 0
    assert {e: r['eval_top1'] for e, r in summary.epochs.items()} == {0: 50., 1: 61., 2: 71.}
    assert run_state(folder).missing == (3,)


# ---------------------------------------------------------------------------------------------- values

@pytest.mark.parametrize('cell, said', [('nan', 'nan'), ('inf', 'inf'), ('-inf', '-inf'), ('1e400', 'inf')])
def test_a_value_that_is_not_a_number_is_said_and_fails_the_run_for_good(tmp_path, cell, said):
    folder = write_run(tmp_path, 'r', rows=())
    (folder / 'summary.csv').write_text(HEADER + '0,1.0,0.5,50.0,100.0,0.01\n' + f'1,1.0,{cell},60.0,100.0,0.01\n')
    state = run_state(folder)
    assert (state.status, state.resumable) == ('failed', False)  # a relaunch does not resume a diverged run
    assert state.reason == f'non-finite eval_loss ({said}) at epoch 2'
    assert last_epoch(folder).describe() == f'epoch 2: top1 60.00, eval_loss {said}, train_loss 1.0000'


def test_a_summary_fault_stays_resumable_and_a_missing_column_is_left_out_not_nan(tmp_path):
    folder = write_run(tmp_path, 'r', rows=())
    (folder / 'summary.csv').write_text('epoch,train_loss,eval_top1\n0,1.0,50\n1,1.0\n')
    state = run_state(folder)
    assert (state.status, state.resumable) == ('failed', True)
    assert last_epoch(folder).describe() == 'epoch 1: top1 50.00, train_loss 1.0000'


def test_rows_past_the_schedule_are_a_problem_not_the_result(tmp_path):
    """Epochs 0-4 written for a run of 3 epochs: another schedule's rows. The run is failed (not averaged), so that
    status and report do not each take another epoch as its result."""
    folder = write_run(tmp_path, 'r', rows=((0, 50.), (1, 60.), (2, 70.), (3, 80.), (4, 90.)))
    run = read_run(folder)
    assert run.past_schedule == [3, 4]
    assert run.value_problems == ['summary.csv has rows past the 3 epochs train.py runs with these arguments (epoch '
                                  '4–5): another schedule wrote them']
    state = run_state(folder)
    assert (state.status, state.resumable) == ('failed', False) and 'rows past the 3 epochs' in state.reason


# ---------------------------------------------------------------------------------------------- args.yaml

@pytest.mark.parametrize('target, why', [('nowhere.yaml', 'a symlink to nowhere.yaml, which does not exist'),
                                         ('args.yaml', 'a symlink loop')])
def test_an_args_yaml_that_is_a_broken_symlink_is_found_and_named(tmp_path, target, why):
    folder = write_run(tmp_path / 'runs', 'r')
    (folder / 'args.yaml').unlink()
    (folder / 'args.yaml').symlink_to(target)
    assert find_runs([tmp_path / 'runs']) == [(folder, 'r')]  # found, to be named: not dropped without a word
    with pytest.raises(RunFileError) as e:
        read_run(folder)
    assert str(e.value) == f'{folder / "args.yaml"}: cannot be read ({why})'
    assert run_state(folder).status == 'failed'  # never "not started" (status: pending) for a run that ran


# ---------------------------------------------------------------------------------------------- finding runs

def test_symlinked_run_folders_are_followed_each_folder_read_once(tmp_path):
    write_run(tmp_path / 'elsewhere', 'linked')
    write_run(tmp_path / 'runs', 'own')
    (tmp_path / 'runs' / 'linked').symlink_to(tmp_path / 'elsewhere' / 'linked')
    (tmp_path / 'runs' / 'loop').symlink_to(tmp_path / 'runs')
    found, notes = search_runs([tmp_path / 'runs', tmp_path / 'elsewhere'])
    assert [(f.folder, f.name) for f in found] == [(tmp_path / 'runs' / 'linked', 'linked'),
                                                   (tmp_path / 'runs' / 'own', 'own')]
    assert notes == [f'{tmp_path / "runs" / "loop"} is a symlink to a folder above it (a loop): not followed',
                     f'{tmp_path / "elsewhere" / "linked"} is {tmp_path / "runs" / "linked"} again: read once']


def test_runs_of_the_same_name_are_named_by_the_folders_that_tell_them_apart(tmp_path):
    for sweep in ('first', 'second'):
        write_run(tmp_path / sweep / 'runs', 'a_seed0')
    write_run(tmp_path / 'first' / 'runs', 'b_seed0')
    names = [n for _, n in find_runs([tmp_path / 'first' / 'runs', tmp_path / 'second' / 'runs'])]
    assert names == ['first/runs/a_seed0', 'b_seed0', 'second/runs/a_seed0']
    given = [n for _, n in find_runs([tmp_path / 'first' / 'runs' / 'a_seed0', tmp_path / 'second' / 'runs' /
                                      'a_seed0'])]
    assert given == ['first/runs/a_seed0', 'second/runs/a_seed0']
    assert distinct_names([(Path('/x/p'), 'a'), (Path('/x/q'), 'a'), (Path('/x/p'), 'b')]) == ['p/a', 'q/a', 'b']


# ---------------------------------------------------------------------------------------------- schedules

def test_an_edited_schedule_record_is_not_trusted(tmp_path):
    """A run's record keeps train.py's epoch count so that status needs no torch; edited (5 epochs for a run of 3),
    it would call a finished run unfinished and a relaunch would run it again. Its digest tells: the count is
    taken from train.py's scheduler instead."""
    folder = write_run(tmp_path, 'r')
    record = schedule_record(yaml.safe_load((folder / 'args.yaml').read_text()))
    assert run_state_with_schedule(folder, record).status == 'finished'
    edited = {**record, 'epochs': 5, 'required': [0, 1, 2, 3, 4]}
    assert run_state_with_schedule(folder, edited) is None
    assert run_state_with_schedule(folder, {k: v for k, v in record.items() if k != 'digest'}) is None
    from timm_pkmixer.launch.tasks import run_progress
    assert run_progress(folder, edited).state == 'finished'


# ---------------------------------------------------------------------------------------------- checkpoints

def test_a_checkpoint_says_its_epoch_and_arguments_without_running_code(tmp_path):
    args = argparse.Namespace(model='m', seed=3, model_kwargs={'perm_seed': 3})
    torch.save(dict(epoch=1, version=2, args=args, state_dict={'w': torch.zeros(2)}), tmp_path / 'last.pth.tar')
    info = read_checkpoint_info(tmp_path / 'last.pth.tar')
    assert (info.epoch, info.next_epoch, info.args) == (1, 2, vars(args))
    torch.save(dict(epoch=1), tmp_path / 'old.pth.tar')  # no version: timm resumes at its epoch
    assert read_checkpoint_info(tmp_path / 'old.pth.tar').next_epoch == 1
    payload = tmp_path / 'ran'
    code = (f'import os, torch\nclass P:\n    def __reduce__(self):\n        return (os.mkdir, ({str(payload)!r},))\n'
            f'torch.save(dict(epoch=0, x=P()), {str(tmp_path / "evil.pth.tar")!r})\n')
    subprocess.run([sys.executable, '-c', code], check=True)
    with pytest.raises(RunFileError, match='not a train.py checkpoint that can be read safely'):
        read_checkpoint_info(tmp_path / 'evil.pth.tar')
    assert not payload.exists()
    os.mkfifo(tmp_path / 'fifo.pth.tar')  # never opened for a blocking read
    with pytest.raises(RunFileError, match='not a regular file'):
        read_checkpoint_info(tmp_path / 'fifo.pth.tar')
