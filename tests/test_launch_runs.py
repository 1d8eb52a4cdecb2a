"""What `pkmixer launch` knows about each run, and `pkmixer status` says: the train.py arguments a relaunch reuses,
a run whose recipe changed since it ran (stale), a run folder with one owner, records that survive a move, a PID
that is not the holder, files that are not what they should be, progress on stderr and a reader that goes away.

One folder of two finished runs is launched once for the module (with the stand-in train.py,
tests/mini_train_py.py); each test works on a copy."""
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest
import yaml
from PIL import Image

from timm_pkmixer.reports.report import build_report
from timm_pkmixer.runs.run_folder import RunFileError

from conftest import command_messages, until

TESTS = Path(__file__).resolve().parent
MINI = str(TESTS / 'mini_train_py.py')
ENV = dict(os.environ, OMP_NUM_THREADS='1', PYTHONPATH=str(TESTS.parent) + os.pathsep +
           os.environ.get('PYTHONPATH', ''))
ENV.pop('TIMM_TRAIN_PY', None)


@pytest.fixture(autouse=True)
def _one_thread(monkeypatch):
    monkeypatch.setenv('OMP_NUM_THREADS', '1')


def _images(root: Path) -> Path:
    """A synthetic ImageFolder: 2 classes × 8 random 8×8 images, train and validation."""
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


def _pkmixer(*argv, timeout: float = 600, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, '-m', 'timm_pkmixer', *map(str, argv)], capture_output=True, text=True,
                          env=ENV, timeout=timeout, **kwargs)


@pytest.fixture(scope='module')
def data(tmp_path_factory) -> Path:
    return _images(tmp_path_factory.mktemp('images'))


@pytest.fixture(scope='module')
def launched(tmp_path_factory, data) -> Path:
    """A folder of two recipes (a, b), launched with the train.py arguments ``--lr 0.02``: both finished."""
    sweep = tmp_path_factory.mktemp('launched') / 'sweep'
    _recipe(sweep, 'a', data)
    _recipe(sweep, 'b', data, seed=1)
    proc = _pkmixer('launch', sweep, '--train-py', MINI, '--lr', '0.02')
    assert proc.returncode == 0, proc.stderr[-3000:]
    return sweep


@pytest.fixture
def sweep(launched, tmp_path) -> Path:
    """A copy of the launched folder (records and markers are relative: a copy is the folder moved)."""
    copy = tmp_path / 'copy'
    shutil.copytree(launched, copy)
    return copy


def _status(cli, folder: Path) -> dict:
    code, out, _ = cli('status', folder, '--json')
    assert code == 0
    data = json.loads(out)
    return {r['name']: r for r in data['runs']} | {'total': data['total'], 'train_args': data.get('train_args')}


def _launch(cli, *argv):
    return cli('launch', *argv, '--train-py', MINI)


def _args_yaml(run_dir: Path) -> dict:
    return yaml.safe_load((run_dir / 'args.yaml').read_text())


# ------------------------------------------------------------------------------------------------- how runs ended

class _Unseen:
    """A batch that reports every task's end with no exit status (as a SLURM task cancelled or killed does)."""
    job = None

    def __init__(self, tasks):
        self.tasks = tasks

    def wait(self, on_end):
        for task in self.tasks:
            on_end(task, None)

    def stop(self):
        pass


@pytest.mark.parametrize('record, detail', [
    (dict(job='42_0', state='running'), 'SLURM job 42_0 ended with no exit status recorded'),
    (dict(job='42_1', state='queued'), 'SLURM job 42_1 ended before the run started with no exit status recorded'),
    (dict(job=None, state='running'), 'its task ended with no exit status recorded'),
])
def test_a_run_ended_with_no_exit_status_is_said_as_such_not_guessed(sweep, record, detail, logged):
    """The launcher says what it knows of a task whose end no exit status reached: its job and whether it had
    started, not a guess ("cancelled?")."""
    from timm_pkmixer.launch.launcher import LaunchResult, _start_and_wait
    from timm_pkmixer.launch.records import write_record
    from timm_pkmixer.launch.tasks import Task, default_run_dir
    recipe = sweep / 'a.yaml'
    task = Task('a', str(recipe), str(default_run_dir(recipe)), (), str(sweep / 'launch'), 'slurm')
    write_record(sweep / 'launch', 'a', executor='slurm', **record)
    executor = type('Unseen', (), dict(start=lambda self, todo: _Unseen(todo)))()
    result = LaunchResult([task], {})
    _start_and_wait(sweep, executor, [task], result, True, None)
    assert [(s.name, s.state, s.detail) for s in result.ended] == [('a', 'finished', detail)]
    assert logged()[-1].startswith(f'[pkmixer launch] ended a: finished ({detail}) — epoch 1: top1 ')


# ------------------------------------------------------------------------------------------------- train.py arguments

def test_a_relaunch_reuses_the_recorded_train_args_and_refuses_others(sweep, data, cli):
    """The first launch gave --lr 0.02; a relaunch without arguments gives them to a new run too (and runs it: a
    record saying it runs as PID 1, from another start, is not believed: nothing runs it, so it is cancelled, not
    pending); other arguments are refused by name; --new-train-args changes them, and the runs trained with the old
    ones become stale."""
    _recipe(sweep, 'c', data, seed=2)
    start = int(Path('/proc/1/stat').read_text().rsplit(')', 1)[1].split()[19])
    (sweep / 'launch' / 'runs' / 'c.json').write_text(json.dumps(dict(
        state='running', pid=1, host=socket.gethostname(), executor='local', job=None, run_dir='runs/c',
        recipe='c.yaml', returncode=None, pid_start=start + 7, boot_id=None)))
    status = _status(cli, sweep)['c']
    assert (status['state'], status['detail']) == (
        'cancelled', f"PID 1 on {socket.gethostname()} (a PID another process has now) ended before its first epoch, "
                     f"its end unrecorded; a relaunch runs it")
    code, out, err = _launch(cli, sweep)
    assert code == 0 and '[pkmixer launch] 1/1 c: finished' in out and 'skipped: 2 finished' in out
    assert '[pkmixer launch] every run gets the train.py arguments of the earlier launches: --lr 0.02' in err
    assert _args_yaml(sweep / 'runs' / 'c')['lr'] == 0.02  # the recipe says 0.01
    assert _status(cli, sweep)['train_args'] == ['--lr', '0.02']

    code, _, err = _launch(cli, sweep, '--lr', '0.5', '--epochs', '2')
    assert code == 2
    assert err.strip() == (
        f'pkmixer launch: error: {sweep} was launched with the train.py arguments --lr 0.02 (recorded in '
        f'{sweep / "launch" / "train_args.json"}), and these differ: --epochs 2 is new; --lr: 0.02 then, 0.5 now. '
        f'Relaunch with no train.py arguments to reuse them, or with --new-train-args to change them on purpose '
        f'(finished runs trained with the old ones become stale)')
    code, out, _ = _launch(cli, sweep, '--new-train-args', '--lr', '0.5')
    assert code == 0 and out.startswith('[pkmixer launch] nothing to launch') and 'skipped: 3 stale' in out
    status = _status(cli, sweep)
    assert status['train_args'] == ['--lr', '0.5']
    assert [(status[n]['state'], status[n]['changed']) for n in 'abc'] == [('stale', ['train.py arguments'])] * 3
    code, out, _ = cli('status', sweep)
    assert out.splitlines()[0] == 'train.py arguments of every run: --lr 0.5'
    assert out.splitlines()[-1] == ('total 3: 0 pending, 0 running, 0 finished, 0 unfinished, 0 failed, 0 cancelled, '
                                    '3 stale')


# ------------------------------------------------------------------------------------------------- stale runs

def test_an_edited_recipe_makes_its_finished_run_stale_until_rerun_apart(sweep, cli, tmp_path):
    recipe = sweep / 'a.yaml'
    recipe.write_text(recipe.read_text().replace('batch_size: 8', 'batch_size: 4'))
    code, out, _ = _launch(cli, sweep)
    assert code == 0 and out.strip() == (
        f'[pkmixer launch] nothing to launch in {sweep} (skipped: 1 finished, 1 stale; --rerun-stale reruns the '
        f'stale (their recipe or train.py arguments changed since they ran) into a fresh folder)')
    status = _status(cli, sweep)
    assert (status['a']['state'], status['a']['changed'], status['a']['detail']) == \
        ('stale', ['batch_size'], 'changed since it ran: batch_size')
    assert status['total'] == dict(pending=0, running=0, finished=1, unfinished=0, failed=0, cancelled=0,
                                   stale=1)
    report = build_report([str(sweep / 'runs')])
    assert [(x.name, x.kind, x.reason) for x in report.listed] == [
        ('a', 'stale', 'stale: its recipe or the train.py arguments of its launch changed since it ran (batch_size): '
                       'not averaged')]
    assert [[r.name for r in p.runs] for p in report.points] == [['b']]
    code, out, err = _launch(cli, sweep, '--rerun-stale')
    assert code == 0 and '[pkmixer launch] 1/1 a: finished' in out
    assert f'[pkmixer launch] a is stale: its run folder moved aside to {sweep / "runs" / "a.stale-1"}' in err
    assert [_args_yaml(sweep / 'runs' / n)['batch_size'] for n in ('a', 'a.stale-1')] == [4, 8]
    status = _status(cli, sweep)
    assert [status[n]['state'] for n in 'ab'] == ['finished', 'finished']
    code, _, _ = cli('report', sweep / 'runs', '--out-dir', tmp_path / 'report', '--no-figures')
    assert code == 0
    assert '\n- `a.stale-1`: stale: its recipe or the train.py arguments of its launch changed since it ran ' \
           '(batch_size): not averaged' in (tmp_path / 'report' / 'report.md').read_text()


# ------------------------------------------------------------------------------------------------- one owner

def test_a_run_folder_of_another_launch_or_model_is_refused_by_name(sweep, data, cli, tmp_path):
    other = tmp_path / 'other'
    _recipe(other, 'mine', data, output=str(sweep / 'runs'), experiment='a')
    code, _, err = _launch(cli, other)
    assert code == 2 and command_messages(err).startswith(
        f'pkmixer launch: error: {other / "mine.yaml"} is refused: its run folder {sweep / "runs" / "a"} belongs to '
        f'recipe a.yaml of another launched folder ({sweep}, id ')
    foreign = tmp_path / 'foreign' / 'run'  # a run of another model, trained without pkmixer launch
    foreign.mkdir(parents=True)
    (foreign / 'args.yaml').write_text(yaml.safe_dump(dict(model='s_mixer_s64c64_32', model_kwargs=dict(
        img_size=8, patch_size=2, num_tokens=16, embed_dim=8, num_blocks=1), epochs=1)))
    third = tmp_path / 'third'
    _recipe(third, 'mine', data, output=str(foreign.parent), experiment='run')
    code, _, err = _launch(cli, third)
    assert code == 2 and f'its run folder {foreign} holds a run of another model (s_mixer_s64c64_32 embed_dim=8 ' \
                         f'img_size=8 num_blocks=1 num_tokens=16 patch_size=2) that no launch of this folder ' \
                         f'started' in err
    assert not (foreign / 'pkmixer_launch.json').exists()


def test_two_launches_planned_into_one_run_folder_cannot_both_run_it(tmp_path, monkeypatch):
    """Two folders whose recipes write one run folder, both planned before either started: the first to start
    claims it; the other's run fails with exit status 2 (said in its record and log) and trains nothing."""
    from timm_pkmixer.launch import ownership, records, tasks
    shared = tmp_path / 'shared' / 'run'
    made = []
    for name in ('one', 'two'):
        folder = tmp_path / name
        folder.mkdir()
        (folder / 'r.yaml').write_text('model: x\n')
        made.append(tasks.Task('r', str(folder / 'r.yaml'), str(shared), (), str(folder / 'launch'), 'local'))
    ownership.claim(Path(made[0].recipe), shared, records.folder_id(Path(made[0].state_dir), create=True))

    def no_popen(*args, **kwargs):
        raise AssertionError('a run was started in a run folder another launch owns')
    monkeypatch.setattr(tasks.subprocess, 'Popen', no_popen)
    assert tasks.execute(made[1]) == 2
    record = records.read_record(Path(made[1].state_dir), 'r')
    assert record['state'] == 'failed' and record['returncode'] == 2
    assert record['reason'].startswith(f'r.yaml is refused: its run folder {shared} belongs to recipe r.yaml of '
                                       f'another launched folder ({tmp_path / "one"}, id ')
    assert 'not started: r.yaml is refused' in (tmp_path / 'two' / 'launch' / 'logs' / 'r.log').read_text()


_CLAIM_RACE = '''
import os, sys
from pathlib import Path
from timm_pkmixer.launch import ownership
from timm_pkmixer.launch.errors import RunFolderTakenError
root, pairs = Path(sys.argv[1]), int(sys.argv[2])
r, w = os.pipe(); res_r, res_w = os.pipe()
kids = []
for i in range(pairs):
    for side in ('x', 'y'):
        pid = os.fork()
        if pid == 0:
            os.close(w); os.read(r, 1)
            try:
                ownership.claim(root / side / 'r.yaml', root / 'runs' / str(i), side); got = 'C'
            except RunFolderTakenError:
                got = 'T'
            os.write(res_w, f'{i:04d}{got}'.encode()); os._exit(0)
        kids.append(pid)
os.close(r); os.close(res_w); os.close(w)
for pid in kids:
    os.waitpid(pid, 0)
data = os.read(res_r, 1 << 20)
out = {}
for k in range(0, len(data), 5):
    out.setdefault(int(data[k:k + 4]), []).append(chr(data[k + 4]))
print(sum(sorted(v) == ['C', 'T'] for v in out.values()), len(out))
'''


def test_claims_raced_by_many_pairs_have_one_winner_each(tmp_path):
    proc = subprocess.run([sys.executable, '-c', _CLAIM_RACE, str(tmp_path), '40'], capture_output=True, text=True,
                          env=ENV, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ['40', '40']


# ------------------------------------------------------------------------------------------------- records

def test_a_cut_short_last_checkpoint_fails_its_run_by_name_and_never_reaches_train_py(sweep, cli):
    """An unfinished run whose last.pth.tar was cut short (a disk that filled, a copy interrupted): the relaunch
    fails the run, exit status 2, naming the file and what to do, rather than hand it to train.py (whose torch.load
    would end in an EOFError); moved away, the run restarts from its first epoch."""
    run_dir = sweep / 'runs' / 'a'
    last = run_dir / 'last.pth.tar'
    last.write_bytes(last.read_bytes()[:last.stat().st_size // 2])
    (run_dir / 'summary.csv').unlink()  # started, not finished: a relaunch resumes it from last.pth.tar
    code, out, _ = _launch(cli, sweep)
    said = (f'{last} is not a whole checkpoint (no zip directory at its end, as torch.save writes: cut short or '
            f'corrupt), so the run cannot resume from it; move it away to restart the run from its first epoch, or '
            f'put back a whole copy')
    status = _status(cli, sweep)['a']
    assert (code, status['state'], status['detail']) == (1, 'failed', said), out
    log = (sweep / 'launch' / 'logs' / 'a.log').read_text()
    assert log.rstrip().endswith(f': not started: {said}') and 'EOFError' not in log
    last.rename(run_dir / 'cut.pth.tar')
    code, out, _ = _launch(cli, sweep, '--retry-failed')
    assert code == 0 and '[pkmixer launch] 1/1 a: finished' in out, out
    assert _status(cli, sweep)['a']['state'] == 'finished' and zipfile.is_zipfile(last)


def test_a_moved_folder_keeps_every_state(sweep, tmp_path, cli):
    moved = tmp_path / 'moved'
    sweep.rename(moved)
    status = _status(cli, moved)
    assert [(status[n]['state'], status[n]['run_dir']) for n in 'ab'] == \
        [('finished', str(moved / 'runs' / n)) for n in 'ab']
    record = json.loads((moved / 'launch' / 'runs' / 'a.json').read_text())
    assert (record['run_dir'], record['recipe']) == ('runs/a', 'a.yaml')


def test_status_reads_files_only(sweep):
    """`pkmixer status` imports neither torch nor timm (the epoch count train.py runs is recorded with the run)."""
    code = ('import sys\nfrom timm_pkmixer.cli import main\n'
            f'assert main(["status", {str(sweep)!r}]) == 0\n'
            'print(sorted({m.split(".")[0] for m in sys.modules} & {"torch", "timm"}))')
    proc = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, env=ENV, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[-2:] == ['total 2: 0 pending, 0 running, 2 finished, 0 unfinished, 0 failed, 0 '
                                             'cancelled, 0 stale', '[]']


@pytest.mark.parametrize('text,why', [('[1]', 'not a JSON object'), ('{"state": 3}', 'state is a int'),
                                      ('{"state": "ended", "run_dir": ["x"]}', 'run_dir is a list'),
                                      ('{"state": "ended"', 'not JSON: Expecting')])
def test_a_corrupt_run_record_is_named_with_what_to_do(sweep, cli, text, why):
    path = sweep / 'launch' / 'runs' / 'a.json'
    path.write_text(text)
    for argv in (('status', sweep), ('launch', sweep, '--train-py', MINI)):
        code, _, err = cli(*argv)
        assert code == 2 and command_messages(err).startswith(
            f'pkmixer {argv[0]}: error: {path} is not a run record of pkmixer launch ({why}')
        assert err.strip().endswith(f'remove it if no launch of {sweep} is running (the next launch writes it anew)')
    assert path.read_text() == text


def test_a_corrupt_launch_marker_is_named_by_status_launch_and_report(sweep, cli):
    path = sweep / 'runs' / 'a' / 'pkmixer_launch.json'
    path.write_text('{"folder": 3}')
    message = (f'{path}: not the launch marker `pkmixer launch` writes (a JSON object with folder, folder_id, recipe, '
               f'digest, recipe_args, train_args); remove it if no launch is running this run')
    for argv in (('status', sweep), ('launch', sweep, '--train-py', MINI)):
        code, _, err = cli(*argv)
        assert code == 2 and command_messages(err) == f'pkmixer {argv[0]}: error: {message}\n'
    report = build_report([str(sweep / 'runs')])
    assert report.unreadable == [('a', f'{path.name}: not the launch marker `pkmixer launch` writes (a JSON object '
                                       f'with folder, folder_id, recipe, digest, recipe_args, train_args); remove it '
                                       f'if no launch is running this run')]


@pytest.mark.parametrize('which', ['record', 'log'])
def test_a_fifo_in_place_of_a_record_or_log_is_named_not_waited_on(sweep, which):
    record = sweep / 'launch' / 'runs' / 'a.json'
    if which == 'log':  # a failed run's log is read by status, and appended to by the launch that retries it
        record.write_text(json.dumps({**json.loads(record.read_text()), 'state': 'failed', 'returncode': 1}))
        (sweep / 'runs' / 'a' / 'summary.csv').unlink()
    path = record if which == 'record' else sweep / 'launch' / 'logs' / 'a.log'
    path.unlink()
    os.mkfifo(path)
    for argv in (('status', sweep), ('launch', sweep, '--train-py', MINI, '--retry-failed')):
        proc = _pkmixer(*argv)  # its timeout stops a wait on the FIFO, which never ends; a busy start is not timed
        assert proc.returncode == 2, proc.stderr
        assert proc.stderr.splitlines()[-1].startswith(f'pkmixer {argv[0]}: error: {path} is not ')
        assert '(a FIFO, not a regular file)' in proc.stderr.splitlines()[-1]


# ------------------------------------------------------------------------------------------------- the reader

def _stdout_dropped(pid: int) -> bool:
    """Whether process `pid` has pointed its stdout at /dev/null (as the launcher does once its reader has gone)."""
    try:
        return os.readlink(f'/proc/{pid}/fd/1') == os.devnull
    except FileNotFoundError:
        return False


@pytest.mark.slow  # two launches of real runs: 28 s on this busy 2-core machine
def test_progress_on_stderr_and_a_closed_stdout_stops_no_run(tmp_path, data):
    """`pkmixer launch DIR | head -1` with the reader gone before the launch starts: every start and end is said on
    stderr with its log; b, still training when a's result cannot be written, goes on and ends recorded. Each run
    waits after its epoch at a gate the test opens (a once b has an epoch, b once the launcher has dropped its
    stdout), so they end in that order however busy the machine."""
    sweep = tmp_path / 'sweep'
    gates = {name: tmp_path / f'gate_{name}' for name in 'ab'}
    _recipe(sweep, 'a', data, epoch_gate=str(gates['a']))
    _recipe(sweep, 'b', data, seed=1, epoch_gate=str(gates['b']))
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader has gone
    with open(tmp_path / 'stderr', 'w+') as stderr:
        try:
            proc = subprocess.Popen([sys.executable, '-m', 'timm_pkmixer', 'launch', str(sweep), '--train-py', MINI,
                                     '--workers', '2'], stdout=write_end, stderr=stderr, env=ENV)
        finally:
            os.close(write_end)
        try:
            until(lambda: (sweep / 'runs' / 'b' / 'last.pth.tar').is_file() or proc.poll() is not None,
                  "b's epoch")
            gates['a'].touch()
            until(lambda: _stdout_dropped(proc.pid) or proc.poll() is not None, "a's result to find no reader")
            b = json.loads((sweep / 'launch' / 'runs' / 'b.json').read_text())
            assert (_stdout_dropped(proc.pid), b['state']) == (True, 'running'), b
            gates['b'].touch()
            assert proc.wait(timeout=600) == 0
        finally:
            proc.kill()
            proc.wait()
        stderr.seek(0)
        err = stderr.read()
    assert 'Traceback' not in err, err
    for name in 'ab':
        record = json.loads((sweep / 'launch' / 'runs' / f'{name}.json').read_text())
        assert (record['state'], record['returncode']) == ('ended', 0)
        log = sweep / 'launch' / 'logs' / f'{name}.log'
        assert any(line.startswith(f'[pkmixer launch] ended {name}: finished — epoch 1: top1 ') and
                   line.endswith(f' (log {log})') for line in err.splitlines()), err
        assert any(line.startswith(f'[pkmixer launch] started {name} (PID ') and line.endswith(f'; log {log})')
                   for line in err.splitlines()), err
    assert '[pkmixer launch] checking recipe 2/2 (b.yaml)' in err, err
    status = _pkmixer('status', sweep)
    assert status.stdout.splitlines()[-1] == ('total 2: 0 pending, 0 running, 2 finished, 0 unfinished, 0 failed, 0 '
                                              'cancelled, 0 stale')


def _closed_stderr(*argv, timeout: float = 600) -> subprocess.CompletedProcess:
    """`pkmixer ARGV 2>&-`: the command starts with its stderr (fd 2) closed, as the shell's ``2>&-`` leaves it."""
    return subprocess.run(['sh', '-c', 'exec "$@" 2>&-', 'sh', sys.executable, '-m', 'timm_pkmixer',
                           *map(str, argv)], stdout=subprocess.PIPE, text=True, env=ENV, timeout=timeout)


def test_a_closed_stderr_drops_the_progress_and_stdout_keeps_the_results_alone(tmp_path, data):
    """`pkmixer launch DIR 2>&-`: the recipe checked and the run's start and end (said by the launcher's watcher
    thread) are dropped, never written to stdout in their place; stdout is the results, whole."""
    sweep = tmp_path / 'sweep'
    _recipe(sweep, 'a', data)
    proc = _closed_stderr('launch', sweep, '--train-py', MINI)
    assert proc.returncode == 0
    lines = proc.stdout.splitlines()
    assert len(lines) == 2 and lines[0].startswith('[pkmixer launch] 1/1 a: finished — epoch 1: top1 ')
    assert lines[1] == (f'[pkmixer launch] 1 of 1 runs finished; `pkmixer report {sweep}` reads them (into '
                        f'{sweep}/report)')
    assert json.loads((sweep / 'launch' / 'runs' / 'a.json').read_text())['state'] == 'ended'


@pytest.mark.parametrize('schedule', [dict(epochs='1', required=[0]), dict(epochs=1, required='0'), dict(epochs=1),
                                      dict(epochs=1, required=[0], args={'epochs': 9})])
def test_a_recorded_epoch_count_that_does_not_fit_is_not_used(launched, schedule):
    """A record's epoch count (kept so that status needs no torch) is used only when it is what the launcher writes
    and was computed for the run's own scheduler arguments; otherwise the run is counted anew."""
    from timm_pkmixer.launch.tasks import run_progress
    from timm_pkmixer.runs.run_folder import run_state_with_schedule
    run_dir = launched / 'runs' / 'a'
    assert run_state_with_schedule(run_dir, schedule) is None
    assert run_progress(run_dir, schedule).state == 'finished'
    record = json.loads((launched / 'launch' / 'runs' / 'a.json').read_text())
    assert run_state_with_schedule(run_dir, record['schedule']).status == 'finished'


# ------------------------------------------------------------------------------------------------- the report

def test_the_report_names_the_experiment_the_runs_sweep_named(sweep):
    """A run's launch marker names its folder and recipe; the folder's sweep.json (`pkmixer sweep`) names the
    recipe's experiment. When every run's sweep named the same one, the report takes it; given, the caller's wins;
    sweeps of several experiments fall back to what varies, with a warning."""
    runs = str(sweep / 'runs')
    assert build_report([runs]).experiment == 'single'  # hand-written recipes a and b (seeds 0 and 1): by what varies
    record = dict(sweeps=[dict(experiment='density', points=[dict(files=['a.yaml']), dict(files=['b.yaml'])])])
    (sweep / 'sweep.json').write_text(json.dumps(record), encoding='utf-8')
    report = build_report([runs])
    assert report.experiment == 'density' and not any('sweeps of' in w for w in report.warnings)
    assert build_report([runs], experiment='seeds').experiment == 'seeds'
    record['sweeps'].append(dict(experiment='depth', points=[dict(files=['b.yaml'])]))
    record['sweeps'][0]['points'].pop()
    (sweep / 'sweep.json').write_text(json.dumps(record), encoding='utf-8')
    report = build_report([runs])
    assert report.experiment == 'single' and report.warnings[0] == (
        'the runs come from sweeps of 2 experiments (density, depth): named single by what varies; name it with '
        'experiment=')
    (sweep / 'sweep.json').write_text('not json', encoding='utf-8')  # unreadable: refused by name (it declares
    with pytest.raises(RunFileError, match=re.escape(f'{sweep / "sweep.json"}: not JSON (')):  # the sweep's claims)
        build_report([runs])
