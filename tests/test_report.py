"""`pkmixer report` on train.py run folders as train.py writes them: runs named anything, resumed, stopped short,
diverged. Each case asserts the grouping, the numbers and what is listed. Folders are written with timm's own
``update_summary`` (train.py's writer); a real resume runs train.py itself (``TIMM_TRAIN_PY``) or, in CI, the
stand-in ``tests/mini_train_py.py`` restarted into the same folder."""
import csv
import json
import math
import os
import statistics
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from timm.utils import update_summary

from timm_pkmixer.cli import main as pkmixer
from timm_pkmixer.reports.report import build_report, infer_experiment, write_report
from timm_pkmixer.runs.run_folder import read_run, scheduled_epochs

from conftest import keep_figures

TESTS = Path(__file__).resolve().parent


def run_folder(root, name, seed=0, top1=(50., 80., 90.), loss=None, epochs=3, resume_at=None, model_kwargs=None,
               model='s_mixer_s64c64_32', rows=None, **args):
    """A run folder as train.py writes it: args.yaml and summary.csv (a header again where `resume_at` epochs
    start, as train.py's ``write_header=best_metric is None`` after ``--resume``); `rows`: the epochs written, in
    order (default every epoch once)."""
    out = Path(root) / name
    out.mkdir(parents=True)
    cfg = dict(model=model, model_kwargs={'num_blocks': 2, **(model_kwargs or {})}, seed=seed, experiment=name,
               epochs=epochs, cooldown_epochs=0, warmup_epochs=0, sched='cosine', lr=0.02, data_dir='/data/x',
               output=str(root))
    cfg.update(args)
    (out / 'args.yaml').write_text(yaml.safe_dump(cfg))
    loss = loss or [1.0] * len(top1)
    for i, epoch in enumerate(range(len(top1)) if rows is None else rows):
        update_summary(epoch, {'loss': 1.0}, {'loss': loss[i], 'top1': top1[i], 'top5': 100.},
                       filename=str(out / 'summary.csv'), lr=0.01, write_header=(i == 0 or i == resume_at))
    return out


def rows_by(report, key='point'):
    return {r[key]: r for r in report.rows()}


def listed(report):
    return {x.name: x.reason for x in report.listed}


# ---------------------------------------------------------------------------------------------- identity

def test_runs_named_anything_are_grouped_by_configuration(tmp_path):
    """Twelve runs of a depth study under train.py's default names: four groups of three seeds, named `depth`."""
    errs = {}
    for i, (depth, perm, seed) in enumerate((d, p, s) for d in (4, 8) for p in ('normal', 'random') for s in (0, 1, 2)):
        last = 90. - depth - (5 if perm == 'random' else 0) - seed
        errs.setdefault((depth, perm), []).append(100. - last)
        run_folder(tmp_path, f'20240101-1200{i:02d}-s_mixer_s64c64_32-32', seed, top1=(50., 70., last),
                   model_kwargs=dict(num_blocks=depth, permutation=perm, **({'perm_seed': seed} if perm == 'random'
                                                                             else {})))
    report = build_report([str(tmp_path)])
    assert report.experiment == 'depth' and report.listed == [] and report.unreadable == []
    assert 'depth' in report.varies and 'permutation' in report.varies
    rows = rows_by(report)
    assert sorted(rows) == ['L4_S64C64_normal', 'L4_S64C64_random', 'L8_S64C64_normal', 'L8_S64C64_random']
    for (depth, perm), e in errs.items():
        row = rows[f'L{depth}_S64C64_{perm}']
        assert (row['runs'], row['seeds'], row['num_blocks'], row['permutation']) == (3, '0 1 2', depth, perm)
        assert row['top1_err_mean'] == pytest.approx(statistics.fmean(e))
        assert row['top1_err_sd'] == pytest.approx(statistics.stdev(e))
        assert row['experiment'] == 'depth'


@pytest.mark.parametrize('points,experiment', [
    # (model, model_kwargs) per group → the experiment named by what varies
    ([('s_mixer_s64c64_32', dict(num_blocks=2, permutation=p)) for p in ('normal', 'random')], 'comparison'),
    ([('s_mixer_s64c64_32', dict(num_blocks=2, permutation=p)) for p in
      ('normal', 'random', ['random', 'normal'], ['normal', 'random'])], 'rp-block'),
    ([('s_mixer_s64c64_32', dict(num_blocks=2, num_tokens=s, embed_dim=c))
      for c, s in ((16, 173), (173, 16), (64, 64))], 'width'),
    ([('s_mixer_s64c64_32', dict(num_blocks=2, num_tokens=113, embed_dim=32)),
      ('sw_mlp_o18_32', dict(num_blocks=2, density=0.5))], 'width'),
    ([('pk_mixer_ss_w_32', dict(num_blocks=2, num_tokens=4096 // c, embed_dim=c, mlp_ratio=None,
                                gamma=round(2 * 2 ** 20 / (4096 * (c + 4096 / c)), 6))) for c in (16, 64)], 'gamma'),
    ([('s_mixer_s64c64_32', dict(num_blocks=2, patch_size=p, num_tokens=64, embed_dim=64)) for p in (2, 4)],
     'patch'),
    ([('s_mixer_s64c64_32', dict(num_blocks=L, patch_size=p)) for L, p in ((2, 2), (4, 4))], 'depth+patch'),
])
def test_the_experiment_is_named_by_what_varies(points, experiment):
    from timm_pkmixer.catalog import summarize
    from timm_pkmixer.reports.report import _features
    feats = [_features(summarize(m, **kw), kw) for m, kw in points]
    assert infer_experiment(feats)[0] == experiment


def test_experiment_can_be_given_and_runs_that_differ_elsewhere_are_listed(tmp_path):
    run_folder(tmp_path, 'a_seed0', 0, top1=(50., 80., 90.))
    run_folder(tmp_path, 'a_seed1', 1, top1=(50., 80., 86.))
    run_folder(tmp_path, 'b_seed0', 0, top1=(50., 80., 70.), lr=0.1)  # same model, another learning rate
    run_folder(tmp_path, 'c_seed0', 0, top1=(50., 80., 60.), model_kwargs=dict(num_tokens=32, embed_dim=32))
    report = build_report([str(tmp_path)], experiment='width')
    assert report.experiment == 'width'
    assert listed(report) == {
        'a_seed0': 'same model as another group but differs on lr: not averaged',
        'a_seed1': 'same model as another group but differs on lr: not averaged',
        'b_seed0': 'same model as another group but differs on lr: not averaged'}
    assert [x.top1_err for x in report.listed] == pytest.approx([10., 14., 30.])
    assert list(rows_by(report)) == ['c'] and rows_by(report)['c']['top1_err_mean'] == pytest.approx(40.)
    with pytest.raises(ValueError, match="experiment must be one of width, depth, rp-block, gamma, patch"):
        build_report([str(tmp_path)], experiment='size')


# ---------------------------------------------------------------------------------------------- epochs

@pytest.mark.parametrize('args,required', [
    (dict(epochs=4), (0, 1, 2, 3)),
    (dict(epochs=3, cooldown_epochs=1), (0, 1, 2, 3)),
    (dict(epochs=3, warmup_epochs=1, warmup_prefix=True), (0, 1, 2, 3)),
    (dict(epochs=3, warmup_epochs=1), (0, 1, 2)),                     # warm-up inside the epochs
    (dict(epochs=4, val_interval=2), (1, 3)),                         # summary rows only where train.py validates
    (dict(epochs=5, val_interval=2), (1, 3, 4)),                      # and at the last epoch
    (dict(epochs=2, lr_cycle_limit=2, lr_cycle_mul=1.0), (0, 1, 2, 3)),  # two cosine cycles
    (dict(epochs=4, sched='step', decay_epochs=1, cooldown_epochs=2), (0, 1, 2, 3)),  # no cycles: no cooldown
])
def test_scheduled_epochs_are_train_pys(args, required):
    assert scheduled_epochs({'sched': 'cosine', 'warmup_epochs': 0, **args})[1] == required


@pytest.mark.parametrize('rows,resume_at,args,finished,top1_err', [
    ((0, 1, 2, 3), None, dict(epochs=4), True, 100 - 93.),
    ((0, 1, 2, 2), None, dict(epochs=4), False, None),                # four rows are not four epochs
    ((0, 1, 2, 3), 2, dict(epochs=4), True, 100 - 93.),               # a header again after --resume
    ((0, 1, 2, 1, 2, 3), 3, dict(epochs=4), True, 100 - 95.),         # resumed from epoch 1: the last row wins
    ((0, 1, 2), None, dict(epochs=3, cooldown_epochs=1), False, None),
    ((0, 1, 2), None, dict(epochs=3, warmup_epochs=1, warmup_prefix=True), False, None),
    ((1, 3), None, dict(epochs=4, val_interval=2), True, 100 - 91.),
])
def test_completion_and_last_epoch_as_train_py_writes_them(tmp_path, rows, resume_at, args, finished, top1_err):
    top1 = [90. + i for i in range(len(rows))]  # 90, 91, …: the last written row of each epoch is recognisable
    run_folder(tmp_path, 'run_seed0', 0, top1=top1, rows=rows, resume_at=resume_at, **args)
    run_folder(tmp_path, 'run_seed1', 1, top1=top1, rows=rows, resume_at=resume_at, **args)
    run = read_run(tmp_path / 'run_seed0')
    assert run.finished is finished and run.problems == []
    report = build_report([str(tmp_path)])
    if finished:
        assert report.listed == [] and rows_by(report)['run']['top1_err_mean'] == pytest.approx(top1_err)
        assert rows_by(report)['run']['runs'] == 2
    else:
        assert report.rows() == [] and len(report.listed) == 2 and report.unfinished == report.listed
        assert listed(report)['run_seed0'] == f'unfinished: 3 of {len(run.required)} epochs (missing 4)'  # from 1


# ---------------------------------------------------------------------------------------------- not measurements

NAN = float('nan')


@pytest.mark.parametrize('name,kwargs,reason', [
    ('top1_250', dict(top1=(50., 80., 250.)), 'eval_top1 = 250 at epoch 3 is outside [0, 100]'),  # epochs from 1
    ('top1_negative', dict(top1=(50., -1., 90.)), 'eval_top1 = -1 at epoch 2 is outside [0, 100]'),
    ('nan_last', dict(top1=(50., 80., NAN), loss=[1., 1., NAN]),
     'non-finite eval_loss (nan), eval_top1 (nan) at epoch 3'),
    ('all_nan', dict(top1=(NAN, NAN, NAN)), 'non-finite eval_top1 (nan) at epoch 1'),
    ('seed_float', dict(seed=1.5), 'seed 1.5 is not an integer'),
    ('seed_text', dict(seed='one'), "seed 'one' is not an integer"),
    ('seed_negative', dict(seed=-3), "seed -3 is outside train.py's range 0 … 4294967295"),
])
def test_values_that_are_not_measurements_are_listed_not_averaged(tmp_path, name, kwargs, reason):
    run_folder(tmp_path, 'good_seed10', 10, top1=(50., 80., 90.))
    run_folder(tmp_path, 'good_seed11', 11, top1=(50., 80., 80.))
    run_folder(tmp_path, name, **{'seed': 12, **kwargs})
    report = build_report([str(tmp_path)])
    assert listed(report) == {name: reason}
    row = rows_by(report)['good']
    assert (row['runs'], row['seeds'], row['top1_err_mean']) == (2, '10 11', pytest.approx(15.))
    files, skipped = write_report(report, str(tmp_path / 'out'), figures=False)
    assert f'- `{name}`: {reason}' in (tmp_path / 'out' / 'report.md').read_text()


@pytest.mark.parametrize('text,reason', [
    ('epoch,train_loss,eval_loss,eval_top1\n0,1.0,1.0,50\n1,1.0,1.0\n2,1.0,1.0,90\n',
     'summary.csv, line 3: 3 values for 4 columns'),
    ('epoch,train_loss,eval_loss,eval_top1\n0,1.0,1.0,50\n1,1.0,oops,60\n2,1.0,1.0,90\n',
     "summary.csv, line 3: column 'eval_loss' holds 'oops', not a number"),
    ('epoch,train_loss,eval_loss,eval_top1\n0,1.0,1.0,50\n1.5,1.0,1.0,60\n2,1.0,1.0,90\n',
     'summary.csv, line 3: epoch 1.5 is not an epoch number'),
    ('0,1.0,1.0,50\n', "summary.csv is not a timm train.py summary.csv (needs epoch and train_loss columns; line 1 "
                        "is '0,1.0,1.0,50')"),
])
def test_a_ragged_or_non_numeric_file_is_listed(tmp_path, text, reason):
    run_folder(tmp_path, 'good_seed0', 0)
    bad = run_folder(tmp_path, 'bad_seed1', 1)
    (bad / 'summary.csv').write_text(text)
    report = build_report([str(tmp_path)])
    assert listed(report)['bad_seed1'].startswith(reason)
    assert rows_by(report)['good']['runs'] == 1


def test_a_repeated_seed_is_listed_and_the_others_averaged(tmp_path):
    run_folder(tmp_path, 'x_seed0', 0, top1=(50., 80., 90.))
    run_folder(tmp_path, 'x_seed0_again', 0, top1=(50., 80., 70.))
    run_folder(tmp_path, 'x_seed1', 1, top1=(50., 80., 86.))
    run_folder(tmp_path, 'x_seed2', 2, top1=(50., 80., 88.))
    report = build_report([str(tmp_path)])
    assert listed(report) == {'x_seed0': 'seed 0 repeated (also x_seed0_again)',
                              'x_seed0_again': 'seed 0 repeated (also x_seed0)'}
    assert [x.kind for x in report.listed] == ['seed repeated'] * 2 and report.unfinished == []
    row = rows_by(report)['x']
    assert (row['runs'], row['seeds'], row['top1_err_mean']) == (2, '1 2', pytest.approx(13.))


def test_an_unreadable_folder_is_named_and_the_report_still_written(tmp_path, capsys):
    run_folder(tmp_path / 'runs', 'good_seed0', 0)
    broken = tmp_path / 'runs' / 'broken'
    broken.mkdir()
    (broken / 'args.yaml').write_text('model: [unclosed\n')
    alien = tmp_path / 'runs' / 'alien'
    alien.mkdir()
    (alien / 'args.yaml').write_text(yaml.safe_dump(dict(model='no_such_model_xyz', seed=0, epochs=1)))
    report = build_report([str(tmp_path / 'runs')])
    assert [name for name, _ in report.unreadable] == ['broken']
    assert report.unreadable[0][1] == ('args.yaml: not a train.py args.yaml that can be read safely (ParserError: '
                                       "while parsing a flow sequence: expected ',' or ']', but got '<stream end>' "
                                       'at line 2, column 1)')
    assert listed(report)['alien'].startswith('its model cannot be built here')
    assert pkmixer(['report', str(tmp_path / 'runs'), '--out-dir', str(tmp_path / 'out'), '--no-figures']) == 0
    assert 'pkmixer report: cannot read broken:' in capsys.readouterr().err
    md = (tmp_path / 'out' / 'report.md').read_text()
    assert '## Folders that cannot be read' in md and '- `broken`:' in md
    assert pkmixer(['report', str(tmp_path / 'out'), '--out-dir', str(tmp_path / 'o2')]) == 2  # no run at all


# ---------------------------------------------------------------------------------------------- outputs

def test_tables_need_no_matplotlib_and_the_message_names_the_extra(tmp_path, capsys, monkeypatch):
    run_folder(tmp_path / 'runs', 'a_seed0', 0)
    monkeypatch.setitem(sys.modules, 'matplotlib', None)
    monkeypatch.setitem(sys.modules, 'matplotlib.figure', None)
    assert pkmixer(['report', str(tmp_path / 'runs'), '--out-dir', str(tmp_path / 'out')]) == 0
    err = capsys.readouterr().err
    assert "pkmixer report: figures not drawn: pkmixer report draws figures with matplotlib: " \
           "pip install matplotlib (or, in a checkout of timm-pkmixer, pip install '.[plot]')" in err
    assert 'timm-pkmixer[' not in err  # not on PyPI: no such requirement
    assert sorted(p.name for p in (tmp_path / 'out').iterdir()) == ['epochs.csv', 'report.csv', 'report.md',
                                                                     'verdict.json']


def test_epochs_csv_regenerates_the_report_and_holds_no_machine_path(tmp_path):
    for seed, last in ((0, 90.), (1, 86.)):
        run_folder(tmp_path / 'runs', f'p_seed{seed}', seed, top1=(50., 80., last), model_kwargs={'permutation':
                                                                                                   'random'})
    run_folder(tmp_path / 'runs', 'short_seed0', 0, top1=(50., 80.), epochs=3, model_kwargs={'num_blocks': 4})
    run_folder(tmp_path / 'runs', 'q_seed0', 0, top1=(50., 80., 250.), model_kwargs={'num_blocks': 4})
    first = build_report([str(tmp_path / 'runs')])
    write_report(first, str(tmp_path / 'a'), figures=False)
    text = (tmp_path / 'a' / 'epochs.csv').read_text()
    assert str(tmp_path) not in text and '/data/x' not in text
    with open(tmp_path / 'a' / 'epochs.csv') as f:
        lines = list(csv.DictReader(f))
    config = json.loads(lines[0]['config'])
    assert config['data_dir'] == 'x' and 'output' not in config and config['seed'] == 0
    assert [(r['run'], r['epoch']) for r in lines][:3] == [('p_seed0', '0'), ('p_seed0', '1'), ('p_seed0', '2')]
    again = build_report([str(tmp_path / 'a' / 'epochs.csv')])
    write_report(again, str(tmp_path / 'b'), figures=False)
    for name in ('report.csv', 'report.md', 'epochs.csv', 'verdict.json'):
        assert (tmp_path / 'a' / name).read_text() == (tmp_path / 'b' / name).read_text()
    assert listed(again) == {'q_seed0': 'eval_top1 = 250 at epoch 3 is outside [0, 100]',
                             'short_seed0': 'unfinished: 2 of 3 epochs (missing 3)'}


# ---------------------------------------------------------------------------------------------- a real resume

def _digits(root):
    pytest.importorskip('sklearn')
    from timm_pkmixer.data.datasets import write_digits_image_folder
    write_digits_image_folder(str(root))
    return root


@pytest.mark.slow  # a run of the stand-in train.py killed and resumed: 20-38 s on this busy 2-core machine
def test_a_run_resumed_into_its_folder_is_one_finished_run(tmp_path):
    """train.py run for 2 epochs, then resumed from its last checkpoint for a third (header written again); the
    stand-in (no --resume) is stopped after one epoch and restarted into the same folder."""
    data = _digits(tmp_path / 'digits')
    train_py = os.environ.get('TIMM_TRAIN_PY')
    common = ['--model', 's_mixer_s64c64_32', '--model-kwargs', 'img_size=8', 'patch_size=2', 'num_tokens=8',
              'embed_dim=8', 'num_blocks=1', '--data-dir', str(data), '--num-classes', '10', '--img-size', '8',
              '-b', '256', '--opt', 'adamw', '--lr', '0.01', '--warmup-epochs', '0', '--device', 'cpu',
              '--workers', '0', '--output', str(tmp_path / 'out'), '--experiment', 'resumed', '--seed', '3']
    env = dict(os.environ, OMP_NUM_THREADS='1', TIMM_PKMIXER_AUTOLOAD='1')
    if train_py:
        common += ['--device-modules', 'timm_pkmixer', '--train-split', 'train', '--val-split', 'validation',
                   '--mean', '0.5', '0.5', '0.5', '--std', '0.5', '0.5', '0.5', '--crop-pct', '1.0', '--no-aug']
        first, second = ['--epochs', '2'], ['--epochs', '3', '--resume', str(tmp_path / 'out' / 'resumed' /
                                                                            'last.pth.tar')]
    else:
        train_py = str(TESTS / 'mini_train_py.py')
        first, second = ['--epochs', '3', '--stop-after-epochs', '1'], ['--epochs', '3']
    for extra in (first, second):
        proc = subprocess.run([sys.executable, train_py, *common, *extra], capture_output=True, text=True, env=env,
                              timeout=600, cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr[-3000:]
    text = (tmp_path / 'out' / 'resumed' / 'summary.csv').read_text().splitlines()
    assert sum(line.startswith('epoch,') for line in text) == 2  # the header, written again
    report = build_report([str(tmp_path / 'out')])
    assert report.listed == [] and len(report.rows()) == 1
    row = report.rows()[0]
    run = read_run(tmp_path / 'out' / 'resumed')
    assert sorted(run.epochs) == [0, 1, 2] and run.finished
    last = [line for line in text if line.startswith('2,')][-1].split(',')
    header = text[0].split(',')
    assert row['top1_err_mean'] == pytest.approx(100 - float(last[header.index('eval_top1')]))
    assert (row['runs'], row['seeds'], row['point']) == (1, '3', 'resumed')
    assert not math.isnan(row['eval_loss_mean'])


def test_the_report_draws_each_points_mean_and_min_max_band_over_its_seeds(tmp_path, monkeypatch):
    """Figs. S.6-S.8's form: `curves_EXP.png` from every point's runs, the band spanning exactly the seeds' curves."""
    pytest.importorskip('matplotlib')
    import timm_pkmixer.reports.curve_figures as curve_figures
    for depth in (2, 4):
        for seed, last in ((0, 80.), (1, 90.)):
            run_folder(tmp_path / 'runs', f'd{depth}_seed{seed}', seed, top1=(50., 70., last),
                       model_kwargs=dict(num_blocks=depth))
    drawn = {}
    real = curve_figures.plot_curve_bands

    def spy(groups, out, **kw):
        drawn.update(groups)
        return real(groups, out, **kw)

    monkeypatch.setattr('timm_pkmixer.reports.figures.plot_curve_bands', spy)
    report = build_report([str(tmp_path / 'runs')])
    files, _ = write_report(report, str(tmp_path / 'out'))
    bands = [f for f in files if Path(f).name == f'curves_{report.experiment}.png']
    assert len(bands) == 1 and Path(bands[0]).stat().st_size > 1000
    assert len(drawn) == 2 and all(len(trials) == 2 for trials in drawn.values())
    _, mean, low, high = curve_figures.min_max_band([t['eval_top1'] for t in next(iter(drawn.values()))])
    assert list(low) == [50., 70., 80.] and list(high) == [50., 70., 90.] and list(mean) == [50., 70., 85.]


# ---------------------------------------------------------------------------------------------- no machine path

def test_a_download_cache_is_bookkeeping_and_no_file_holds_a_machine_path(tmp_path):
    """torch/… runs made on two machines (data_dir: where the download is cached) are one configuration, and
    epochs.csv writes no data_dir for them; ImageFolder runs keep data_dir (it is their data: another folder, another
    configuration). No written file holds an absolute path: not report.md's listed or unreadable runs either."""
    runs = tmp_path / 'runs'
    for seed, cache in ((0, '/home/alice/data'), (1, '/scratch/bob/torchvision')):
        run_folder(runs, f'cifar_seed{seed}', seed, top1=(50., 80., 90. - seed), dataset='torch/cifar10',
                   data_dir=cache)
    run_folder(runs, 'hub_seed0', 0, top1=(50., 80., 80.), dataset='hfds/cifar10', data_dir='/home/alice/hf',
               model_kwargs=dict(num_blocks=3))
    for seed, folder in ((0, '/home/alice/images_a'), (1, '/home/alice/images_b')):
        run_folder(runs, f'folder_seed{seed}', seed, top1=(50., 80., 70.), dataset='', data_dir=folder,
                   model_kwargs=dict(num_blocks=4))
    (runs / 'broken').mkdir()
    (runs / 'broken' / 'args.yaml').write_text('model: [unclosed\n')
    report = build_report([str(runs)])
    [cifar] = [p for p in report.points if p.point == 'cifar']
    assert (len(cifar.runs), cifar.row()['seeds']) == (2, '0 1')  # averaged: the caches differ, the data do not
    assert listed(report) == {
        'folder_seed0': 'same model as another group but differs on data_dir: not averaged',
        'folder_seed1': 'same model as another group but differs on data_dir: not averaged'}
    assert [name for name, _ in report.unreadable] == ['broken']
    write_report(report, str(tmp_path / 'out'), figures=False)
    with open(tmp_path / 'out' / 'epochs.csv') as f:
        configs = {line['run']: json.loads(line['config']) for line in csv.DictReader(f) if line['config']}
    assert 'data_dir' not in configs['cifar_seed0'] and 'data_dir' not in configs['hub_seed0']
    assert configs['folder_seed0']['data_dir'] == 'images_a'  # the folder's name: its data, no machine path
    for name in ('report.csv', 'report.md', 'epochs.csv', 'verdict.json'):
        text = (tmp_path / 'out' / name).read_text()
        assert str(tmp_path) not in text and '/home/' not in text and '/scratch/' not in text, name
    again = build_report([str(tmp_path / 'out' / 'epochs.csv')])
    assert [(p.point, len(p.runs)) for p in again.points] == [(p.point, len(p.runs)) for p in report.points]


# ---------------------------------------------------------------------------- a record names what was built

def test_the_report_and_the_model_card_name_a_reshaped_model_by_what_was_built(tmp_path):
    """s_mixer_s128c128_32 shrunk by model_kwargs to S = C = 64, L = 4 is not 'an s_mixer_s128c128_32': the
    report's model column and the card say the shape built; a model of its registered shape keeps its name."""
    from timm_pkmixer.publish.model_card import build_model_card
    shrunk = dict(num_tokens=64, embed_dim=64, num_blocks=4)
    run_folder(tmp_path / 'runs', 'small_seed0', 0, model='s_mixer_s128c128_32', model_kwargs=shrunk)
    run_folder(tmp_path / 'runs', 'plain_seed0', 0, model='s_mixer_s64c64_32', model_kwargs=dict(num_blocks=8))
    report = build_report([str(tmp_path / 'runs')], experiment='width')
    rows = rows_by(report)
    assert rows['small']['model'] == 's_mixer_s128c128_32 reshaped to S = 64, C = 64, L = 4'
    assert rows['plain']['model'] == 's_mixer_s64c64_32'
    write_report(report, str(tmp_path / 'out'), figures=False)
    assert '| small | s_mixer_s128c128_32 reshaped to S = 64, C = 64, L = 4 | 4 | 64 | 64 |' in \
        (tmp_path / 'out' / 'report.md').read_text()
    card = build_model_card('s_mixer_s128c128_32', 'org/small', {**shrunk, 'num_blocks': 4}, 'apache-2.0', [])
    assert card['details']['Architecture']['timm architecture'] == \
        '`s_mixer_s128c128_32` reshaped to S = 64, C = 64, L = 4'
    assert card['description'].startswith('An S-Mixer (S = 64, C = 64, L = 4) of the PK family')
    plain = build_model_card('s_mixer_s64c64_32', 'org/plain', {}, 'apache-2.0', [])
    assert plain['details']['Architecture']['timm architecture'] == '`s_mixer_s64c64_32`'


# ------------------------------------------------------------------------------------------ figures a reader can read

@pytest.fixture
def figures_drawn(monkeypatch):
    """Every matplotlib Figure the report's figure functions make, kept for inspection (they are saved too)."""
    import timm_pkmixer.reports.curve_figures as curve_figures
    import timm_pkmixer.reports.figures as figures
    return keep_figures(monkeypatch, figures, curve_figures)


def _texts(fig):
    return [t.get_text() for t in fig.texts]


def test_every_figure_names_the_runs_it_leaves_out_and_report_md_says_where(tmp_path, figures_drawn):
    """The normal arm averaged, the RP runs of two epoch counts listed: no figure may look as if RP were not run."""
    runs = tmp_path / 'runs'
    for seed in (0, 1):
        run_folder(runs, f'normal_seed{seed}', seed, model_kwargs=dict(permutation='normal'))
    run_folder(runs, 'rp_seed0', 0, model_kwargs=dict(permutation='random', perm_seed=0))
    run_folder(runs, 'rp_long_seed1', 1, top1=(50., 80., 90., 91.), epochs=4,
               model_kwargs=dict(permutation='random', perm_seed=1))
    report = build_report([str(runs)])
    assert [p.point for p in report.points] == ['normal']
    assert report.omitted() == 'not shown: 2 runs listed in report.md (2 differ on epochs)'
    files, _ = write_report(report, str(tmp_path / 'out'))
    assert len(files) == 6 and len(figures_drawn) == 2  # the tables, verdict.json; eval-loss curves, bands
    for fig in figures_drawn:
        assert any(t.endswith('\nnot shown: 2 runs listed in report.md (2 differ on epochs)') for t in _texts(fig))
    md = (tmp_path / 'out' / 'report.md').read_text()
    assert '## Runs listed, not averaged\n\nThese runs are in no table and no figure: every figure says, under its ' \
           'panels, how many it leaves out and why, and points here.\n\n- `rp_long_seed1`: same model' in md


def test_every_error_plot_states_its_data_and_seeds_and_epochs_are_whole(tmp_path, figures_drawn):
    for depth, seeds in ((2, (0, 1, 2)), (4, (0, 1))):
        for seed in seeds:
            run_folder(tmp_path / 'runs', f'd{depth}_seed{seed}', seed, model_kwargs=dict(num_blocks=depth),
                       dataset='torch/fashion_mnist', data_dir=f'/cache/{seed}')
    run_folder(tmp_path / 'folder', 'd8_seed0', 0, model_kwargs=dict(num_blocks=8), dataset='',
               data_dir='/home/x/my_images/')
    report = build_report([str(tmp_path / 'runs'), str(tmp_path / 'folder')])
    assert report.experiment == 'depth' and report.omitted() == ''
    write_report(report, str(tmp_path / 'out'))
    assert len(figures_drawn) == 3  # depth.png, eval_loss_depth.png, curves_depth.png
    caption = 'data: torch/fashion_mnist, my_images; seeds per point: 1–3'
    assert [_texts(fig)[-1] for fig in figures_drawn] == [f'{caption} (error bars: sd over seeds)',
                                                          f'{caption} (curves: their mean)', caption]
    for fig in figures_drawn:
        for ax in fig.axes:
            if ax.get_xlabel() == 'epoch':
                assert [float(t).is_integer() for t in ax.get_xticks()] == [True] * len(ax.get_xticks())
    assert sum(ax.get_xlabel() == 'epoch' for fig in figures_drawn for ax in fig.axes) == 4  # loss + 3 bands


def test_plot_run_names_its_data_and_runs_per_curve(tmp_path, figures_drawn):
    from timm_pkmixer.reports.figures import plot_runs
    paths = [str(run_folder(tmp_path, f'a_seed{s}', s, dataset='torch/cifar10') / 'summary.csv') for s in (0, 1)]
    paths.append(str(run_folder(tmp_path, 'b', 0, data_dir='/data/flowers') / 'summary.csv'))
    plot_runs(paths, str(tmp_path / 'r.png'))
    [fig] = figures_drawn
    assert _texts(fig) == ['data: torch/cifar10, flowers; runs (seeds) per curve: 1–2; bands: min–max over them']


def test_a_report_without_scipy_says_what_to_install(tmp_path, capsys, monkeypatch):
    """scipy judges the verdicts: an install that lacks it is told so in one line (exit 2), no traceback."""
    import importlib
    run_folder(tmp_path / 'runs', 'a_seed0', 0)
    monkeypatch.delitem(sys.modules, 'timm_pkmixer.reports.verdicts', raising=False)
    monkeypatch.setitem(sys.modules, 'scipy', None)
    try:
        assert pkmixer(['report', str(tmp_path / 'runs'), '--out-dir', str(tmp_path / 'out')]) == 2
    finally:
        monkeypatch.undo()
        importlib.import_module('timm_pkmixer.reports.verdicts')
    err = capsys.readouterr().err
    assert "pkmixer report: error: pkmixer report judges the declared claims with scipy, a dependency of timm-pkmixer" \
        in err and "pip install 'scipy>=1.11'" in err and 'Traceback' not in err
