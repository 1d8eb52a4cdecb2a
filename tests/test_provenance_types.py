"""pkmixer_env.json and epochs.csv's environment column read with their types checked (issue 52, round 5): a word
where a boolean belongs ("no") is named, never read as true ("(changed)", "TF32 on"); a commit that is a number or
true, or torch given as a list, is named and costs the report nothing but that run's environment; a machine path in
a record never reaches epochs.csv or report.md."""
import csv
import io
import json

import pytest
from test_provenance import _env

from timm_pkmixer.reports.report import build_report, write_report
from timm_pkmixer.runs.epochs_csv import read_epochs_csv
from timm_pkmixer.runs.provenance import PROVENANCE_JSON, check_environment, read_provenance, without_paths
from timm_pkmixer.runs.run_folder import RunFileError

from test_report import run_folder

CUDA = dict(cuda=True, cuda_matmul_allow_tf32=False, cudnn_allow_tf32=False)


@pytest.mark.parametrize('changes, said', [
    (dict(pkmixer_dirty='no'), "pkmixer_dirty is 'no', not true or false or null"),
    (dict(flags={**CUDA, 'cuda_matmul_allow_tf32': 'no'}), "flags.cuda_matmul_allow_tf32 is 'no', not true or false "
                                                           "or null"),
    (dict(pkmixer_commit=1234567), 'pkmixer_commit is 1234567, not a string or null'),
    (dict(pkmixer_commit=True), 'pkmixer_commit is True, not a string or null'),
    (dict(torch=['2.5.0']), "torch is ['2.5.0'], not a string or null"),
    (dict(threads=True), 'threads is a bool'),  # (read_json's own shape check names it first)
    (dict(resumed_in=[_env(pkmixer_dirty='yes')]), "resumed_in[0].pkmixer_dirty is 'yes', not true or false or null"),
])
def test_a_record_of_the_wrong_types_is_named_and_the_report_goes_on(tmp_path, changes, said):
    for seed in (0, 1):
        run_folder(tmp_path / 'runs', f'a_seed{seed}', seed)
    (tmp_path / 'runs' / 'a_seed0' / PROVENANCE_JSON).write_text(json.dumps(_env(**changes)))
    (tmp_path / 'runs' / 'a_seed1' / PROVENANCE_JSON).write_text(json.dumps(_env()))
    with pytest.raises(RunFileError) as e:
        read_provenance(tmp_path / 'runs' / 'a_seed0')
    assert str(e.value) == f'{tmp_path / "runs" / "a_seed0" / PROVENANCE_JSON}: not a {PROVENANCE_JSON} of `pkmixer ' \
                           f'train` ({said})'
    report = build_report([str(tmp_path / 'runs')])
    assert [len(p.runs) for p in report.points] == [2]  # both averaged: only what made a_seed0 is unknown
    assert [w for w in report.warnings if 'a_seed0' in w] == [f'`a_seed0`: {PROVENANCE_JSON}: not a {PROVENANCE_JSON} '
                                                              f'of `pkmixer train` ({said}): its environment is '
                                                              f'counted as not recorded']
    write_report(report, str(tmp_path / 'out'), figures=False)
    section = (tmp_path / 'out' / 'report.md').read_text().split('## Environments')[1]
    assert '| 1 | not recorded |' in section and '(changed)' not in section and 'TF32 on' not in section


def test_an_epochs_csv_whose_environment_has_the_wrong_types_is_named_by_line_and_key(tmp_path):
    run_folder(tmp_path / 'runs', 'a_seed0', 0)
    (tmp_path / 'runs' / 'a_seed0' / PROVENANCE_JSON).write_text(json.dumps(_env()))
    write_report(build_report([str(tmp_path / 'runs')]), str(tmp_path / 'out'), figures=False)
    lines = list(csv.DictReader(io.StringIO((tmp_path / 'out' / 'epochs.csv').read_text())))
    lines[0]['environment'] = json.dumps(_env(pkmixer_commit=5))
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(lines[0]))
    writer.writeheader()
    writer.writerows(lines)
    (tmp_path / 'edited.csv').write_text(out.getvalue())
    with pytest.raises(RunFileError) as e:
        read_epochs_csv(tmp_path / 'edited.csv')
    assert str(e.value) == (f"{tmp_path / 'edited.csv'}, line 2: column environment of run 'a_seed0' is not an "
                            f"environment `pkmixer train` records (pkmixer_commit is 5, not a string or null)")


def test_no_machine_path_of_a_record_reaches_epochs_csv_or_report_md(tmp_path):
    run_folder(tmp_path / 'runs', 'a_seed0', 0)
    env = _env(train_py='/root/timm/train.py', device='cpu (see /work/notes/cpu.txt)', cpu='C:\\Users\\me\\cpu')
    (tmp_path / 'runs' / 'a_seed0' / PROVENANCE_JSON).write_text(json.dumps(env))
    write_report(build_report([str(tmp_path / 'runs')]), str(tmp_path / 'out'), figures=False)
    written = (tmp_path / 'out' / 'epochs.csv').read_text() + (tmp_path / 'out' / 'report.md').read_text()
    assert '/root' not in written and '/work' not in written and 'Users' not in written
    kept = json.loads(next(csv.DictReader(io.StringIO((tmp_path / 'out' / 'epochs.csv').read_text())))['environment'])
    assert (kept['train_py'], kept['device'], kept['cpu']) == ('train.py', 'cpu (see cpu.txt)', 'cpu')
    assert without_paths({'a': ['/x/y/z.py', 'a/b', '~/q']}) == {'a': ['z.py', 'a/b', 'q']}
    assert check_environment(_env(), ValueError) == _env()  # what `pkmixer train` writes passes as it is
