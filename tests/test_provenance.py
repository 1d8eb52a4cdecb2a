"""What made a run: the commit of the package's own checkout (never the caller's), the record a start and a resume
write into the run folder, the environment column of epochs.csv (old files without it still read) and report.md's
count of runs per environment."""
import csv
import io
import json
import shutil
import subprocess
from pathlib import Path

import pytest

from timm_pkmixer.reports.report import build_report, write_report
from timm_pkmixer.runs.epochs_csv import read_epochs_csv, write_epochs_csv
from timm_pkmixer.runs.provenance import (
    ENVIRONMENT_KEYS,
    PROVENANCE_JSON,
    describe_flags,
    environment_key,
    read_provenance,
    record_provenance,
)
from timm_pkmixer.runs.run_folder import RunFileError
from timm_pkmixer.training.provenance import collect_environment, package_commit

from test_report import run_folder

ROOT = Path(__file__).resolve().parent.parent
COMMITTED = ROOT / 'benchmarks' / 'fashion_mnist' / 'fig2' / 'epochs.csv'  # written before the column existed


def _env(**changes):
    env = dict(pkmixer_env=1, started='2025-01-01T00:00:00.000000Z', pkmixer_version='0.2.0', pkmixer_commit='a' * 40,
               pkmixer_dirty=False, torch='2.5.0', timm='1.0.31', python='3.11.7', train_py='train.py',
               train_py_sha256='b' * 64, device_type='cpu', device='AMD EPYC', cpu='AMD EPYC', threads=1, processes=1,
               flags=dict(cuda=False, deterministic_algorithms=False, float32_matmul_precision='highest'))
    env.update(changes)
    return env


def _git(cwd, *argv):
    subprocess.run(['git', '-c', 'user.email=t@t', '-c', 'user.name=t', *argv], cwd=cwd, check=True,
                   capture_output=True)


@pytest.mark.skipif(shutil.which('git') is None, reason='needs git')
def test_the_commit_is_the_packages_own_checkouts_and_none_elsewhere(tmp_path):
    repo = tmp_path / 'checkout'
    (repo / 'timm_pkmixer').mkdir(parents=True)
    (repo / 'timm_pkmixer' / 'x.py').write_text('x = 1\n')
    _git(repo, 'init', '-q')
    _git(repo, 'add', '.')
    _git(repo, 'commit', '-qm', 'one')
    head = subprocess.run(['git', 'rev-parse', 'HEAD'], cwd=repo, capture_output=True, text=True).stdout.strip()
    assert package_commit(repo / 'timm_pkmixer') == (head, False)
    (repo / 'notes.txt').write_text('a run folder or a note beside the package: not a change of the code\n')
    package_commit.cache_clear()
    assert package_commit(repo / 'timm_pkmixer') == (head, False)
    (repo / 'timm_pkmixer' / 'new.py').write_text('y = 2\n')
    package_commit.cache_clear()
    assert package_commit(repo / 'timm_pkmixer') == (head, True)
    # installed into a site-packages that lies inside some other repository: not a checkout of the package
    site = repo / 'venv' / 'site-packages' / 'timm_pkmixer'
    site.mkdir(parents=True)
    assert package_commit(site) == (None, None)
    outside = tmp_path / 'wheel' / 'timm_pkmixer'
    outside.mkdir(parents=True)
    assert package_commit(outside) == (None, None)
    package_commit.cache_clear()


def test_the_environment_names_versions_device_threads_and_no_path(tmp_path, monkeypatch):
    import timm
    import torch
    train_py = tmp_path / 'somewhere' / 'train.py'
    train_py.parent.mkdir()
    train_py.write_text('# train.py\n')
    monkeypatch.chdir(tmp_path)
    env = collect_environment(train_py, 'cpu')
    assert env['torch'] == torch.__version__ and env['timm'] == timm.__version__
    assert env['train_py'] == 'train.py' and env['threads'] == torch.get_num_threads()
    assert env['device_type'] == 'cpu' and env['device'] == env['cpu'] and env['flags']['cuda'] is False
    assert env['flags']['cpu_capability'] == torch.backends.cpu.get_cpu_capability()  # e.g. 'AVX2'
    import timm_pkmixer
    commit, _ = package_commit()
    assert env['pkmixer_commit'] == commit and env['pkmixer_version'] == timm_pkmixer.__version__
    if (ROOT / '.git').exists() and shutil.which('git'):
        assert commit is not None  # the tests run from a checkout
    assert str(tmp_path) not in json.dumps(env) and str(ROOT) not in json.dumps(env)


def test_a_start_is_recorded_once_and_a_resume_beside_it(tmp_path):
    first, again = _env(), _env(started='2025-01-02T00:00:00.000000Z', torch='2.6.0')
    record_provenance(tmp_path, first)
    record_provenance(tmp_path, {**first, 'threads': 1})  # the same start, rewritten when train.py ends
    assert read_provenance(tmp_path)['resumed_in'] == []
    record_provenance(tmp_path, again)
    record_provenance(tmp_path, again)
    env = read_provenance(tmp_path)
    assert env['torch'] == '2.5.0' and [r['torch'] for r in env['resumed_in']] == ['2.6.0']
    assert environment_key(env)[1] == 'resumed in another environment'
    record_provenance(tmp_path / 'late', first, earlier_epochs=3)  # a folder whose first epochs recorded nothing
    assert environment_key(read_provenance(tmp_path / 'late'))[1] == 'epochs before 3 not recorded'
    assert environment_key(None) == (('not recorded',), '')
    (tmp_path / 'bad').mkdir()
    (tmp_path / 'bad' / PROVENANCE_JSON).write_text('{"threads": "one"}')
    with pytest.raises(RunFileError, match='threads is a str'):
        read_provenance(tmp_path / 'bad')


@pytest.mark.parametrize('flags, words', [
    (dict(cuda=False), ''),
    (dict(cuda=False, cpu_capability='AVX2'), 'AVX2 kernels'),
    (dict(cuda=False, cpu_capability='AVX512', deterministic_algorithms=True), 'AVX512 kernels'),
    (dict(cuda=True, cpu_capability='AVX2', cuda_matmul_allow_tf32=False), 'TF32 off'),
    (dict(cuda=True, cuda_matmul_allow_tf32=True, cudnn_allow_tf32=True, cudnn_benchmark=True), 'TF32 on, cuDNN '
                                                                                                  'autotuning'),
    (dict(cuda=True, cuda_matmul_allow_tf32=True, NVIDIA_TF32_OVERRIDE='0'), 'TF32 off (NVIDIA_TF32_OVERRIDE=0)'),
    (dict(cuda=True, cuda_matmul_allow_tf32=False, cudnn_allow_tf32=False, cudnn_deterministic=True),
     'TF32 off, deterministic'),
])
def test_the_flags_that_change_the_arithmetic_in_words(flags, words):
    assert describe_flags(flags) == words


def test_an_epochs_csv_from_before_the_column_reads_and_counts_as_not_recorded(tmp_path):
    runs = read_epochs_csv(COMMITTED)
    assert runs and all(r.environment is None for r in runs)
    report = build_report([str(COMMITTED)], experiment='seeds')
    assert report.environments() == [(('not recorded',), '', len(runs))]
    write_report(report, str(tmp_path), figures=False)
    assert f'| {len(runs)} | not recorded |' in (tmp_path / 'report.md').read_text()


def test_the_report_counts_runs_per_environment_and_epochs_csv_keeps_them(tmp_path):
    for seed in (0, 1, 2):
        run_folder(tmp_path / 'runs', f'a_seed{seed}', seed)
    run_folder(tmp_path / 'runs', 'a_seed3', 3)
    record_provenance(tmp_path / 'runs' / 'a_seed0', _env())
    record_provenance(tmp_path / 'runs' / 'a_seed1', _env(started='2025-02-01T00:00:00.000000Z'))
    record_provenance(tmp_path / 'runs' / 'a_seed2', _env(device_type='cuda', device='NVIDIA H200', threads=1,
                                                          flags=dict(cuda=True, cuda_matmul_allow_tf32=True,
                                                                     NVIDIA_TF32_OVERRIDE='0')))
    (tmp_path / 'runs' / 'a_seed3' / PROVENANCE_JSON).write_text('not json')
    report = build_report([str(tmp_path / 'runs')])
    device = ENVIRONMENT_KEYS.index('device')
    counts = {env[0] if len(env) == 1 else env[device]: n for env, _, n in report.environments()}
    assert counts == {'AMD EPYC': 2, 'NVIDIA H200': 1, 'not recorded': 1}
    assert any('a_seed3' in w and 'not recorded' in w for w in report.warnings)
    write_report(report, str(tmp_path / 'out'), figures=False)
    md = (tmp_path / 'out' / 'report.md').read_text()
    section = md.split('## Environments')[1]
    assert ('| 2 | aaaaaaaaaaaa | 0.2.0 | 2.5.0 | 1.0.31 | 3.11.7 | bbbbbbbbbbbb | cpu: AMD EPYC | 1 | 1 | - |'
            in section)
    assert 'cuda: NVIDIA H200' in section and 'TF32 off (NVIDIA_TF32_OVERRIDE=0)' in section
    assert '| 1 | not recorded |' in section
    # epochs.csv keeps each run's environment on its first row: the report rebuilt from it counts the same
    text = (tmp_path / 'out' / 'epochs.csv').read_text()
    lines = list(csv.DictReader(io.StringIO(text)))
    assert [json.loads(r['environment'])['device'] if r['environment'] else None for r in lines if r['epoch'] == '0'] \
        == ['AMD EPYC', 'AMD EPYC', 'NVIDIA H200', None]
    assert all(not r['environment'] for r in lines if r['epoch'] != '0')
    again = build_report([str(tmp_path / 'out' / 'epochs.csv')])
    assert again.environments() == [e for e in report.environments()]
    write_epochs_csv(again.runs, tmp_path / 'again.csv')
    assert (tmp_path / 'again.csv').read_text() == text


def test_runs_whose_cpu_kernels_differ_are_told_apart(tmp_path):
    """The same code and seed on CPUs whose torch kernels differ (AVX2 against AVX512) round differently, so the
    report counts them as two environments and names the kernels; a record without them stays as it was."""
    cpu = dict(cuda=False, deterministic_algorithms=False, float32_matmul_precision='highest')
    for seed, capability in enumerate(('AVX2', 'AVX512', None)):
        run_folder(tmp_path / 'runs', f'a_seed{seed}', seed)
        flags = {**cpu, 'cpu_capability': capability} if capability else cpu
        record_provenance(tmp_path / 'runs' / f'a_seed{seed}', _env(flags=flags))
    report = build_report([str(tmp_path / 'runs')])
    flags = ENVIRONMENT_KEYS.index('flags')
    assert sorted(env[flags] for env, _, _ in report.environments()) == ['', 'AVX2 kernels', 'AVX512 kernels']
    write_report(report, str(tmp_path / 'out'), figures=False)
    section = (tmp_path / 'out' / 'report.md').read_text().split('## Environments')[1]
    assert '| 1 | 1 | AVX2 kernels |' in section and '| 1 | 1 | AVX512 kernels |' in section


def test_a_broken_environment_column_is_named_by_line(tmp_path):
    text = COMMITTED.read_text().splitlines()
    header, first = text[0] + ',environment', text[1] + ',"[1, 2]"'
    (tmp_path / 'e.csv').write_text('\n'.join([header, first]) + '\n')
    with pytest.raises(RunFileError, match='line 2: column environment of run .* is not a JSON object'):
        read_epochs_csv(tmp_path / 'e.csv')
