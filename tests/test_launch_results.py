"""Results where the researcher looks (issue 43, item 2): `pkmixer status` and the launch's closing lines give each
run's last epoch (the metric train.py optimises, its losses), a running run where train.py's log says it is, and the
launch's hint `pkmixer report DIR` runs as printed. With the stand-in train.py (tests/mini_train_py.py)."""
import json
import os
import shlex
import socket
from pathlib import Path

import pytest
from test_launch_runs import MINI, _images, _recipe

from timm_pkmixer.launch.launcher import run_status
from timm_pkmixer.launch.records import launch_state_dir, write_record


@pytest.fixture(autouse=True)
def _env(launch_env, monkeypatch):
    monkeypatch.setenv('OMP_NUM_THREADS', '1')


def _summary(run_dir: Path, rows, resumed_at=None):
    """summary.csv rows (epoch, train_loss, eval_loss, eval_top1), its header again before epoch `resumed_at`."""
    header = 'epoch,train_loss,eval_loss,eval_top1,eval_top5,lr\n'
    text = header
    for epoch, train, loss, top1 in rows:
        text += header if epoch == resumed_at else ''
        text += f'{epoch},{train},{loss},{top1},100.0,0.01\n'
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / 'summary.csv').write_text(text)


def test_launch_and_status_give_each_runs_result_and_the_report_hint_runs(cli, tmp_path, monkeypatch):
    data = _images(tmp_path / 'images')
    sweep = tmp_path / 'sweep'
    _recipe(sweep, 'a', data, epochs=2)
    code, out, err = cli('launch', sweep, '--train-py', MINI)
    assert code == 0, err
    summary = (sweep / 'runs' / 'a' / 'summary.csv').read_text().splitlines()
    last = dict(zip(summary[0].split(','), summary[-1].split(',')))
    result = (f"epoch 2: top1 {float(last['eval_top1']):.2f}, eval_loss {float(last['eval_loss']):.4f}, "
              f"train_loss {float(last['train_loss']):.4f}")
    assert f'[pkmixer launch] 1/1 a: finished — {result}' in out.splitlines()
    code, status, _ = cli('status', sweep)
    assert f'a: finished — {result}' in status.splitlines()
    code, status, _ = cli('status', sweep, '--json')
    run = json.loads(status)['runs'][0]
    assert run['last']['metric'] == 'top1' and run['last']['value'] == float(last['eval_top1'])
    assert run['result'] == result

    hint = out.splitlines()[-1]
    command = hint.split('`')[1]
    assert command == f'pkmixer report {shlex.quote(str(sweep))}'  # runs as printed: no --out-dir needed
    code, out, err = cli(*shlex.split(command)[1:], '--no-figures')
    assert code == 0, err
    assert (sweep / 'report' / 'report.csv').is_file() and (sweep / 'report' / 'epochs.csv').is_file()
    assert '1 runs averaged in 1 groups' in out


def test_status_gives_the_metric_the_run_optimises(tmp_path):
    folder = tmp_path / 'sweep'
    recipe = _recipe(folder, 'a', tmp_path)
    run_dir = folder / 'runs' / 'a'
    _summary(run_dir, [(0, 0.9, 0.8, 60.5), (1, 0.5, 0.45, 70.25)])
    (run_dir / 'args.yaml').write_text('model: s_mixer_s64c64_32\neval_metric: loss\nepochs: 5\n')
    status = run_status(recipe, launch_state_dir(folder))
    assert status.state == 'unfinished'
    assert status.result == 'epoch 2: loss 0.4500, eval_loss 0.4500, train_loss 0.5000'  # the second, as people count
    assert status.line() == 'a: unfinished (epoch 2 of 5) — epoch 2: loss 0.4500, eval_loss 0.4500, train_loss 0.5000'


def test_a_running_run_shows_its_epoch_and_step_from_train_pys_log(tmp_path):
    folder = tmp_path / 'sweep'
    recipe = _recipe(folder, 'a', tmp_path)
    run_dir = folder / 'runs' / 'a'
    _summary(run_dir, [(0, 0.9, 0.8, 60.5)])
    (run_dir / 'args.yaml').write_text('model: s_mixer_s64c64_32\nepochs: 3\n')
    state_dir = launch_state_dir(folder)
    write_record(state_dir, 'a', state='running', pid=os.getpid(), host=socket.gethostname(), job=None,
                 executor='local', run_dir=str(run_dir), recipe=str(recipe))  # this process: alive
    log = state_dir / 'logs' / 'a.log'
    log.parent.mkdir(parents=True)
    log.write_text('Train: 0 [ 389/390 (100%)]  Loss: 0.9\nTest: [ 0/10]\n'
                   'Train: 1 [   0/390 (  0%)]  Loss: 0.7\nTrain: 1 [  50/390 ( 13%)]  Loss: 0.6 (0.65)\n')
    status = run_status(recipe, state_dir)
    assert status.state == 'running' and status.at == 'epoch 2, step 50/390'  # train.py's 'Train: 1', from 0
    assert status.line().endswith('— at epoch 2, step 50/390; epoch 1: top1 60.50, eval_loss 0.8000, '
                                  'train_loss 0.9000')


def test_report_default_out_dir(tmp_path):
    from timm_pkmixer.cli.report import default_out_dir
    assert default_out_dir(str(tmp_path)) == tmp_path / 'report'
    (tmp_path / 'epochs.csv').write_text('')
    assert default_out_dir(str(tmp_path / 'epochs.csv')) == tmp_path / 'report'
