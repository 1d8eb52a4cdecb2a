"""Bad inputs and faults of `pkmixer launch` / `pkmixer status` (issue 43, item 7), each refused by name or handled,
never silent, never hanging: two recipes of one name, a dangling recipe symlink and a symlink loop, a run folder that
holds another model's run, `--no-wait` on a folder the background launcher refuses, a FIFO in place of the
background launcher's log, a huge `--workers`, a run record without its run folder."""
import json
import os
import socket
from pathlib import Path

import pytest
import yaml
from test_launch_runs import MINI, _recipe

from conftest import command_messages


@pytest.fixture(autouse=True)
def _env(launch_env, monkeypatch):
    monkeypatch.setenv('OMP_NUM_THREADS', '1')


@pytest.mark.parametrize('command', ['launch', 'status'])
def test_two_recipes_of_one_name_are_refused(cli, tmp_path, command):
    sweep = tmp_path / 'sweep'
    _recipe(sweep, 'a', tmp_path)
    (sweep / 'a.yml').write_text((sweep / 'a.yaml').read_text())
    code, out, err = cli(command, sweep, *(['--train-py', MINI] if command == 'launch' else []))
    assert code == 2
    assert 'a.yaml and a.yml are both recipe a (one run, one record and one log per name): rename or remove one' \
        in command_messages(err)
    assert not (sweep / 'launch').exists()


@pytest.mark.parametrize('command', ['launch', 'status'])
def test_a_dangling_recipe_symlink_and_a_symlink_loop_are_named(cli, tmp_path, command):
    sweep = tmp_path / 'sweep'
    _recipe(sweep, 'a', tmp_path)
    os.symlink(tmp_path / 'gone.yaml', sweep / 'b.yaml')
    extra = ['--train-py', MINI] if command == 'launch' else []
    code, out, err = cli(command, sweep, *extra)
    assert code == 2
    assert f'{sweep / "b.yaml"} is not a recipe: a symlink to {tmp_path / "gone.yaml"}, which does not exist' in err
    (sweep / 'b.yaml').unlink()
    os.symlink(sweep / 'd.yml', sweep / 'c.yaml')
    os.symlink(sweep / 'c.yaml', sweep / 'd.yml')
    code, out, err = cli(command, sweep, *extra)
    assert code == 2 and f'{sweep / "c.yaml"} is not a recipe: a symlink loop' in err


def _finished_run(run_dir: Path, model: str, epochs: int = 1, done: int = 1, **keys) -> None:
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / 'args.yaml').write_text(yaml.safe_dump(dict(model=model, epochs=epochs, seed=0, sched='cosine',
                                                           warmup_epochs=0, **keys)))
    header = 'epoch,train_loss,eval_loss,eval_top1,eval_top5,lr\n'
    (run_dir / 'summary.csv').write_text(header + ''.join(f'{e},0.5,0.5,80.0,100.0,0.01\n' for e in range(done)))


def test_status_refuses_a_run_folder_that_holds_another_models_run(cli, tmp_path):
    sweep = tmp_path / 'sweep'
    _recipe(sweep, 'a', tmp_path)
    _finished_run(sweep / 'runs' / 'a', 'resnet18')
    code, out, err = cli('status', sweep)
    assert code == 2
    message = command_messages(err)
    assert f'a.yaml is refused: its run folder {sweep / "runs" / "a"} holds a run of another model (resnet18) that ' \
           f'no launch of this folder started' in message
    code, out, err = cli('launch', sweep, '--train-py', MINI)  # the same words
    assert code == 2 and 'holds a run of another model (resnet18) that no launch of this folder started' in err


def test_no_wait_returns_the_background_launchers_refusal(cli, tmp_path):
    sweep = tmp_path / 'sweep'
    _recipe(sweep, 'a', tmp_path / 'no-such-data')
    code, out, err = cli('launch', sweep, '--train-py', MINI, '--no-wait')
    assert code == 2
    assert 'launching in the background' not in out
    assert 'cannot be read, so no run is started' in err and 'no such folder' in err
    assert not (sweep / 'launch' / 'lock').exists()


def test_no_wait_refuses_a_fifo_in_place_of_its_log(cli, tmp_path):
    sweep = tmp_path / 'sweep'
    _recipe(sweep, 'a', tmp_path)
    (sweep / 'launch').mkdir()
    os.mkfifo(sweep / 'launch' / 'launcher.log')
    code, out, err = cli('launch', sweep, '--train-py', MINI, '--no-wait')  # never blocks on the FIFO
    assert code == 2
    assert f"{sweep / 'launch' / 'launcher.log'} is not the background launcher's log (a FIFO, not a regular file)" \
        in err


def test_more_workers_than_runs_take_no_memory():
    from timm_pkmixer.launch.executors import LocalExecutor
    executor = LocalExecutor(workers=10 ** 9)
    executor.check()
    assert executor.plan()['slots'] == 10 ** 9
    assert executor._slots(limit=2) == [{}, {}]  # the places a launch of 2 runs makes
    gpus = LocalExecutor(gpus='0,1', runs_per_gpu=10 ** 9)
    assert gpus._slot_count() == 2 * 10 ** 9
    assert gpus._slots(limit=3) == [dict(CUDA_VISIBLE_DEVICES='0')] * 3


def test_a_record_without_its_run_folder_reads_the_run_where_the_launch_put_it(cli, tmp_path):
    """The run folder is where the launch's recorded train.py arguments (--output) put it, not the recipe's
    default: an unfinished run there is unfinished, not pending."""
    sweep = tmp_path / 'sweep'
    recipe = _recipe(sweep, 'a', tmp_path)
    out_dir = tmp_path / 'elsewhere'
    _finished_run(out_dir / 'a', 's_mixer_s64c64_32', epochs=2, done=1,
                  model_kwargs=yaml.safe_load(recipe.read_text())['model_kwargs'])
    (sweep / 'launch' / 'runs').mkdir(parents=True)
    (sweep / 'launch' / 'train_args.json').write_text(json.dumps(dict(train_args=['--output', str(out_dir)])))
    (sweep / 'launch' / 'runs' / 'a.json').write_text(json.dumps(dict(
        state='interrupted', returncode=-15, pid=1, host=socket.gethostname(), job=None, executor='local',
        recipe=recipe.name, time=0.)))
    code, out, err = cli('status', sweep, '--json')
    assert code == 0, err
    run = json.loads(out)['runs'][0]
    assert (run['state'], run['run_dir'], run['done'], run['epochs']) == ('unfinished', str(out_dir / 'a'), 1, 2)
