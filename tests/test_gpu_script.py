"""benchmarks/gpu/: the one GPU script (run_all.py). Its plan's arithmetic (probe.plan_epochs), its stop at the
deadline, the B-W benchmark's ratios (bench_b_w.summarize), the smoke test's synthetic data, the carried data's
preparation, and the smoke test itself: every phase on the CPU at toy sizes, and what it wrote checked file by file
(needs timm's train.py and benchmark.py: TIMM_TRAIN_PY, TIMM_BENCHMARK_PY or benchmark.py beside train.py)."""
import csv
import hashlib
import json
import os
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest
import timm
import torch

ROOT = Path(__file__).resolve().parent.parent
GPU = ROOT / 'benchmarks' / 'gpu'
sys.path.insert(0, str(GPU))
import bench_b_w  # noqa: E402
import probe  # noqa: E402
import run_all  # noqa: E402

REAL_TRAIN_PY = os.environ.get('TIMM_TRAIN_PY')  # read before a fixture clears it
REAL_BENCHMARK_PY = os.environ.get('TIMM_BENCHMARK_PY') or (
    str(Path(REAL_TRAIN_PY).with_name('benchmark.py')) if REAL_TRAIN_PY else None)
HAVE_SCRIPTS = bool(REAL_TRAIN_PY and Path(REAL_TRAIN_PY).is_file() and REAL_BENCHMARK_PY
                    and Path(REAL_BENCHMARK_PY).is_file())
DEBIAN_FMNIST = Path('/usr/share/datasets/fashion-mnist')


def _probe(name, rate):
    return dict(recipe=name, steps_per_s=rate)


# ------------------------------------------------------------------------------------------------- the plan

def test_the_slowest_run_sets_the_epochs_that_fit():
    plan = probe.plan_epochs([_probe('a', 10.0), _probe('b', 4.0)], seconds_left=600, startup_s=60, batch=128,
                             max_epochs=200)
    assert plan['epoch_s'] == pytest.approx(468 / 4.0 * 1.16)  # 60,000 // 128 steps at b's rate, ×1.16
    assert (plan['fit'], plan['epochs'], plan['slowest']) == (3, 3, 'b')  # 540 / 135.7 = 3.98
    assert plan['estimated_training_s'] == pytest.approx(60 + 3 * 468 / 4.0 * 1.16)
    assert plan['reason'] == ('2 runs at once; the slowest, b, made 4.00 steps/s in the probe: 468 steps an epoch '
                              '×1.16 (evaluation, checkpoint) = 135.7 s an epoch; 600 s left for training, 60 s of '
                              'it to start: 3 epochs fit; 3 chosen (set by the time left, cap 200, floor 1)')


def test_the_mean_pace_plans_on_the_runs_mean_time_a_step_with_a_margin():
    plan = probe.plan_epochs([_probe('a', 10.0), _probe('b', 4.0)], 600, 60, 128, 200, pace='mean')
    step = 1.25 * (1 / 10.0 + 1 / 4.0) / 2
    assert plan['epoch_s'] == pytest.approx(468 * step * 1.16)
    assert plan['epochs'] == 4  # 540 / 118.8 = 4.55: one more than the slowest pace
    assert 'their mean time a step ×1.25 is 0.219 s' in plan['reason']


def test_the_plan_keeps_to_its_cap_and_floor_and_counts_the_data_it_has():
    capped = probe.plan_epochs([_probe('a', 100.0)], 1e6, 0, 128, max_epochs=15)
    assert (capped['epochs'], capped['fit']) == (15, 184202)  # 1e6 s / (468 / 100 × 1.16 s)
    assert 'set by the cap, cap 15' in capped['reason']
    none_fit = probe.plan_epochs([_probe('a', 1.0)], 100, 90, 128, max_epochs=15)
    assert (none_fit['epochs'], none_fit['fit']) == (1, 0)
    assert 'set by the floor' in none_fit['reason']
    tiny = probe.plan_epochs([_probe('a', 1.0)], 100, 0, 128, max_epochs=15, train_images=256)
    assert tiny['steps_per_epoch'] == 2 and tiny['epoch_s'] == pytest.approx(2 * 1.16)


# ------------------------------------------------------------------------------------------------- the deadline

def _gone(pid: int) -> bool:
    try:
        with open(f'/proc/{pid}/stat') as f:
            return f.read().rsplit(')', 1)[1].split()[0] == 'Z'
    except OSError:
        return True


def test_a_phase_past_its_deadline_is_stopped_with_its_children(tmp_path):
    script = ('import subprocess, sys, time\n'
              'p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])\n'
              'print(p.pid, flush=True)\n'
              'time.sleep(120)\n')
    log = tmp_path / 'child.log'
    proc = run_all.start([sys.executable, '-c', script], log, dict(os.environ))
    end = time.time() + 60
    while not log.read_text().strip() and time.time() < end:
        time.sleep(0.1)
    grandchild = int(log.read_text().split()[0])
    started = time.time()
    assert run_all.wait_all([proc], 1.0) is False
    assert time.time() - started < 15
    assert proc.poll() is not None
    end = time.time() + 10
    while not _gone(grandchild) and time.time() < end:
        time.sleep(0.1)
    assert _gone(grandchild)


def _raise(error):
    raise error


def test_a_failing_phase_is_said_and_the_others_run(capsys):
    phases = run_all.Phases(run_all.Clock(100))
    assert phases.run('bad', lambda: 1 / 0) is None
    assert phases.run('refused', _raise, run_all.PhaseError('failed: no data')) is None
    kept = run_all.PhaseResult(dict(finished=2), 'stopped at the deadline: 2 of 3 runs finished 4 epochs')
    assert phases.run('partial', _raise, kept) == dict(finished=2)
    assert phases.run('good', lambda: 7) == 7
    assert [(r['phase'], r['status']) for r in phases.rows] == [
        ('bad', 'failed (a bug): ZeroDivisionError: division by zero'), ('refused', 'failed: no data'),
        ('partial', 'stopped at the deadline: 2 of 3 runs finished 4 epochs'), ('good', 'ok')]
    assert 'ZeroDivisionError' in capsys.readouterr().err  # the bug's traceback is shown


def test_a_probe_without_a_result_costs_its_rate_not_the_plan(tmp_path):
    recipes = [tmp_path / f'{n}.yaml' for n in ('a', 'b', 'c')]
    (tmp_path / 'a.json').write_text(json.dumps(_probe('a', 3.0)))
    (tmp_path / 'c.json').write_text(json.dumps(_probe('c', 1.5)))
    probes, missing = run_all.collect_probes(recipes, tmp_path)
    assert [p['recipe'] for p in probes] == ['a', 'c'] and missing == ['b']
    assert probe.plan_epochs(probes, 1000, 0, 128, 200)['slowest'] == 'c'


# ------------------------------------------------------------------------------------------------- B-W ratios

def test_the_b_w_ratio_is_the_normal_models_rate_over_the_rp_models_per_repetition():
    rows = [dict(rep=0, model='pk_mixer_b_w', infer_samples_per_sec='100', train_samples_per_sec='40', error=''),
            dict(rep=0, model='rp_mixer_b_w', infer_samples_per_sec='80', train_samples_per_sec='40', error=''),
            dict(rep=1, model='rp_mixer_b_w', infer_samples_per_sec='50', train_samples_per_sec='20', error=''),
            dict(rep=1, model='pk_mixer_b_w', infer_samples_per_sec='100', train_samples_per_sec='30', error='')]
    s = bench_b_w.summarize(rows)
    assert s['infer']['ratios'] == [1.25, 2.0] and s['infer']['ratio_median'] == pytest.approx(1.625)
    assert s['train']['ratios'] == [1.0, 1.5] and (s['train']['ratio_min'], s['train']['ratio_max']) == (1.0, 1.5)
    assert s['infer']['samples_per_s'] == {'pk_mixer_b_w': 100.0, 'rp_mixer_b_w': 65.0}
    assert s['errors'] == []
    failed = bench_b_w.summarize(rows[:2] + [dict(rep=1, model='rp_mixer_b_w', error='CUDA out of memory')])
    assert failed['errors'] == ['rp_mixer_b_w: CUDA out of memory'] and failed['infer']['ratios'] == [1.25]


def test_benchmark_py_is_looked_for_where_the_user_said_and_named_when_missing(tmp_path, monkeypatch):
    monkeypatch.delenv(bench_b_w.BENCHMARK_PY_ENV, raising=False)
    monkeypatch.setenv('TIMM_TRAIN_PY', str(tmp_path / 'train.py'))
    (tmp_path / 'benchmark.py').write_text('')
    assert bench_b_w.find_benchmark_py(None) == tmp_path / 'benchmark.py'  # beside train.py
    monkeypatch.delenv('TIMM_TRAIN_PY')
    with pytest.raises(FileNotFoundError, match=r"timm's benchmark.py not found \(nothing given\): it is not in the "
                                                r'timm wheel; give --benchmark-py or TIMM_BENCHMARK_PY'):
        bench_b_w.find_benchmark_py(None)


# ------------------------------------------------------------------------------------------------- data

def test_the_smoke_tests_fashion_mnist_reads_as_timms_torch_fashion_mnist(tmp_path):
    from timm.data import create_dataset
    run_all.write_synthetic_fashion_mnist(tmp_path, 20, 10)
    train = create_dataset('torch/fashion_mnist', root=str(tmp_path), split='train', download=False)
    test = create_dataset('torch/fashion_mnist', root=str(tmp_path), split='validation', download=False)
    assert (len(train), len(test)) == (20, 10)
    image, label = train[13]
    assert image.size == (28, 28) and label == 3
    assert run_all.idx_count(tmp_path / 'FashionMNIST' / 'raw' / 'train-images-idx3-ubyte') == 20


@pytest.mark.slow
@pytest.mark.skipif(not all((DEBIAN_FMNIST / f'{n}.gz').is_file() for n in (
    'train-images-idx3-ubyte', 'train-labels-idx1-ubyte', 't10k-images-idx3-ubyte', 't10k-labels-idx1-ubyte')),
    reason="Debian's dataset-fashion-mnist is not installed (.ci/install-fashion-mnist)")
def test_the_carried_gz_files_are_prepared_as_on_the_device(tmp_path):
    """The GPU path's data: the four .gz files prepare_carry.py carries, prepared by pkmixer prepare-fashion-mnist."""
    (tmp_path / 'logs').mkdir()
    (tmp_path / 'carry' / 'fashion-mnist').mkdir(parents=True)
    for f in DEBIAN_FMNIST.glob('*.gz'):
        os.symlink(f, tmp_path / 'carry' / 'fashion-mnist' / f.name)
    data = run_all.prepare_data(tmp_path, False, None, tmp_path / 'carry', run_all.child_env({}), 300)
    assert (data['train_images'], data['test_images']) == (60000, 10000)
    assert data['kind'] == 'Fashion-MNIST (prepared from the carried .gz files)'
    with pytest.raises(run_all.PhaseError, match='failed: no data: give --data-dir'):
        run_all.prepare_data(tmp_path, False, None, None, {}, 10)


@pytest.mark.skipif(torch.cuda.is_available(), reason='this machine has CUDA')
def test_without_cuda_the_gpu_plan_is_refused_by_name():
    out = subprocess.run([sys.executable, str(GPU / 'run_all.py'), '--budget-s', '10'], capture_output=True,
                         text=True, timeout=300, cwd=ROOT)
    assert out.returncode == 2
    assert out.stderr.strip().endswith('run_all.py: error: no CUDA device here: run with --smoke on a CPU')


# ------------------------------------------------------------------------------------------------- the smoke test

EXPECTED_FILES = {'provenance.json', 'summary.md', 'bench_b_w.csv', 'probe.csv', 'rp_cost/rp_cost.json',
                  'rp_cost/rp_cost.md'} | {f'{fig}/{f}' for fig, kind in (('fig6', 'width'), ('fig7', 'depth'))
                                           for f in ('report.md', 'report.csv', 'epochs.csv', 'verdict.json',
                                                     f'curves_{kind}.png', f'eval_loss_{kind}.png', f'{kind}.png')}
FIG6_POINTS = {'width_c16_s173_normal', 'width_c64_s64_normal', 'width_c173_s16_normal'}
FIG7_POINTS = {f'depth_L{d}_{p}' for d in (4, 8, 12) for p in ('normal', 'random')}


@pytest.fixture(scope='module')
def smoke(tmp_path_factory):
    """run_all.py --smoke, once for the tests below: (exit status, stdout, the results folder, the archive, the
    temporary root)."""
    tmp = tmp_path_factory.mktemp('gpu_smoke')
    out, archive = tmp / 'results' / 'smoke', tmp / 'results.tar.gz'
    env = dict(os.environ, TIMM_TRAIN_PY=REAL_TRAIN_PY, TIMM_BENCHMARK_PY=REAL_BENCHMARK_PY, OMP_NUM_THREADS='1')
    proc = subprocess.run([sys.executable, str(GPU / 'run_all.py'), '--smoke', '--work-dir', str(tmp / 'work'),
                           '--out-dir', str(out), '--archive', str(archive)], capture_output=True, text=True,
                          timeout=1800, cwd=ROOT, env=env)
    return proc.returncode, proc.stdout + proc.stderr, out, archive, tmp


def _csv(path):
    with open(path, newline='') as f:
        return list(csv.DictReader(f))


@pytest.mark.slow
@pytest.mark.skipif(not HAVE_SCRIPTS, reason="TIMM_TRAIN_PY (and benchmark.py beside it, or TIMM_BENCHMARK_PY) not "
                                             "set: timm's scripts are not in the timm wheel")
def test_the_smoke_test_runs_every_phase_and_writes_sane_results(smoke):
    code, log, out, archive, tmp = smoke
    assert code == 0, log[-4000:]
    assert 'plan: 9 runs at once; the slowest, ' in log and '1 chosen (set by the cap, cap 1, floor 1)' in log

    files = {p.relative_to(out).as_posix() for p in out.rglob('*') if p.is_file()}
    assert files == EXPECTED_FILES
    for folder in [out, *[p for p in out.rglob('*') if p.is_dir()]]:
        assert sum(1 for p in folder.iterdir() if p.is_file()) <= 8  # tests/test_layout.py's rule
    for name in files:  # no machine path: neither the temporary folders nor this checkout's
        if not name.endswith('.png'):
            text = (out / name).read_text(encoding='utf-8')
            assert str(tmp) not in text and str(ROOT) not in text and '/tmp/' not in text, name

    prov = json.loads((out / 'provenance.json').read_text())
    assert [(r['phase'], r['status']) for r in prov['phases']] == [
        (p, 'ok') for p in ('data', 'sweep', 'bench_b_w', 'rp_cost', 'probe', 'train', 'report')]
    env = prov['environment']
    assert (env['torch'], env['timm'], env['device_type']) == (torch.__version__, timm.__version__, 'cpu')
    commit = env['source']['commit']  # the checkout's commit when the smoke started: HEAD or, if others committed
    assert len(commit) == 40 and env['source']['read_from'] == 'git'  # since, its ancestor
    assert subprocess.run(['git', '-C', str(ROOT), 'merge-base', '--is-ancestor', commit, 'HEAD']).returncode == 0
    assert env['train_py'] == 'train.py'
    assert env['train_py_sha256'] == hashlib.sha256(Path(REAL_TRAIN_PY).read_bytes()).hexdigest()
    assert env['benchmark_py_sha256'] == hashlib.sha256(Path(REAL_BENCHMARK_PY).read_bytes()).hexdigest()
    assert prov['data'] == dict(kind='synthetic (the smoke test)', train_images=256, test_images=128)
    assert prov['plan']['epochs'] == 1 and prov['plan']['fit'] >= 1 and prov['plan']['runs'] == 9
    train = prov['training']
    assert (train['finished'], train['planned'], train['stopped_at_deadline']) == (9, 9, False)
    assert all(r == dict(state='finished', epochs_done=1, epochs=1) for r in train['runs'].values())
    assert prov['wall_s'] <= prov['budget_s']

    rows = _csv(out / 'bench_b_w.csv')
    assert list(rows[0]) == list(bench_b_w.FIELDS)
    assert [r['model'] for r in rows] == list(bench_b_w.SMOKE_MODELS) and not any(r['error'] for r in rows)
    assert all(float(r[f'{b}_samples_per_sec']) > 0 for r in rows for b in bench_b_w.BENCHES)
    assert all(prov['bench_b_w'][b]['ratio_median'] > 0 for b in bench_b_w.BENCHES)

    cost = json.loads((out / 'rp_cost' / 'rp_cost.json').read_text())
    assert [(r['model'], r['mode']) for r in cost['results']] == [('table_s3', 'eager')]
    assert len(cost['results'][0]['ratios']) == 2 and all(x > 0 for x in cost['results'][0]['ratios'])
    assert prov['rp_cost']['eager']['ratio_median'] > 0

    probes = _csv(out / 'probe.csv')
    assert {p['recipe'].rsplit('_seed', 1)[0] for p in probes} == FIG6_POINTS | FIG7_POINTS
    assert all(float(p['steps_per_s']) > 0 and p['measured_with'] == '9' for p in probes)

    for fig, points in (('fig6', FIG6_POINTS), ('fig7', FIG7_POINTS)):
        epochs = _csv(out / fig / 'epochs.csv')
        assert sorted(r['run'].rsplit('/', 1)[1].rsplit('_seed', 1)[0] for r in epochs) == sorted(points)
        assert all(r['epoch'] == '0' and r['seed'] == '0' and 0 <= float(r['eval_top1']) <= 100 for r in epochs)
        assert {r['point'] for r in _csv(out / fig / 'report.csv')} == points
    summary = (out / 'summary.md').read_text()
    assert '**Training**: 9 of 9 runs finished 1 epochs' in summary and '| train |' in summary

    with tarfile.open(archive) as tar:
        packed = {n for n in tar.getnames() if tar.getmember(n).isfile()}
    assert packed == {f'smoke/{f}' for f in files}
