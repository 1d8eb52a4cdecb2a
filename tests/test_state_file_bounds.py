"""Every state file is read within bounds (`timm_pkmixer.state_files`): a size limit per kind of file, checked before
reading (an 8 GiB sparse args.yaml, summary.csv or sweep.json is named with its size and the limit, never read into
memory), JSON that nests too deep or holds a number Python cannot print refused before any ``json.loads`` recurses,
and YAML composed with a bound on its depth and its integers' digits. Each is a one-line error of `status`,
`launch` and `report` (a folder the report lists as unreadable), never a RecursionError or MemoryError."""
import csv
import os

import pytest
import yaml

from timm_pkmixer.state_files import (
    MAX_DEPTH,
    MAX_DIGITS,
    SIZE_LIMITS,
    YAMLDepthError,
    json_problem,
    load_yaml,
    read_json,
    read_text,
    size_limit,
    yaml_reason,
)

from conftest import ROOT
from test_report import run_folder

DEEP = '[' * 50_000 + ']' * 50_000
GiB = 1 << 30


def _problem(why):
    return ValueError(why)


def _why(read, *args):
    with pytest.raises(ValueError) as e:
        read(*args)
    return str(e.value)


@pytest.mark.parametrize('name,limit,kind', [('args.yaml', '1 MiB', 'a .yaml file'),
                                             ('summary.csv', '256 MiB', 'a .csv file'),
                                             ('sweep.json', '64 MiB', 'a .json file'), ('lock', '16 MiB', 'a file')])
def test_a_sparse_8_gib_file_is_named_with_its_size_and_its_kinds_limit(tmp_path, name, limit, kind):
    path = tmp_path / name
    path.touch()
    os.truncate(path, 8 * GiB)  # sparse: no disk, and a read of it would take 8 GiB of memory
    assert _why(read_text, path, _problem) == f'8 GiB, larger than {limit}, the limit of {kind}'
    assert size_limit(path) == (SIZE_LIMITS.get(path.suffix, 16 << 20), kind)


def test_a_file_that_says_no_size_is_read_no_further_than_its_limit(tmp_path):
    """/proc's files have st_size 0: the read itself stops one byte past the limit."""
    assert read_text('/proc/self/status', _problem, limit=10 ** 6).startswith('Name:')
    assert _why(read_text, '/proc/self/status', _problem, 16) == 'larger than 16 bytes, the limit'


@pytest.mark.parametrize('text,why', [
    ('[' * (MAX_DEPTH + 1) + ']' * (MAX_DEPTH + 1), f'nested deeper than {MAX_DEPTH} levels'),
    ('[' * MAX_DEPTH + ']' * MAX_DEPTH, ''),
    ('{"a": "' + '[' * 500 + '{"}', ''),                     # brackets inside a string are no nesting
    ('[ "]", ' * 200 + '1' + ']' * 200, f'nested deeper than {MAX_DEPTH} levels'),  # nor hide it
    ('{"pid": ' + '1' * (MAX_DIGITS + 1) + '}', f'a number of more than {MAX_DIGITS} digits'),
    ('{"digest": "' + '1' * 500 + '", "pid": 12}', ''),
    ('not JSON at all [', ''),
])
def test_json_problem(text, why):
    assert json_problem(text) == why


@pytest.mark.parametrize('name', ['record.json', 'lock'])
def test_read_json_refuses_deep_nesting_and_long_numbers_whatever_the_name(tmp_path, name):
    path = tmp_path / name
    path.write_text('{"state": ' + DEEP + '}')
    assert _why(read_json, path, _problem, {}) == f'nested deeper than {MAX_DEPTH} levels'
    path.write_text('{"pid": ' + '7' * 5000 + '}')  # json.loads reads it; no str() of it could
    assert _why(read_json, path, _problem, {}) == f'a number of more than {MAX_DIGITS} digits'
    path.write_text('{"pid": 7}')
    assert read_json(path, _problem, dict(pid=(int,))) == {'pid': 7}


def test_a_csv_files_json_cells_are_bounded_its_other_cells_are_not(tmp_path):
    path = tmp_path / 'epochs.csv'
    with open(path, 'w', newline='') as f:
        csv.writer(f).writerows([['run', 'config'], ['a', '{"x": ' + '[' * 200 + ']' * 200 + '}']])
    assert _why(read_text, path, _problem) == f'nested deeper than {MAX_DEPTH} levels'
    with open(path, 'w', newline='') as f:  # CSV quoting doubles the quotes of a JSON string: still read exactly
        csv.writer(f).writerows([['run', 'config'], ['a', '{"x": "' + ']' * 300 + '", "y": [[1]]}'],
                                 ['b' * 300, '[' * 50 + ']' * 50]])
    assert read_text(path, _problem).startswith('run,config')


@pytest.mark.parametrize('text,error', [
    (DEEP, f'YAMLDepthError: nested deeper than {MAX_DEPTH} levels at line 1, column {MAX_DEPTH + 1}'),
    ('- ' * 5000 + 'x', f'YAMLDepthError: nested deeper than {MAX_DEPTH} levels at line 1, column '
                        f'{2 * MAX_DEPTH + 1}'),
    ('seed: ' + '1' * 5000, 'ConstructorError: an integer of 5,000 digits (at most 100 are read) at line 1, column 7'),
    ('seed: 0x' + 'f' * 5000, 'ConstructorError: an integer of 5,000 digits (at most 100 are read) at line 1, '
                              'column 7'),
    ('seed: 1' + ':1' * 100, 'ConstructorError: an integer of 101 digits'),  # base 60: 60**100 and growing
])
def test_yaml_depth_and_integers_are_bounded(text, error):
    with pytest.raises(yaml.YAMLError) as e:
        load_yaml(text)
    assert yaml_reason(e.value).startswith(error)


def test_yaml_within_the_bounds_still_reads():
    nested = '[' * (MAX_DEPTH - 1) + ']' * (MAX_DEPTH - 1)  # and the mapping: MAX_DEPTH levels
    cfg = load_yaml(f'a: {nested}\nb: 0x1f\nc: 1_000\nd: 1:30\ne: {"9" * MAX_DIGITS}\n')
    assert (cfg['b'], cfg['c'], cfg['d'], cfg['e']) == (31, 1000, 90, int('9' * MAX_DIGITS))
    with pytest.raises(YAMLDepthError):
        load_yaml(f'a: [{nested}]')


# ------------------------------------------------------------------------------------------------ the commands

@pytest.fixture
def sweep(tmp_path):
    folder = tmp_path / 'sweep'
    (folder / 'launch' / 'runs').mkdir(parents=True)
    (folder / 'r.yaml').write_text('model: s_mixer_s64c64_32\nepochs: 1\ndata_dir: data\n')
    return folder


@pytest.mark.parametrize('command,where,text,what', [
    ('status', 'runs/r.json', '{"state": ' + DEEP + '}', 'a run record of pkmixer launch'),
    ('status', 'runs/r.json', '{"state": "done", "pid": ' + '1' * 5000 + '}', 'a run record of pkmixer launch'),
    ('launch', 'train_args.json', DEEP, "the launch's train.py arguments"),
    ('launch', 'lock', '{"a":' * 50_000, 'a launch lock'),
])
def test_status_and_launch_name_a_state_file_nested_too_deep(cli, sweep, command, where, text, what, launch_env):
    (sweep / 'launch' / where).write_text(text)
    code, _, err = cli(command, sweep, *(['--train-py', ROOT / 'tests' / 'mini_train_py.py'] if command == 'launch'
                                         else []))
    why = 'a number of more than 100 digits' if '1' * 5000 in text else 'nested deeper than 100 levels'
    assert code == 2
    assert f'pkmixer {command}: error: {sweep / "launch" / where} is not {what} ({why}): remove it' in err


def test_report_lists_run_folders_with_unbounded_files_as_unreadable(cli, tmp_path):
    runs = tmp_path / 'runs'
    for name in ('ok', 'big_args', 'deep_args', 'long_int', 'big_summary', 'deep_marker'):
        run_folder(runs, name)
    os.truncate(runs / 'big_args' / 'args.yaml', 8 * GiB)
    (runs / 'deep_args' / 'args.yaml').write_text('model: s_mixer_s64c64_32\nx: ' + DEEP + '\n')
    with open(runs / 'long_int' / 'args.yaml', 'a') as f:
        f.write('y: ' + '1' * 5000 + '\n')
    os.truncate(runs / 'big_summary' / 'summary.csv', 8 * GiB)
    (runs / 'deep_marker' / 'pkmixer_launch.json').write_text(DEEP)
    code, _, err = cli('report', runs, '--out-dir', tmp_path / 'out', '--no-figures')
    assert code == 0
    cannot = sorted(line for line in err.splitlines() if line.startswith('pkmixer report: cannot read'))
    assert cannot == [
        'pkmixer report: cannot read big_args: args.yaml: cannot be read (8 GiB, larger than 1 MiB, the limit of a '
        '.yaml file)',
        'pkmixer report: cannot read deep_args: args.yaml: not a train.py args.yaml that can be read safely '
        '(YAMLDepthError: nested deeper than 100 levels at line 2, column 103)',
        'pkmixer report: cannot read deep_marker: pkmixer_launch.json: nested deeper than 100 levels',
        'pkmixer report: cannot read long_int: args.yaml: not a train.py args.yaml that can be read safely '
        '(ConstructorError: an integer of 5,000 digits (at most 100 are read) at line 13, column 4)']
    md = (tmp_path / 'out' / 'report.md').read_text()
    assert 'big_summary' in md and 'larger than 256 MiB, the limit of a .csv file' in md


def test_report_refuses_an_epochs_csv_or_sweep_json_nested_too_deep_or_too_large(cli, tmp_path):
    run_folder(tmp_path / 'runs', 'ok')
    assert cli('report', tmp_path / 'runs', '--out-dir', tmp_path / 'first', '--no-figures')[0] == 0
    epochs = tmp_path / 'first' / 'epochs.csv'
    with open(epochs, newline='') as f:
        rows = list(csv.reader(f))
    rows[1][rows[0].index('config')] = '{"model": "s_mixer_s64c64_32", "x": ' + DEEP + '}'
    (tmp_path / 'deep').mkdir()
    with open(tmp_path / 'deep' / 'epochs.csv', 'w', newline='') as f:
        csv.writer(f).writerows(rows)
    code, _, err = cli('report', tmp_path / 'deep' / 'epochs.csv', '--out-dir', tmp_path / 'o1', '--no-figures')
    assert code == 2 and err.splitlines()[-1] == (f'pkmixer report: error: {tmp_path / "deep" / "epochs.csv"}: not an '
                                                  f'epochs.csv of `pkmixer report` (nested deeper than 100 levels)')
    (tmp_path / 'first' / 'sweep.json').write_text('{"sweeps": ' + DEEP + '}')
    code, _, err = cli('report', epochs, '--out-dir', tmp_path / 'o2', '--no-figures')
    assert code == 2 and err.splitlines()[-1] == (f'pkmixer report: error: {tmp_path / "first" / "sweep.json"}: not '
                                                  f'JSON (nested deeper than 100 levels)')
    os.truncate(tmp_path / 'first' / 'sweep.json', 8 * GiB)
    code, _, err = cli('report', epochs, '--out-dir', tmp_path / 'o3', '--no-figures')
    assert code == 2 and err.splitlines()[-1] == (f'pkmixer report: error: {tmp_path / "first" / "sweep.json"}: not '
                                                  f'JSON (8 GiB, larger than 64 MiB, the limit of a .json file)')
