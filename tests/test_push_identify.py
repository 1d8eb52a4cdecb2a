"""Every file `pkmixer push`, `expand` and `analyze` are handed is identified by its first bytes before it is used
(nothing unpickled): text (CSV, YAML, JSON), archives torch did not write, plain and hostile pickles, empty and special
files, folders, and a checkpoint whose name says another format are each refused by name with what was expected. A
checkpoint's own fields (epoch, weights, arguments, EMA weights alone) are refused by name too. A push refused midway
leaves its folder as it was, so the same command runs again; train_hparams.yaml keeps no machine path however its
YAML spells it."""
import argparse
import gzip
import io
import os
import pickle
import stat
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import numpy as np
import pytest
import timm
import torch
import yaml
from safetensors.torch import load_file, save_file
from timm.utils import update_summary

from timm_pkmixer.cli import main as pkmixer

from conftest import command_messages

NAME = 's_mixer_s64c64_32'
KWARGS = {'num_blocks': 1}
EXPECTED = ("expected train.py's checkpoint (last.pth.tar or model_best.pth.tar: a torch zip archive), a state dict "
            "saved by torch.save, or a .safetensors file")
ROOT = Path(__file__).resolve().parent.parent


def train_py_checkpoint(path: Path, **fields) -> dict:
    """A checkpoint as train.py saves it (weights, epoch, arguments), `fields` replacing or adding entries."""
    model = timm.create_model(NAME, **KWARGS)
    args = argparse.Namespace(model=NAME, model_kwargs=KWARGS, num_classes=None, in_chans=None, input_size=None,
                              gp=None, seed=0, epochs=3, model_ema=False)
    checkpoint = {'epoch': 1, 'arch': NAME, 'state_dict': model.state_dict(), 'args': args, 'version': 2, **fields}
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save(checkpoint, path)
    return checkpoint


def push(capsys, checkpoint, out, *extra):
    code = pkmixer(['push', str(checkpoint), '--out-dir', str(out), *map(str, extra)])
    out_text, err = capsys.readouterr()
    assert 'Traceback' not in err, err
    return code, out_text, command_messages(err)


class Hostile:
    """Unpickling this runs code: it creates the file `marker`."""

    def __init__(self, marker: str):
        self.marker = marker

    def __reduce__(self):
        return (open, (self.marker, 'w'))


def _tar_of(path: Path, member: Path) -> None:
    with tarfile.open(path, 'w') as tar:
        tar.add(member, arcname=member.name)


def _zip_of(path: Path, names: dict) -> None:
    with zipfile.ZipFile(path, 'w') as z:
        for name, data in names.items():
            z.writestr(name, data)


def _files(tmp_path: Path) -> dict:
    """name -> (file written, what the refusal says it is), each in a run folder whose last.pth.tar is beside it."""
    run = tmp_path / 'run'
    train_py_checkpoint(run / 'last.pth.tar')
    for epoch, top1 in enumerate((40.0, 55.5)):
        update_summary(epoch, {'loss': 1.0}, {'loss': 0.9, 'top1': top1, 'top5': 100.0},
                       filename=str(run / 'summary.csv'), lr=1e-3, write_header=epoch == 0)
    (run / 'args.yaml').write_text(yaml.safe_dump({'model': NAME, 'lr': 0.1, 'mean': [0.5, 0.5]}))
    (run / 'config.json').write_text('{"architecture": "s_mixer_s64c64_32", "num_classes": 10}')
    (run / 'fake.pth.tar').write_text('hello world\n')
    (run / 'blank.pth').write_text('\n  \n')
    (run / 'empty.pth.tar').write_bytes(b'')
    _tar_of(run / 'archive.pth.tar', run / 'last.pth.tar')
    (run / 'w.pth.gz').write_bytes(gzip.compress((run / 'last.pth.tar').read_bytes()))
    (run / 'plain.pkl').write_bytes(pickle.dumps({'state_dict': {}}, protocol=4))
    np.savez(run / 'weights.npz', a=np.zeros(3))
    _zip_of(run / 'notes.zip', {'notes.txt': 'hello'})
    (run / 'noise.bin').write_bytes(bytes([0xfe, 0xff, 0x00, 0x01, 0x02, 0x03, 0x04, 0x05]) * 8)
    return {
        'summary.csv': 'a CSV text file', 'args.yaml': 'a YAML text file', 'config.json': 'a JSON text file',
        'fake.pth.tar': 'a text file', 'blank.pth': 'a text file of blank lines',
        'empty.pth.tar': 'an empty file (0 bytes)',
        'archive.pth.tar': "a tar archive (train.py's .pth.tar is a torch zip archive, not a tar, whatever its name)",
        'w.pth.gz': 'a gzip archive',
        'plain.pkl': 'a Python pickle that torch.save did not write (torch.load reads only its own formats)',
        'weights.npz': 'a NumPy .npz archive',
        'notes.zip': 'a zip archive that torch.save did not write (no data.pkl among its 1 entries)',
        'noise.bin': 'an unrecognised binary file (its first bytes: fe ff 00 01 02 03 04 05)',
    }


def test_files_that_are_not_checkpoints_are_named_by_what_they_are(tmp_path, capsys):
    """`pkmixer push fake.pth.tar` used to end in KeyError: 101, `push summary.csv` in IndexError: pop from empty list,
    a YAML in "truncated or corrupt (UnpicklingError …)": each is now refused saying what it is and what push
    expects, naming the run's checkpoint beside it; nothing is written."""
    run = tmp_path / 'run'
    for name, kind in _files(tmp_path).items():
        code, _, err = push(capsys, run / name, tmp_path / 'out')
        assert code == 2, name
        assert err == (f"pkmixer push: error: {run / name} is {kind}, not a checkpoint: {EXPECTED}; train.py's "
                       f"checkpoint beside it is {run / 'last.pth.tar'}\n"), name
        assert not (tmp_path / 'out').exists()


def test_expand_and_analyze_identify_their_files_the_same_way(tmp_path, capsys):
    run = tmp_path / 'run'
    _files(tmp_path)
    assert pkmixer(['expand', str(run / 'summary.csv'), '--factor', '2', '--out-dir', str(tmp_path / 'x')]) == 2
    assert command_messages(capsys.readouterr().err) == (
        f"pkmixer expand: error: {run / 'summary.csv'} is a CSV text file, not a checkpoint: {EXPECTED}; train.py's "
        f"checkpoint beside it is {run / 'last.pth.tar'}\n")
    assert pkmixer(['analyze', 'cka', str(run / 'args.yaml'), str(run / 'fake.pth.tar'), '--out-dir',
                    str(tmp_path / 'a')]) == 2
    assert command_messages(capsys.readouterr().err) == (
        f"pkmixer analyze cka: error: {run / 'args.yaml'} is a YAML text file, not a checkpoint: {EXPECTED}; "
        f"train.py's checkpoint beside it is {run / 'last.pth.tar'}\n")


def test_a_hostile_pickle_is_never_run(tmp_path, capsys):
    """A plain pickle is refused by its first bytes; one inside torch.save's archive is refused by torch's
    weights_only reader: in neither case does its code run."""
    marker = tmp_path / 'ran'
    (tmp_path / 'plain.pth').write_bytes(pickle.dumps(Hostile(str(marker))))
    torch.save({'state_dict': {}, 'payload': Hostile(str(marker))}, tmp_path / 'zipped.pth')
    code, _, err = push(capsys, tmp_path / 'plain.pth', tmp_path / 'out')
    assert code == 2 and err.startswith(f'pkmixer push: error: {tmp_path / "plain.pth"} is a Python pickle that '
                                        f'torch.save did not write'), err
    code, _, err = push(capsys, tmp_path / 'zipped.pth', tmp_path / 'out')
    assert code == 2 and err.startswith(f'pkmixer push: error: {tmp_path / "zipped.pth"}: refusing to unpickle it'), err
    assert not marker.exists()


def test_a_name_that_says_another_format_is_refused_as_timms_scripts_would_fail_on_it(tmp_path, capsys):
    """timm's scripts choose the reader by the name: safetensors content named .pth.tar, or torch.save's named
    .safetensors, would fail there; push says so and how to rename it."""
    model = timm.create_model(NAME, **KWARGS)
    save_file(model.state_dict(), str(tmp_path / 'last.pth.tar'))
    torch.save(model.state_dict(), tmp_path / 'w.safetensors')
    readers = "timm's scripts choose the reader by the name (.safetensors: safetensors, any other: torch.load)"
    code, _, err = push(capsys, tmp_path / 'last.pth.tar', tmp_path / 'out', '--model', NAME)
    assert code == 2 and err == (f"pkmixer push: error: {tmp_path / 'last.pth.tar'} is a safetensors file, not the "
                                 f"torch checkpoint its name says: {readers}, so they would fail on it; rename it to "
                                 f"last.safetensors\n"), err
    code, _, err = push(capsys, tmp_path / 'w.safetensors', tmp_path / 'out', '--model', NAME)
    assert code == 2 and err == (f"pkmixer push: error: {tmp_path / 'w.safetensors'} is a torch checkpoint "
                                 f"(torch.save's format), not the safetensors file its name says: {readers}, so they "
                                 f"would fail on it; rename it to w.pth\n"), err


def test_a_folder_is_refused_naming_the_checkpoint_it_holds(tmp_path, capsys):
    train_py_checkpoint(tmp_path / 'run' / 'last.pth.tar')
    code, _, err = push(capsys, tmp_path / 'run', tmp_path / 'out')
    assert code == 2 and err == (f"pkmixer push: error: the checkpoint is a directory, not a file: {tmp_path / 'run'}; "
                                 f"{EXPECTED}; it holds train.py's last.pth.tar: give "
                                 f"{tmp_path / 'run' / 'last.pth.tar'}\n"), err


def test_a_fifo_is_refused_without_waiting_for_a_writer(tmp_path):
    """A FIFO in a checkpoint's place (push) or a run folder's (analyze) is named at once, never opened for a
    blocking read (a subprocess, so that a regression fails on its timeout instead of hanging the suite)."""
    fifo = tmp_path / 'last.pth.tar'
    os.mkfifo(fifo)
    for argv, prog in ((['push', str(fifo), '--out-dir', str(tmp_path / 'out')], 'pkmixer push'),
                       (['analyze', 'cka', str(fifo), str(tmp_path), '--out-dir', str(tmp_path / 'a')],
                        'pkmixer analyze cka')):
        proc = subprocess.run([sys.executable, '-m', 'timm_pkmixer', *argv], capture_output=True, text=True,
                              timeout=300, cwd=str(ROOT))
        assert proc.returncode == 2, proc.stderr
        assert command_messages(proc.stderr) == f'{prog}: error: {fifo} is a FIFO, not a regular file: {EXPECTED}\n'


@pytest.mark.parametrize('fields,problem', [
    ({'epoch': 'abc'}, "its epoch is 'abc', not an epoch number (train.py records the epoch it saved as an integer "
                       "≥ 0)"),
    ({'epoch': float('nan')}, 'its epoch is nan, not an epoch number (train.py records the epoch it saved as an '
                              'integer ≥ 0)'),
    ({'epoch': -1}, 'its epoch is -1, not an epoch number (train.py records the epoch it saved as an integer ≥ 0)'),
    ({'state_dict': None}, 'its state_dict is None: the checkpoint holds no weights'),
    ({'state_dict': ['blocks.0.weight']}, 'its state_dict is a list, not a state dict (parameter names mapped to '
                                          'tensors)'),
    ({'args': 'model=s_mixer_s64c64_32'}, "its args is a str, not train.py's arguments (an argparse.Namespace)"),
])
def test_a_checkpoints_fields_are_refused_by_name(tmp_path, capsys, fields, problem):
    train_py_checkpoint(tmp_path / 'last.pth.tar', **fields)
    code, _, err = push(capsys, tmp_path / 'last.pth.tar', tmp_path / 'out')
    assert code == 2 and err == f'pkmixer push: error: {tmp_path / "last.pth.tar"}: {problem}\n', err
    assert not (tmp_path / 'out').exists()


@pytest.mark.parametrize('weights', ['absent', 'None'])
def test_an_ema_only_checkpoint_is_pushed_when_asked_for_as_timm_takes_it(tmp_path, capsys, weights):
    """timm's load_state_dict takes a checkpoint's EMA weights only when asked (use_ema), else its state_dict: a
    checkpoint of EMA weights alone is refused naming --use-ema (it used to be refused as 'neither a state dict nor a
    train.py checkpoint' with and without it), and pushed with it: model.safetensors holds the EMA weights."""
    ema = timm.create_model(NAME, **KWARGS)
    with torch.no_grad():
        for p in ema.parameters():
            p.add_(0.25)
    checkpoint = train_py_checkpoint(tmp_path / 'last.pth.tar', state_dict_ema=ema.state_dict())
    if weights == 'absent':
        del checkpoint['state_dict']
    else:
        checkpoint['state_dict'] = None
    torch.save(checkpoint, tmp_path / 'last.pth.tar')
    code, _, err = push(capsys, tmp_path / 'last.pth.tar', tmp_path / 'out')
    assert code == 2 and err == (f"pkmixer push: error: {tmp_path / 'last.pth.tar'}: holds EMA weights alone "
                                 f"(state_dict_ema; no state_dict), and timm's loaders take EMA weights only when "
                                 f"asked for them (--use-ema)\n"), err
    code, _, err = push(capsys, tmp_path / 'last.pth.tar', tmp_path / 'out', '--use-ema')
    assert code == 0, err
    pushed = load_file(str(tmp_path / 'out' / 'model.safetensors'))
    assert pushed.keys() == ema.state_dict().keys()
    assert all(torch.equal(pushed[k], v) for k, v in ema.state_dict().items())


# ------------------------------------------------------------------------------- a refused push leaves no folder

def _run_with_a_bad_top1(root: Path) -> Path:
    """A run whose pushed epoch (1) has a top-1 of 250 in summary.csv: the push refuses it only after the weights
    and config.json are written (the card comes last)."""
    train_py_checkpoint(root / 'last.pth.tar')
    for epoch, top1 in enumerate((40.0, 250.0)):
        update_summary(epoch, {'loss': 1.0}, {'loss': 0.9, 'top1': top1, 'top5': 100.0},
                       filename=str(root / 'summary.csv'), lr=1e-3, write_header=epoch == 0)
    return root


@pytest.mark.parametrize('out_dir', ['absent', 'empty', 'nested'])
def test_a_push_refused_midway_leaves_the_folder_as_it_was_and_runs_again(tmp_path, capsys, monkeypatch, out_dir):
    """The refusal comes after model.safetensors and config.json are written (they used to stay, and the retry
    failed: 'out_dir … is not empty'); now the folder is as before the push (absent, or empty with its mode; no
    folder the push made, no temporary folder beside it), and once the fault is fixed the same command succeeds."""
    from timm_pkmixer.publish import hub
    run = _run_with_a_bad_top1(tmp_path / 'run')
    out = {'absent': tmp_path / 'out', 'empty': tmp_path / 'out', 'nested': tmp_path / 'a' / 'b' / 'out'}[out_dir]
    if out_dir == 'empty':
        out.mkdir(mode=0o750)
        os.chmod(out, 0o750)
    written = []
    save_config = hub._save_config
    monkeypatch.setattr(hub, '_save_config', lambda *a: (save_config(*a), written.append(sorted(os.listdir(a[1])))))
    before = sorted(os.listdir(tmp_path))
    code, _, err = push(capsys, run / 'last.pth.tar', out)
    assert code == 2 and 'eval_top1 = 250' in err and 'is outside [0, 100]' in err, err
    assert written == [['config.json', 'model.safetensors']]  # refused midway: after these were written
    assert sorted(os.listdir(tmp_path)) == before  # no temporary folder, no parent made
    if out_dir == 'empty':
        assert os.listdir(out) == [] and stat.S_IMODE(out.stat().st_mode) == 0o750
    else:
        assert not out.exists() and not (tmp_path / 'a').exists()
    (run / 'summary.csv').unlink()  # the fault fixed: the same command again
    code, stdout, err = push(capsys, run / 'last.pth.tar', out)
    assert code == 0, err
    assert sorted(os.listdir(out)) == ['README.md', 'config.json', 'model.safetensors']
    assert stdout.splitlines()[-1].startswith(f'wrote {out}; nothing uploaded')
    assert [p for p in os.listdir(out.parent) if p.startswith('.')] == []
    if out_dir == 'empty':
        assert stat.S_IMODE(out.stat().st_mode) == 0o750


# -------------------------------------------------------------------------- no machine path in train_hparams.yaml

ARGS_YAMLS = {
    'quoted': ('"data_dir": "/home/alice/data"\n\'output\': \'/scratch/alice/runs\'\nmodel: s_mixer_s64c64_32\n'
               'seed: 0\nlr: 0.1\n'),
    'flow style': ('{data_dir: /home/alice/data, output: /scratch/alice/runs, model: s_mixer_s64c64_32, seed: 0, '
                   'lr: 0.1}\n'),
    'class_map and config': ('class_map: /home/alice/classes.txt\nconfig: /home/alice/recipe.yaml\n'
                             'model: s_mixer_s64c64_32\nseed: 0\nlr: 0.1\n'),
    'other keys and comments': ('# trained on /home/alice/data\nmodel: s_mixer_s64c64_32\nseed: 0\nlr: 0.1\n'
                                'resume: ~/runs/last.pth.tar\nwandb_tags: [/home/alice/tag, plain]\n'
                                'pretrained_path: C:\\Users\\alice\\w.pth\ndata: data/fmnist\n'),
}
PUBLISHED = {
    'quoted': {'data_dir': '', 'output': '', 'model': NAME, 'seed': 0, 'lr': 0.1},
    'flow style': {'data_dir': '', 'output': '', 'model': NAME, 'seed': 0, 'lr': 0.1},
    'class_map and config': {'class_map': '', 'config': '', 'model': NAME, 'seed': 0, 'lr': 0.1},
    'other keys and comments': {'model': NAME, 'seed': 0, 'lr': 0.1, 'resume': '', 'wandb_tags': ['', 'plain'],
                                'pretrained_path': '', 'data': ''},
}


@pytest.mark.parametrize('spelling', sorted(ARGS_YAMLS))
def test_train_hparams_keeps_no_machine_path_however_the_yaml_spells_it(tmp_path, capsys, spelling):
    """args.yaml read as YAML and written again: a quoted key or value, flow style, class_map and config (train.py's
    FILE arguments), a home or Windows path under any key, in a list, or in a comment: none reaches the Hub; every
    other value does."""
    run = tmp_path / 'run'
    model = timm.create_model(NAME, **KWARGS)
    run.mkdir()
    save_file(model.state_dict(), str(run / 'w.safetensors'))
    (run / 'args.yaml').write_text(ARGS_YAMLS[spelling])
    code, _, err = push(capsys, run / 'w.safetensors', tmp_path / 'out', '--model-kwargs', 'num_blocks=1')
    assert code == 0, err
    published = (tmp_path / 'out' / 'train_hparams.yaml').read_text()
    for path in ('/home/alice', '/scratch', '~/', 'alice'):
        assert path not in published, (spelling, published)
    assert yaml.safe_load(published) == PUBLISHED[spelling]


def test_a_train_py_args_yaml_is_published_line_for_line_less_its_paths():
    """What train.py writes (yaml.safe_dump, block style, sorted keys) comes out the same but for the path values."""
    from timm_pkmixer.publish.hub import without_machine_paths
    args = {'batch_size': 128, 'class_map': '/home/alice/map.txt', 'data_dir': '/home/alice/data', 'lr': 0.02,
            'mean': [0.286], 'model': NAME, 'model_kwargs': {'num_blocks': 1}, 'output': '', 'resume': None}
    text = yaml.safe_dump(args, default_flow_style=False)
    assert without_machine_paths(text) == text.replace('/home/alice/map.txt', "''").replace('/home/alice/data', "''")


def test_a_text_file_is_identified_without_reading_all_of_it(tmp_path):
    """A large CSV is named from its first 64 kB (its last line there cut, not misread)."""
    from timm_pkmixer.errors import CheckpointError
    from timm_pkmixer.publish.checkpoint_file import identify_checkpoint
    rows = ''.join(f'{i},{i * 0.5},é\n' for i in range(100_000))
    (tmp_path / 'big.csv').write_text('epoch,loss,note\n' + rows)
    with pytest.raises(CheckpointError, match=r'big\.csv is a CSV text file, not a checkpoint'):
        identify_checkpoint(tmp_path / 'big.csv')
    buffer = io.BytesIO()
    torch.save({'a': torch.ones(1)}, buffer, _use_new_zipfile_serialization=False)  # torch's legacy format
    (tmp_path / 'legacy.pth').write_bytes(buffer.getvalue())
    assert identify_checkpoint(tmp_path / 'legacy.pth') == 'torch'
