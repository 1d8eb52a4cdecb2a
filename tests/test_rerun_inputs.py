"""benchmarks/fashion_mnist/rerun.py on input it cannot use: each is one line, ``rerun.py: error: …`` (exit status 2),
before anything is launched or any folder made (no work folder left behind): no such experiment folder, a folder
without epochs.csv or with a junk, empty or run-less one, a value that is not a number, a FIFO for epochs.csv, a
folder or FIFO where the rerun writes a file, no data or train.py, and a ``--parallel`` below 1 (which launched
nothing and waited for ever)."""
import csv
import importlib.util
import os

import pytest

from timm_pkmixer.errors import InvalidArgumentError
from timm_pkmixer.reports.report import build_report, write_report

from conftest import ROOT
from test_report import run_folder

SCRIPT = ROOT / 'benchmarks' / 'fashion_mnist' / 'rerun.py'
MINI = ROOT / 'tests' / 'mini_train_py.py'


@pytest.fixture(scope='module')
def script():
    spec = importlib.util.spec_from_file_location('rerun', SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope='module')
def experiment(tmp_path_factory):
    """A committed experiment folder as `pkmixer report` writes it: two arms (depth 2 and 4), seeds 0 and 1."""
    root = tmp_path_factory.mktemp('experiment')
    for depth in (2, 4):
        for seed in (0, 1):
            run_folder(root / 'runs', f'd{depth}_seed{seed}', seed, model_kwargs=dict(num_blocks=depth))
    write_report(build_report([str(root / 'runs')]), str(root / 'exp'), figures=False)
    return root / 'exp'


@pytest.fixture
def rerun(script, tmp_path, monkeypatch, capsys):
    """``rerun(EXPERIMENT, *more)`` → (exit status, stdout, stderr), run in `tmp_path` (where the default work folder
    would go) with real data and train.py paths; argparse's exits are returned, not raised."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / 'data').mkdir(exist_ok=True)

    def run(exp, *more):
        try:
            code = script.main([str(exp), '--seed', '0', '--data-dir', 'data', '--train-py', str(MINI),
                                *map(str, more)])
        except SystemExit as e:
            code = e.code
        out, err = capsys.readouterr()
        assert 'Traceback' not in err
        return code, out, err
    return run


def _copy(experiment, to, column, value):
    """A copy of the experiment's epochs.csv in `to` whose first row holds `value` in `column`."""
    to.mkdir()
    with open(experiment / 'epochs.csv', newline='') as f:
        rows = list(csv.reader(f))
    rows[1][rows[0].index(column)] = value
    with open(to / 'epochs.csv', 'w', newline='') as f:
        csv.writer(f).writerows(rows)
    return to


def _one_error(result, message):
    code, out, err = result
    assert (code, out, err) == (2, '', f'rerun.py: error: {message}\n')


def _nothing_made(tmp_path):
    assert sorted(p.name for p in tmp_path.iterdir()) == ['data']  # no rerun-… folder


def test_a_missing_folder_or_one_without_epochs_csv(rerun, tmp_path):
    _one_error(rerun(tmp_path / 'nowhere'), f'{tmp_path / "nowhere"}: no such folder (give a committed experiment '
                                            f'folder, holding the epochs.csv `pkmixer report` wrote)')
    (tmp_path / 'data' / 'junk').mkdir()
    _one_error(rerun(tmp_path / 'data' / 'junk'), f'{tmp_path / "data" / "junk"} holds no epochs.csv: not a committed '
                                                  f'experiment folder (`pkmixer report` writes one)')
    _nothing_made(tmp_path)


@pytest.mark.parametrize('content,why', [
    ('', 'is empty'),
    ('run,seed,model,model_kwargs,epoch,config,read_problems\n', 'holds no run'),
    ('garbage,,\nxx\n', ': not an epochs.csv of `pkmixer report` (columns run, seed, model, model_kwargs, epoch, '
                        'config, read_problems)'),
    (b'\x89PNG\r\n\x1a\n\x00', ': not an epochs.csv of `pkmixer report` (not a text file)'),
    ('fifo', ': not an epochs.csv of `pkmixer report` (a FIFO, not a regular file)'),
])
def test_an_epochs_csv_that_is_empty_junk_or_no_file(rerun, tmp_path, content, why):
    folder = tmp_path / 'data' / 'exp'
    folder.mkdir()
    if content == 'fifo':
        os.mkfifo(folder / 'epochs.csv')
    else:
        (folder / 'epochs.csv').write_bytes(content if isinstance(content, bytes) else content.encode())
    _one_error(rerun(folder), f'{folder / "epochs.csv"}{"" if why.startswith(":") else " "}{why}')
    _nothing_made(tmp_path)


@pytest.mark.parametrize('column,value,why', [
    ('eval_top1', 'abc', "line 2: column 'eval_top1' holds 'abc', not a number"),
    ('config', '{"model": ', 'line 2: column config is not JSON (Expecting value at character 11)'),
])
def test_a_cell_that_cannot_be_read_is_named_by_line_and_column(rerun, experiment, tmp_path, column, value, why):
    broken = _copy(experiment, tmp_path / 'data' / 'broken', column, value)
    _one_error(rerun(broken), f'{broken / "epochs.csv"}, {why}')
    _nothing_made(tmp_path)


@pytest.mark.parametrize('where', ['rerun.csv', 'd2/launch.out', 'd4/d4_seed0.yaml'])
@pytest.mark.parametrize('kind', ['folder', 'fifo'])
def test_a_stray_folder_or_fifo_where_the_rerun_writes_a_file_is_named_before_anything_runs(rerun, experiment,
                                                                                           tmp_path, where, kind):
    work = tmp_path / 'work'
    (work / where).parent.mkdir(parents=True)
    (work / where).mkdir() if kind == 'folder' else os.mkfifo(work / where)
    _one_error(rerun(experiment, '--work-dir', work), f'{work / where} is in the way: not a file, where the rerun '
                                                      f'writes one (remove it, or give another --work-dir)')
    assert not any(p.name in ('runs', 'launch') for p in work.rglob('*'))  # nothing was launched
    assert not (work / 'd2' / 'd2_seed0.yaml').exists()  # nor any recipe written


def test_a_work_dir_that_is_a_file_is_named(rerun, experiment, tmp_path):
    (tmp_path / 'work').write_text('')
    _one_error(rerun(experiment, '--work-dir', tmp_path / 'work'), f'Not a directory: {tmp_path / "work" / "d2"}')


def test_missing_data_or_train_py_and_a_seed_the_experiment_lacks(rerun, script, experiment, tmp_path):
    code, out, err = rerun(experiment, '--data-dir', tmp_path / 'nodata')
    assert (code, err) == (2, f'rerun.py: error: --data-dir {tmp_path / "nodata"}: no such folder\n')
    code, out, err = rerun(experiment, '--train-py', tmp_path / 'train.py')
    assert (code, err) == (2, f'rerun.py: error: --train-py {tmp_path / "train.py"}: no such file\n')
    _one_error(rerun(experiment, '--seed', 7), f'no committed run of seed 7 in {experiment / "epochs.csv"}')
    _nothing_made(tmp_path)


@pytest.mark.parametrize('parallel', ['0', '-2'])
def test_parallel_below_one_is_refused_not_waited_on(rerun, script, experiment, tmp_path, parallel):
    """Was: a loop that launched nothing and never ended."""
    code, out, err = rerun(experiment, '--parallel', parallel)
    assert code == 2 and err.endswith(f'rerun.py: error: argument --parallel: parallel must be a positive integer, '
                                      f'got {parallel}\n')
    _nothing_made(tmp_path)
    with pytest.raises(InvalidArgumentError, match='^parallel must be a positive integer, got 0$'):
        script.run_arms([(tmp_path, tmp_path, 1)], str(MINI), (), None, parallel=0)
