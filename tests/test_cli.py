"""The command line: `pkmixer models` (its table, the README's copy, --update on a file it cannot rewrite), every
command's refusal of bad input (exit 2, `pkmixer CMD: error: ...` naming the argument or the file, no traceback),
unknown arguments, `--help` and `pkmixer width` without torch, and the README's list of commands. The demo's tests
are in test_demo.py, `pkmixer train`'s in test_train_command.py."""
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import timm
from safetensors.torch import save_file

from timm_pkmixer.catalog import list_pkmixer_models, summarize

from conftest import ROOT, RP


def test_a_reader_that_goes_away_ends_the_command_quietly():
    """`pkmixer recipes | head -1`: the pipe is closed before the command writes (its reader is gone before the
    command starts, so however slowly this test runs); it stops without a traceback."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        proc = subprocess.run([sys.executable, '-m', 'timm_pkmixer', 'recipes'], stdout=write_end,
                              stderr=subprocess.PIPE, text=True, timeout=300)
    finally:
        os.close(write_end)
    assert proc.returncode == 1 and proc.stderr == ''


@pytest.fixture(scope='module')
def rp_checkpoint(tmp_path_factory) -> Path:
    """A checkpoint of the RP S-Mixer, written once for the module."""
    path = tmp_path_factory.mktemp('rp') / 'w.safetensors'
    save_file(timm.create_model(RP).state_dict(), str(path))
    return path


@pytest.fixture
def files(files, rp_checkpoint):
    """The working folder (conftest) with the files `CLI_CASES` feed the commands: a broken YAML recipe, a YAML
    list, a checkpoint of the RP S-Mixer and a folder."""
    (files / 'broken.yaml').write_text('model: [rp_mixer_b_w\nlr: 0.1\n')
    (files / 'list.yaml').write_text('- a\n- b\n')
    shutil.copy(rp_checkpoint, files / 'w.safetensors')
    (files / 'dir').mkdir()
    return files


@pytest.mark.slow  # summarizes every registered model: 23 s on this busy 2-core machine
def test_models_table_plain_for_a_model_and_the_readme_copy_of_every_model(tmp_path, cli):
    """The whole table is built once: `--update` on a stale copy of the README, which must then be the README (and
    lists every registered model); the plain layout is checked on one model, through the console script."""
    from timm_pkmixer.cli.models import TABLE_END, TABLE_START
    exe = shutil.which('pkmixer') or [sys.executable, '-m', 'timm_pkmixer']
    cmd = [exe, 'models', 'rp_mixer_b_w'] if isinstance(exe, str) else exe + ['models', 'rp_mixer_b_w']
    lines = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout.splitlines()
    assert lines[0].split()[:3] == ['model', 'family', 'params'] and len(lines) == 2
    row = lines[1].split()
    assert row[:4] == ['rp_mixer_b_w', 'RP', 'MLP-Mixer', '31.06'] and row[6:9] == ['256', '588', '8'] and \
        row[10] == '150528'
    readme = (Path(__file__).resolve().parent.parent / 'README.md').read_text(encoding='utf-8')
    table = readme.split(TABLE_START)[1].split(TABLE_END)[0].strip()
    stale = tmp_path / 'README.md'
    stale.write_text(readme.replace(table, '| old |'), encoding='utf-8')
    code, out, err = cli('models', '--markdown', '--update', stale)
    assert code == 0 and out == f'{stale}: models table updated ({len(list_pkmixer_models())} models)\n', err
    written = stale.read_text(encoding='utf-8').split(TABLE_START)[1].split(TABLE_END)[0].strip()
    assert written.startswith('| model | family | params (M) | GMACs |')
    assert sorted(line.split('`')[1] for line in written.splitlines()[2:]) == list_pkmixer_models()
    assert written == table, 'README.md models table is stale: run `pkmixer models --markdown --update README.md`'
    assert stale.read_text(encoding='utf-8') == readme  # the command rewrote the generated table and nothing else
    code, out, _ = cli('models', '--markdown', 'rp_mixer_b_w')  # printed: the README's lines of that model
    header, separator, *rows = table.splitlines()
    assert code == 0 and out.splitlines() == [header, separator, next(r for r in rows if '`rp_mixer_b_w`' in r)]


@pytest.mark.parametrize('content,message', [
    ('Tabelle für Modelle\n'.encode('latin-1'),
     '--update README.md: not UTF-8 text (byte 0xfc at offset 9); convert it to UTF-8 first'),
    (b'\xff\xfe# R\x00E\x00', '--update README.md: not UTF-8 text (byte 0xff at offset 0)'),
    (b'# README without the markers\n', 'README.md has no generated models table: put the lines'),
    (None, 'No such file or directory: README.md'),
])
def test_models_update_refuses_a_document_it_cannot_rewrite(files, cli, content, message):
    if content is not None:
        (files / 'README.md').write_bytes(content)
    code, out, err = cli('models', '--markdown', '--update', 'README.md')
    assert code == 2 and err.startswith(f'pkmixer models: error: {message}'), err
    assert out == '' and (content is None or (files / 'README.md').read_bytes() == content)


def test_summary_numbers():
    s = summarize('pk_mixer_b16_224')
    assert s.params == sum(p.numel() for p in timm.create_model('mixer_b16_224', device='meta').parameters())
    assert abs(s.gmacs - 12.6) < 0.05  # timm lists mixer_b16_224 at 12.62 GMACs
    assert s.width == 196 * 768 and s.gamma_label == '1.96/4'
    sw = summarize('sw_mlp_o18_32')
    assert sw.family == 'SW-MLP' and sw.width == 724 and sw.density == 0.5


# --------------------------------------------------------------------------------------- every command's user errors

CLI_CASES = [
    (['push', '{root}/missing.pt', '--model', RP, '--repo-id', 'a/b'], 'pkmixer push: error: no checkpoint file at'),
    (['push', '{root}/dir', '--model', RP, '--repo-id', 'a/b'], 'pkmixer push: error: the checkpoint is a directory'),
    (['push', '{root}/w.safetensors', '--model', 'nope', '--repo-id', 'a/b'], "'nope' is not a timm-pkmixer"),
    (['push', '{root}/w.safetensors', '--model', RP, '--repo-id', 'a/b', '--model-kwargs', 'perm_seed'],
     "argument --model-kwargs: expected key=value with a Python name as key, got 'perm_seed'"),
    (['push', '{root}/w.safetensors', '--model', RP, '--repo-id', 'a/b', '--model-kwargs', 'colour=3'],
     "s_mixer_rp_s64c64_32 has no argument 'colour'; it takes: "),
    (['push', '{root}/w.safetensors', '--model', RP, '--repo-id', 'a/b', '--model-kwargs', 'perm_seed=1.5'],
     r'perm_seed must be an integer, got 1.5'),
    (['train', '{root}/broken.yaml', '--train-py', '{tests}/mini_train_py.py'],
     'pkmixer train: error: {root}/broken.yaml: not a valid YAML recipe'),
    (['train', '{root}/broken.yaml', '--train-py', '{root}/none.py'], 'pkmixer train: error: no train.py at'),
    (['sweep', '{root}/broken.yaml', '--out-dir', '{root}/s'], 'broken.yaml: not a valid YAML recipe'),
    (['sweep', '{root}/list.yaml', '--out-dir', '{root}/s'], 'a recipe must be a YAML mapping'),
    (['sweep', '{root}/dir', '--out-dir', '{root}/s'], 'pkmixer sweep: error: a recipe must be a YAML file'),
    (['sweep', '{root}/nothing.yaml', '--out-dir', '{root}/s'], 'pkmixer sweep: error: '),
    (['train', 'x.yaml', '--global-batch', '0'], 'argument --global-batch: global batch must be a positive integer'),
    (['demo', '--epochs', '0'], 'argument --epochs: epochs must be a positive integer, got 0'),
    (['demo', '--model', 'resnet50'], "unknown model 'resnet50' (a timm model, but not one of timm-pkmixer)"),
    (['demo', '--data-dir', '{root}/none'], 'pkmixer demo: error: no such data folder'),
    (['width', '--omega', 'inf'], 'argument --omega: omega must be a finite number, got inf'),
    (['width', '--omega', 'x'], "argument --omega: expected a number, got 'x'"),
    (['width', '--model', 'nope'], "unknown model 'nope'"),
    (['models', 'zzz'], 'pkmixer models: error: no registered model matches'),
    (['plot', 'run', '{root}/dir', '--out', '{root}/x.png'], 'pkmixer plot run: error: '),
    (['plot', 'width', '--omega', '1000', '--model-tol', '-0.1', '--out', '{root}/x.png'],
     'argument --model-tol: model_tol must be in [0, ∞), got -0.1'),
    (['nonsense'], "invalid choice: 'nonsense'"),
]


@pytest.mark.parametrize('argv,message', CLI_CASES)
def test_e_cli_user_errors(files, cli, argv, message):
    tests = os.path.dirname(os.path.abspath(__file__))
    argv = [a.format(root=files, tests=tests) for a in argv]
    code, _, err = cli(*argv)  # in this process: `cli` fails the test on a traceback
    assert code == 2, (argv, code, err)
    assert message.format(root=files) in err, (argv, err)
    assert [line for line in err.splitlines() if ': error: ' in line][0].startswith('pkmixer'), err


@pytest.mark.parametrize('argv,message', [
    (['models', '--bogus'], 'pkmixer models: error: unrecognized arguments: --bogus'),
    (['width', '--omega', '100', 'extra'], 'pkmixer width: error: unrecognized arguments: extra'),
    (['recipes', 'a', 'b'], 'pkmixer recipes: error: unrecognized arguments: b'),
])
def test_other_commands_still_refuse_unknown_arguments(cli, argv, message):
    code, _, err = cli(*argv)
    assert code == 2 and message in err, err


# ---------------------------------------------------------------------------- --help and pkmixer width without torch

def test_help_and_the_cli_import_neither_torch_nor_timm():
    code = textwrap.dedent('''
        import contextlib, io, sys
        from timm_pkmixer.cli import build_parser, main
        for argv in (['--help'], ['train', '--help'], ['width', '--help'], ['demo', '--help'], ['plot', 'run', '-h']):
            with contextlib.redirect_stdout(io.StringIO()):
                assert main(argv) == 0, argv
        print(sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'timm', 'numpy')))
    ''')
    env = dict(os.environ, PYTHONPATH=str(ROOT), TIMM_PKMIXER_AUTOLOAD='1')
    out = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, env=env, check=True).stdout
    assert out.strip() == '[]'


WIDTH_ARITHMETIC = [  # every mode of `pkmixer width` but --model: what it prints, and that torch stayed out
    (['width', '--omega', '262144'], 'optimum (eq. 15): C* = S* = (Ω/γ)^(1/3) = 64.00, max m = (Ω/γ)^(2/3) = 4096'),
    (['width', '--omega', '262144', '--gamma', '4', '--C', '64', '--mirror'], 'Ω = 262144, γ = 4'),
    (['width', '--omega', '1e6', '--patch', '4', '8'], 'Ω = 1000000, γ = 1'),
    (['width', '--S', '64', '--C', '64', '--omega', '262144'], 'γ = 1 (solved from Ω, S, C by eq. 14)'),
    (['width', '--omega', '262144', '--json'], '"mode": "curve"'),
    (['width', '--omega', 'inf'], ''),  # a refusal (exit 2) does not import torch either
]


def test_width_arithmetic_imports_neither_torch_nor_timm():
    code = textwrap.dedent(f'''
        import contextlib, io, json, sys
        from timm_pkmixer.cli import main
        results = []
        for argv, _ in {WIDTH_ARITHMETIC!r}:
            out, err = io.StringIO(), io.StringIO()
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                results.append((main(argv), out.getvalue()))
        print(json.dumps([results, sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'timm'))]))
    ''')
    env = dict(os.environ, PYTHONPATH=str(ROOT), TIMM_PKMIXER_AUTOLOAD='1')
    results, modules = json.loads(subprocess.run([sys.executable, '-c', code], capture_output=True, text=True,
                                                 env=env, check=True).stdout)
    assert modules == []
    for (argv, expected), (code, out) in zip(WIDTH_ARITHMETIC, results):
        assert code == (0 if expected else 2) and expected in out, (argv, out)


# -------------------------------------------------------------------------------------------------------- the README

def test_readme_lists_every_command():
    import argparse
    import re

    from timm_pkmixer.cli import build_parser
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    readme = (ROOT / 'README.md').read_text(encoding='utf-8')
    paragraph = readme.split('`pkmixer --help` lists the commands:')[1].split('\n\n')[0]
    listed = set(re.findall(r'`([a-z0-9-]+)`', paragraph))
    assert {'analyze', 'train', 'models'} <= set(sub.choices) and set(sub.choices) <= listed, \
        sorted(set(sub.choices) - listed)
