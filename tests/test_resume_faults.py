"""A resume is what it says, or the run is refused by name (issue 52, round 5): `pkmixer launch` does not resume a
run whose recipe changed since it started, restart into a folder whose last.pth.tar is gone or not a file, resume
from another run's checkpoint or from one that leaves the run unfinished for ever, nor resume a diverged run; a run
train.py ends without an epoch is failed, not relaunched for ever; an edited record does not rerun a run; the
launch's train.py arguments cannot replace the recipes, name a second folder or grow without bound; an editor's
lock link is no recipe.

One folder of two runs (a: seed 0, b: seed 1; 2 epochs each, stopped after the first by the stand-in's stop file)
is launched once for the module; each test works on a copy of it holding run a only."""
import json
import shutil
from pathlib import Path

import pytest
import torch
from test_launch_runs import MINI, _launch, _pkmixer, _recipe, _status, data  # noqa: F401 (data: a fixture)

from timm_pkmixer.launch.tasks import find_recipes
from timm_pkmixer.reports.report import build_report


@pytest.fixture(scope='module')
def stopped(tmp_path_factory, data) -> Path:  # noqa: F811
    """Runs a and b stopped after their first of 2 epochs, each with its last.pth.tar (of epoch 0)."""
    root = tmp_path_factory.mktemp('stopped')
    (root / 'stop').write_text('1')
    for name, seed in (('a', 0), ('b', 1)):
        _recipe(root / 'sweep', name, data, epochs=2, seed=seed, stop_file=str(root / 'stop'))
    proc = _pkmixer('launch', root / 'sweep', '--train-py', MINI)
    assert proc.returncode == 1 and 'a: unfinished (epoch 1 of 2)' in proc.stdout, proc.stderr[-3000:]
    return root / 'sweep'


@pytest.fixture
def sweep(stopped, tmp_path) -> Path:
    copy = tmp_path / 'copy'
    shutil.copytree(stopped, copy, symlinks=True)
    (copy / 'b.yaml').unlink()
    (copy / 'launch' / 'runs' / 'b.json').unlink()
    shutil.rmtree(copy / 'runs' / 'b')
    return copy


def _refused(cli, sweep: Path, said: str, *argv) -> None:
    """A relaunch fails run a by name (exit status 2 in its record, the reason in status and its log) and trains
    nothing: its summary.csv is as it was."""
    summary = sweep / 'runs' / 'a' / 'summary.csv'
    before = summary.read_text() if summary.exists() else None
    code, out, _ = _launch(cli, sweep, *argv)
    status = _status(cli, sweep)['a']
    assert (code, status['state'], status['detail']) == (1, 'failed', said), out
    assert (sweep / 'launch' / 'logs' / 'a.log').read_text().rstrip().endswith(f': not started: {said}')
    assert json.loads((sweep / 'launch' / 'runs' / 'a.json').read_text())['returncode'] == 2
    assert (summary.read_text() if summary.exists() else None) == before


def test_a_recipe_changed_since_the_start_is_not_resumed(sweep, cli):
    """lr 0.01 → 0.5 before the relaunch: resumed, the run's second epoch would be of another recipe than its first,
    yet read as one run and averaged. It is skipped as stale, and status says why."""
    recipe = sweep / 'a.yaml'
    recipe.write_text(recipe.read_text().replace('lr: 0.01', 'lr: 0.5'))
    summary = (sweep / 'runs' / 'a' / 'summary.csv').read_text()
    code, out, _ = _launch(cli, sweep)
    assert (code, out.strip()) == (0, f'[pkmixer launch] nothing to launch in {sweep} (skipped: 1 stale; '
                                      f'--rerun-stale reruns the stale (their recipe or train.py arguments changed '
                                      f'since they ran) into a fresh folder)')
    assert (sweep / 'runs' / 'a' / 'summary.csv').read_text() == summary
    status = _status(cli, sweep)['a']
    assert (status['state'], status['detail']) == ('unfinished', 'changed since it started: lr; a relaunch does not '
                                                   'resume it (its epochs would mix two recipes): --rerun-stale '
                                                   'restarts it in a fresh folder')
    assert [(x.name, x.kind) for x in build_report([str(sweep / 'runs')]).listed] == [('a', 'stale')]


@pytest.mark.parametrize('make, why', [
    (lambda last: last.unlink(), None),
    (lambda last: (last.unlink(), last.mkdir()), 'is not a regular file'),
    (lambda last: (last.unlink(), last.symlink_to('gone.pth.tar')),
     'cannot be read (a symlink to gone.pth.tar, which does not exist)'),
])
def test_summary_rows_without_a_checkpoint_to_resume_from_are_refused(sweep, cli, make, why):
    """Without its last.pth.tar, train.py would start over into the same summary.csv (epoch 0 twice, read as
    "resumed at epoch 0")."""
    run_dir = sweep / 'runs' / 'a'
    make(run_dir / 'last.pth.tar')
    again = f'move {run_dir} away to restart the run from its first epoch'
    said = (f'{run_dir} holds summary rows up to epoch 1 but no last.pth.tar to resume from: train.py would start '
            f'over into the same summary.csv; {again}, or put back its last.pth.tar') if why is None else \
        f'{run_dir / "last.pth.tar"} {why}, so the run cannot resume from it; {again}'
    _refused(cli, sweep, said)


def test_another_runs_checkpoint_is_not_resumed_from(sweep, stopped, cli):
    run_dir = sweep / 'runs' / 'a'
    shutil.copy(stopped / 'runs' / 'b' / 'last.pth.tar', run_dir / 'last.pth.tar')
    _refused(cli, sweep, f"{run_dir / 'last.pth.tar'} was saved by another run (seed 1, this run's 0): resuming "
                         f"from it would go on with that run; move {run_dir} away to restart the run from its first "
                         f"epoch, or put back its own last.pth.tar")


def _set_epoch(path: Path, epoch: int) -> None:
    checkpoint = torch.load(path, map_location='cpu', weights_only=False)
    torch.save({**checkpoint, 'epoch': epoch}, path)


def test_a_checkpoint_at_the_end_of_the_schedule_or_past_it_is_not_resumed(sweep, cli):
    """train.py would start past its last epoch, train nothing and end with exit status 0: unfinished for ever."""
    run_dir = sweep / 'runs' / 'a'
    _set_epoch(run_dir / 'last.pth.tar', 6)
    _refused(cli, sweep, f'{run_dir / "last.pth.tar"} is of epoch 7, the end of the 2 epochs train.py runs or past '
                         f'it: resuming would train nothing and leave the run unfinished (no summary row for epoch '
                         f'2); move {run_dir} away to restart the run from its first epoch')


def test_a_checkpoint_past_epochs_summary_csv_lacks_is_not_resumed(sweep, cli):
    """summary.csv deleted: resumed from the checkpoint of epoch 1, the run would never get its row."""
    run_dir = sweep / 'runs' / 'a'
    (run_dir / 'summary.csv').unlink()
    _refused(cli, sweep, f'{run_dir}: summary.csv has no row for epoch 1, which {run_dir / "last.pth.tar"} (of epoch '
                         f'1) has passed: resuming cannot write them, and the run would stay unfinished; move '
                         f'{run_dir} away to restart the run from its first epoch, or put back its summary.csv')


def test_a_diverged_run_is_failed_and_never_resumed(sweep, cli):
    summary = sweep / 'runs' / 'a' / 'summary.csv'
    lines = summary.read_text().splitlines()
    header = lines[0].split(',')
    row = lines[1].split(',')
    row[header.index('eval_loss')] = 'nan'
    summary.write_text('\n'.join([lines[0], ','.join(row)]) + '\n')
    status = _status(cli, sweep)['a']
    assert (status['state'], status['detail']) == ('failed', 'non-finite eval_loss (nan) at epoch 1')
    assert status['last']['eval_loss'] == 'nan' and ', eval_loss nan, ' in status['result']  # said, not left out
    code, out, _ = _launch(cli, sweep)
    assert code == 0 and 'nothing to launch' in out and 'skipped: 1 failed' in out
    run_dir = sweep / 'runs' / 'a'
    _refused(cli, sweep, f'{run_dir} holds a run whose values are not measurements (non-finite eval_loss (nan) at '
                         f'epoch 1): resuming would go on from them; move {run_dir} away to restart the run from its '
                         f'first epoch', '--retry-failed')


def test_a_run_train_py_ends_without_an_epoch_is_failed_not_relaunched_for_ever(sweep, cli):
    """The stop file still says 1: resumed at its second epoch, the run trains nothing and ends with exit status 0."""
    code, out, _ = _launch(cli, sweep)
    status = _status(cli, sweep)['a']
    said = ('train.py ended (exit status 0) with the run unfinished, no summary row written (epoch 1 of 2; no row '
            'for epoch 2): a relaunch would do the same; its log says why')
    assert (code, status['state'], status['detail']) == (1, 'failed', said), out
    code, out, _ = _launch(cli, sweep)
    assert code == 0 and 'nothing to launch' in out and 'skipped: 1 failed' in out


def test_an_edited_schedule_in_a_record_is_not_believed(sweep, cli):
    record_path = sweep / 'launch' / 'runs' / 'a.json'
    record = json.loads(record_path.read_text())
    record['schedule'] = {**record['schedule'], 'epochs': 1, 'required': [0]}  # would make a finished
    record_path.write_text(json.dumps(record))
    status = _status(cli, sweep)['a']
    assert (status['state'], status['done'], status['epochs']) == ('unfinished', 1, 2)


# ------------------------------------------------------------------------------------------------- train.py arguments

@pytest.mark.parametrize('argv, said', [
    (['--', '--config', 'other.yaml'], "--config is train.py's --config: a launch runs each recipe as train.py's "
                                       "config (pkmixer train RECIPE), and a --config among the train.py arguments "
                                       "would replace every recipe"),
    (['--conf=other.yaml'], "--conf=other.yaml is train.py's --config"),
    (['-cother.yaml'], "-cother.yaml is train.py's --config"),
    (['OTHER_DIR'], 'OTHER_DIR would reach train.py as its positional data folder (`data`): pkmixer launch takes one '
                    "folder of recipes, and a run's data is its recipe's data_dir (or --data-dir among the train.py "
                    'arguments). Nothing was recorded or started'),
    (['--wandb-tags', *[f't{i}' for i in range(200_000)]], 'the train.py arguments take 2,088,906 bytes (200,001 '
                                                           'arguments; --wandb-tags 200,000 values): more than the '
                                                           '65,536 a launch records'),
])
def test_train_args_a_launch_cannot_give_every_run_are_refused_before_anything_is_written(tmp_path, data, cli,  # noqa: F811
                                                                                          argv, said):
    sweep = tmp_path / 'sweep'
    _recipe(sweep, 'a', data)
    code, _, err = _launch(cli, sweep, *argv)
    assert code == 2 and err.startswith(f'pkmixer launch: error: {said}'), err
    assert sorted(p.name for p in sweep.iterdir()) == ['a.yaml']  # no lock, record or run folder


def test_an_editors_lock_link_is_no_recipe(sweep, cli):
    """emacs's .#a.yaml, a symlink to nothing while a.yaml is edited: status and launch read the folder still."""
    (sweep / '.#a.yaml').symlink_to('root@host.1234:1700000000')
    assert find_recipes(sweep) == [sweep / 'a.yaml']
    code, out, err = cli('status', sweep)
    assert code == 0 and out.splitlines()[1].startswith('a: unfinished (epoch 1 of 2) — epoch 1: top1 ')
    assert f"{sweep}: .#a.yaml left out: hidden, not recipes (an editor's lock or swap file; the shell's *.yaml " \
           f"leaves them out too)" in err
    (sweep / 'b.yml').symlink_to('nowhere.yml')  # not hidden: still refused by name
    code, _, err = cli('status', sweep)
    assert code == 2 and f'{sweep / "b.yml"} is not a recipe: a symlink to nowhere.yml, which does not exist' in err


@pytest.mark.parametrize('target, why', [('moved.yaml', 'is a symlink to moved.yaml, which does not exist'),
                                         ('args.yaml', 'cannot be read (a symlink loop)')])
def test_an_args_yaml_that_is_a_broken_symlink_is_named_not_pending(sweep, cli, target, why):
    args = sweep / 'runs' / 'a' / 'args.yaml'
    args.unlink()
    args.symlink_to(target)
    code, _, err = cli('status', sweep)
    assert code == 2 and err.strip() == f'pkmixer status: error: {args} {why}: train.py writes it; move it away'
