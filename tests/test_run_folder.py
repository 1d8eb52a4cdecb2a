"""The one reader of train.py's files (`timm_pkmixer.runs.run_folder`) and the commands that read through it:
YAML read safely with its aliases bounded, a summary.csv resumed as train.py writes it (read alike by `report` and
`plot run`), faults named by file, line and column, a run's state, epochs.csv and sweep.json that are not JSON, and the
report's
configurations (equal numbers equal, never an empty reason, report.csv in full precision)."""
import csv
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from timm.utils import update_summary

from timm_pkmixer.cli import main as pkmixer
from timm_pkmixer.runs.epochs_csv import read_epochs_csv
from timm_pkmixer.runs.run_folder import RunFileError, read_run, read_summary, run_state
from timm_pkmixer.state_files import YAMLAliasError, load_yaml
from timm_pkmixer.sweeps.sweep_write import read_sweep_record

from conftest import command_messages

ROOT = Path(__file__).resolve().parent.parent
BOMB = ('model: s_mixer_s64c64_32\nseed: 0\na: &a ["x","x","x","x","x","x","x","x","x","x"]\n'
        + ''.join(f'{n}: &{n} [{",".join([f"*{p}"] * 10)}]\n' for p, n in zip('abcdefgh', 'bcdefghi')))


def write_run(root, name, seed=0, rows=((0, 50.), (1, 80.), (2, 90.)), header_at=(0,), **args):
    """A run folder as train.py writes it: args.yaml and summary.csv with `rows` (epoch, top-1) written in order, the
    header written before the rows at the indices `header_at` (train.py's ``write_header=best_metric is None``:
    again after ``--resume``)."""
    out = Path(root) / name
    out.mkdir(parents=True)
    cfg = dict(model='s_mixer_s64c64_32', model_kwargs={'num_blocks': 2}, seed=seed, epochs=3, cooldown_epochs=0,
               warmup_epochs=0, sched='cosine', lr=0.02)
    cfg.update(args)
    (out / 'args.yaml').write_text(yaml.safe_dump(cfg))
    for i, (epoch, top1) in enumerate(rows):
        update_summary(epoch, {'loss': 2. - epoch / 10}, {'loss': 1. + i / 100, 'top1': top1, 'top5': 100.},
                       filename=str(out / 'summary.csv'), lr=0.01, write_header=i in header_at)
    return out


# ---------------------------------------------------------------------------------------------- YAML

@pytest.mark.parametrize('text,expected', [
    (BOMB, "its aliases expand it to more than 10,000 nodes at line "),
    ('a: &a [1, *a]\n', 'the alias *a refers to a node that contains it at line 1, column 11'),
    ('x: &x {k: [1, 2]}\ny: *x\nz: {<<: *x, j: 3}\n', {'x': {'k': [1, 2]}, 'y': {'k': [1, 2]},
                                                      'z': {'k': [1, 2], 'j': 3}}),  # ordinary aliases still read
])
def test_yaml_aliases_are_bounded(text, expected):
    if isinstance(expected, dict):
        assert load_yaml(text) == expected
        return
    with pytest.raises(YAMLAliasError) as e:
        load_yaml(text)
    assert expected in f'{e.value.problem} at line {e.value.problem_mark.line + 1}, column ' \
                       f'{e.value.problem_mark.column + 1}'


@pytest.mark.parametrize('where,argv,code,message', [
    ('args.yaml', ['report', '{root}/runs', '--out-dir', '{root}/out', '--no-figures'], 0,
     'pkmixer report: cannot read bomb: args.yaml: not a train.py args.yaml that can be read safely '
     '(YAMLAliasError: its aliases expand it to more than 10,000 nodes at line 6, column 4)'),
    ('recipe', ['sweep', '{root}/bomb.yaml', '--explain'], 2,
     'pkmixer sweep: error: {root}/bomb.yaml: not a valid YAML recipe (YAMLAliasError: its aliases expand it to '
     'more than 10,000 nodes at line 6, column 4)'),
    ('recipe', ['train', '{root}/bomb.yaml', '--dry-run', '--train-py', '{tests}/mini_train_py.py'], 2,
     'pkmixer train: error: {root}/bomb.yaml: not a valid YAML recipe (YAMLAliasError'),
])
def test_an_alias_bomb_is_refused_promptly_naming_the_file(tmp_path, where, argv, code, message):
    """Without the bound, the report's comparison of arguments and the sweep's explanation expand it without end."""
    (tmp_path / 'runs' / 'bomb').mkdir(parents=True)
    (tmp_path / 'runs' / 'bomb' / 'args.yaml').write_text(BOMB)
    (tmp_path / 'bomb.yaml').write_text(BOMB)
    fill = dict(root=tmp_path, tests=ROOT / 'tests')
    proc = subprocess.run([sys.executable, '-m', 'timm_pkmixer', *(a.format(**fill) for a in argv)],
                          capture_output=True, text=True, timeout=600, env=dict(os.environ, OMP_NUM_THREADS='1'))
    # (the timeout only stops a command that never ends, as one without the bound would: 89 s of the old 120 were
    # used by `pkmixer report` on a 2-core machine at load 17; the bound itself is test_yaml_aliases_are_bounded's)
    assert proc.returncode == code and 'Traceback' not in proc.stderr, proc.stderr
    assert message.format(**fill) in proc.stderr, proc.stderr


# ---------------------------------------------------------------------------------------------- summary.csv

def test_a_resumed_summary_is_read_alike_by_the_report_and_plot_run(tmp_path, capsys):
    """Trained to epoch 2, resumed from the checkpoint of epoch 1 to epoch 3: the header again, epoch 2 twice."""
    folder = write_run(tmp_path, 'resumed', rows=((0, 50.), (1, 60.), (2, 70.), (2, 72.), (3, 80.)),
                       header_at=(0, 3), epochs=4)
    text = (folder / 'summary.csv').read_text().splitlines()
    assert [i for i, line in enumerate(text, 1) if line.startswith('epoch,')] == [1, 5]
    summary = read_summary(folder / 'summary.csv')
    assert summary.faults == () and sorted(summary.epochs) == [0, 1, 2, 3]
    assert summary.lines == {0: 2, 1: 3, 2: 6, 3: 7}   # epoch 2: the row written after the resume
    assert [summary.epochs[e]['eval_top1'] for e in range(4)] == [50., 60., 72., 80.]
    run = read_run(folder)
    assert run.finished and run.problems == [] and run.top1_err == 20.
    from timm_pkmixer.reports.figures import read_summary as plot_summary
    columns = plot_summary(str(folder / 'summary.csv'))
    assert list(columns) == ['epoch', 'train_loss', 'eval_loss', 'eval_top1', 'eval_top5', 'lr']
    assert columns['epoch'].tolist() == [0., 1., 2., 3.]
    assert columns['eval_top1'].tolist() == run.curves['eval_top1'] == [50., 60., 72., 80.]
    assert columns['eval_loss'].tolist() == run.curves['eval_loss'] == [1., 1.01, 1.03, 1.04]
    pytest.importorskip('matplotlib')
    assert pkmixer(['plot', 'run', str(folder / 'summary.csv'), '--out', str(tmp_path / 'r.png')]) == 0
    assert (tmp_path / 'r.png').stat().st_size > 1000


@pytest.mark.parametrize('text,faults', [
    ('epoch,train_loss,eval_top1\n0,1.0,50\n1,1.0\n2,1.0,90\n', ('line 3: 2 values for 3 columns',)),
    ('epoch,train_loss,eval_top1\n0,1.0,50\n1,1.0,x\n2,,90\n',
     ("line 3: column 'eval_top1' holds 'x', not a number", "line 4: column 'train_loss' is empty")),
    ('epoch,train_loss,eval_top1\n0,1.0,50\n-1,1.0,60\n0.5,1,1\n',
     ('line 3: epoch -1 is not an epoch number', 'line 4: epoch 0.5 is not an epoch number')),
    ('epoch,train_loss,eval_top1\n0,1.0,50\nepoch,train_loss\n1,0.5\n', ()),  # a resumed run with fewer columns
])
def test_summary_faults_are_named_by_line_and_column(tmp_path, text, faults):
    (tmp_path / 'summary.csv').write_text(text)
    assert read_summary(tmp_path / 'summary.csv').faults == faults


# ---------------------------------------------------------------------------------------------- a run's state

@pytest.mark.parametrize('make,status,done,scheduled,text', [
    (lambda root: root / 'none', 'not started', 0, 0, 'not started: no args.yaml in {root}/none'),
    (lambda root: write_run(root, 'r', rows=((0, 50.), (1, 60.))), 'unfinished', 2, 3,
     'unfinished: epoch 2 of 3 (no summary row for epoch 3)'),
    (lambda root: write_run(root, 'r', rows=()), 'unfinished', 0, 3,
     'unfinished: epoch 0 of 3 (no summary row for epoch 1–3)'),
    (lambda root: write_run(root, 'r'), 'finished', 3, 3, 'finished (3 of 3 epochs)'),
    (lambda root: write_run(root, 'r', rows=((0, 50.), (1, 60.), (2, 70.), (3, 80.)), epochs=3, cooldown_epochs=1),
     'finished', 4, 4, 'finished (4 of 4 epochs)'),  # train.py's count: a cosine cycle's cooldown epoch
    (lambda root: write_run(root, 'r', rows=((0, 50.), (1, float('nan')))), 'failed', 2, 3,
     'failed: non-finite eval_top1 (nan) at epoch 2'),
    (lambda root: write_run(root, 'r', model_kwargs='num_blocks=2'), 'failed', 0, 0,
     "failed: {root}/r/args.yaml: model_kwargs is a str ('num_blocks=2'), not the mapping of model arguments "
     "train.py writes (--model-kwargs key=value …)"),
])
def test_run_state(tmp_path, make, status, done, scheduled, text):
    state = run_state(make(tmp_path))
    assert (state.status, state.epochs_done, state.epochs_scheduled) == (status, done, scheduled)
    assert str(state) == text.format(root=tmp_path)


# ---------------------------------------------------------------------------------------------- epochs.csv, sweep.json

def _epochs_csv(tmp_path):
    write_run(tmp_path / 'runs', 'a_seed0')
    assert pkmixer(['report', str(tmp_path / 'runs'), '--out-dir', str(tmp_path / 'rep'), '--no-figures']) == 0
    return tmp_path / 'rep' / 'epochs.csv'


@pytest.mark.parametrize('edit,message', [
    (lambda rows: rows[1].__setitem__(-3, '{"model": "s_mixer_s64c64_32", '),
     '{path}, line 2: column config is not JSON (Expecting property name enclosed in double quotes at character 32)'),
    (lambda rows: rows[1].__setitem__(-3, '[1, 2]'),
     "{path}, line 2: column config of run 'a_seed0' is not a train.py configuration (a JSON object with a model)"),
    (lambda rows: rows[2].__setitem__(5, 'x'), "{path}, line 3: column 'train_loss' holds 'x', not a number"),
    (lambda rows: rows[2].__setitem__(4, 'two'), "{path}, line 3: column 'epoch' holds 'two', not an epoch number"),
])
def test_an_epochs_csv_that_is_not_what_the_report_writes_is_named(tmp_path, capsys, edit, message):
    path = _epochs_csv(tmp_path)
    with open(path, newline='') as f:
        rows = list(csv.reader(f))
    assert rows[0][4:6] == ['epoch', 'train_loss'] and rows[0][-3:] == ['config', 'read_problems', 'environment']
    edit(rows)
    with open(path, 'w', newline='') as f:
        csv.writer(f).writerows(rows)
    with pytest.raises(RunFileError) as e:
        read_epochs_csv(path)
    assert str(e.value) == message.format(path=path)
    capsys.readouterr()
    assert pkmixer(['report', str(path), '--out-dir', str(tmp_path / 'again')]) == 2
    err = command_messages(capsys.readouterr().err)
    assert err == f'pkmixer report: error: {message.format(path=path)}\n'


@pytest.mark.parametrize('text,message', [
    ('{"sweeps": [', '{path}: not JSON (Expecting value at line 1, column 13); `pkmixer sweep` writes it, move it '
                     'away to start a new record'),
    ('[1, 2]\n', '{path}: not a sweep record (a JSON object with a list of sweeps)'),
])
def test_a_sweep_json_that_is_not_a_record_is_named_before_anything_is_written(tmp_path, capsys, text, message):
    out = tmp_path / 'sweep'
    out.mkdir()
    (out / 'sweep.json').write_text(text)
    with pytest.raises(RunFileError) as e:
        read_sweep_record(out / 'sweep.json')
    assert str(e.value) == message.format(path=out / 'sweep.json')
    assert pkmixer(['sweep', 'cifar10/s_mixer_fig7', '--experiment', 'depth', '--seeds', '0', '--out-dir', str(out),
                    '--add']) == 2
    assert command_messages(capsys.readouterr().err) == \
        f'pkmixer sweep: error: {message.format(path=out / "sweep.json")}\n'
    assert sorted(p.name for p in out.iterdir()) == ['sweep.json']


# ---------------------------------------------------------------------------------------------- the report

def test_equal_numbers_are_one_configuration(tmp_path):
    from timm_pkmixer.reports.report import build_report
    kwargs = dict(num_blocks=2, mlp_ratio=None)
    write_run(tmp_path, 'g_seed0', 0, model='pk_mixer_ss_w_32', model_kwargs={**kwargs, 'gamma': 4})
    write_run(tmp_path, 'g_seed1', 1, model='pk_mixer_ss_w_32', model_kwargs={**kwargs, 'gamma': 4.0}, lr=0.020)
    report = build_report([str(tmp_path)])
    assert report.listed == [] and [(p.point, len(p.runs)) for p in report.points] == [('g', 2)]


def test_every_listed_run_has_a_reason(tmp_path):
    """`lr: null` in one args.yaml and no lr in the other: two configurations, and the reason says where."""
    from timm_pkmixer.reports.report import build_report
    write_run(tmp_path, 'a_seed0', 0, lr=None)
    write_run(tmp_path, 'b_seed1', 1)
    args = yaml.safe_load((tmp_path / 'b_seed1' / 'args.yaml').read_text())
    del args['lr']
    (tmp_path / 'b_seed1' / 'args.yaml').write_text(yaml.safe_dump(args))
    report = build_report([str(tmp_path)])
    assert {x.name: x.reason for x in report.listed} == {
        'a_seed0': 'same model as another group but differs on lr (in one only): not averaged',
        'b_seed1': 'same model as another group but differs on lr (in one only): not averaged'}


def test_report_csv_keeps_every_digit_and_report_md_rounds(tmp_path):
    from timm_pkmixer.reports.report import build_report, write_report
    last = (78.9262, 78.9262, 78.9261)  # errors 21.0738, 21.0738, 21.0739
    for seed, top1 in enumerate(last):
        write_run(tmp_path / 'runs', f'p_seed{seed}', seed, rows=((0, 50.), (1, 60.), (2, top1)))
    report = build_report([str(tmp_path / 'runs')])
    write_report(report, str(tmp_path / 'out'), figures=False)
    with open(tmp_path / 'out' / 'report.csv') as f:
        (row,) = list(csv.DictReader(f))
    mean = report.rows()[0]['top1_err_mean']
    assert row['top1_err_mean'] == repr(mean) and float(row['top1_err_mean']) == mean
    assert mean == pytest.approx(21.073833333, abs=1e-8) and row['top1_err_mean'] != '21.07'
    assert float(row['top1_err_sd']) == report.rows()[0]['top1_err_sd']
    assert float(row['density']) == report.points[0].description.density
    md = (tmp_path / 'out' / 'report.md').read_text()
    assert '| p | s_mixer_s64c64_32 reshaped to S = 64, C = 64, L = 2 | 2 | 64 | 64 | 4096 | normal | 3 | 21.07 | ' \
           '5.774e-05 |' in md  # num_blocks=2 reshapes the registered L = 8 model: the name says what was built


# -------------------------------------------------------------------------- plot run on a file that is not a summary

@pytest.mark.parametrize('content,message', [
    (b'epoch,train_loss,eval_top1\n0,1.5,abc\n', "bad.csv, line 2: column 'eval_top1' holds 'abc', not a number"),
    (b'epoch,train_loss\n0,1.5\n1,x\n', "bad.csv, line 3: column 'train_loss' holds 'x', not a number"),
    (bytes(range(128, 256)) * 3, 'bad.csv is not a timm train.py summary.csv: not a text file'),
    (b'epoch,train_loss\n0,1.5,7\n', 'bad.csv, line 2: 3 values for 2 columns'),
    (b'foo,bar\n1,2\n', 'bad.csv is not a timm train.py summary.csv (needs epoch and train_loss columns'),
    (b'', 'bad.csv is not a timm train.py summary.csv'),
])
def test_plot_run_on_a_csv_that_is_not_a_summary(files, cli, content, message):
    pytest.importorskip('matplotlib')
    (files / 'bad.csv').write_bytes(content)
    code, _, err = cli('plot', 'run', 'bad.csv', '--out', 'x.png')
    assert code == 2 and err.startswith('pkmixer plot run: error: ') and message in err, err
