"""The lock of a launched folder (``DIR/launch/lock``) and the child processes of `pkmixer launch`: one holder when
many launches start together, a dead holder's lock taken over once, a reused PID never taken for the holder, a
corrupt or special lock file named, and a child started with no import in it."""
import builtins
import json
import os
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from timm_pkmixer.launch.errors import LaunchError, LaunchLockedError
from timm_pkmixer.launch.lock import acquire_lock, release_lock

# a fresh interpreter forks PAIRS pairs of processes; each pair races for the lock of its own folder (half of the
# folders hold a dead holder's lock, to be taken over); every process stays alive until all have tried
_RACE = textwrap.dedent('''
    import json, os, subprocess, sys
    from pathlib import Path
    from timm_pkmixer.launch.lock import acquire_lock
    from timm_pkmixer.launch.errors import LaunchLockedError
    root, pairs = Path(sys.argv[1]), int(sys.argv[2])
    gone = subprocess.Popen([sys.executable, '-c', 'pass']); gone.wait()  # a PID nobody holds
    folders = [root / f'f{i}' for i in range(pairs)]
    for i, folder in enumerate(folders):
        (folder / 'launch').mkdir(parents=True)
        if i % 2:
            (folder / 'launch' / 'lock').write_text(json.dumps(dict(pid=gone.pid, host=os.uname().nodename,
                                                                    executor='local')))
    start_r, start_w = os.pipe(); end_r, end_w = os.pipe(); res_r, res_w = os.pipe()
    children = []
    for i, folder in enumerate(folders):
        for _ in range(2):
            pid = os.fork()
            if pid == 0:
                os.close(start_w); os.close(end_w); os.close(res_r)
                os.read(start_r, 1)  # every child waits here until the parent closes start_w
                try:
                    acquire_lock(folder, 'local'); got = 'H'
                except LaunchLockedError:
                    got = 'R'
                except BaseException as e:
                    got = 'E'
                os.write(res_w, f'{i:05d}{got}'.encode())
                os.read(end_r, 1)  # alive until every process has tried
                os._exit(0)
            children.append(pid)
    os.close(start_r); os.close(end_r); os.close(res_w)
    os.close(start_w)  # go
    data = b''
    while len(data) < 6 * 2 * pairs:
        chunk = os.read(res_r, 65536)
        if not chunk:
            break
        data += chunk
    os.close(end_w)
    for pid in children:
        os.waitpid(pid, 0)
    results = {}
    for k in range(0, len(data), 6):
        results.setdefault(int(data[k:k + 5]), []).append(data[k + 5:k + 6].decode())
    print(json.dumps({str(i): ''.join(sorted(r)) for i, r in sorted(results.items())}))
''')


def test_many_pairs_started_together_get_exactly_one_holder_each(tmp_path):
    pairs = 100
    proc = subprocess.run([sys.executable, '-c', _RACE, str(tmp_path), str(pairs)], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    outcomes = json.loads(proc.stdout)
    assert len(outcomes) == pairs
    assert {i: o for i, o in outcomes.items() if o != 'HR'} == {}  # one holder and one refusal in every pair
    for i in range(pairs):  # the lock names a process of the pair and is whole
        lock = json.loads((tmp_path / f'f{i}' / 'launch' / 'lock').read_text())
        assert isinstance(lock['pid'], int) and lock['executor'] == 'local'


def _write_lock(folder: Path, text: str) -> Path:
    (folder / 'launch').mkdir(parents=True, exist_ok=True)
    path = folder / 'launch' / 'lock'
    path.write_text(text)
    return path


@pytest.mark.parametrize('text,why', [
    ('', 'empty'),
    ('{"pid": 12', 'not JSON'),
    ('[1, 2]', 'not a JSON object'),
    ('{"pid": "me", "host": "h", "executor": "local"}', 'pid is a str'),
    ('{"pid": 12, "host": ["h"], "executor": "local"}', 'host is a list'),
])
def test_a_corrupt_lock_is_named_with_what_to_do(tmp_path, text, why):
    path = _write_lock(tmp_path, text)
    with pytest.raises(LaunchError) as e:
        acquire_lock(tmp_path, 'local')
    assert str(e.value).startswith(f'{path} is not a launch lock ({why}')
    assert str(e.value).endswith(f'remove it if no launch of {tmp_path} is running')
    assert path.read_text() == text  # left as it was


def test_a_fifo_in_place_of_the_lock_is_named_not_waited_on(tmp_path):
    (tmp_path / 'launch').mkdir()
    path = tmp_path / 'launch' / 'lock'
    os.mkfifo(path)
    code = ('from pathlib import Path\nfrom timm_pkmixer.launch.lock import acquire_lock\n'
            'from timm_pkmixer.launch.errors import LaunchError\n'
            f'try:\n    acquire_lock(Path({str(tmp_path)!r}), "local")\n'
            'except LaunchError as e:\n    print(e)\n')
    proc = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, timeout=600)  # stops a wait
    # on the FIFO, which never ends; a busy machine's start of the interpreter is not timed (21 s of 60 at load 17)
    assert proc.stdout.strip() == (f'{path} is not a launch lock (a FIFO, not a regular file): remove it if no '
                                   f'launch of {tmp_path} is running'), proc.stderr


def test_a_lock_naming_a_reused_pid_is_a_dead_holders(tmp_path):
    """PID 1 lives, but not since the lock's holder started: its start time (field 22 of /proc/1/stat) or the
    boot differs, so the lock is taken over."""
    stat = Path('/proc/1/stat').read_text()
    start = int(stat.rsplit(')', 1)[1].split()[19])
    boot = Path('/proc/sys/kernel/random/boot_id').read_text().strip()
    for other in (dict(pid_start=start + 1, boot_id=boot), dict(pid_start=start, boot_id='another-boot')):
        _write_lock(tmp_path, json.dumps(dict(pid=1, host=socket.gethostname(), executor='local', job=None,
                                              since=0., **other)))
        path = acquire_lock(tmp_path, 'local')
        assert json.loads(path.read_text())['pid'] == os.getpid()
        release_lock(tmp_path)
        assert not path.exists()
    # the same start and boot: the holder, alive
    _write_lock(tmp_path, json.dumps(dict(pid=1, host=socket.gethostname(), executor='local', job=None, since=0.,
                                          pid_start=start, boot_id=boot)))
    with pytest.raises(LaunchLockedError, match=f'is being launched already, by PID 1 on {socket.gethostname()}'):
        acquire_lock(tmp_path, 'local')


def test_a_lock_records_its_holders_start_and_boot(tmp_path):
    path = acquire_lock(tmp_path, 'local')
    lock = json.loads(path.read_text())
    stat = Path(f'/proc/{os.getpid()}/stat').read_text()
    assert lock['pid'] == os.getpid() and lock['pid_start'] == int(stat.rsplit(')', 1)[1].split()[19])
    assert lock['boot_id'] == Path('/proc/sys/kernel/random/boot_id').read_text().strip()
    release_lock(tmp_path)


def test_the_run_process_is_started_with_no_import_in_the_child(tmp_path, monkeypatch):
    """The preexec_fn `execute` gives Popen runs in the forked child of a threaded launcher: it may not import
    (Python documents that as unsafe with threads) yet must set the parent-death signal (SIGTERM)."""
    from timm_pkmixer.launch import tasks
    seen = {}

    class Stop(Exception):
        pass

    def fake_popen(command, **kwargs):
        seen.update(kwargs)
        raise Stop

    monkeypatch.setattr(tasks.subprocess, 'Popen', fake_popen)
    monkeypatch.setattr(tasks, 'run_progress', lambda run_dir, *a, **k: tasks.Progress('absent'))
    folder = tmp_path / 'sweep'
    folder.mkdir()
    (folder / 'r.yaml').write_text('model: x\n')
    task = tasks.Task('r', str(folder / 'r.yaml'), str(folder / 'runs' / 'r'), (), str(folder / 'launch'), 'local')
    with pytest.raises(Stop):
        tasks.execute(task)
    preexec = seen['preexec_fn']
    import ctypes
    prctl = ctypes.CDLL(None, use_errno=True).prctl
    sig = ctypes.c_int(0)
    pid = os.fork()
    if pid == 0:  # the child: no import may happen, and the parent-death signal must be set
        code = 99
        try:
            def no_import(*args, **kwargs):
                raise ImportError('import in preexec_fn')
            builtins.__import__ = no_import
            preexec()
            prctl(2, ctypes.byref(sig))  # PR_GET_PDEATHSIG
            code = sig.value
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 15  # SIGTERM, set without an import


@pytest.mark.parametrize('pid', [0, -1])
def test_a_lock_naming_a_process_group_is_a_dead_holders(tmp_path, pid):
    """0 and negative PIDs name process groups to os.kill (which then finds this one alive): never a holder."""
    _write_lock(tmp_path, json.dumps(dict(pid=pid, host=socket.gethostname(), executor='local')))
    path = acquire_lock(tmp_path, 'local')
    assert json.loads(path.read_text())['pid'] == os.getpid()
    release_lock(tmp_path)


def test_a_process_that_has_ended_unreaped_is_no_holder(tmp_path):
    """A zombie (ended, its parent has not reaped it yet: a SLURM task's run for a moment after SLURM requeued the job)
    is not the process its record names: a run record or lock naming it has no live holder."""
    from timm_pkmixer.launch.liveness import identity, pid_alive, same_process
    from timm_pkmixer.launch.lock import holder_alive
    child = subprocess.Popen(['cat'], stdin=subprocess.PIPE)
    record = dict(pid=child.pid, host=socket.gethostname(), executor='local', **identity(child.pid))
    assert same_process(record) and holder_alive(record)
    child.stdin.close()  # cat ends
    os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOWAIT)  # once it has, left unreaped: a zombie until child.wait()
    assert Path(f'/proc/{child.pid}/stat').read_text().rsplit(')', 1)[1].split()[0] == 'Z'
    assert (same_process(record), pid_alive(child.pid, socket.gethostname()), holder_alive(record)) == \
        (False, False, False)
    assert (same_process(dict(record, pid_start=None)), identity(child.pid)['pid_start']) == (False, None)
    child.wait()
