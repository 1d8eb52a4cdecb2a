"""`pkmixer launch` and `pkmixer status`: a folder of recipes run on this machine (--workers 2) and on a real
single-node SLURM cluster (tests/slurm/cluster.sh), with the stand-in train.py (tests/mini_train_py.py: real
training, args.yaml, summary.csv, last.pth.tar and --resume, as train.py's)."""
import json
import os
import re
import signal
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml
from PIL import Image

from timm_pkmixer.cli import main as cli_main
from timm_pkmixer.launch.slurm import squeue
from timm_pkmixer.runs.run_folder import find_runs

from conftest import command_messages, until

TESTS = Path(__file__).resolve().parent
MINI = str(TESTS / 'mini_train_py.py')
CLUSTER = TESTS / 'slurm' / 'cluster.sh'


@pytest.fixture(autouse=True)
def _one_thread(monkeypatch):
    monkeypatch.setenv('OMP_NUM_THREADS', '1')


@pytest.fixture(scope='module')
def data(tmp_path_factory) -> Path:
    return make_images(tmp_path_factory.mktemp('images'))


def make_images(root: Path) -> Path:
    """A synthetic ImageFolder at `root`: 2 classes × 8 random 8×8 images, train and validation."""
    rng = np.random.default_rng(0)
    for split in ('train', 'validation'):
        for c in range(2):
            folder = root / split / f'class{c}'
            folder.mkdir(parents=True)
            for i in range(8):
                Image.fromarray((rng.random((8, 8, 3)) * 255).astype(np.uint8)).save(folder / f'{i}.png')
    return root


def _recipe(folder: Path, name: str, data: Path, **keys) -> Path:
    """A tiny S-Mixer (S = C = 8, one block) recipe for the stand-in train.py."""
    cfg = dict(model='s_mixer_s64c64_32', device_modules=['timm_pkmixer'],
               model_kwargs=dict(img_size=8, patch_size=2, num_tokens=8, embed_dim=8, num_blocks=1),
               data_dir=str(data), num_classes=2, img_size=8, batch_size=8, opt='adamw', lr=0.01, epochs=1,
               warmup_epochs=0, device='cpu', workers=0, seed=0)
    cfg.update(keys)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f'{name}.yaml'
    path.write_text(yaml.safe_dump(cfg), encoding='utf-8')
    return path


def _drop_key(recipe: Path, key: str) -> None:
    cfg = yaml.safe_load(recipe.read_text())
    cfg.pop(key)
    recipe.write_text(yaml.safe_dump(cfg))


def _launch(capsys, *argv):
    capsys.readouterr()
    rc = cli_main(['launch', *map(str, argv), '--train-py', MINI])
    out = capsys.readouterr()
    return rc, out.out, out.err


def _status(capsys, folder: Path) -> dict:
    capsys.readouterr()
    assert cli_main(['status', str(folder), '--json']) == 0
    data = json.loads(capsys.readouterr().out)
    return {r['name']: r for r in data['runs']} | {'total': data['total']}


def _summary_epochs(run_dir: Path):
    lines = (run_dir / 'summary.csv').read_text().splitlines()
    return [int(line.split(',')[0]) for line in lines if not line.startswith('epoch')], \
        sum(line.startswith('epoch') for line in lines)


def _attempts(folder: Path, name: str) -> int:
    """How many times the launcher started the run (one header line per attempt in its log)."""
    lines = (folder / 'launch' / 'logs' / f'{name}.log').read_text().splitlines()
    return sum(line.startswith('=== 20') for line in lines)


# ------------------------------------------------------------------------------------------------- local

@pytest.mark.slow  # five runs of the stand-in train.py, two at once: 48 s on this busy 2-core machine
def test_local_two_workers_finish_fail_resume_retry_and_skip(tmp_path, data, capsys):
    sweep = tmp_path / 'sweep'
    _recipe(sweep, 'a', data)
    broken = _recipe(sweep, 'b', data, fail=True, seed=1)  # raises in training (a wrong data_dir is refused first)
    stop = tmp_path / 'stop'  # the stand-in stops after the epochs it holds while it exists (recipe unchanged)
    stop.write_text('1')
    _recipe(sweep, 'c', data, epochs=2, stop_file=str(stop), seed=2)  # stops as if killed after epoch 0
    (sweep / 'sweep.json').write_text('{}')  # what pkmixer sweep writes beside the recipes: not a recipe

    rc, out, _ = _launch(capsys, sweep, '--executor', 'local', '--workers', '2')
    assert rc == 1  # not every run finished
    ends = sorted(line.split('] ', 1)[1].split(' ', 1)[1] for line in out.splitlines() if '/3 ' in line)
    assert ends[0].startswith('a: finished — epoch 1: top1 ') and ends[1].startswith('b: failed (exit status 1)') \
        and ends[2].startswith('c: unfinished (epoch 1 of 2) — epoch 1: top1 ')  # each run's last epoch, from 1
    status = _status(capsys, sweep)
    assert [status[n]['state'] for n in 'abc'] == ['finished', 'failed', 'unfinished']
    assert (status['c']['done'], status['c']['epochs']) == (1, 2)
    assert 'boom inside training' in '\n'.join(status['b']['log'])  # the last lines of its log
    assert status['total'] == dict(pending=0, running=0, finished=1, unfinished=1, failed=1, cancelled=0,
                                   stale=0)
    assert status['a']['run_dir'] == str(sweep / 'runs' / 'a')

    stop.unlink()  # a changed recipe would not be resumed
    rc, out, _ = _launch(capsys, sweep, '--workers', '2')
    assert rc == 0 and '1 of 1 runs finished' in out and 'skipped: 1 finished, 1 failed; --retry-failed' in out
    epochs, headers = _summary_epochs(sweep / 'runs' / 'c')
    assert epochs == [0, 1] and headers == 2  # resumed: epoch 0 was not trained again
    log = (sweep / 'launch' / 'logs' / 'c.log').read_text()
    assert 'resuming from epoch 2' in log and f'Resumed from {sweep / "runs" / "c" / "last.pth.tar"} at epoch 1' in log

    _drop_key(broken, 'fail')
    rc, out, _ = _launch(capsys, sweep, '--retry-failed')
    assert rc == 0 and '[pkmixer launch] 1/1 b: finished' in out and 'skipped: 2 finished' in out
    rc, out, _ = _launch(capsys, sweep, '--workers', '2')
    assert rc == 0 and out.startswith('[pkmixer launch] nothing to launch') and 'skipped: 3 finished' in out
    assert [_attempts(sweep, n) for n in 'abc'] == [1, 2, 2]
    assert sorted(name for _, name in find_runs([str(sweep / 'runs')])) == ['a', 'b', 'c']  # what report reads
    capsys.readouterr()
    assert cli_main(['status', str(sweep)]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == \
        'total 3: 0 pending, 0 running, 3 finished, 0 unfinished, 0 failed, 0 cancelled, 0 stale'


def _an_epoch_saved(run_dir: Path) -> bool:
    """An epoch's summary row and its last.pth.tar are both written: train.py (and the stand-in) write the row
    first, so a run stopped between the two rightly trains that epoch again, and a test that stops it to watch it
    resume waits for both."""
    return (run_dir / 'last.pth.tar').is_file() and bool(_summary_epochs(run_dir)[0])


@pytest.mark.slow  # a launch killed mid-run and a relaunch: 28 s on this busy 2-core machine
def test_local_launcher_killed_then_relaunched_resumes(tmp_path, data, capsys):
    """--no-wait starts a background launcher; killing it (SIGTERM) stops its run after an epoch; the second launch
    of the folder meanwhile is refused; a relaunch resumes the run from its last.pth.tar. After each epoch the run
    waits at a gate the test opens only for the relaunch, so it is stopped after epoch 0 however busy the machine."""
    sweep = tmp_path / 'sweep'
    gate = tmp_path / 'gate'
    _recipe(sweep, 'slow', data, epochs=3, epoch_gate=str(gate))
    rc, out, _ = _launch(capsys, sweep, '--no-wait')
    assert rc == 0 and 'launching in the background' in out
    lock = json.loads((sweep / 'launch' / 'lock').read_text())
    rc, _, err = _launch(capsys, sweep)
    assert rc == 2 and f'is being launched already, by PID {lock["pid"]}' in err
    run_dir = sweep / 'runs' / 'slow'
    until(lambda: _an_epoch_saved(run_dir), 'epoch 0 saved')
    os.kill(lock['pid'], signal.SIGTERM)
    until(lambda: not (sweep / 'launch' / 'lock').exists(), 'the killed launcher to release its lock')
    status = _status(capsys, sweep)['slow']
    assert (status['state'], status['done'], status['epochs']) == ('unfinished', 1, 3)
    gate.touch()
    rc, out, _ = _launch(capsys, sweep)
    assert rc == 0 and '1/1 slow: finished' in out
    epochs, _ = _summary_epochs(run_dir)
    assert epochs == list(range(3)) and 'resuming from epoch 2\n' in (sweep / 'launch' / 'logs' /
                                                                      'slow.log').read_text()


def test_launch_refuses_bad_input(tmp_path, data, capsys, monkeypatch):
    empty = tmp_path / 'empty'
    empty.mkdir()
    rc, _, err = _launch(capsys, empty)
    assert rc == 2 and err.strip() == f'pkmixer launch: error: {empty} holds no recipes (*.yaml); write some with ' \
                                      f'`pkmixer sweep … --out-dir {empty}`'
    assert not (empty / 'launch' / 'lock').exists()
    rc, _, err = _launch(capsys, tmp_path / 'nowhere')
    assert rc == 2 and 'no such folder of recipes' in err
    odd = tmp_path / 'odd'
    _recipe(odd, 'good', data)
    (odd / 'list.yaml').write_text('- 1\n- 2\n')
    rc, _, err = _launch(capsys, odd)
    assert rc == 2 and f'{odd / "list.yaml"} is not a recipe: a recipe is a mapping of train.py arguments' in err
    unknown = tmp_path / 'unknown'
    _recipe(unknown, 'typo', data, epochz=3)
    rc, _, err = _launch(capsys, unknown)
    assert rc == 2 and f'{unknown / "typo.yaml"} is refused' in err and 'epochz' in err
    rc, _, err = _launch(capsys, odd, '--partition', 'debug')
    assert rc == 2 and '--partition is an option of --executor slurm, not of --executor local' in err
    rc, _, err = _launch(capsys, odd, '--workers', '0')
    assert rc == 2 and '--workers must be a positive integer' in err
    rc, _, err = _launch(capsys, odd, '--gpus', '0,x')
    assert rc == 2 and 'gpus must be distinct device indices' in err
    monkeypatch.setenv('PATH', str(tmp_path))  # no sbatch
    rc, _, err = _launch(capsys, odd, '--executor', 'slurm')
    assert rc == 2 and 'there is no `sbatch` on PATH' in err and '--executor local' in err
    monkeypatch.undo()
    # a lock held by a live process refuses; a dead one's is taken over (then the recipe is refused, lock released)
    holder = subprocess.Popen([sys.executable, '-c', 'import sys; sys.stdin.read()'],  # alive until killed (or this
                              stdin=subprocess.PIPE)  # process ends)
    try:
        (unknown / 'launch').mkdir(exist_ok=True)
        (unknown / 'launch' / 'lock').write_text(json.dumps(dict(pid=holder.pid, host=socket.gethostname(),
                                                                 executor='local')))
        rc, _, err = _launch(capsys, unknown)
        assert rc == 2 and err.strip() == (f'pkmixer launch: error: {unknown} is being launched already, by PID '
                                           f'{holder.pid} on {socket.gethostname()}; `pkmixer status {unknown}` '
                                           f'shows its runs')
    finally:
        holder.kill()
        holder.wait()
        holder.stdin.close()
    rc, _, err = _launch(capsys, unknown)
    assert rc == 2 and 'typo.yaml is refused' in err and not (unknown / 'launch' / 'lock').exists()


def test_launch_and_status_help_import_neither_torch_nor_submitit():
    code = ('import contextlib, io, sys\nfrom timm_pkmixer.cli import main\n'
            'for argv in (["launch", "--help"], ["status", "--help"]):\n'
            '    with contextlib.redirect_stdout(io.StringIO()) as out:\n'
            '        assert main(argv) == 0\n'
            'print(sorted({m.split(".")[0] for m in sys.modules} & {"torch", "timm", "submitit", "wandb"}))')
    out = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, check=True,
                         env=dict(os.environ, TIMM_PKMIXER_AUTOLOAD='1')).stdout
    assert out.strip() == '[]'


def test_local_gpu_slots_and_torchrun_command():
    from timm_pkmixer.launch.executors import LocalExecutor
    from timm_pkmixer.launch.tasks import Task
    slots = LocalExecutor(gpus='0,1,2,3', gpus_per_run=2, runs_per_gpu=2)._slots()
    assert slots == [dict(CUDA_VISIBLE_DEVICES='0,1')] * 2 + [dict(CUDA_VISIBLE_DEVICES='2,3')] * 2
    assert LocalExecutor(gpus='0,1', runs_per_gpu=3, workers=4)._slots() == \
        [dict(CUDA_VISIBLE_DEVICES='0')] * 3 + [dict(CUDA_VISIBLE_DEVICES='1')]
    assert LocalExecutor(gpus='0,1,2,3', gpus_per_run=2).plan()['nproc'] == 2
    with pytest.raises(ValueError, match='4 devices cannot be split into runs of gpus_per_run=3'):
        LocalExecutor(gpus='0,1,2,3', gpus_per_run=3)._slots()
    task = Task('r', '/d/r.yaml', '/d/runs/r', ('--epochs', '2'), '/d/launch', 'local', nproc=2)
    assert task.command('/d/runs/r/last.pth.tar') == [
        sys.executable, '-m', 'torch.distributed.run', '--standalone', '--nproc_per_node=2', '-m', 'timm_pkmixer',
        'train', '/d/r.yaml', '--epochs', '2', '--resume', '/d/runs/r/last.pth.tar']


def test_status_of_a_folder_never_launched(tmp_path, data, capsys):
    sweep = tmp_path / 'sweep'
    _recipe(sweep, 'a', data)
    _recipe(sweep, 'b', data, output=str(tmp_path / 'elsewhere'), experiment='bee')
    status = _status(capsys, sweep)
    assert [status[n]['state'] for n in 'ab'] == ['pending', 'pending']
    assert status['b']['run_dir'] == str(tmp_path / 'elsewhere' / 'bee')  # where the recipe says


# ------------------------------------------------------------------------------------------------- SLURM

def slurm_cluster() -> str:
    """The single-node cluster of tests/slurm/cluster.sh (brought up here if .ci/run has not): its SLURM_CONF; the
    test skips where SLURM cannot be had (no root, no apt-get)."""
    proc = subprocess.run(['bash', str(CLUSTER), 'up'], capture_output=True, text=True, timeout=900)
    if proc.returncode == 3:
        pytest.skip(f'no SLURM cluster on this machine: {proc.stderr.strip().splitlines()[-1]}')
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip().splitlines()[-1].split('=', 1)[1]


@pytest.fixture(scope='module')
def slurm():
    return slurm_cluster()


@pytest.mark.slow  # runs on the test cluster: 35 s on this busy 2-core machine
def test_slurm_array_finishes_skips_resumes_cancelled_and_refuses_bad_partition(tmp_path, data, capsys, slurm,
                                                                                 monkeypatch):
    monkeypatch.setenv('SLURM_CONF', slurm)
    sweep = tmp_path / 'sweep'
    _recipe(sweep, 'a', data)
    _recipe(sweep, 'b', data, seed=1)
    slurm_opts = ('--executor', 'slurm', '--partition', 'debug', '--cpus-per-run', '1')

    rc, _, err = _launch(capsys, sweep, '--executor', 'slurm', '--partition', 'nosuch')
    assert rc == 2 and command_messages(err).strip() == (  # after the progress lines (each recipe checked)
        'pkmixer launch: error: SLURM refused the job array (nothing was submitted): invalid partition specified: '
        'nosuch; Invalid partition name specified (sbatch --test-only --array=0-1%2 --cpus-per-task=1 --nodes=1 '
        '--partition=nosuch)')
    assert not (sweep / 'launch' / 'runs').exists() and not (sweep / 'runs').exists()
    assert not (sweep / 'launch' / 'slurm').exists() and not (sweep / 'launch' / 'lock').exists()

    rc, out, _ = _launch(capsys, sweep, *slurm_opts)
    assert rc == 0, out
    job = re.search(r'as SLURM job array (\d+)', out).group(1)
    records = {n: json.loads((sweep / 'launch' / 'runs' / f'{n}.json').read_text()) for n in 'ab'}
    assert sorted(r['job'] for r in records.values()) == [f'{job}_0', f'{job}_1']  # one array, a task per run
    assert all(r['state'] == 'ended' and r['returncode'] == 0 for r in records.values())
    assert f'(SLURM job {job}_0)' in (sweep / 'launch' / 'logs' / 'a.log').read_text()
    status = _status(capsys, sweep)
    assert [status[n]['state'] for n in 'ab'] == ['finished', 'finished']

    rc, out, _ = _launch(capsys, sweep, *slurm_opts)  # a relaunch submits nothing
    assert rc == 0 and out.startswith('[pkmixer launch] nothing to launch') and 'skipped: 2 finished' in out
    assert len(list((sweep / 'launch' / 'slurm').iterdir())) == 1

    gate = tmp_path / 'gate'  # opened for the relaunch: until then, the run waits after epoch 0 until cancelled
    _recipe(sweep, 'slow', data, epochs=3, epoch_gate=str(gate), seed=2)
    rc, out, _ = _launch(capsys, sweep, *slurm_opts, '--no-wait')
    assert rc == 0 and 'submitted 1 runs as SLURM job array' in out
    job = re.search(r'as SLURM job array (\d+)', out).group(1)
    rc, _, err = _launch(capsys, sweep, *slurm_opts)  # while the job lives, a second launch is refused
    assert rc == 2 and f'is being launched already, by SLURM job {job} (`scancel {job}` stops it)' in err
    run_dir = sweep / 'runs' / 'slow'
    until(lambda: _an_epoch_saved(run_dir), 'epoch 0 saved')
    assert _status(capsys, sweep)['slow']['state'] == 'running'
    subprocess.run(['scancel', job], check=True)
    until(lambda: not squeue(job), f'cancelled job {job} to leave the queue')
    status = _status(capsys, sweep)['slow']
    assert (status['state'], status['done'], status['epochs']) == ('unfinished', 1, 3)
    gate.touch()
    rc, out, _ = _launch(capsys, sweep, *slurm_opts)
    assert rc == 0 and '1/1 slow: finished' in out and 'skipped: 2 finished' in out
    assert _summary_epochs(run_dir)[0] == [0, 1, 2]  # resumed: no epoch trained twice
    assert 'resuming from epoch 2\n' in (sweep / 'launch' / 'logs' / 'slow.log').read_text()  # its second


# ------------------------------------------------------------------------------------------------- W&B

def _wandb_records(path: Path):
    """The protobuf records of a W&B run file (``run-ID.wandb``: a LevelDB-style log of 32 KiB blocks after a
    7-byte header; record kinds full 1, first 2, middle 3, last 4)."""
    import struct

    from wandb.proto import wandb_internal_pb2 as pb
    data = path.read_bytes()
    assert data[:4] == b':W&B'
    pos, block, buf = 7, 32768, b''
    while pos + 7 <= len(data):
        left = block - pos % block
        _, length, kind = struct.unpack('<IHB', data[pos:pos + 7]) if left >= 7 else (0, 0, 0)
        if left < 7 or (length == 0 and kind == 0):
            pos += left
            continue
        buf = (b'' if kind in (1, 2) else buf) + data[pos + 7:pos + 7 + length]
        pos += 7 + length
        if kind in (1, 4):
            record = pb.Record()
            record.ParseFromString(buf)
            yield record


def test_sweep_log_wandb_groups_by_figure_and_tags_point_and_seed(tmp_path, data, capsys):
    pytest.importorskip('wandb')
    base = _recipe(tmp_path, 'base', data)
    out = tmp_path / 'sweep'
    capsys.readouterr()
    assert cli_main(['sweep', str(base), '--wandb-project', 'pk', '--out-dir', str(out)]) == 2
    assert capsys.readouterr().err.strip().endswith('--wandb-project names the W&B project of --log-wandb: add '
                                                    '--log-wandb')
    assert cli_main(['sweep', str(base), '--figure', 'fig7', '--seeds', '3', '--permutation', 'random',
                     '--log-wandb', '--wandb-project', 'pk', '--out-dir', str(out)]) == 0
    recipe = out / 'depth_L4_random_seed3.yaml'
    cfg = yaml.safe_load(recipe.read_text())
    assert (cfg['log_wandb'], cfg['wandb_project'], cfg['wandb_tags']) == (True, 'pk', ['fig7', 'depth_L4_random',
                                                                                      'seed3'])
    assert '\n# wandb group: fig7\n' in recipe.read_text()
    env = dict(os.environ, WANDB_MODE='offline', WANDB_DIR=str(tmp_path), WANDB_SILENT='true')
    env.pop('WANDB_RUN_GROUP', None)
    proc = subprocess.run([sys.executable, '-m', 'timm_pkmixer', 'train', str(recipe), '--train-py', MINI,
                           '--output', str(tmp_path / 'runs')], capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    [run_file] = (tmp_path / 'wandb').glob('offline-run-*/run-*.wandb')
    records = list(_wandb_records(run_file))
    [run] = [r.run for r in records if r.WhichOneof('record_type') == 'run']
    assert (run.project, run.run_group, list(run.tags), run.display_name) == \
        ('pk', 'fig7', ['fig7', 'depth_L4_random', 'seed3'], 'depth_L4_random_seed3')
    assert sum(r.WhichOneof('record_type') == 'history' for r in records) == 1  # train.py's summary row, logged
