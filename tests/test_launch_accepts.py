"""What `pkmixer launch` records only once it is accepted (issue 43, item 3): train.py's refusal of an argument
leaves the folder's recorded arguments as they were and names a probable launcher flag; the data are checked once,
before any run starts; new arguments with which no run reached its first epoch are not recorded, and a relaunch
with corrected ones retries those runs without further flags. With the stand-in train.py (tests/mini_train_py.py)."""
import json
from pathlib import Path

import pytest
from test_launch_runs import MINI, _images, _recipe

from conftest import command_messages


@pytest.fixture(autouse=True)
def _env(launch_env, monkeypatch):
    monkeypatch.setenv('OMP_NUM_THREADS', '1')


@pytest.fixture(scope='module')
def data(tmp_path_factory) -> Path:
    return _images(tmp_path_factory.mktemp('images'))


def _recorded(folder: Path):
    path = folder / 'launch' / 'train_args.json'
    return json.loads(path.read_text())['train_args'] if path.exists() else None


def test_a_refused_argument_records_nothing_and_names_the_launcher_flag(cli, tmp_path, data):
    sweep = tmp_path / 'sweep'
    _recipe(sweep, 'a', data)
    code, out, err = cli('launch', sweep, '--train-py', MINI, '--retry-faild', '--lr', '0.02')
    message = command_messages(err)
    assert code == 2
    assert 'train.py refuses its arguments' in message
    assert '--retry-faild (probably --retry-failed, a flag of pkmixer launch)' in message
    assert _recorded(sweep) is None and not (sweep / 'runs').exists()
    # the corrected launch is not refused as a change: nothing was recorded
    code, out, err = cli('launch', sweep, '--train-py', MINI, '--lr', '0.02')
    assert code == 0, err
    assert _recorded(sweep) == ['--lr', '0.02']

    # a relaunch's refused new arguments leave the recorded ones
    code, out, err = cli('launch', sweep, '--train-py', MINI, '--new-train-args', '--no-such-flag', '1')
    assert code == 2 and 'train.py refuses its arguments' in err
    assert _recorded(sweep) == ['--lr', '0.02']


def test_a_wrong_data_dir_is_refused_once_before_any_run(cli, tmp_path, data):
    sweep = tmp_path / 'sweep'
    _recipe(sweep, 'a', data)
    _recipe(sweep, 'b', data, seed=1)
    missing = tmp_path / 'no-such-data'
    code, out, err = cli('launch', sweep, '--train-py', MINI, '--data-dir', missing)
    message = command_messages(err)
    assert code == 2
    assert f'the data of 2 recipes (a.yaml, …) cannot be read, so no run is started: --data-dir {missing}: no ' \
           f'such folder' in message
    assert 'train/ and validation/' in message
    assert _recorded(sweep) is None and not (sweep / 'runs').exists()
    assert not (sweep / 'launch' / 'runs').exists()  # no run record: nothing started

    empty = tmp_path / 'empty'
    empty.mkdir()
    code, out, err = cli('launch', sweep, '--train-py', MINI, '--data-dir', empty)
    assert code == 2 and f'{empty} holds no class folders' in err

    code, out, err = cli('launch', sweep, '--train-py', MINI, '--data-dir', data)  # one command recovers
    assert code == 0, err


def test_arguments_no_run_got_an_epoch_with_are_not_recorded(cli, tmp_path, data):
    """A failure before the first epoch with new arguments (the stand-in's --fail): the record is as before, and the
    corrected launch retries the failed runs without --retry-failed or --new-train-args."""
    sweep = tmp_path / 'sweep'
    _recipe(sweep, 'a', data)
    code, out, err = cli('launch', sweep, '--train-py', MINI, '--fail')
    assert code == 1
    assert _recorded(sweep) is None
    assert 'no run reached its first epoch with the train.py arguments --fail: they are not recorded' in err
    code, out, err = cli('launch', sweep, '--train-py', MINI, '--lr', '0.02')
    assert code == 0, err
    assert '1 of 1 runs finished' in out
    assert _recorded(sweep) == ['--lr', '0.02']
