"""How `pkmixer report` finds and names run folders (issue 52, round 5): two runs of one name are named apart by the
folders that tell them apart, a symlinked run folder is read (a loop, or a folder reached twice, is said), an
args.yaml that is a symlink to nothing is named, a restart is said and only its rows are read, rows past the
schedule keep a run out of the averages."""
from timm_pkmixer.reports.report import build_report, write_report

from test_report import listed, run_folder


def test_two_runs_of_one_name_are_named_apart_everywhere(tmp_path):
    """Two sweeps' runs/ given, each with a_seed0 and a_seed1 (one of them resumed): every list, table and file names
    each by its path relative to what was given, so that which one was resumed is told."""
    for sweep in ('first', 'second'):
        for seed in (0, 1):
            run_folder(tmp_path / sweep / 'runs', f'a_seed{seed}', seed)
    resumed = run_folder(tmp_path / 'resumed', 'a_seed1', 1, rows=(0, 1, 1, 2), top1=(50., 80., 81., 90.),
                         resume_at=2)  # epoch 1 written again after --resume
    (resumed / 'summary.csv').replace(tmp_path / 'second' / 'runs' / 'a_seed1' / 'summary.csv')
    report = build_report([str(tmp_path / 'first' / 'runs'), str(tmp_path / 'second' / 'runs')])
    names = sorted(r.name for r in report.runs)
    assert names == ['first/runs/a_seed0', 'first/runs/a_seed1', 'second/runs/a_seed0', 'second/runs/a_seed1']
    assert report.resumed() == [('second/runs/a_seed1', (1,), False)]
    assert listed(report) == {'first/runs/a_seed0': 'seed 0 repeated (also second/runs/a_seed0)',
                              'first/runs/a_seed1': 'seed 1 repeated (also second/runs/a_seed1)',
                              'second/runs/a_seed0': 'seed 0 repeated (also first/runs/a_seed0)',
                              'second/runs/a_seed1': 'seed 1 repeated (also first/runs/a_seed1)'}
    write_report(report, str(tmp_path / 'out'), figures=False)
    runs = {line.split(',')[0] for line in (tmp_path / 'out' / 'epochs.csv').read_text().splitlines()[1:]}
    assert runs == set(names)


def test_a_symlinked_run_folder_is_read_and_a_loop_is_said(tmp_path):
    run_folder(tmp_path / 'runs', 'a_seed0', 0)
    run_folder(tmp_path / 'kept', 'a_seed1', 1)
    (tmp_path / 'runs' / 'a_seed1').symlink_to(tmp_path / 'kept' / 'a_seed1')
    (tmp_path / 'runs' / 'back').symlink_to(tmp_path)
    report = build_report([str(tmp_path / 'runs')])
    assert [len(p.runs) for p in report.points] == [2]
    assert f'{tmp_path / "runs" / "back"} is a symlink to a folder above it (a loop): not followed' in report.warnings


def test_an_args_yaml_that_points_nowhere_is_named_not_dropped(tmp_path):
    run_folder(tmp_path / 'runs', 'a_seed0', 0)
    broken = run_folder(tmp_path / 'runs', 'a_seed1', 1)
    (broken / 'args.yaml').unlink()
    (broken / 'args.yaml').symlink_to('moved.yaml')
    report = build_report([str(tmp_path / 'runs')])
    assert report.unreadable == [('a_seed1', 'args.yaml: cannot be read (a symlink to moved.yaml, which does not '
                                             'exist)')]


def test_a_restart_is_said_and_rows_past_the_schedule_keep_a_run_out(tmp_path):
    run_folder(tmp_path / 'runs', 'a_seed0', 0)
    run_folder(tmp_path / 'runs', 'a_seed1', 1, rows=(0, 1, 0, 1, 2), top1=(40., 45., 50., 80., 90.), resume_at=2)
    run_folder(tmp_path / 'runs', 'a_seed2', 2, top1=(50., 80., 90., 95.))  # epochs=3 but a row for a fourth
    report = build_report([str(tmp_path / 'runs')])
    assert sorted(r.name for p in report.points for r in p.runs) == ['a_seed0', 'a_seed1']
    assert report.resumed() == []  # started over, not resumed at epoch 0
    assert report.warnings == ['`a_seed1`: train.py started over into its folder (summary.csv\'s header again, then '
                               'epoch 1): only the rows of its last start are read, those of the earlier start '
                               'dropped']
    assert listed(report) == {'a_seed2': 'summary.csv has rows past the 3 epochs train.py runs with these arguments '
                                         '(epoch 4): another schedule wrote them'}
