"""`pkmixer push` and `pkmixer analyze` on the files of a run that train.py (or a crash) can leave: a summary.csv
resumed into its folder, a top-1 that is not a measurement, truncated checkpoints, and ``model_kwargs`` that are not
a mapping. Each is read through `timm_pkmixer.runs.run_folder`, as the report reads it; a refusal exits 2
naming the file and the fault, without a traceback."""
import argparse
import os
from pathlib import Path

import pytest
import timm
import torch
import yaml
from safetensors.torch import save_file
from timm.utils import update_summary

from timm_pkmixer.cli import main as pkmixer

from conftest import command_messages

NAME = 's_mixer_s64c64_32'
KWARGS = {'num_blocks': 1}
NAN = float('nan')


def train_py_run(root, rows, header_at=(0,), model_kwargs=KWARGS, epoch=2):
    """A run folder as train.py leaves it: last.pth.tar (weights, epoch, arguments), args.yaml and summary.csv with
    `rows` (epoch, eval loss, top-1) written in order, the header again at the indices `header_at` (a resume)."""
    root.mkdir(parents=True, exist_ok=True)
    model = timm.create_model(NAME, **KWARGS)
    args = argparse.Namespace(model=NAME, model_kwargs=model_kwargs, num_classes=None, in_chans=None,
                              input_size=None, gp=None, seed=0, epochs=3, model_ema=False)
    torch.save({'epoch': epoch, 'arch': NAME, 'state_dict': model.state_dict(), 'args': args}, root / 'last.pth.tar')
    (root / 'args.yaml').write_text(yaml.safe_dump(vars(args)))
    for i, (e, loss, top1) in enumerate(rows):
        update_summary(e, {'loss': 1.0}, {'loss': loss, 'top1': top1, 'top5': 100.},
                       filename=str(root / 'summary.csv'), lr=1e-3, write_header=i in header_at)
    return root


def push(capsys, checkpoint, out):
    code = pkmixer(['push', str(checkpoint), '--model', NAME, '--repo-id', 'org/name', '--out-dir', str(out)])
    return code, capsys.readouterr().err


def test_push_of_a_run_resumed_into_its_folder_cards_the_last_row_of_its_epoch(tmp_path, capsys):
    """Resumed from epoch 1: the header written again and epoch 2 twice (push used to stop on the header line:
    ValueError: could not convert string to float: 'epoch'); the card shows the row the report reads."""
    run = train_py_run(tmp_path / 'run', [(0, 1.2, 40.), (1, 1.1, 50.), (2, 1.0, 60.), (2, 0.9, 63.5)],
                       header_at=(0, 3))
    assert (run / 'summary.csv').read_text().count('epoch,train_loss') == 2
    code, err = push(capsys, run / 'last.pth.tar', tmp_path / 'out')
    assert code == 0, err
    card = (tmp_path / 'out' / 'README.md').read_text()
    assert 'top-1 (%): 63.50' in card and '60.00' not in card
    from timm_pkmixer.runs.run_folder import read_run
    assert read_run(run).top1_err == 100 - 63.5


@pytest.mark.parametrize('rows,fault', [
    ([(0, 1.2, 40.), (1, 1.1, 50.), (2, 1.0, 250.)], 'line 4: eval_top1 = 250 at epoch 3 is outside [0, 100]'),
    ([(0, 1.2, 40.), (1, 1.1, 50.), (2, NAN, NAN)], 'line 4: non-finite eval_loss (nan), eval_top1 (nan) at epoch 3'),
    ([(0, 1.2, 40.), (1, 1.1, -3.)], None),  # another epoch's values: not on the card, not refused
])
def test_push_refuses_a_top1_the_report_refuses(tmp_path, capsys, rows, fault):
    run = train_py_run(tmp_path / 'run', rows)
    code, err = push(capsys, run / 'last.pth.tar', tmp_path / 'out')
    if fault is None:
        assert code == 0 and 'summary.csv not used: no validation row for epoch 3' in err, err
        return
    assert code == 2 and 'Traceback' not in err and not (tmp_path / 'out' / 'README.md').exists()
    assert command_messages(err) == (f'pkmixer push: error: {run / "summary.csv"}, {fault}; refusing to put it on '
                                     f'the model card (move the file away to push without the run\'s metrics)\n')


def _truncated(tmp_path, suffix):
    model = timm.create_model(NAME, **KWARGS)
    path = tmp_path / f'full{suffix}'
    if suffix == '.safetensors':
        save_file(model.state_dict(), str(path))
    else:
        torch.save({'epoch': 1, 'state_dict': model.state_dict()}, path)
    data = path.read_bytes()
    cut = tmp_path / f'cut{suffix}'
    cut.write_bytes(data[:len(data) // 2])
    return cut


@pytest.mark.parametrize('command', ['push', 'analyze'])
@pytest.mark.parametrize('suffix,detail', [
    ('.pth.tar', '(OSError: [Errno 22] Invalid argument)'),   # a zip cut in the middle of a record
    ('.safetensors', '(SafetensorError: Error while deserializing header: incomplete metadata'),
])
def test_a_truncated_checkpoint_is_named(tmp_path, capsys, command, suffix, detail):
    cut = _truncated(tmp_path, suffix)
    argv = (['push', str(cut), '--model', NAME, '--repo-id', 'org/name', '--out-dir', str(tmp_path / 'out')]
            if command == 'push' else
            ['analyze', 'cka', str(cut), str(cut), '--model', NAME, '--out-dir', str(tmp_path / 'out')])
    assert pkmixer(argv) == 2
    err = command_messages(capsys.readouterr().err)
    assert err.startswith(f'pkmixer {command}{" cka" if command == "analyze" else ""}: error: {cut}: cannot be '
                          f'read as a checkpoint, it is truncated or corrupt {detail}'), err
    assert 'Traceback' not in err


@pytest.mark.parametrize('command', ['push', 'analyze'])
@pytest.mark.parametrize('model_kwargs,shown', [
    (['num_blocks', 1], 'a list ("[\'num_blocks\', 1]")'),
    ('num_blocks=1', "a str ('num_blocks=1')"),
])
def test_model_kwargs_that_are_not_a_mapping_are_named(tmp_path, capsys, command, model_kwargs, shown):
    """In the args.yaml beside a plain state dict, and in the arguments a train.py checkpoint records."""
    run = tmp_path / 'run'
    run.mkdir()
    save_file(timm.create_model(NAME, **KWARGS).state_dict(), str(run / 'w.safetensors'))
    (run / 'args.yaml').write_text(yaml.safe_dump(dict(model=NAME, model_kwargs=model_kwargs, seed=0)))
    recorded = train_py_run(tmp_path / 'recorded', [(0, 1., 50.)], model_kwargs=model_kwargs, epoch=0)
    (recorded / 'args.yaml').unlink()
    problem = (f'model_kwargs is {shown}, not the mapping of model arguments train.py writes (--model-kwargs '
               f'key=value …)')
    for checkpoint, source in ((run / 'w.safetensors', run / 'args.yaml'),
                               (recorded / 'last.pth.tar', f'{recorded / "last.pth.tar"} (the arguments it records)')):
        argv = (['push', str(checkpoint), '--model', NAME, '--repo-id', 'org/name', '--out-dir', str(tmp_path / 'o')]
                if command == 'push' else ['analyze', 'cka', str(checkpoint), str(checkpoint), '--out-dir',
                                           str(tmp_path / 'o')])
        assert pkmixer(argv) == 2
        err = command_messages(capsys.readouterr().err)
        assert err.startswith(f'pkmixer {command}{" cka" if command == "analyze" else ""}: error: {source}: '
                              f'{problem}'), err
        assert 'Traceback' not in err
        assert command == 'analyze' or not (tmp_path / 'o').exists()  # push writes nothing


def test_push_writes_every_file_with_the_umask_and_says_a_readable_size(tmp_path, capsys):
    """safetensors writes its file 0600: every file of the folder gets the mode the umask gives new files, as the
    others have; the progress line states a small checkpoint's size in kB, not '(0 MiB)'."""
    import stat
    run = train_py_run(tmp_path / 'run', [(0, 1.0, 50.)])
    old = os.umask(0o027)
    try:
        code, err = push(capsys, run / 'last.pth.tar', tmp_path / 'out')
    finally:
        os.umask(old)
    assert code == 0, err
    modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in (tmp_path / 'out').iterdir()}
    assert modes == {name: 0o640 for name in ('README.md', 'config.json', 'model.safetensors', 'train_hparams.yaml')}
    size = (run / 'last.pth.tar').stat().st_size
    assert 1000 < size < 10 ** 6  # a small file: kB is its unit
    assert f'reading {run / "last.pth.tar"} ({size / 1000:.3g} kB)' in err, err
    assert '(0 MiB)' not in err


@pytest.mark.parametrize('size,shown', [(0, '0 bytes'), (999, '999 bytes'), (1500, '1.5 kB'), (123_456, '123 kB'),
                                        (999_500, '1 MB'), (5 * 2 ** 20, '5.24 MB'), (3 * 10 ** 9, '3 GB'),
                                        (10 ** 18, '1.00e18 bytes')])
def test_file_sizes_are_readable(size, shown):
    from timm_pkmixer.sizes import format_bytes
    assert format_bytes(size) == shown


def test_config_json_is_replaced_whole(tmp_path, capsys, monkeypatch):
    """timm's save_for_hf writes config.json, which the push then rewrites: never in place (a reader or a crash
    in between would meet half a file), but as a new file renamed over it, leaving no temporary file."""
    import json

    from timm_pkmixer.publish import hub
    renames = []
    real_replace = hub.os.replace

    def replace(src, dst):
        renames.append((Path(src).name, Path(dst).name, json.loads(Path(src).read_text())['architecture']))
        real_replace(src, dst)

    monkeypatch.setattr(hub.os, 'replace', replace)
    run = train_py_run(tmp_path / 'run', [(0, 1.0, 50.)])
    code, err = push(capsys, run / 'last.pth.tar', tmp_path / 'out')
    assert code == 0, err
    assert renames == [(f'.config.json.{os.getpid()}.tmp', 'config.json', NAME)]
    assert sorted(p.name for p in (tmp_path / 'out').iterdir()) == [
        'README.md', 'config.json', 'model.safetensors', 'train_hparams.yaml']
