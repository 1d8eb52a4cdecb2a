"""`pkmixer demo`: the shapes dataset, a run end to end, its CPU threads, and a reading that concludes only what
it measured (the accuracies, the gap and its noise) and cites a committed depth study that says so."""
import math
import os

import pytest

from timm_pkmixer.experiments.demo import SHAPES, run_demo, write_shapes_dataset

from conftest import ROOT


def test_shapes_dataset(tmp_path):
    write_shapes_dataset(str(tmp_path), train_per_class=3, val_per_class=2)
    for split, n in (('train', 3), ('validation', 2)):
        assert sorted(os.listdir(tmp_path / split)) == sorted(SHAPES)
        assert all(len(os.listdir(tmp_path / split / c)) == n for c in SHAPES)


def test_demo_runs_end_to_end():
    lines = []
    results = run_demo(models=['s_mixer_rp_s64c64_32'], epochs=2, train_per_class=8, batch_size=16, log=lines.append)
    (r,) = results
    assert r.model == 's_mixer_rp_s64c64_32' and r.width == 4096 and r.params == 76356
    assert math.isfinite(r.train_loss) and 0 <= r.val_acc <= 100
    assert any('epoch 2/2' in line for line in lines) and lines[-1].startswith('s_mixer_rp_s64c64_32')


def test_demo_uses_the_idle_cores(monkeypatch):
    """Under load, one thread (two threads convoyed 9x slower on a busy 2-core machine); idle, all of them."""
    import os

    from timm_pkmixer.experiments import threads
    from timm_pkmixer.experiments.threads import choose_threads
    monkeypatch.delenv('OMP_NUM_THREADS', raising=False)
    monkeypatch.setattr(threads, 'available_cores', lambda: 2)
    monkeypatch.setattr(os, 'getloadavg', lambda: (3.1, 3.0, 2.5))
    assert choose_threads() == (1, '2 cores, load average 3.1')
    monkeypatch.setattr(os, 'getloadavg', lambda: (0.2, 0.3, 0.1))
    import torch
    assert choose_threads()[0] == min(torch.get_num_threads(), 2)
    assert choose_threads(3) == (3, 'as requested')


def test_demo_reading_follows_its_numbers():
    from timm_pkmixer.experiments.demo import DemoResult, reading
    rp = DemoResult('s_mixer_rp_s64c64_32', 76356, 4096, 0.6, 91.0, 30.)
    normal = DemoResult('s_mixer_s64c64_32', 76356, 4096, 0.4, 96.3, 20.)
    assert 'trails the normal one by 5.3 points' in reading(rp, normal)
    assert 'matched or beat the normal one here (+1.0 points)' in reading(
        DemoResult(rp.model, 1, 4096, 0.5, 97.3, 1.), normal)


@pytest.mark.parametrize('rp_acc,normal_acc,expected', [
    (36.0, 36.3, 'inconclusive. The models reached 36.0% (RP) and 36.3% (normal) against 25% by chance'),
    (60.0, 95.0, 'inconclusive'),
    (95.7, 96.3, '95.7% (RP) and 96.3% (normal): the RP S-Mixer trails the normal one by 0.6 points, within the noise '
                 'of ±3.2 points on 300 validation images: no difference shown.'),
    (90.0, 97.0, 'trails the normal one by 7.0 points, beyond the noise of ±4.0 points on 300 validation images, in '
                 'one seed of a short run on this small task: a measurement, not a cause. Over 5 seeds and depths '
                 '4-20 on the 8x8 digits, the committed depth study (benchmarks/digits/paper_experiments_results/depth/'
                 'report.md) measured the RP S-Mixer ahead at every depth.'),
    (96.0, 95.0, 'matched or beat the normal one here (+1.0 points), within the noise of ±3.4 points'),
    (99.0, 85.0, 'matched or beat the normal one here (+14.0 points), beyond the noise of ±4.3 points'),
])
def test_demo_concludes_only_what_it_measured(rp_acc, normal_acc, expected):
    """The accuracies, the gap and its noise; no cause (one seed measures none) and nothing the committed depth
    study contradicts (it measured RP ahead at every depth)."""
    from timm_pkmixer.experiments.demo import DemoResult, reading
    text = reading(DemoResult('s_mixer_rp_s64c64_32', 1, 4096, 0.5, rp_acc, 1.),
                   DemoResult('s_mixer_s64c64_32', 1, 4096, 0.5, normal_acc, 1.))
    assert expected in text
    assert not any(claim in text for claim in ('because', 'neighbours', 'catch up', 'usually trails', 'the paper'))
    assert ('inconclusive' in text) == (min(rp_acc, normal_acc) < 62.5)


def test_the_depth_study_the_demo_cites_measured_rp_ahead_at_every_depth():
    import csv

    from timm_pkmixer.experiments.demo import DEPTH_STUDY
    with open(ROOT / DEPTH_STUDY.replace('report.md', 'report.csv'), encoding='utf-8') as f:
        rows = {(r['num_blocks'], r['permutation']): r for r in csv.DictReader(f)}
    depths = sorted({int(d) for d, _ in rows})
    assert depths == [4, 8, 12, 16, 20] and {r['runs'] for r in rows.values()} == {'5'}
    assert all(float(rows[str(d), 'random']['top1_err_mean']) < float(rows[str(d), 'normal']['top1_err_mean'])
               for d in depths)
