"""`pkmixer models` and `pkmixer demo`."""
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import timm

from timm_pkmixer.catalog import list_pkmixer_models, summarize
from timm_pkmixer.experiments.demo import SHAPES, run_demo, write_shapes_dataset


def test_models_table_lists_every_model():
    exe = shutil.which('pkmixer') or [sys.executable, '-m', 'timm_pkmixer']
    cmd = [exe, 'models'] if isinstance(exe, str) else exe + ['models']
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    names = list_pkmixer_models()
    lines = out.splitlines()
    assert lines[0].split()[:3] == ['model', 'family', 'params']
    assert sorted(line.split()[0] for line in lines[1:]) == sorted(names)
    row = next(line for line in lines if line.startswith('rp_mixer_b_w ')).split()
    assert row[1:4] == ['RP', 'MLP-Mixer', '31.06'] and row[6:9] == ['256', '588', '8'] and row[10] == '150528'


def test_readme_models_table_is_what_pkmixer_models_prints(tmp_path, cli):
    from timm_pkmixer.cli.models import TABLE_END, TABLE_START
    code, out, err = cli('models', '--markdown')
    assert code == 0, err
    assert out.startswith('| model | family | params (M) | GMACs |')
    assert sorted(line.split('`')[1] for line in out.splitlines()[2:]) == list_pkmixer_models()
    readme = (Path(__file__).resolve().parent.parent / 'README.md').read_text(encoding='utf-8')
    table = readme.split(TABLE_START)[1].split(TABLE_END)[0].strip()
    assert table == out.strip(), 'README.md models table is stale: run `pkmixer models --markdown --update README.md`'
    # the command that mends it: rewrites the generated table and nothing else
    stale = tmp_path / 'README.md'
    stale.write_text(readme.replace(table, '| old |'), encoding='utf-8')
    code, out, err = cli('models', '--markdown', '--update', stale)
    assert code == 0 and out == f'{stale}: models table updated ({len(list_pkmixer_models())} models)\n', err
    assert stale.read_text(encoding='utf-8') == readme


def test_summary_numbers():
    s = summarize('pk_mixer_b16_224')
    assert s.params == sum(p.numel() for p in timm.create_model('mixer_b16_224', device='meta').parameters())
    assert abs(s.gmacs - 12.6) < 0.05  # timm lists mixer_b16_224 at 12.62 GMACs
    assert s.width == 196 * 768 and s.gamma_label == '1.96/4'
    sw = summarize('sw_mlp_o18_32')
    assert sw.family == 'SW-MLP' and sw.width == 724 and sw.density == 0.5


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
    from timm_pkmixer.experiments.demo import choose_threads
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
