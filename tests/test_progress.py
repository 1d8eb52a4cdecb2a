"""Progress: every command that can run longer than about ten seconds says on stderr what it is doing (a line per
model, point, run, stage or batch of images) while stdout keeps only its results, and a closed stderr drops it; the
library logs it (``logging``) and prints nothing, so a caller who configures no logging hears nothing. The lines are
compared whole, in order, so a step that stops reporting (or reports twice, or out of order) fails here."""
import logging
import subprocess
import sys
from pathlib import Path

import pytest
import timm
from PIL import Image
from safetensors.torch import save_file

import timm_pkmixer.data.datasets as datasets_module
import timm_pkmixer.sweeps.sweep_plan as sweep_module
from timm_pkmixer.catalog import list_pkmixer_models, models_near_omega
from timm_pkmixer.data.datasets import export_image_folder
from timm_pkmixer.reports.report import build_report, write_report
from timm_pkmixer.sizes import format_bytes
from timm_pkmixer.sweeps.sweep_plan import plan_sweep

from conftest import command_messages
from test_report import run_folder

SMALL = 's_mixer_s64c64_32'


@pytest.fixture
def fresh_sweep_cache(monkeypatch):
    """No point built before (the plan builds a configuration once per process)."""
    monkeypatch.setattr(sweep_module, '_BUILT', set())
    monkeypatch.setattr(sweep_module, '_ACCEPTED', set())


@pytest.fixture
def checkpoint(tmp_path) -> Path:
    path = tmp_path / 'w.safetensors'
    save_file(timm.create_model(SMALL, num_blocks=2).state_dict(), str(path))
    return path


def _runs(root: Path) -> Path:
    """Four runs: two seeds of two depths (two groups)."""
    for blocks in (2, 3):
        for seed in (0, 1):
            run_folder(root, f'depth{blocks}-seed{seed}', seed=seed, model_kwargs={'num_blocks': blocks})
    return root


def test_models_says_each_model_it_counts(cli):
    names = [n for n in list_pkmixer_models() if 'ss8' in n]
    code, out, err = cli('models', 'ss8')
    assert code == 0 and len(names) >= 2
    assert err.splitlines() == [f'{n} ({i + 1}/{len(names)}): counting parameters and MACs on the meta device'
                                for i, n in enumerate(names)]
    assert [line.split()[0] for line in out.splitlines()[1:]] == names  # stdout: the table only


def test_each_command_installs_one_stderr_handler_and_takes_it_away(cli, caplog):
    """The handler is the command's: installed when it starts, not propagating (a root handler, as timm's train.py
    sets one up and as pytest's `caplog` is, does not get the lines to print them twice), removed when it ends, so
    a second command in the same process says each line once again and the library is silent between them."""
    caplog.set_level(logging.INFO)  # a handler on the root logger that hears INFO
    logger = logging.getLogger('timm_pkmixer')
    before = (logger.handlers[:], logger.level, logger.propagate)
    first = cli('models', 'ss8')
    assert first[0] == 0 and first[2] and not [r for r in caplog.records if r.name.startswith('timm_pkmixer')]
    assert (logger.handlers, logger.level, logger.propagate) == before
    assert cli('models', 'ss8') == first


def test_sweep_says_each_point_it_builds(cli, tmp_path, fresh_sweep_cache):
    plan = plan_sweep('cifar10/s_mixer_fig7', experiment='depth', seeds=[0])
    sweep_module._BUILT.clear()
    code, out, err = cli('sweep', 'cifar10/s_mixer_fig7', '--experiment', 'depth', '--seeds', '0', '--out-dir',
                         tmp_path / 'sweep')
    n = len(plan.points)
    assert code == 0 and n >= 4
    assert err.splitlines() == [f'point {i + 1}/{n}: building {p.name} ({p.model}) on the meta device'
                                for i, p in enumerate(plan.points)]
    assert out.splitlines()[0] == f'# {n} recipes in {tmp_path / "sweep"}; run each with (add --data-dir … where ' \
                                  f'the data lives):'


def test_report_says_each_run_it_reads_each_group_and_each_figure(cli, tmp_path):
    root = _runs(tmp_path / 'runs')
    code, out, err = cli('report', root, '--out-dir', tmp_path / 'report')
    names = ['depth2-seed0', 'depth2-seed1', 'depth3-seed0', 'depth3-seed1']
    assert code == 0
    assert err.splitlines() == (
        [f'{root}: reading run {i + 1}/4 ({name})' for i, name in enumerate(names)]
        + [f'group {i + 1}/2: describing {SMALL} (built on the meta device)' for i in range(2)]
        + ['drawing the figures of depth (2 points)'])
    assert out.startswith('depth: 4 runs averaged in 2 groups')


@pytest.mark.parametrize('command, stages', [
    (['push', '--repo-id', 'org/name'],
     ['reading {ckpt} ({size})', f'building {SMALL} and loading the weights into it',
      'writing model.safetensors, config.json and the model card into {out}']),
    (['expand', '--factor', '2'],
     ['reading {ckpt} ({size})', f'building {SMALL} and loading the weights into it',
      f'expanding {SMALL} 2× (32→64 px)', 'writing model.safetensors, config.json and the model card into {out}']),
])
def test_push_and_expand_say_each_stage(cli, tmp_path, checkpoint, command, stages):
    out_dir = tmp_path / 'out'
    code, out, err = cli(command[0], checkpoint, '--model', SMALL, '--model-kwargs', 'num_blocks=2', *command[1:],
                         '--out-dir', out_dir)
    assert code == 0
    size = format_bytes(Path(checkpoint).stat().st_size)  # a small file: in kB, not '0 MiB'
    assert size.endswith(' kB')
    assert err.splitlines() == [s.format(ckpt=checkpoint, out=out_dir, size=size) for s in stages]
    assert 'model.safetensors' in out and 'reading' not in out


def test_push_says_what_it_did_before_the_error(cli, tmp_path, checkpoint):
    """The error comes after the stages that ran, alone on its line; the stages not reached are not said."""
    code, _, err = cli('push', checkpoint, '--model', 'rp_mixer_ss8_32', '--repo-id', 'org/name', '--out-dir',
                       tmp_path / 'out')
    assert code == 2
    lines = err.splitlines()
    assert lines[:2] == [f'reading {checkpoint} ({format_bytes(Path(checkpoint).stat().st_size)})',
                         'building rp_mixer_ss8_32 and loading the weights into it']
    assert command_messages(err).startswith('pkmixer push: error: ') and not any('writing' in x for x in lines)


def test_plot_width_says_each_model_it_reads(cli, tmp_path):
    names = list_pkmixer_models()
    code, out, err = cli('plot', 'width', '--omega', '290217984', '--out', tmp_path / 'w.png')
    assert code == 0 and out == f'wrote {tmp_path / "w.png"}\n'
    assert err.splitlines() == [f'{n} ({i + 1}/{len(names)}): counting parameters and MACs on the meta device'
                                for i, n in enumerate(names)]


def test_the_library_reports_through_logging_only(tmp_path, capsys, caplog, logged, fresh_sweep_cache):
    """Each library entry point logs its lines (to the ``timm_pkmixer`` loggers) and prints nothing."""
    plan = plan_sweep('cifar10/s_mixer_fig7', experiment='depth', seeds=[0])
    assert logged() == [f'point {i + 1}/{len(plan.points)}: building {p.name} ({p.model}) on the meta device'
                        for i, p in enumerate(plan.points)]
    assert {r.name for r in caplog.records if r.name.startswith('timm_pkmixer')} == {
        'timm_pkmixer.sweeps.sweep_plan'}  # named by its module, as timm's loggers are

    caplog.clear()
    report = build_report([str(_runs(tmp_path / 'runs'))])
    assert len(logged()) == 6 and logged()[0].endswith('reading run 1/4 (depth2-seed0)')
    assert logged()[-1].startswith('group 2/2')
    caplog.clear()
    write_report(report, str(tmp_path / 'report'))
    assert logged() == ['drawing the figures of depth (2 points)']

    caplog.clear()
    models_near_omega(2 ** 18)
    assert len(logged()) == len(list_pkmixer_models())
    assert capsys.readouterr() == ('', '')


def test_a_caller_who_configures_no_logging_hears_nothing():
    """As timm's library code: silent under Python's default configuration; a caller's own logging configuration
    (here ``basicConfig`` at INFO) gets the lines, named by their module."""
    proc = subprocess.run([sys.executable, '-c', (
        'import logging\nfrom timm_pkmixer.catalog import summarize_all\n'
        'summarize_all(["s_mixer_s64c64_32"])\nprint("configured", flush=True)\n'
        'logging.basicConfig(level=logging.INFO, format="%(name)s: %(message)s")\n'
        'summarize_all(["s_mixer_s64c64_32"])\n')], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert (proc.stdout, proc.stderr) == ('configured\n', 'timm_pkmixer.catalog: s_mixer_s64c64_32 (1/1): counting '
                                                          'parameters and MACs on the meta device\n')


def test_image_export_says_every_thousand_images_and_the_last(tmp_path, monkeypatch, logged):
    """`pkmixer prepare-stl10` writes 13,000 PNG files: a line per PROGRESS_EVERY images (2 here) and at the end."""
    monkeypatch.setattr(datasets_module, 'PROGRESS_EVERY', 2)
    samples = [(Image.new('RGB', (8, 8)), i % 2) for i in range(5)]
    counts = export_image_folder(samples, ['a', 'b'], tmp_path / 'train')
    assert counts == {'a': 3, 'b': 2}
    assert logged() == [f'{tmp_path / "train"}: {k}/5 images written' for k in (2, 4, 5)]


def _closed_stderr(*argv) -> subprocess.CompletedProcess:
    """`pkmixer ARGV 2>&-`: the command starts with its stderr (fd 2) closed, as the shell's ``2>&-`` leaves it."""
    return subprocess.run(['sh', '-c', 'exec "$@" 2>&-', 'sh', sys.executable, '-m', 'timm_pkmixer',
                           *map(str, argv)], stdout=subprocess.PIPE, text=True, timeout=600)


def test_a_closed_stderr_drops_the_progress_and_stdout_keeps_the_results_alone(tmp_path):
    """`pkmixer sweep … 2>&-`: the point built is not said anywhere (never on stdout in stderr's place); stdout is
    the recipes written, whole."""
    out = tmp_path / 'sweep'
    proc = _closed_stderr('sweep', 'cifar10/s_mixer_fig7', '--experiment', 'depth', '--depths', '4',
                          '--permutation', 'random', '--seeds', '0', '--out-dir', out)
    assert proc.returncode == 0
    assert proc.stdout.splitlines() == [
        f'# 1 recipe in {out}; run each with (add --data-dir … where the data lives):',  # one: no plural
        f'pkmixer train {out / "depth_L4_random_seed0.yaml"}',
        f'# every setting with its value and source: {out / "SWEEP.md"} (and sweep.json)']


@pytest.mark.parametrize('argv', [['report', '{missing}'], ['report', '{missing}', '--out-dir', '{out}']],
                         ids=['usage', 'error'])
def test_a_closed_stderr_drops_an_error_too(tmp_path, argv):
    """An error is no result: with stderr closed, argparse's usage error and the command's own (``pkmixer report:
    error: no train.py run folders …``) are dropped (the exit status says it), never written to stdout."""
    proc = _closed_stderr(*[a.format(missing=tmp_path / 'missing', out=tmp_path / 'out') for a in argv])
    assert (proc.returncode, proc.stdout) == (2, '')
