"""docs/findings.md's table is the one benchmarks/fashion_mnist/findings.py computes from the committed results, and
its verdicts follow the stated rule (a difference counts when it exceeds twice its standard error)."""
import importlib.util
import math
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


class _Arm:
    def __init__(self, errors, epochs=15):
        self.errors, self.epochs = errors, epochs
        self.n = len(errors)
        self.mean = sum(errors) / len(errors)
        self.sd = (math.sqrt(sum((e - self.mean) ** 2 for e in errors) / (self.n - 1)) if self.n > 1 else math.nan)


def test_a_difference_counts_beyond_twice_its_standard_error(findings):
    a, b = _Arm([10.0, 11.0, 12.0]), _Arm([12.0, 13.0, 14.0])
    diff, se = findings.difference(a, b)
    assert diff == -2.0 and se == pytest.approx(math.sqrt(2 / 3))  # sd 1 in each arm, n = 3
    assert findings.shown(diff, se)  # 2 > 2 × 0.816
    assert not findings.shown(-1.5, se)
    assert math.isnan(findings.difference(_Arm([10.0]), b)[1]) and not findings.shown(*findings.difference(
        _Arm([10.0]), b))  # one seed: no spread, nothing counts


def test_rp_verdicts(findings):
    assert findings._rp_verdict(-0.1, 0.2, 15, 15).startswith('agrees: RP matches normal')
    assert findings._rp_verdict(-1.0, 0.2, 15, 15) == 'agrees: RP beats normal beyond the seed spread'
    assert findings._rp_verdict(1.0, 0.2, 5, 15) == ("not shown at this scale: RP trails normal beyond the seed "
                                                     "spread after 5 of the recipe's 15 epochs")
    assert findings._rp_verdict(1.0, 0.2, 15, 15) == 'disagrees: RP trails normal beyond the seed spread'


def test_width_verdicts(findings):
    """Fig. 5's row: the wider − the narrower error of an arm; lower agrees with the paper."""
    assert findings._width_verdict('normal', -1.0, 0.2) == 'normal: agrees, the wider is better'
    assert findings._width_verdict('RP', 1.0, 0.2) == 'RP: disagrees, the wider is worse'
    assert findings._width_verdict('RP', -0.3, 0.2) == 'RP: no difference beyond twice its standard error'
    assert findings._width_verdict('RP', -3.0, math.nan) == 'RP: no difference beyond twice its standard error'


def test_width_rows_overall_word(findings):
    agree, none = 'normal: agrees, the wider is better', 'RP: no difference beyond twice its standard error'
    assert findings._overall([agree, none]) == f'agrees in part: {agree}; {none}'
    assert findings._overall([agree]) == f'agrees: {agree}'
    assert findings._overall([none]) == f'not shown at this scale: {none}'
    assert findings._overall([agree, 'RP: disagrees, the wider is worse']).startswith('disagrees: ')
