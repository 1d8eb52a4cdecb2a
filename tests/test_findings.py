"""docs/findings.md's table is the one benchmarks/fashion_mnist/findings.py computes from the committed results, and
its verdicts follow the stated rule (a difference counts when it exceeds twice its standard error)."""
import importlib.util
import math
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / 'benchmarks' / 'fashion_mnist' / 'findings.py'


@pytest.fixture(scope='module')
def findings():
    spec = importlib.util.spec_from_file_location('findings', SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_doc_holds_the_table_the_committed_results_give(findings, capsys):
    assert findings.main(['--check', str(ROOT / 'docs' / 'findings.md')]) == 0, capsys.readouterr().err
    table = findings.table()
    assert table.count('\n| ') == len([f for f in findings.ROWS if f()]) + 1  # the header and one row per result


def test_a_doc_whose_table_differs_is_named(findings, tmp_path, capsys):
    doc = tmp_path / 'findings.md'
    doc.write_text(findings.table().replace('±', '+/-', 1), encoding='utf-8')
    assert findings.main(['--check', str(doc)]) == 1
    assert capsys.readouterr().err.startswith(f'{doc}: its findings table differs from the committed results')


def test_a_difference_counts_beyond_twice_its_standard_error(findings):
    a, b = findings.Sample([10.0, 11.0, 12.0]), findings.Sample([12.0, 13.0, 14.0])
    diff, se = findings.difference(a, b)
    assert diff == -2.0 and se == pytest.approx(math.sqrt(2 / 3))  # sd 1 in each arm, n = 3
    assert findings.shown(diff, se)  # 2 > 2 × 0.816
    assert not findings.shown(-1.5, se)
    assert math.isnan(findings.difference(findings.Sample([10.0]), b)[1]) and not findings.shown(*findings.difference(
        findings.Sample([10.0]), b))  # one seed: no spread, nothing counts


def test_rp_verdicts(findings):
    assert findings._rp_verdict(-0.1, 0.2, 15, 15).startswith('agrees: RP matches normal')
    assert findings._rp_verdict(-1.0, 0.2, 15, 15) == 'agrees: RP beats normal beyond the seed spread'
    assert findings._rp_verdict(1.0, 0.2, 5, 15) == ("not shown at this scale: RP trails normal beyond the seed "
                                                     "spread after 5 of the recipe's 15 epochs")
    assert findings._rp_verdict(1.0, 0.2, 15, 15) == 'disagrees: RP trails normal beyond the seed spread'


def test_width_verdicts(findings):
    """Fig. 5's row: the wider − the narrower error of an arm; lower agrees with the paper."""
    assert findings._width_verdict('normal', -1.0, 0.2) == ('agrees', 'normal: agrees, the wider is better')
    assert findings._width_verdict('RP', 1.0, 0.2) == ('disagrees', 'RP: disagrees, the wider is worse')
    assert findings._width_verdict('RP', -0.3, 0.2) == ('', 'RP: no difference beyond twice its standard error')
    assert findings._width_verdict('RP', -3.0, math.nan) == ('', 'RP: no difference beyond twice its standard error')


def test_width_rows_overall_word(findings):
    agree = findings._width_verdict('normal', -1.0, 0.2)
    none = findings._width_verdict('RP', -0.3, 0.2)
    worse = findings._width_verdict('SW-MLP', 1.0, 0.2)
    assert findings._overall([agree, none]) == f'agrees in part: {agree.text}; {none.text}'
    assert findings._overall([agree]) == f'agrees: {agree.text}'
    assert findings._overall([none]) == f'not shown at this scale: {none.text}'
    assert findings._overall([agree, none, worse]) == f'disagrees: {agree.text}; {none.text}; {worse.text}'


def test_a_sample_over_seeds(findings):
    s = findings.Sample([0.6, 0.7, 0.8])
    assert (s.n, s.spread(3)) == (3, '0.700 ± 0.100')
    assert findings.Sample([0.65]).spread(3) == '0.650' and math.isnan(findings.Sample([0.65]).sd)


def _cka(findings, **by_density):
    """{density: Sample} from keyword lists: p1=[…], p8=[…] for p = 1, 1/8 …"""
    return {1 / int(k[1:]): findings.Sample(v) for k, v in by_density.items()}


def test_cka_rows_group_seeds_by_density(findings):
    rows = [dict(density_b=d, mean_diagonal=v) for d, v in
            [('1', '0.40'), ('0.03125', '0.65'), ('1', '0.38'), ('0.03125', '0.67')]]
    cka = findings.cka_by_density(rows)
    assert sorted(cka) == [0.03125, 1.0]
    assert cka[1.0].values == [0.40, 0.38] and cka[0.03125].mean == pytest.approx(0.66)


def test_cka_verdicts(findings):
    """Fig. 2(a): p = 1/C above the dense MLP, and a peak inside the range above the sparsest, each beyond 2 SE."""
    inside = _cka(findings, p1=[0.40, 0.41, 0.39], p8=[0.40, 0.45, 0.35], p32=[0.70, 0.71, 0.69],
                  p1024=[0.60, 0.61, 0.59])
    assert findings.cka_verdict(inside, 1 / 32) == (
        'agrees: p = 1/C = 1/32 against p = 1: Δ = +0.30 ± 0.01 (SE); 2 of 3 sparse SW-MLPs closer than the dense '
        'MLP beyond the seed spread; highest at p = 1/32, above the sparsest (p = 1/1024) by Δ = +0.10 ± 0.01 (SE)')
    edge = _cka(findings, p1=[0.40, 0.41, 0.39], p32=[0.60, 0.61, 0.59], p1024=[0.70, 0.71, 0.69])
    assert findings.cka_verdict(edge, 1 / 32).startswith('agrees in part: p = 1/C = 1/32 against p = 1: Δ = +0.20')
    assert findings.cka_verdict(edge, 1 / 32).endswith(
        'highest at the sparsest measured, p = 1/1024: no maximum inside the range seen')
    flat_peak = _cka(findings, p1=[0.40, 0.41, 0.39], p32=[0.66, 0.71, 0.61], p1024=[0.65, 0.70, 0.60])
    assert findings.cka_verdict(flat_peak, 1 / 32).endswith(', not beyond twice its standard error')
    assert findings.cka_verdict(flat_peak, 1 / 32).startswith('agrees in part: ')
    dense_best = _cka(findings, p1=[0.80, 0.81, 0.79], p32=[0.60, 0.61, 0.59], p1024=[0.50, 0.51, 0.49])
    assert findings.cka_verdict(dense_best, 1 / 32) == (
        'disagrees: p = 1/C = 1/32 against p = 1: Δ = -0.20 ± 0.01 (SE); 0 of 2 sparse SW-MLPs closer than the dense '
        'MLP beyond the seed spread; highest at the dense MLP, p = 1: no maximum inside the range seen')
    one_seed = _cka(findings, p1=[0.39], p32=[0.65], p256=[0.72])
    assert findings.cka_verdict(one_seed, 1 / 32) == (
        'not shown at this scale: p = 1/C = 1/32 against p = 1: Δ = +0.26, not beyond twice its standard error; 0 of 2 '
        'sparse SW-MLPs closer than the dense MLP beyond the seed spread; highest at the sparsest measured, '
        'p = 1/256: no maximum inside the range seen')


def test_densities_read_back_as_fractions(findings):
    assert [findings._density(p) for p in (1.0, 0.03125, 0.000976562, 0.1264)] == ['1', '1/32', '1/1024', '0.1264']


def _cost_json(path: Path, device: str, eager: float, compiled: float, per_epoch: tuple = ()) -> None:
    """An rp_cost.json with the given RP / normal ratios per step (and, given `per_epoch`, per whole epoch)."""
    import json
    path.mkdir(parents=True)
    results = [dict(mode=mode, ratios=[ratio] * 3, seconds_per_step=dict(normal=[step] * 3, random=[ratio * step] * 3))
               for mode, ratio, step in (('eager', eager, 0.1), ('compile', compiled, 0.13))]
    for result, ratio in zip(results, per_epoch):
        result['epochs'] = dict(ratios=[ratio - 0.01, ratio, ratio + 0.5])  # the median is the figure
    env = dict(device=device, **(dict(loader_workers=4) if per_epoch else {}))
    (path / 'rp_cost.json').write_text(json.dumps(dict(env=env, results=results)), encoding='utf-8')


def test_the_rp_cost_row_takes_its_word_from_the_gpu_per_epoch(findings, tmp_path, monkeypatch):
    """Table S.3 timed whole epochs on a GPU: a GPU's per-epoch measurement decides the word (its per-step one
    when it has no epochs); the CPU's per-step verdicts are listed beside it."""
    monkeypatch.setattr(findings, 'HERE', tmp_path / 'fashion_mnist')
    _cost_json(tmp_path / 'speed' / 'rp_cost', 'cpu', 1.3, 0.97)
    cpu_only = findings.row_rp_cost()
    assert ('one CPU thread (CPU time): per step eager ×1.300, compile ×0.970 | CPU, per step: disagrees eager '
            '(×1.300); agrees compile (×0.970), the compiled normal model itself ×1.30 its eager time |') in cpu_only
    _cost_json(tmp_path / 'speed' / 'rp_cost_gpu', 'NVIDIA H200', 1.7, 1.0)
    row = findings.row_rp_cost()
    assert ('; one NVIDIA H200 (wall time, synchronized): per step eager ×1.700, compile ×1.000 | agrees in part, '
            "judged on the GPU per step (Table S.3's kind of machine). CPU, per step: ") in row
    assert 'NVIDIA H200, per step: disagrees eager (×1.700); agrees compile (×1.000) |' in row
    assert row.count('` and `') == 1 and '--device cuda' in row  # both commands
    shutil.rmtree(tmp_path / 'speed' / 'rp_cost_gpu')
    _cost_json(tmp_path / 'speed' / 'rp_cost_gpu', 'NVIDIA H200', 1.7, 1.0, per_epoch=(1.04, 0.93))
    row = findings.row_rp_cost()
    assert ("per step eager ×1.700, compile ×1.000; per epoch of real training (timm's loader, 4 workers) eager "
            "×1.040, compile ×0.930 | agrees, judged on the GPU per epoch (Table S.3's kind of machine, and its "
            "unit). ") in row
    assert 'NVIDIA H200, per epoch: agrees eager (×1.040); agrees compile (×0.930) |' in row
