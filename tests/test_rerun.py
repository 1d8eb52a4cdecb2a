"""benchmarks/fashion_mnist/rerun.py on a tiny made-up committed experiment: two arms (a one-block S-Mixer, normal
and RP) × two seeds, three epochs on 16 synthetic 8×8 images, trained by the stand-in train.py
(tests/mini_train_py.py) through `pkmixer launch` and reported by `pkmixer report`, as the committed experiments
are. Seed 0 rerun repeats the committed epochs exactly; a committed file whose numbers are moved puts one arm within
the committed spread but not exact, the other outside it (exit 1); every run folder records what made it."""
import csv
import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from test_launch_runs import ENV, MINI, _images, _recipe

from timm_pkmixer.reports.report import build_report, write_report

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / 'benchmarks' / 'fashion_mnist' / 'rerun.py'
pytestmark = pytest.mark.slow  # four runs launched, two reruns of the stand-in train.py: 160 s on the busy 2-core CPU


def _script():
    spec = importlib.util.spec_from_file_location('rerun', SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _rerun(*argv) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *map(str, argv)], capture_output=True, text=True, env=ENV,
                          timeout=600)


@pytest.fixture(scope='module')
def committed(tmp_path_factory):
    """(the committed experiment folder, its data, the folder it was run in)."""
    root = tmp_path_factory.mktemp('committed')
    data = _images(root / 'images')
    sweep = root / 'sweep'
    for permutation in ('normal', 'random'):
        for seed in (0, 1):
            _recipe(sweep, f'{permutation}_seed{seed}', data, epochs=3, seed=seed,
                    model_kwargs=dict(img_size=8, patch_size=2, num_tokens=8, embed_dim=8, num_blocks=1,
                                      permutation=permutation))
    proc = subprocess.run([sys.executable, '-m', 'timm_pkmixer', 'launch', sweep, '--workers', '2', '--threads', '1',
                           '--train-py', MINI], capture_output=True, text=True, env=ENV, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    experiment = root / 'experiment'
    write_report(build_report([str(sweep / 'runs')]), str(experiment), figures=False)
    return experiment, data, sweep


@pytest.fixture(scope='module')
def rerun_dir(committed, tmp_path_factory):
    """Seed 0 of the committed experiment rerun once (the folder is reused by the tests that compare again)."""
    experiment, data, _ = committed
    work = tmp_path_factory.mktemp('rerun')
    proc = _rerun(experiment, '--seed', 0, '--data-dir', data, '--train-py', MINI, '--work-dir', work)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    (work / 'stdout.txt').write_text(proc.stdout)
    return work


def _rows(path: Path):
    with open(path, newline='') as f:
        return {r['arm']: r for r in csv.DictReader(f)}


def test_every_run_folder_records_what_made_it_and_no_machine_path(committed):
    _, _, sweep = committed
    env = json.loads((sweep / 'runs' / 'normal_seed0' / 'pkmixer_env.json').read_text())
    import timm
    import torch
    assert env['torch'] == torch.__version__ and env['timm'] == timm.__version__
    assert env['threads'] == 1 and env['processes'] == 1 and env['device_type'] == 'cpu'
    assert env['train_py'] == 'mini_train_py.py' and len(env['train_py_sha256']) == 64
    assert env['pkmixer_version'] and env['resumed_in'] == [] and env['recorded_from_epoch'] == 0
    text = json.dumps(env)
    assert str(ROOT) not in text and str(sweep) not in text and os.uname().nodename not in text


def test_the_report_carries_the_environment_into_epochs_csv_and_report_md(committed):
    experiment, _, sweep = committed
    md = (experiment / 'report.md').read_text()
    assert '## Environments' in md and '| 4 |' in md and 'not recorded' not in md
    with open(experiment / 'epochs.csv', newline='') as f:
        lines = list(csv.DictReader(f))
    first = {line['run']: line for line in reversed(lines)}
    assert all(json.loads(line['environment'])['threads'] == 1 for line in first.values())
    again = build_report([str(experiment / 'epochs.csv')])
    assert [n for _, _, n in again.environments()] == [4]


def test_a_rerun_of_the_same_code_and_machine_is_exact(rerun_dir):
    out = (rerun_dir / 'stdout.txt').read_text()
    rows = _rows(rerun_dir / 'rerun.csv')
    assert set(rows) == {'normal', 'random'}
    assert {r['verdict'] for r in rows.values()} == {'exact'}, out
    assert {r['env'] for r in rows.values()} == {'same'}, out
    assert all(r['epochs_compared'] == '3' and r['spread_seeds'] == '0 1' for r in rows.values())
    assert '| normal | 0 | 3 | exact |' in out


def test_epochs_check_compares_the_first_epochs_only(committed, rerun_dir):
    experiment, data, _ = committed
    proc = _rerun(experiment, '--seed', 0, '--data-dir', data, '--train-py', MINI, '--work-dir', rerun_dir,
                  '--epochs-check', 1)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = _rows(rerun_dir / 'rerun.csv')
    assert {(r['epochs_compared'], r['verdict']) for r in rows.values()} == {('1', 'exact')}


def _moved(experiment: Path, to: Path, errors: dict) -> Path:
    """A copy of the committed experiment whose last-epoch eval_top1 of each (arm, seed) is 100 − errors[...]."""
    shutil.copytree(experiment, to)
    with open(experiment / 'epochs.csv', newline='') as f:
        reader = csv.DictReader(f)
        fields, lines = reader.fieldnames, list(reader)
    for line in lines:
        name = Path(line['run']).name
        arm, seed = name.rsplit('_seed', 1)
        if line['epoch'] == '2' and (arm, int(seed)) in errors:
            line['eval_top1'] = repr(100. - errors[arm, int(seed)])
    with open(to / 'epochs.csv', 'w', newline='') as f:
        writer = csv.DictWriter(f, fieldnames=fields)
        writer.writeheader()
        writer.writerows(lines)
    return to


def test_a_rerun_outside_the_committed_spread_fails_and_one_inside_is_said_so(committed, rerun_dir, tmp_path):
    experiment, data, _ = committed
    from timm_pkmixer.runs.run_folder import read_run
    err = {arm: read_run(rerun_dir / arm / 'runs' / f'{arm}_seed0').top1_err for arm in ('normal', 'random')}
    moved = _moved(experiment, tmp_path / 'moved',
                   {('normal', 0): err['normal'] - 1, ('normal', 1): err['normal'] + 1,
                    ('random', 0): err['random'] + 5, ('random', 1): err['random'] + 9})
    work = tmp_path / 'work'
    shutil.copytree(rerun_dir, work)  # the reruns are done: only the comparison is new
    proc = _rerun(moved, '--seed', 0, '--data-dir', data, '--train-py', MINI, '--work-dir', work)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    rows = _rows(work / 'rerun.csv')
    assert rows['normal']['verdict'] == 'within spread' and rows['normal']['first_differing_epoch'] == '2'
    assert rows['random']['verdict'] == 'OUTSIDE spread'
    assert float(rows['random']['spread_min']) == pytest.approx(err['random'] + 5)
    assert '[rerun] launching' not in proc.stdout  # nothing was run again


def test_a_seed_the_experiment_lacks_is_refused(committed, tmp_path):
    experiment, data, _ = committed
    proc = _rerun(experiment, '--seed', 7, '--data-dir', data, '--train-py', MINI, '--work-dir', tmp_path)
    assert proc.returncode != 0 and 'no committed run of seed 7' in proc.stderr + proc.stdout


def test_arms_are_the_committed_runs_equal_but_for_the_seed(committed):
    from timm_pkmixer.runs.epochs_csv import read_epochs_csv
    module = _script()
    experiment, _, _ = committed
    arms = module.arms(read_epochs_csv(experiment / 'epochs.csv'))
    assert sorted((module.arm_name(a[0]), sorted(r.seed for r in a)) for a in arms) == [('normal', [0, 1]),
                                                                                       ('random', [0, 1])]


def test_arms_reruns_only_the_arms_matched_and_names_those_left_out(committed, rerun_dir, tmp_path):
    experiment, data, _ = committed
    work = tmp_path / 'work'
    shutil.copytree(rerun_dir, work)
    proc = _rerun(experiment, '--seed', 0, '--data-dir', data, '--train-py', MINI, '--work-dir', work,
                  '--arms', 'rand*')
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = _rows(work / 'rerun.csv')
    assert {arm: r['verdict'] for arm, r in rows.items()} == {'random': 'exact', 'normal': 'not rerun'}
    assert (rows['normal']['epochs_compared'], rows['normal']['top1_err'], rows['normal']['seed']) == ('0', '', '0')
    assert '[rerun] normal: not rerun (not matched by --arms rand*)' in proc.stdout
    proc = _rerun(experiment, '--seed', 0, '--data-dir', data, '--train-py', MINI, '--work-dir', work,
                  '--arms', 'sw_mlp_*')
    assert proc.returncode != 0 and 'no committed run of seed 0 in' in proc.stderr
    assert 'matched by --arms sw_mlp_*' in proc.stderr
