"""Refusals in a second (issue 52): a command's argument errors — a mistyped flag (its own usage and the closest flag
named), an invalid choice, a model name of one of our families that is not registered, a missing path, a mistyped
flag of train.py's for `pkmixer launch` — are found before torch or timm is imported, and a refused launch leaves its
folder exactly as it was."""
import json
import os
import stat
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Dict, List

import pytest
import timm
from test_launch_runs import MINI, _images, _recipe

from timm_pkmixer.catalog import is_pkmixer_model, list_pkmixer_models
from timm_pkmixer.cli import build_parser
from timm_pkmixer.training.train_py import TrainArgumentError, _resolve, load_train_py, missing_train_py_message
from timm_pkmixer.training.train_py_parsers import check_train_args, rebuild_train_py
from timm_pkmixer.validation import (
    closest_flags,
    closest_models,
    did_you_mean_flags,
    model_families,
    registered_models,
    unknown_model,
)

from conftest import command_messages

ROOT = Path(__file__).resolve().parent.parent
# timm's own train.py, where the shell names one (the stand-in otherwise stands for it)
TRAIN_PYS = [MINI] + ([os.environ['TIMM_TRAIN_PY']] if os.path.isfile(os.environ.get('TIMM_TRAIN_PY', '')) else [])


@pytest.fixture(autouse=True)
def _env(launch_env, monkeypatch):
    monkeypatch.setenv('OMP_NUM_THREADS', '1')


@pytest.fixture(scope='module')
def data(tmp_path_factory) -> Path:
    return _images(tmp_path_factory.mktemp('images'))


def snapshot(folder: Path) -> Dict[str, object]:
    """Every path under `folder`: a file's bytes, else its kind."""
    out: Dict[str, object] = {}
    for path in sorted(folder.rglob('*')):
        mode = path.lstat().st_mode
        out[str(path.relative_to(folder))] = (path.read_bytes() if stat.S_ISREG(mode) else
                                              'dir' if stat.S_ISDIR(mode) else 'fifo' if stat.S_ISFIFO(mode) else mode)
    return out


# ------------------------------------------------------------------------------------- the registered names, torch-free

def test_the_names_read_from_the_model_files_are_timms_registry():
    assert registered_models() == tuple(list_pkmixer_models())


def test_no_other_timm_model_is_named_as_one_of_our_model_families():
    """What lets a launch refuse `rp_mixr_b_w` without timm: no timm model outside ours begins with pk_, rp_, s_, …"""
    assert set(model_families()) == {name.split('_')[0] for name in list_pkmixer_models()}
    assert [n for n in timm.list_models() if n.split('_')[0] in model_families() and not is_pkmixer_model(n)] == []


@pytest.mark.parametrize('name, message', [
    ('rp_mixr_b_w', "unknown model 'rp_mixr_b_w': not a registered timm-pkmixer model; did you mean rp_mixer_b_w, "
                    "pk_mixer_b_w, rp_mixer_ss_w_32? (see `pkmixer models`)"),
    ('s_mixer_s64c64', "unknown model 's_mixer_s64c64': not a registered timm-pkmixer model; did you mean "
                       "s_mixer_s64c64_32, s_mixer_rp_s64c64_32, s_mixer_rp_first_s64c64_32? (see `pkmixer models`)"),
    ('sw_zzzzzzzzzzzzzzzz', "unknown model 'sw_zzzzzzzzzzzzzzzz': not a registered timm-pkmixer model (see "
                            "`pkmixer models`)"),
    ('rp_mixer_b_w', None), ('rp_mixer_b_w.some_tag', None),  # registered (a pretrained tag is timm's to judge)
    ('resnet50', None), ('mixer_b16_224', None), ('nope', None), ('hf-hub:org/rp_mixer', None),  # timm's to judge
])
def test_a_family_name_not_registered_is_refused_with_the_closest(name, message):
    assert unknown_model(name) == message


def test_closest_models_are_registered_and_closest_first():
    assert closest_models('rp_mixer_b16_22') == ['rp_mixer_b16_224', 'rp_mixer_s16_224', 'rp_mixer_l16_224']
    assert closest_models('zzzz') == []


# ---------------------------------------------------------------------------------- flags, choices, model names

def test_closest_flags_names_each_unknown_flag_once_in_order_at_the_cutoff():
    known = ['-w', '--workers', '--experiment', '--out-dir', '--lr']
    args = ['--out-dri=x', 'depth', '--wrkers', '1', '--wrkers', '-', '--', '-x', '--lr', '--zzz']
    assert closest_flags(args, known, cutoff=0.6) == {'--out-dri': '--out-dir', '--wrkers': '--workers'}
    assert list(closest_flags(args, known, cutoff=0.6)) == ['--out-dri', '--wrkers']
    assert closest_flags(['--wor'], known, cutoff=0.6) == {'--wor': '--workers'}  # 6/10 = 0.6: close at 0.6
    assert closest_flags(['--wor'], known, cutoff=0.8) == {}  # ... not at train.py's 0.8
    assert did_you_mean_flags({}) == ''
    assert did_you_mean_flags({'--wrkers': '--workers'}) == ' (did you mean --workers?)'
    assert did_you_mean_flags({'--a': '--ab', '--c': '--cd'}) == ' (did you mean --ab for --a, --cd for --c?)'


def test_train_pys_refusal_carries_its_hint_apart(tmp_path):
    """train.py's guess is a field of the refusal, not only text in its message: the launch replaces it by the
    launcher's own guess without reading it back out of the message."""
    recipe = tmp_path / 'r.yaml'
    recipe.write_text('model: s_mixer_s64c64_32\n')
    with pytest.raises(TrainArgumentError) as caught:
        _resolve(rebuild_train_py(Path(MINI)), [MINI, '--config', str(recipe), '--wrkers', '1', '--seeed', '2'])
    assert caught.value.refusal == 'train.py refuses its arguments: unrecognized arguments: --wrkers 1 --seeed 2'
    assert caught.value.hint == ' (did you mean --workers for --wrkers, --seed for --seeed?)'
    assert str(caught.value) == caught.value.refusal + caught.value.hint


@pytest.mark.parametrize('argv, last', [
    (['status', '{dir}', '--jsn'], 'pkmixer status: error: unrecognized arguments: --jsn (did you mean --json?)'),
    (['sweep', 'cifar10/s_mixer_fig7', '--experimnt', 'depth'],
     'pkmixer sweep: error: unrecognized arguments: --experimnt depth (did you mean --experiment?)'),
    (['sweep', 'cifar10/s_mixer_fig7', '--experimnt', 'depth', '--out-dri', 'x'],
     'pkmixer sweep: error: unrecognized arguments: --experimnt depth --out-dri x (did you mean --experiment for '
     '--experimnt, --out-dir for --out-dri?)'),
    (['models', '--bogus'], 'pkmixer models: error: unrecognized arguments: --bogus'),
    (['report', '{dir}', '--nofigures'],
     'pkmixer report: error: unrecognized arguments: --nofigures (did you mean --no-figures?)'),
    (['--verison'], 'pkmixer: error: unrecognized arguments: --verison (did you mean --version?)'),
])
def test_a_mistyped_flag_gets_the_commands_usage_and_the_closest_flag(cli, tmp_path, argv, last):
    code, out, err = cli(*[a.format(dir=tmp_path) for a in argv])
    command = argv[0] if not argv[0].startswith('-') else ''
    assert code == 2 and out == ''
    assert err.splitlines()[0].startswith(f'usage: pkmixer {command}'.rstrip() + ' ')
    assert err.splitlines()[-1] == last


def test_the_usage_is_the_subcommands_own(cli, tmp_path):
    code, _, err = cli('status', tmp_path, '--jsn')
    assert err == ('usage: pkmixer status [-h] [--json] dir\n'
                   'pkmixer status: error: unrecognized arguments: --jsn (did you mean --json?)\n')


@pytest.mark.parametrize('argv, last', [
    (['sweep', 'cifar10/s_mixer_fig7', '--experiment', 'dpth'],
     "pkmixer sweep: error: argument --experiment: invalid choice: 'dpth' (choose from 'width', 'depth', 'rp-block', "
     "'gamma', 'patch', 'density', 'seeds') (did you mean depth?)"),
    (['statsu'], "pkmixer: error: argument COMMAND: invalid choice: 'statsu' (choose from "
                 + ', '.join(repr(c) for c in build_parser()._subparsers._group_actions[0].choices)
                 + ') (did you mean status?)'),
])
def test_an_invalid_choice_names_the_closest(cli, argv, last):
    code, _, err = cli(*argv)
    assert code == 2 and err.splitlines()[-1] == last


@pytest.mark.parametrize('argv', [
    ['demo', '--model', 'rp_mixr_b_w'],
    ['width', '--model', 'rp_mixr_b_w'],
    ['plot', 'width', '--omega', '1000', '--model', 'rp_mixr_b_w'],
    ['push', 'w.pth', '--model', 'rp_mixr_b_w'],
    ['expand', 'w.pth', '--model', 'rp_mixr_b_w', '--factor', '2', '--out-dir', 'x'],
    ['analyze', 'spectra', '--model', 'rp_mixr_b_w'],
])
def test_a_model_flag_refuses_a_family_name_not_registered(cli, argv):
    code, out, err = cli(*argv)
    prog = ' '.join(argv[:2] if argv[0] in ('plot', 'analyze') else argv[:1])
    assert code == 2 and out == ''
    assert err.splitlines()[-1] == f'pkmixer {prog}: error: argument --model: {unknown_model("rp_mixr_b_w")}'


# ----------------------------------------------------------------------------------- before torch, measured

_PROBE = textwrap.dedent('''
    import json, sys, time
    from timm_pkmixer.cli import main
    out = []
    for argv in json.loads(sys.argv[1]):
        start = time.perf_counter()
        code = main(argv)
        out.append([argv, code, 'torch' in sys.modules or 'timm' in sys.modules, time.perf_counter() - start])
    print(json.dumps(out))
''')


def test_refusals_import_neither_torch_nor_timm(tmp_path, data):
    """Each refusal in a fresh interpreter's ``main``: exit status 2 and, after it, neither torch nor timm imported
    (the launch's among them read train.py's parsers from its source)."""
    sweep = tmp_path / 'sweep'
    _recipe(sweep, 'a', data)
    before = snapshot(sweep)
    d = str(sweep)
    cases = [['status', d, '--jsn'], ['sweep', 'cifar10/s_mixer_fig7', '--experimnt', 'depth'],
             ['sweep', 'cifar10/s_mixer_fig7', '--experiment', 'dpth'], ['statsu'],
             ['demo', '--model', 'rp_mixr_b_w'], ['push', 'w.pth', '--model', 'rp_mixer_b_ww'],
             ['launch', d, '--train-py', MINI, '--wrkers', '1'], ['launch', d, '--train-py', MINI, '--epochs', 'x'],
             ['launch', d, '--train-py', MINI, '--no-wait', '--wrkers', '1'],
             ['launch', d, '--train-py', MINI, '--model', 'rp_mixr_b_w'],
             ['launch', d, '--train-py', MINI, '--data-dir', str(tmp_path / 'none')],
             ['launch', d, '--train-py', str(tmp_path / 'none.py')], ['launch', str(tmp_path / 'none')],
             ['train', str(sweep / 'a.yaml'), '--train-py', MINI, '--wrkers', '1']]
    env = dict(os.environ, PYTHONPATH=str(ROOT), TIMM_PKMIXER_AUTOLOAD='1')
    proc = subprocess.run([sys.executable, '-c', _PROBE, json.dumps(cases)], capture_output=True, text=True, env=env,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr
    results = json.loads(proc.stdout.splitlines()[-1])
    assert [(argv, code, imported) for argv, code, imported, _ in results] == [(c, 2, False) for c in cases]
    assert snapshot(sweep) == before


# ----------------------------------------------------------------------------------- launch: train.py's flags at once

def test_launch_refuses_a_mistyped_train_py_flag_with_the_launcher_flag(cli, tmp_path, data):
    sweep = tmp_path / 'sweep'
    recipe = _recipe(sweep, 'a', data)
    code, out, err = cli('launch', sweep, '--train-py', MINI, '--wrkers', '1')
    assert code == 2 and out == ''
    assert command_messages(err) == (
        f'pkmixer launch: error: {recipe} is refused: train.py refuses its arguments: unrecognized arguments: --wrkers '
        f'1. Every argument pkmixer launch does not know goes to train.py: --wrkers (probably --workers, a flag of '
        f'pkmixer launch)? Nothing was recorded or started\n')
    assert 'checking recipe' not in err  # refused before train.py was imported to check the first recipe


def test_launch_names_the_train_py_flag(cli, tmp_path, data):
    sweep = tmp_path / 'sweep'
    _recipe(sweep, 'a', data)
    missing = tmp_path / 'none.py'
    code, _, err = cli('launch', sweep, '--train-py', missing)
    assert code == 2
    assert command_messages(err) == (f'pkmixer launch: error: no train.py at {missing}\n'
                                     f'{missing_train_py_message("pass --train-py PATH/train.py")}\n')
    assert 'as train_py' not in err and 'train_py:' not in err
    code, _, err = cli('launch', sweep)  # none given, no $TIMM_TRAIN_PY
    assert command_messages(err).startswith('pkmixer launch: error: no train.py given\n')
    assert 'then pass --train-py PATH/train.py or set TIMM_TRAIN_PY=PATH/train.py.' in err
    assert not (sweep / 'launch').exists()


def test_launch_refuses_a_family_model_name_not_registered(cli, tmp_path, data):
    sweep = tmp_path / 'sweep'
    _recipe(sweep, 'a', data)
    recipe = _recipe(sweep, 'b', data, model='s_mixer_s64c64')
    code, _, err = cli('launch', sweep, '--train-py', MINI)
    assert code == 2
    assert command_messages(err) == f'pkmixer launch: error: {recipe} is refused: {unknown_model("s_mixer_s64c64")}\n'


# ----------------------------------------------------------------------------------- launch: the folder as it was

@pytest.mark.parametrize('args', [
    ['--wrkers', '1'],                       # train.py's parser rebuilt: before train.py is imported
    ['--model', 'rp_mixr_b_w'],              # a family name not registered: before train.py is imported
    ['--data-dir', '{tmp}/none'],            # data not there: before train.py is imported
    ['--model', 'resnet_not_in_timm'],       # timm's registry: train.py imported
    ['--model-kwargs', 'colour=3'],          # the model built on the meta device
])
@pytest.mark.parametrize('launched', [False, True], ids=['first', 'relaunch'])
def test_a_refused_launch_leaves_the_folder_as_it_was(cli, tmp_path, data, args, launched):
    sweep = tmp_path / 'sweep'
    _recipe(sweep, 'a', data)
    if launched:  # the state an earlier launch leaves: the folder's id, the lock's mutex, its train.py arguments
        (sweep / 'launch' / 'runs').mkdir(parents=True)
        (sweep / 'launch' / 'folder.json').write_text('{"id": "0123", "created": 1.5}\n')
        (sweep / 'launch' / 'lock.mutex').write_text('')
        (sweep / 'launch' / 'train_args.json').write_text('{\n "train_args": [],\n "time": 2.5\n}\n')
    before = snapshot(sweep)
    argv = [a.format(tmp=tmp_path) for a in args]
    code, out, err = cli('launch', sweep, '--train-py', MINI, *(['--new-train-args'] if launched else []), *argv)
    assert code == 2 and out == '', err
    assert 'is refused' in err or 'cannot be read' in err, err
    assert snapshot(sweep) == before


def test_a_refusal_after_the_arguments_are_recorded_puts_them_back(cli, tmp_path, data):
    """A run's log that is a FIFO is refused after every recipe was checked and the new train.py arguments recorded:
    the recorded ones are put back as they were, byte for byte, and the folder's id made for it removed."""
    sweep = tmp_path / 'sweep'
    _recipe(sweep, 'a', data)
    (sweep / 'launch' / 'logs').mkdir(parents=True)
    os.mkfifo(sweep / 'launch' / 'logs' / 'a.log')
    (sweep / 'launch' / 'train_args.json').write_text('{\n "train_args": [\n  "--lr",\n  "0.02"\n ],\n "time": 1\n}\n')
    before = snapshot(sweep)
    code, _, err = cli('launch', sweep, '--train-py', MINI, '--new-train-args', '--lr', '0.03')
    assert code == 2 and "a.log is not a run log (a FIFO, not a regular file)" in err, err
    assert snapshot(sweep) == before


def test_a_no_wait_refusal_leaves_the_folder_as_it_was(cli, tmp_path, data):
    sweep = tmp_path / 'sweep'
    _recipe(sweep, 'a', data)
    before = snapshot(sweep)
    code, out, err = cli('launch', sweep, '--train-py', MINI, '--no-wait', '--wrkers', '1')
    assert code == 2 and 'launching in the background' not in out
    assert '--wrkers (probably --workers, a flag of pkmixer launch)' in err
    assert snapshot(sweep) == before


@pytest.mark.slow
def test_a_background_launchers_refusal_leaves_the_folder_as_it_was(cli, tmp_path, data):
    """Refused by the background launcher (timm's registry, under the lock): its log is removed with the rest."""
    sweep = tmp_path / 'sweep'
    _recipe(sweep, 'a', data)
    before = snapshot(sweep)
    code, out, err = cli('launch', sweep, '--train-py', MINI, '--no-wait', '--model', 'resnet_not_in_timm')
    assert code == 2 and "model 'resnet_not_in_timm' is neither a registered timm model" in err, err
    assert snapshot(sweep) == before


def test_a_launch_waiting_for_a_removed_mutex_takes_the_one_in_place(tmp_path):
    """A refused first launch removes the lock's mutex while holding it: a launch waiting for it then holds the
    file in place (made anew), never the removed one, so two launches are never both in the critical section."""
    import fcntl

    from timm_pkmixer.launch.lock import _mutex
    folder = tmp_path / 'sweep'
    mutex = folder / 'launch' / 'lock.mutex'
    entered, leave = threading.Event(), threading.Event()

    def waiting() -> None:
        with _mutex(folder):
            entered.set()
            leave.wait(60)
    with _mutex(folder):
        thread = threading.Thread(target=waiting)
        thread.start()
        time.sleep(0.3)  # it waits for the flock of the file held here
        assert not entered.is_set()
        mutex.unlink()
    assert entered.wait(60)
    fd = os.open(mutex, os.O_RDWR)  # the file in place is the one the waiting launch holds
    try:
        with pytest.raises(BlockingIOError):
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    finally:
        os.close(fd)
        leave.set()
        thread.join()


# ----------------------------------------------------------------------------------- train.py's parsers, rebuilt

def _signature(parser) -> List[tuple]:
    return [(tuple(a.option_strings), a.dest, a.nargs, a.const, a.choices, a.required, a.type)
            for a in parser._actions]


def _left_out(ours, theirs) -> List[str]:
    """The arguments whose custom action or default (not a literal: ``[3. / 4., 4. / 3.]``) the rebuild leaves out."""
    return [b.dest for a, b in zip(ours._actions, theirs._actions)
            if type(b).__module__ != 'argparse' or (a.default != b.default and a.default is None)]


@pytest.mark.parametrize('path', TRAIN_PYS, ids=lambda p: Path(p).name)
def test_the_rebuilt_parsers_are_train_pys(path):
    real, rebuilt = load_train_py(Path(path)), rebuild_train_py(Path(path))
    assert rebuilt is not None
    for name in ('config_parser', 'parser'):
        ours, theirs = getattr(rebuilt, name), getattr(real, name)
        custom = [i for i, a in enumerate(theirs._actions) if type(a).__module__ != 'argparse']  # ParseKwargs
        assert [s for i, s in enumerate(_signature(ours)) if i not in custom] == \
               [s for i, s in enumerate(_signature(theirs)) if i not in custom]
        assert [(a.option_strings, a.nargs) for i, a in enumerate(ours._actions) if i in custom] == \
               [(a.option_strings, a.nargs) for i, a in enumerate(theirs._actions) if i in custom]
        left_out = _left_out(ours, theirs)
        assert [(a.dest, a.default) for a in ours._actions if a.dest not in left_out] == \
               [(a.dest, a.default) for a in theirs._actions if a.dest not in left_out]
        assert [[a.dest for a in g._group_actions] for g in ours._mutually_exclusive_groups] == \
               [[a.dest for a in g._group_actions] for g in theirs._mutually_exclusive_groups]


@pytest.mark.parametrize('path', TRAIN_PYS, ids=lambda p: Path(p).name)
@pytest.mark.parametrize('argv', [
    [], ['--wrkers', '1'], ['--workers', '2', '--lr', '0.1'], ['--epochs', 'x'], ['--epochs'], ['-b', '16'],
    ['--model-kwargs', 'a=1', 'b=2', '--seed', '3'], ['--input-size', '3', '8'], ['--output=o', '--experiment', 'e'],
    ['--torchscript', '--torchcompile'], ['--train-size-schedule', 'x'], ['--lr-base-scale', 'sqrt', '--bogus'],
    ['--dataset-download', '--pin-mem'], ['extra'], ['--conf', 'other.yaml'], ['--wor', '1'],
])
def test_the_rebuilt_parsers_refuse_and_accept_as_train_pys(tmp_path, path, argv):
    """The same refusal (train.py's message) or the same arguments (less those the rebuild leaves out)."""
    recipe = tmp_path / 'r.yaml'
    recipe.write_text('model: s_mixer_s64c64_32\nepochs: 2\n')
    full = [path, '--config', str(recipe), *argv]
    rebuilt, real = rebuild_train_py(Path(path)), load_train_py(Path(path))
    left_out = _left_out(rebuilt.parser, real.parser)

    def outcome(module):
        try:
            args = _resolve(module, list(full))
        except (TrainArgumentError, OSError) as e:
            return f'{type(e).__name__}: {e}'
        return {k: v for k, v in vars(args).items() if k not in left_out}
    assert outcome(rebuilt) == outcome(real)


_READABLE = '''
import argparse
config_parser = parser = argparse.ArgumentParser(add_help=False)
parser.add_argument('-c', '--config', default='')
parser = argparse.ArgumentParser()
group = parser.add_argument_group('g')
group.add_argument('--lr', type=float, default=0.1)
{extra}

def _parse_args():
    args_config, remaining = config_parser.parse_known_args()
    args = parser.parse_args(remaining)
    return args, ''

def main():
    pass
'''


@pytest.mark.parametrize('extra', [
    "if True:\n    group.add_argument('--epochs', type=int)",      # in a branch
    "for f in ('--a', '--b'):\n    group.add_argument(f)",         # in a loop
    "kw = dict(type=int)\ngroup.add_argument('--epochs', **kw)",     # **kwargs
    "NAME = '--epochs'\ngroup.add_argument(NAME)",                  # an option string held in a variable
    "group.add_argument('--epochs', action=Custom)",                  # a custom action, its nargs not given
    "parser.set_defaults(lr=0.2)",                                     # a parser method not rebuilt
    "def more():\n    parser.add_argument('--epochs')",              # an argument added in a function
])
def test_a_train_py_that_builds_its_parsers_otherwise_is_not_rebuilt(tmp_path, extra):
    path = tmp_path / 'train.py'
    path.write_text(_READABLE.format(extra=''))
    assert rebuild_train_py(path) is not None  # the file as it is, without the addition, is read
    path.write_text(_READABLE.format(extra=extra))
    assert rebuild_train_py(path) is None


def test_a_parse_args_that_does_more_is_not_rebuilt(tmp_path):
    path = tmp_path / 'train.py'
    path.write_text(_READABLE.format(extra='').replace("    return args, ''", "    check(args)\n    return args, ''"))
    assert rebuild_train_py(path) is None


def test_check_train_args_reads_the_recipe_and_train_args_as_prepare_train(tmp_path, data):
    recipe = _recipe(tmp_path / 'sweep', 'a', data)
    checked = check_train_args(str(recipe), ['--lr', '0.5'], MINI)
    assert (checked.args.model, checked.args.lr, checked.args.epochs) == ('s_mixer_s64c64_32', 0.5, 1)
    assert checked.data.root == str(data) and checked.data.present
    bad = _recipe(tmp_path / 'sweep', 'b', data, colour=3)
    with pytest.raises(Exception, match=r"\['colour'\] are not arguments of train.py"):
        check_train_args(str(bad), [], MINI)


def test_train_names_the_closest_train_py_flag_and_model_before_torch(cli, tmp_path, data):
    """`pkmixer train` refuses a mistyped train.py flag with the closest of train.py's own flags, and a model named
    as one of the package's families but not registered with the closest registered names, from train.py's source
    and the model files (the same check `launch` makes), and leaves nothing behind."""
    recipe = _recipe(tmp_path / 'sweep', 'a', data)
    before = snapshot(tmp_path)
    code, out, err = cli('train', recipe, '--train-py', MINI, '--wrkers', '1')
    assert code == 2 and out == ''
    assert command_messages(err).endswith('unrecognized arguments: --wrkers 1 (did you mean --workers?)\n')
    code, out, err = cli('train', recipe, '--train-py', MINI, '--model', 's_mixer_s64c64')
    assert code == 2 and command_messages(err) == (
        "pkmixer train: error: unknown model 's_mixer_s64c64': not a registered timm-pkmixer model; did you mean "
        's_mixer_s64c64_32, s_mixer_rp_s64c64_32, s_mixer_rp_first_s64c64_32? (see `pkmixer models`)\n')
    assert snapshot(tmp_path) == before
