"""docs/findings.md is what benchmarks/fashion_mnist/findings.py computes from the committed results with the package's
verdicts (timm_pkmixer/reports/verdicts.py: the rules are tested in tests/test_verdicts.py); here, what the page adds:
each row's claim as the paper means it, the words pinned to their numbers, 'not yet run', the notes (old crop,
provenance, reruns), the cost rows, the coverage table by the strict reading, and the untrained control."""
import importlib.util
import json
import re
import shutil
import sys
from pathlib import Path

import pytest

from timm_pkmixer.reports.verdicts import AGREES, DISAGREES, MEASURED, NOT_RUN, NOT_SHOWN

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / 'benchmarks' / 'fashion_mnist' / 'findings.py'


@pytest.fixture(scope='module')
def findings():
    spec = importlib.util.spec_from_file_location('findings', SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope='module')
def rows(findings):
    return {f.key: f for f in findings.all_findings()}


def test_the_docs_hold_what_the_committed_results_give(findings, capsys):
    assert findings.main(['--check', str(ROOT / 'docs' / 'findings.md'),
                          '--check-coverage', str(ROOT / 'docs' / 'experiments.md')]) == 0, capsys.readouterr().err


def test_a_page_that_differs_is_named(findings, tmp_path, capsys):
    doc = tmp_path / 'findings.md'
    doc.write_text(findings.page().replace('±', '+/-', 1), encoding='utf-8')
    assert findings.main(['--check', str(doc)]) == 1
    assert capsys.readouterr().err == (f'{doc}: differs from what the committed results give; rewrite it with '
                                       f'--write {doc}\n')
    findings.main(['--write', str(doc)])
    assert findings.main(['--check', str(doc)]) == 0


def test_the_script_is_a_thin_page_over_the_package():
    text = SCRIPT.read_text(encoding='utf-8')
    assert len(text.splitlines()) < 700
    assert 'from timm_pkmixer.reports.verdicts import' in text
    for generic in ('def welch', 'def contrast', 'def direction', 'def level(', 'def match_or_beat', 'def flatness',
                    'class Sample', 'def at_scale', 'def overall', 'import scipy', 'from scipy'):
        assert generic not in text, generic


# ------------------------------------------------------------------ the words as the paper means them
def test_c_is_the_papers_inference_not_compromised_with_the_literal_comparable_beside(rows):
    c = rows['c']
    assert c.claim.startswith('Weight sharing does not compromise performance: Kronecker not worse than Monarch')
    judged, literal = c.parts
    assert judged.verdict.word == AGREES and judged.difference == '-1.39 [-1.75, -1.04], p < 0.001'
    assert judged.verdict.why == "beats it: the 95 % interval excludes 0 on the paper's side"
    assert literal.name.startswith('the literal "comparable"') and literal.verdict.word == MEASURED
    assert literal.verdict.why == 'disagrees: apart beyond the ±0.5 margin (TOST p = 1.00)'
    assert c.word == AGREES
    assert 'lowest at epoch 35 (11.84 %)' in ' '.join(c.notes)


def test_a2_shows_its_tost_names_every_deviation_and_is_not_shown_at_this_scale(rows):
    a2 = rows['a2']
    assert a2.word == NOT_SHOWN and a2.folder == 'fashion_mnist/rp_mixer_40ep' and a2.epochs == '40 / 600'
    assert a2.number == 'RP − normal +0.08 [-0.26, +0.41], p = 0.58; level within ±0.5: TOST p = 0.01'
    assert a2.parts[0].tost == 'p = 0.01 (±0.5)'
    deviations = next(n for n in a2.notes if n.startswith('Deviations from D.7:'))
    assert 'weight decay 0.05' in deviations and '40 epochs, not 600' in deviations and 'seeds, not' not in deviations
    assert 'a late effect' in deviations
    assert [n for n in a2.notes if n.startswith("The same arms at the recipe's 15 epochs (`rp_mixer_c4crop/`, 5 "
                                                "seeds): RP 12.80 ± 0.22; normal 13.35 ± 0.18; RP − normal -0.55 "
                                                '[-0.84, -0.25], p = 0.003')]


def test_b2_shows_the_s_mixer_sw_mlp_gap_in_its_summary(rows):
    b2 = rows['b2']
    assert b2.number == ('SW-MLP +0.23 [-0.15, +0.60], p = 0.19 per doubling of m; S-Mixer − SW-MLP +2.81 '
                         '[+2.30, +3.32], p = 0.009')
    assert '2.81 points above the widest SW-MLP' in b2.sentence and 'it rises: 11.00 at m = 540, 11.18 at 935' in \
        b2.sentence
    assert 'otherwise disagrees' in b2.parts[1].verdict.why
    assert 'm = 1619 (p = 0.1) not run; 2 seeds, not 3' in ' '.join(b2.notes)


def test_d2_says_what_the_control_measures(rows):
    d2 = rows['d2']
    assert d2.claim.startswith("The gap of the Mixer's CKA to the SW-MLP of p = 1/C over the dense MLP is made by "
                               'training')
    assert d2.sentence.startswith('Training lowers the CKA at every density (-0.48 to -0.13), the dense MLP\'s most, '
                                  'so the gap of p = 1/C over dense grows from -0.001 ± 0.007 untrained to 0.263 ± '
                                  '0.007 after 2 epochs')
    assert 'p = 1: -0.482 [-0.510, -0.454], p < 0.001' in ' '.join(d2.notes)


def test_g1_is_labelled_the_s_mixer_and_dates_its_gpu_numbers(rows):
    g1, g2 = rows['g1'], rows['g2']
    assert 'on the S-Mixer (not Table S.3\'s model)' in g1.claim and g1.word == DISAGREES
    assert ('GPU numbers: 2026-11-26 06:12 UTC, torch 2.11.0+cu130, gather backend index_select (before the gather '
            "rewrites of issue 44: to be rerun with today's gather on a GPU)") in g1.notes[0]
    # g2: every thread count measured, the 2-thread compiled rows included
    assert '×1.122 [1.071, 1.173]' in g2.number and 'CPU, 2 threads, per step, compile' in g2.number
    assert g2.word == NOT_SHOWN and g2.sentence.startswith('Measured on a CPU only, at one and two threads')


def test_the_fig6_row_is_judged_on_its_nine_preregistered_runs_and_cites_the_10_epoch_sweep(rows):
    e = rows['e']
    assert (e.word, e.seeds, e.epochs) == ('no difference shown', '3 / 3', '40 / 600–2000')
    assert e.number == ('normal: err(C = 64) − mean(err(C = 16), err(C = 173)) +0.06 [-0.39, +0.51], p = 0.73')
    contrast, trend = e.parts
    assert (contrast.mde, contrast.curves, trend.curves) == ('0.53', 'flat', 'flat')
    assert (trend.difference, trend.verdict.word) == ('+0.24 [+0.12, +0.35], p = 0.002', MEASURED)
    assert e.sentence == ('Pre-registered, 9 runs of 40 epochs: at C = 64 (= S) the error is 0.06 points above the '
                       'mean of C = 16 and C = 173 [-0.39, +0.51] (the paper: below; the design could have '
                       'detected 0.53), and it rises by 0.24 per doubling of C (p = 0.002), lowest at C = 16: no '
                       'difference shown.')
    assert e.notes[0].startswith('Declared before the runs (`width_fig6/sweep.json`, PREREGISTRATION.md)')
    assert ('`width_o18/` (C.4\'s pairs (16, 173), (32, 113), (113, 32), (173, 16) and (64, 64) in place of (48, 83) '
            'and (83, 48)') in e.notes[1]
    assert 'normal: slope of the error per doubling of C +0.13 [+0.03, +0.23], p = 0.01' in e.notes[1]


def test_the_bottom_line_names_what_is_shown_against_and_untold(findings, rows):
    line = findings.bottom_line(list(rows.values()))
    assert line == ('**Bottom line.** shown as the paper says: c; against the paper: g1; no difference shown, '
                    'the curves flat (what the design could have detected): e (normal: err(C = 64) − '
                    'mean(err(C = 16), err(C = 173)): +0.06 [-0.39, +0.51]; MDE 0.53); pointing against it, '
                    'not shown at this scale: b2 (S-Mixer, C = 64 − SW-MLP, m = 935: +2.81 [+2.30, +3.32]); '
                    'this scale cannot tell (curves still moving, too short, or timed on a CPU only): a1, a2, '
                    'b1, b2, d1, d2, f, g2.')


# ------------------------------------------------------------------ not yet run; the folders
def test_experiments_not_yet_run_say_so_and_make_up_no_number(findings, tmp_path, monkeypatch):
    monkeypatch.setattr(findings, 'HERE', tmp_path / 'fashion_mnist')
    every = findings.all_findings()
    assert {f.word for f in every} == {NOT_RUN}
    assert all(f.number == '—' and not f.parts and f.sentence.startswith('Not yet run: ') for f in every)
    page = findings.render(every)
    assert '| a1 | RP S-Mixer matches or beats normal (S = C = 64, L = 8) | — | — | — | — | — | — | — | not yet run |' \
        in page
    cells = findings.coverage_cells(every)
    assert cells['Fig. 6 (a–c)'] == ('e (`benchmarks/fashion_mnist/width_fig6/`): not yet run', 'no: not yet run')
    assert cells['Table S.3'][0].endswith('g2 (`benchmarks/speed/rp_cost/`): not yet run')


def test_the_rows_read_their_folders_under_here(findings, tmp_path, monkeypatch):
    """A row reads the folder its constant names under HERE: the committed (a) results, copied with other numbers."""
    original = findings.finding_rp_s_mixer().parts[0].arms
    monkeypatch.setattr(findings, 'HERE', tmp_path)
    shutil.copytree(SCRIPT.parent / findings.FIG7_DIR, tmp_path / findings.FIG7_DIR)
    (tmp_path / findings.FIG7_DIR / 'epochs.csv').write_text(
        (SCRIPT.parent / findings.FIG7_DIR / 'epochs.csv').read_text().replace(',86.', ',88.'))
    findings.committed_report.cache_clear()
    try:
        row = findings.finding_rp_s_mixer()
    finally:
        findings.committed_report.cache_clear()
    assert row.folder == f'fashion_mnist/{findings.FIG7_DIR}'
    assert original == 'RP 13.01 ± 0.24; normal 13.20 ± 0.05' != row.parts[0].arms
    assert row.parts[0].arms.endswith('normal 11.20 ± 0.05')  # every normal run's 86.x read as 88.x


# ------------------------------------------------------------------ coverage, strictly read
def test_the_coverage_columns_are_set_once_and_counted(findings):
    text = ('x\n\n| paper | command | test | committed |\n|---|---|---|---|\n| Fig. 5 | a | b | c |\n'
            '| Fig. 1 | a | b | c |\n')
    once = findings.with_coverage(text, {'Fig. 5': ('b1: agrees', 'yes: b1 signed')})
    assert once.split('\n')[2:8] == [
        'Covered by the strict reading (generated with docs/findings.md): 1 yes, 0 partly, 1 no, of 2.', '',
        f'| paper | command | test | committed | {findings.COVERAGE_COLUMN} | {findings.STRICT_COLUMN} |',
        '|---|---|---|---|---|---|', '| Fig. 5 | a | b | c | b1: agrees | yes: b1 signed |',
        '| Fig. 1 | a | b | c | none | no: a schematic: nothing to measure |']
    assert findings.with_coverage(once, {'Fig. 5': ('b1: agrees', 'yes: b1 signed')}) == once


def test_the_strict_reading_of_the_committed_rows(findings, rows):
    cells = findings.coverage_cells(list(rows.values()))
    assert cells['Fig. 2 (d)'][1] == 'yes: c signed'
    assert cells['Fig. 7'][1] == 'partly: a real-data result, but a1, f are not shown at this scale'
    assert cells['Table S.3'][1] == 'partly: a real-data result, but g2 is not judged on a GPU'
    doc = (ROOT / 'docs' / 'experiments.md').read_text(encoding='utf-8')
    counted = re.search(r'(\d+) yes, (\d+) partly, (\d+) no, of 23\.', doc)
    table = [line for line in doc.split('\n') if line.startswith('| Fig.') or line.startswith('| Table')]
    assert counted and [sum(line.rstrip(' |').rsplit('| ', 1)[1].startswith(w) for line in table)
                        for w in ('yes', 'partly', 'no')] == [int(x) for x in counted.groups()]


# ------------------------------------------------------------------ the cost rows
def _cost_json(path: Path, device: str, eager: list, compiled: list, per_epoch: tuple = (), threads: int = 1,
               model: str = 's_mixer') -> None:
    path.mkdir(parents=True, exist_ok=True)
    results = [dict(mode=mode, ratios=ratios, model=model, threads=threads)
               for mode, ratios in (('eager', eager), ('compile', compiled))]
    for result, ratios in zip(results, per_epoch):
        result['epochs'] = dict(ratios=ratios)
    (path / 'rp_cost.json').write_text(json.dumps(dict(env=dict(device=device, date='2026-12-01', torch='2.14.1',
                                                                gather='tuned'), results=results)))


def test_the_rp_cost_row_takes_its_word_from_the_gpu_per_epoch(findings, tmp_path, monkeypatch):
    """Table S.3 timed whole epochs on a GPU: a GPU's per-epoch ratios decide the word (its per-step ones when it has
    no epochs), each a t interval against the paper's ×1.054; the CPU's, at every thread count, are listed."""
    monkeypatch.setattr(findings, 'HERE', tmp_path / 'fashion_mnist')
    _cost_json(tmp_path / 'speed' / 'rp_cost', 'cpu', [1.3, 1.31, 1.29], [0.97, 0.98, 0.96])
    cpu_only = findings.finding_rp_cost()
    assert cpu_only.word == NOT_SHOWN and cpu_only.sentence.startswith('Measured on a CPU only')
    assert cpu_only.number == ('CPU, 1 thread, per step, eager: ×1.300 [1.275, 1.325]; CPU, 1 thread, per step, '
                               'compile: ×0.970 [0.945, 0.995]')
    _cost_json(tmp_path / 'speed' / 'rp_cost_gpu', 'NVIDIA H200', [1.7, 1.71, 1.69], [1.0, 1.01, 0.99])
    row = findings.finding_rp_cost()
    assert {p.name: p.verdict.word for p in row.parts} == {
        'CPU, 1 thread, per step, eager': MEASURED, 'CPU, 1 thread, per step, compile': MEASURED,
        'H200, per step, eager': DISAGREES, 'H200, per step, compile': AGREES}
    assert row.word == DISAGREES
    _cost_json(tmp_path / 'speed' / 'rp_cost_gpu', 'NVIDIA H200', [1.7, 1.71, 1.69], [1.0, 1.01, 0.99],
               per_epoch=([1.0, 1.01, 0.99], [0.93, 0.94, 0.92]))
    row = findings.finding_rp_cost()
    assert row.word == AGREES and row.sentence == 'Judged on the GPU per epoch: eager agrees; compile agrees.'
    assert row.number == ('H200, per epoch, eager: ×1.000 [0.975, 1.025]; H200, per epoch, compile: ×0.930 '
                          '[0.905, 0.955]')
    assert 'GPU numbers: 2026-12-01, torch 2.14.1, gather backend tuned' in row.notes[0]


def test_the_cost_rows_read_their_own_models_results_at_every_thread_count(findings, tmp_path, monkeypatch):
    monkeypatch.setattr(findings, 'HERE', tmp_path / 'fashion_mnist')
    _cost_json(tmp_path / 'speed' / 'rp_cost', 'cpu', [1.3, 1.2], [0.9, 1.0], model='table_s3', threads=2)
    assert findings.finding_rp_cost().word == NOT_RUN  # no S-Mixer timing there
    assert [p.name for p in findings.finding_rp_cost_s3().parts] == ['CPU, 2 threads, per step, eager',
                                                                    'CPU, 2 threads, per step, compile']


# ------------------------------------------------------------------ the notes: old crop, provenance, reruns
def test_rows_trained_with_the_old_crop_say_so(findings, rows):
    assert findings.trained_with_old_crop('fashion_mnist/rp') and findings.trained_with_old_crop('fashion_mnist/fig5')
    assert not findings.trained_with_old_crop('fashion_mnist/fig2d')
    assert not findings.trained_with_old_crop('fashion_mnist/no_such_folder')
    noted = {f.key for f in rows.values() if findings.OLD_CROP_NOTE in f.notes}
    assert 'd1' in noted and not {'a1', 'a2', 'b1', 'c'} & noted
    assert [n for n in rows['a1'].notes if 'crop of before' in n and '`rp/`' in n and 'RP − normal -0.23 [' in n]
    assert [n for n in rows['a2'].notes if 'crop of before' in n and '`rp/`' in n and 'RP − normal -0.80 [' in n]
    assert [n for n in rows['b1'].notes if 'crop of before' in n and '`fig5/`' in n and
            'S-Mixer, normal: slope of the error per doubling of m -0.82 [' in n]
    assert rows['a1'].notes[1].endswith('`rp/` rerun with the code of this page on this CPU (seed 0): 4 arms, the '
                                        'first 1 of 15 epochs: 3 within spread, 1 OUTSIDE spread; 1 arm, all 15 '
                                        'epochs: 1 OUTSIDE spread.')


def test_no_note_names_a_deviation_that_is_none(rows):
    for f in rows.values():
        for note in f.notes:
            assert not re.search(r'\b(\d+) (seeds|epochs), not \1\b', note), (f.key, note)


def test_each_row_says_what_made_its_runs_as_recorded(rows):
    prefix = 'What made the runs, as recorded (pkmixer_env.json): '
    cpu = 'torch 2.14.1+cu130, timm 1.0.31, cpu (AMD EPYC), 1 thread'
    assert prefix + f'8 runs not recorded; {cpu}; timm-pkmixer 828ea03 (4 runs).' in rows['a1'].notes
    assert prefix + f'{cpu}; timm-pkmixer fbce4b3 (1 run), 4c347db (1 run), 828ea03 (10 runs).' in rows['b1'].notes
    assert [n for n in rows['b2'].notes if n.startswith(prefix) and '3d3e99d with uncommitted changes (2 runs)' in n]
    assert prefix + '21 runs not recorded.' in rows['d1'].notes
    assert not [n for f in rows.values() if f.key.startswith('g') for n in f.notes if n.startswith(prefix)]


@pytest.fixture(scope='module')
def rerun():
    sys.path.insert(0, str(SCRIPT.parent))
    import rerun as module
    return module


_RERUN_COLUMNS = ('arm,run,seed,epochs_compared,verdict,top1_err,committed_top1_err,spread_min,spread_max,'
                  'spread_seeds,first_differing_epoch,max_abs_top1_diff,env')


def _experiment(folder: Path, runs: dict) -> None:
    folder.mkdir(parents=True)
    lines = ['run,seed,epoch,eval_top1'] + [f'{name},0,{e},80.0' for name, n in runs.items() for e in range(n)]
    (folder / 'epochs.csv').write_text('\n'.join(lines) + '\n')


def test_a_committed_rerun_is_cited_in_its_row(findings, rerun, rows):
    for f in rows.values():
        note = rerun.rerun_note(f.folder)
        if note:
            assert note in f.notes and note.startswith(('Rerun with the code of this page (rerun.py, seed ',
                                                        'Rebuilt with the code of this page'))


def test_the_reruns_table_lists_every_experiment_each_arm_and_what_was_not_rerun(rerun, tmp_path):
    _experiment(tmp_path / 'exp_a', {'runs/a_seed0': 10, 'runs/b_seed0': 10, 'runs/c_seed0': 10, 'runs/d_seed0': 10})
    (tmp_path / 'exp_a' / 'reruns').mkdir()
    (tmp_path / 'exp_a' / 'reruns' / 'seed0.csv').write_text(
        _RERUN_COLUMNS + '\n'
        'a,runs/a_seed0,0,2,exact,14.0,14.0,13.5,14.2,0 1,,0.0,same\n'
        'b,runs/b_seed0,0,2,exact,13.0,13.0,12.5,13.2,0 1,,0.0,same\n'
        'c,runs/c_seed0,0,10,OUTSIDE spread,15.004,14.0,13.5,14.2,0 1,3,1.0,not recorded (committed)\n'
        'd,runs/d_seed0,0,0,not rerun,,,,,0 1,,,\n')
    _experiment(tmp_path / 'exp_b', {'runs/a_seed0': 5})
    (tmp_path / 'weights').mkdir()
    assert rerun.rerun_table(tmp_path)[2:] == [
        '| `exp_a/` | a | 0 | 2 of 10 | exact | 14.00 / 14.00 [13.50, 14.20] | same |',
        '| `exp_a/` | b | 0 | 2 of 10 | exact | 13.00 / 13.00 [12.50, 13.20] | same |',
        '| `exp_a/` | c | 0 | 10 of 10 | OUTSIDE spread | 15.00 / 14.00 [13.50, 14.20] | not recorded (committed) |',
        '| `exp_a/` | d | 0 | — | not rerun | — | — |',
        '| `exp_b/` | — | — | — | not rerun | — | — |']
    counted = rerun._rerun_counts(rerun.reruns(tmp_path / 'exp_a'), rerun.committed_epochs(tmp_path / 'exp_a'))
    assert counted == ('2 arms, the first 2 of 10 epochs: 2 exact; 1 arm, all 10 epochs: 1 OUTSIDE spread; 1 arm not '
                       'rerun')


def test_a_rebuilt_cka_is_compared_pair_by_pair_with_the_committed_one(rerun, tmp_path):
    folder = tmp_path / 'untrained'
    (folder / 'reruns').mkdir(parents=True)
    head = 'model_a,model_b,mean_diagonal\n'
    (folder / 'cka_summary.csv').write_text(head + 'm0,s1_0,0.864815\nm0,s2_0,0.865887\nm1,s1_1,0.5\n')
    (folder / 'reruns' / 'seed0_cka_summary.csv').write_text(head + 'm0,s1_0,0.864815\nm0,s2_0,0.865887\n')
    assert rerun.cka_rerun(folder) == (2, 2, 0.0)
    assert rerun.rerun_table(tmp_path)[2:] == ['| `untrained/` | 2 CKA pairs rebuilt | — | untrained | exact | — | — |']
    (folder / 'reruns' / 'seed0_cka_summary.csv').write_text(head + 'm0,s1_0,0.864815\nm0,s2_0,0.865890\n')
    assert rerun.rerun_table(tmp_path)[2] == (
        '| `untrained/` | 2 CKA pairs rebuilt | — | untrained | 1 of 2 pairs differ (largest 3e-06) | — | — |')
    (folder / 'reruns' / 'seed0_cka_summary.csv').write_text(head + 'm9,s1_9,0.1\n')
    with pytest.raises(ValueError, match=r"untrained: rerun pairs not in the committed cka_summary.csv: \[\('m9'"):
        rerun.cka_rerun(folder)


# ------------------------------------------------------------------ (d2)'s control script
def _cka_untrained():
    spec = importlib.util.spec_from_file_location('cka_untrained', SCRIPT.parent / 'cka_untrained.py')
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_cka_untrained_builds_each_committed_run_as_train_py_seeds_it(tmp_path):
    """(d2)'s control: a committed SW-MLP run of fig2 rebuilt at initialisation is the model its recorded arguments
    give under train.py's seeding, as a run folder `pkmixer analyze cka` reads; another seed gives other weights."""
    import torch

    from timm_pkmixer.runs.epochs_csv import read_epochs_csv
    module = _cka_untrained()
    run = next(r for r in read_epochs_csv(SCRIPT.parent / 'fig2' / 'epochs.csv')
               if Path(r.name).name == 'sw_mlp_p0.03125_m1024_seed1')
    folder = module.build_initial(dict(run.args), tmp_path / 'a')
    state = torch.load(folder / 'last.pth.tar', map_location='cpu', weights_only=True)['state_dict']
    d = module.timm.create_model(run.args['model'], in_chans=1, num_classes=10,
                                 **run.args['model_kwargs']).describe()
    assert (d.width, d.density) == (1024, 0.03125) and state['head.weight'].shape == (10, 1024)
    again = module.build_initial(dict(run.args), tmp_path / 'b')
    state_b = torch.load(again / 'last.pth.tar', map_location='cpu', weights_only=True)['state_dict']
    assert all(torch.equal(state[k], state_b[k]) for k in state)
    other = module.build_initial({**run.args, 'seed': 2}, tmp_path / 'c')
    state_c = torch.load(other / 'last.pth.tar', map_location='cpu', weights_only=True)['state_dict']
    assert not all(torch.equal(state[k], state_c[k]) for k in state if state[k].is_floating_point())


def test_cka_untrained_refuses_a_seed_the_experiment_lacks():
    import subprocess
    proc = subprocess.run([sys.executable, str(SCRIPT.parent / 'cka_untrained.py'), '--data-dir', 'nowhere',
                           '--out-dir', 'nowhere', '--seeds', '0', '7'], capture_output=True, text=True)
    assert proc.returncode == 2
    assert 'seeds [7] are not in ' in proc.stderr and '(its seeds: [0, 1, 2])' in proc.stderr


@pytest.mark.parametrize('text,said', [
    ('', 'epochs.csv'), ('not,a\ncsv file\x00\x01', 'epochs.csv'),
    (None, 'eighty')])  # None: the committed file, one eval_top1 cell not a number
def test_a_committed_file_it_cannot_use_is_one_line_and_a_stray_folder_is_passed_over(findings, tmp_path, monkeypatch,
                                                                                       capsys, text, said):
    monkeypatch.setattr(findings, 'HERE', tmp_path / 'fashion_mnist')
    (tmp_path / 'fashion_mnist' / 'stray').mkdir(parents=True)  # a folder of nothing: no row, no rerun, no error
    assert findings.main([]) == 0 and '| `stray/` |' not in capsys.readouterr().out
    (tmp_path / 'fashion_mnist' / findings.FIG7_DIR).mkdir()
    committed = (SCRIPT.parent / findings.FIG7_DIR / 'epochs.csv').read_text()
    junked = re.sub(r',(8\d\.\d+),', ',eighty,', committed, count=1)
    (tmp_path / 'fashion_mnist' / findings.FIG7_DIR / 'epochs.csv').write_text(junked if text is None else text)
    findings.committed_report.cache_clear()
    try:
        assert findings.main([]) == 2
    finally:
        findings.committed_report.cache_clear()
    err = capsys.readouterr().err
    assert err.startswith('findings.py: error: ') and said in err and 'Traceback' not in err and err.count('\n') == 1


def test_fig6_runs_committed_as_they_ran_are_counted_not_judged(findings, monkeypatch, tmp_path):
    """Row e stays 'not yet run' until the registered nine runs have ended; meanwhile it says how far they are."""
    monkeypatch.setattr(findings, 'HERE', tmp_path)
    assert findings._so_far() == ''
    (tmp_path / findings.FIG6_DIR).mkdir()
    rows = ['run,epoch,eval_top1'] + [f'runs/a,{e},88' for e in range(40)] + [f'runs/b,{e},80' for e in range(3)]
    (tmp_path / findings.FIG6_DIR / 'runs_so_far_epochs.csv').write_text('\n'.join(rows) + '\n')
    assert findings._so_far() == (' (1 of 9 at their 40th epoch, 1 part-way, in `runs_so_far_epochs.csv`; judged '
                                  'once all 9 have ended, as registered)')
    assert findings.finding_fig6().word == findings.NOT_RUN
    rows = rows[:41] + [f'runs/b,{e},80' for e in range(40)]  # runs that ended only: none part-way to name
    (tmp_path / findings.FIG6_DIR / 'runs_so_far_epochs.csv').write_text('\n'.join(rows) + '\n')
    assert findings._so_far() == (' (2 of 9 at their 40th epoch, in `runs_so_far_epochs.csv`; judged once all 9 have '
                                  'ended, as registered)')
