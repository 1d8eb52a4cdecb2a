"""CPU threads on a busy machine (`timm_pkmixer.training.threads`): the idle cores per process unless asked
for or set by OMP_NUM_THREADS, and the timm suite's runner (tests/timm_suite.py) keeping its timeouts by them."""
import os

import pytest
import torch


@pytest.mark.parametrize('cores,load,local_world,expected', [
    (2, 3.1, None, (1, '2 cores, load average 3.1')),
    (16, 4.0, None, (12, '16 cores, load average 4.0')),
    (16, 4.0, '4', (3, '16 cores, load average 4.0, 4 processes on this machine')),
    (8, 7.9, '2', (1, '8 cores, load average 7.9, 2 processes on this machine')),
])
def test_threads_are_the_idle_cores_per_process(monkeypatch, cores, load, local_world, expected):
    from timm_pkmixer.training import threads
    from timm_pkmixer.training.threads import choose_threads
    monkeypatch.delenv('OMP_NUM_THREADS', raising=False)
    monkeypatch.setattr(threads, 'available_cores', lambda: cores)
    monkeypatch.setattr(os, 'getloadavg', lambda: (load, load, load))
    monkeypatch.setattr(torch, 'get_num_threads', lambda: cores)
    if local_world is None:
        monkeypatch.delenv('LOCAL_WORLD_SIZE', raising=False)
    else:
        monkeypatch.setenv('LOCAL_WORLD_SIZE', local_world)
    assert choose_threads() == expected
    assert choose_threads(5) == (5, 'as requested')
    monkeypatch.setenv('OMP_NUM_THREADS', '2')
    assert choose_threads()[1] == 'OMP_NUM_THREADS'


@pytest.mark.parametrize('env,cores,load,expected', [
    ({}, 2, 0.2, {'OMP_NUM_THREADS': '2'}),
    ({}, 2, 3.0, {'OMP_NUM_THREADS': '1', 'TIMEOUT': '720'}),  # two other jobs on two cores
    ({}, 16, 4.0, {'OMP_NUM_THREADS': '12'}),
    ({'OMP_NUM_THREADS': '2'}, 2, 3.0, {'TIMEOUT': '720'}),
    ({'TIMEOUT': '100'}, 2, 9.0, {'OMP_NUM_THREADS': '1'}),
    ({}, 2, 8.5, {'OMP_NUM_THREADS': '1', 'TIMEOUT': '1800'}),
])
def test_timm_suite_keeps_its_timeouts_on_a_busy_machine(monkeypatch, env, cores, load, expected):
    from timm_suite import load_env

    from timm_pkmixer.training import threads
    for var in ('OMP_NUM_THREADS', 'TIMEOUT', 'LOCAL_WORLD_SIZE'):
        monkeypatch.delenv(var, raising=False)
    for var, value in env.items():
        monkeypatch.setenv(var, value)
    monkeypatch.setattr(threads, 'available_cores', lambda: cores)
    monkeypatch.setattr(os, 'getloadavg', lambda: (load, load, load))
    monkeypatch.setattr(torch, 'get_num_threads', lambda: cores)
    assert load_env(os.environ, cores, load) == expected
