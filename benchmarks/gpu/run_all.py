"""One GPU script for the central claims, inside a time budget on one GPU (default 540 s: one device command may
run 10 minutes, benchmarks/gpu/README.md says why and how to call it):

1. `rp_mixer_b_w` against `pk_mixer_b_w` through timm's own benchmark.py (inference and a training step, bf16
   autocast, batch 128; `bench_b_w.py`), then the RP cost per step of Table S.3's MLP-Mixer (S = 64, C = 48, L = 3,
   γ = 2) eager and compiled with today's gather (benchmarks/speed/rp_cost.py `--models table_s3`): the device
   quiet, each in its own process;
2. a timing probe (`probe.py`): every training run of step 3 started at once for a few seconds of real training, and
   from the slowest run's rate the longest schedule that fits the time left (`probe.plan_epochs`; said in the output
   with its arithmetic);
3. Fig. 6's three points (normal S-Mixers, Ω = 2^18, L = 8, C = 16, 64, 173: the pre-registered design of
   benchmarks/fashion_mnist/width_fig6/) and Fig. 7 at L = 4, 8, 12, RP and normal (S = C = 64), on Fashion-MNIST,
   3 seeds each: 27 runs of timm's train.py through `pkmixer sweep` and `pkmixer launch`, all sharing the GPU at
   once, at the chosen epochs (train.py's `--epochs`: the cosine schedule spans them), one CPU thread and one
   loading worker a run, float32 (NVIDIA_TF32_OVERRIDE=0, as the GPU runs of docs/findings.md's (a)); runs still
   going at the deadline are stopped and reported as unfinished;
4. `pkmixer report` of each figure.

Results (no machine path), in ``--out-dir`` (default benchmarks/gpu/results/<name>): ``provenance.json`` (what ran:
commit, torch, timm, Python, the GPU and driver, the scripts' sha256, the budget, each phase's time and outcome, the
plan and why), ``summary.md`` (the same, to read), ``bench_b_w.csv`` (every benchmark.py call), ``probe.csv`` (the
probe's rate per run), ``rp_cost/`` (rp_cost.py's rp_cost.md and rp_cost.json), ``fig6/`` and ``fig7/`` (pkmixer
report: report.md, report.csv, epochs.csv, figures). ``--archive FILE.tar.gz`` packs the folder for the trip back.

    python benchmarks/gpu/run_all.py --carry .gpu_carry --archive $OUT/results.tar.gz     # on the device
    python benchmarks/gpu/run_all.py --smoke --work-dir W --out-dir R    # the same code paths on a CPU, toy sizes

``--smoke``: a CPU, a synthetic Fashion-MNIST of 256 training and 128 test images (IDX files as torchvision reads
them), one seed, one epoch, Mixer-SS/8 at 32 px in benchmark.py (batch 2), rp_cost.py eager at 2 × 1 steps.
"""
import argparse
import hashlib
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
import traceback
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT))
import bench_b_w  # noqa: E402
import probe  # noqa: E402

FIGURES = {  # name: (recipe, pkmixer sweep's arguments besides the seeds)
    'fig6': ('fashion_mnist/s_mixer_fig6', ['--dims', '16', '64', '173', '--permutation', 'normal',
                                            '--model-kwargs', 'num_blocks=8']),
    'fig7': ('fashion_mnist/s_mixer_fig7', ['--experiment', 'depth', '--depths', '4', '8', '12']),
}
PAPER_MAX_EPOCHS = 200  # C.6's Fig. 7 schedule (Fig. 6: 600–2000, Table S.2); the cap of the plan
DEFAULT_BUDGET_S = 540  # one device command runs at most 600 s: 60 s kept for the archive and the trip back
REPORT_RESERVE_S = 60  # kept after training for the reports, the provenance and the archive
PLAN_S_PER_RECIPE = 0.6  # pkmixer launch checks each recipe (train.py's parser, the model on the meta device)
# a train.py run starts slower than a probe (pkmixer train's checks and record, train.py's model, loaders and output
# folder): in two smoke tests on a loaded 2-core CPU, 9 runs took 1.9-3.8x as long from their spawn to train.py's
# args.yaml as the probes took to be ready (59-117 s against 31 s; 120 s against 51-56 s); the plan counts 3x
STARTUP_FACTOR = 3.0
SMOKE_IMAGES = (256, 128)  # synthetic training and test images of --smoke


@dataclass
class Settings:
    """What one call runs: the sizes of the GPU plan, or of the smoke test."""
    device: str
    seeds: List[int]
    bench_models: Sequence[str]
    bench_args: List[str]      # bench_b_w.py's sizes
    cost_args: List[str]       # rp_cost.py's modes and sizes
    probe_args: List[str]      # probe.py's sizes
    max_epochs: int
    env: Dict[str, str] = field(default_factory=dict)


def settings(smoke: bool, seeds: Optional[List[int]]) -> Settings:
    if smoke:
        return Settings('cpu', seeds or [0], bench_b_w.SMOKE_MODELS,
                        ['--batch-size', '2', '--warm', '1', '--iters', '5', '--reps', '1', '--threads', '1'],
                        ['--modes', 'eager', '--reps', '2', '--steps', '1', '--warmup', '1', '--no-micro'],
                        ['--seconds', '2', '--warmup', '1'], max_epochs=1, env=dict(OMP_NUM_THREADS='1'))
    return Settings('cuda', seeds or [0, 1, 2], bench_b_w.MODELS,
                    ['--batch-size', '128', '--warm', '10', '--iters', '40', '--reps', '3'],
                    ['--modes', 'eager', 'compile', '--reps', '10', '--steps', '30', '--warmup', '10'],
                    ['--seconds', '15', '--warmup', '10'], max_epochs=PAPER_MAX_EPOCHS,
                    env=dict(NVIDIA_TF32_OVERRIDE='0'))


class Clock:
    """Seconds since the start, and the deadline of the budget."""

    def __init__(self, budget_s: float):
        self.start = time.time()
        self.budget_s = budget_s

    def now(self) -> float:
        return time.time() - self.start

    def left(self, reserve: float = 0.0) -> float:
        return self.budget_s - reserve - self.now()


def say(clock: Clock, text: str) -> None:
    print(f'[run_all +{clock.now():6.1f}s] {text}', flush=True)


def child_env(extra: Dict[str, str]) -> Dict[str, str]:
    """The environment of every child: this checkout first on PYTHONPATH (no install needed), unbuffered output."""
    env = dict(os.environ, PYTHONUNBUFFERED='1', **extra)
    env['PYTHONPATH'] = os.pathsep.join([str(ROOT)] + [p for p in env.get('PYTHONPATH', '').split(os.pathsep) if p])
    return env


def start(cmd: Sequence[str], log: Path, env: Dict[str, str]) -> subprocess.Popen:
    """A child in its own session (so that it and its children can be stopped together), output to `log`."""
    with open(log, 'ab') as f:
        return subprocess.Popen(list(map(str, cmd)), stdout=f, stderr=subprocess.STDOUT, env=env, cwd=ROOT,
                                start_new_session=True)


def stop(proc: subprocess.Popen, grace: float = 10.0) -> None:
    """SIGTERM to the child's process group, SIGKILL after `grace` seconds."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(grace)
            return
        except subprocess.TimeoutExpired:
            continue


def wait_all(procs: Sequence[subprocess.Popen], timeout: float) -> bool:
    """Wait for every child until `timeout` seconds; stop the ones still running then. True if all ended."""
    end = time.time() + max(0.0, timeout)
    while time.time() < end and any(p.poll() is None for p in procs):
        time.sleep(0.5)
    late = [p for p in procs if p.poll() is None]
    for p in late:
        stop(p)
    return not late


def tail(path: Path, lines: int = 15) -> str:
    try:
        text = path.read_text(encoding='utf-8', errors='replace')
    except OSError:
        return ''
    return '\n'.join(text.splitlines()[-lines:])


class Phases:
    """Each phase timed and its outcome kept: 'ok', 'failed: …', 'timed out', 'skipped: …'."""

    def __init__(self, clock: Clock):
        self.clock, self.rows = clock, []

    def run(self, name: str, fn, *args, **kwargs) -> Any:
        t = self.clock.now()
        say(self.clock, f'{name}: start')
        try:
            result, status = fn(*args, **kwargs), 'ok'
        except PhaseResult as e:
            result, status = e.result, str(e)
        except PhaseError as e:
            result, status = None, str(e)
        except Exception as e:  # noqa: BLE001  (a bug in one phase must not cost the others: said, with its traceback)
            traceback.print_exc()
            result, status = None, f'failed (a bug): {type(e).__name__}: {e}'
        self.rows.append(dict(phase=name, start_s=round(t, 1), wall_s=round(self.clock.now() - t, 1),
                              status=status))
        say(self.clock, f'{name}: {status} ({self.clock.now() - t:.1f} s)')
        return result

    def skip(self, name: str, why: str) -> None:
        self.rows.append(dict(phase=name, start_s=round(self.clock.now(), 1), wall_s=0.0, status=f'skipped: {why}'))
        say(self.clock, f'{name}: skipped: {why}')


class PhaseError(Exception):
    """A phase that did not do its job; the message is its outcome."""


class PhaseResult(PhaseError):
    """A phase that did not do all its job but has a result to keep."""

    def __init__(self, result: Any, status: str):
        super().__init__(status)
        self.result = result


def run_children(name: str, cmds: Sequence[Sequence[str]], logs: Path, env: Dict[str, str], timeout: float) -> None:
    """Run `cmds` side by side (each its own log in `logs`); PhaseError unless each ends with status 0 in time."""
    procs = [start(c, logs / f'{name}_{i}.log', env) for i, c in enumerate(cmds)]
    if not wait_all(procs, timeout):
        raise PhaseError(f'timed out after {timeout:.0f} s')
    bad = [i for i, p in enumerate(procs) if p.returncode != 0]
    if bad:
        for i in bad:
            print(tail(logs / f'{name}_{i}.log'), flush=True)
        raise PhaseError(f'failed: exit status {procs[bad[0]].returncode} ({len(bad)} of {len(procs)})')


# ------------------------------------------------------------------------------------------------- data, scripts

def write_synthetic_fashion_mnist(root: Path, train: int, test: int, seed: int = 0) -> None:
    """A toy Fashion-MNIST in torchvision's raw layout (root/FashionMNIST/raw, IDX files): random 28 × 28 images,
    labels 0–9 in turn. For the smoke test only: it trains the same code paths on no real data."""
    import numpy as np
    raw = root / 'FashionMNIST' / 'raw'
    raw.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    for prefix, n in (('train', train), ('t10k', test)):
        images = rng.integers(0, 256, size=(n, 28, 28), dtype=np.uint8)
        labels = (np.arange(n) % 10).astype(np.uint8)
        (raw / f'{prefix}-images-idx3-ubyte').write_bytes(
            bytes([0, 0, 8, 3]) + n.to_bytes(4, 'big') + (28).to_bytes(4, 'big') * 2 + images.tobytes())
        (raw / f'{prefix}-labels-idx1-ubyte').write_bytes(bytes([0, 0, 8, 1]) + n.to_bytes(4, 'big') +
                                                          labels.tobytes())


def idx_count(path: Path) -> int:
    """The item count of an IDX file (its header's first dimension)."""
    with open(path, 'rb') as f:
        return int.from_bytes(f.read(8)[4:8], 'big')


def find_script(name: str, option: Optional[str], env_var: str, carry: Optional[Path]) -> Path:
    """timm's `name` (train.py, benchmark.py): the option, the variable, the carry folder, or beside
    $TIMM_TRAIN_PY."""
    train_py = os.environ.get('TIMM_TRAIN_PY')
    for c in (option, os.environ.get(env_var), carry / name if carry else None,
              Path(train_py).with_name(name) if train_py else None):
        if c and Path(c).is_file():
            return Path(c).resolve()
    raise SystemExit(f"run_all.py: error: timm's {name} not found: give --{name.split('.')[0].replace('_', '-')}-py, "
                     f'{env_var} or --carry (it is not in the timm wheel)')


def sha256(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


# ------------------------------------------------------------------------------------------------- phases

def prepare_data(work: Path, smoke: bool, data_dir: Optional[str], carry: Optional[Path], env: Dict[str, str],
                 timeout: float) -> Dict[str, Any]:
    """The Fashion-MNIST the runs read: synthetic (--smoke), a prepared one (--data-dir), or prepared here from the
    carried .gz files (pkmixer prepare-fashion-mnist --source)."""
    if smoke:
        root = work / 'data'
        write_synthetic_fashion_mnist(root, *SMOKE_IMAGES)
        kind = 'synthetic (the smoke test)'
    elif data_dir:
        root, kind = Path(data_dir).resolve(), 'Fashion-MNIST (prepared)'
    else:
        source = carry / 'fashion-mnist' if carry else None
        if source is None or not source.is_dir():
            raise PhaseError('failed: no data: give --data-dir (a prepared Fashion-MNIST) or --carry holding '
                             'fashion-mnist/*.gz (prepare_carry.py)')
        root, kind = work / 'data', 'Fashion-MNIST (prepared from the carried .gz files)'
        run_children('data', [[sys.executable, '-m', 'timm_pkmixer', 'prepare-fashion-mnist', root, '--source',
                               source, '--no-download']], work / 'logs', env, timeout)
    raw = root / 'FashionMNIST' / 'raw'
    return dict(root=root, kind=kind, train_images=idx_count(raw / 'train-images-idx3-ubyte'),
                test_images=idx_count(raw / 't10k-images-idx3-ubyte'))


def write_sweeps(work: Path, seeds: Sequence[int], env: Dict[str, str], timeout: float) -> Dict[str, List[Path]]:
    """`pkmixer sweep` of each figure into work/<figure>; the recipes it wrote."""
    cmds = [[sys.executable, '-m', 'timm_pkmixer', 'sweep', recipe, *args, '--seeds', *map(str, seeds),
             '--out-dir', work / name] for name, (recipe, args) in FIGURES.items()]
    run_children('sweep', cmds, work / 'logs', env, timeout)
    return {name: sorted((work / name).glob('*.yaml')) for name in FIGURES}


def bench_phase(s: Settings, benchmark_py: Path, out: Path, work: Path, env: Dict[str, str],
                timeout: float) -> Dict[str, Any]:
    cmd = [sys.executable, HERE / 'bench_b_w.py', '--benchmark-py', benchmark_py, '--device', s.device,
           '--models', *s.bench_models, *s.bench_args, '--out', out / 'bench_b_w.csv']
    run_children('bench_b_w', [cmd], work / 'logs', env, timeout)
    summary = bench_b_w.summarize(bench_b_w.read_rows(out / 'bench_b_w.csv'), s.bench_models)
    if summary['errors'] or not all(b in summary for b in bench_b_w.BENCHES):
        raise PhaseError(f'failed: benchmark.py: {"; ".join(summary["errors"]) or "no ratio"}')
    return summary


def cost_phase(s: Settings, out: Path, work: Path, env: Dict[str, str], timeout: float) -> Dict[str, Any]:
    cmd = [sys.executable, ROOT / 'benchmarks' / 'speed' / 'rp_cost.py', '--device', s.device, '--models', 'table_s3',
           '--threads', '1', *s.cost_args, '--out-dir', out / 'rp_cost']
    run_children('rp_cost', [cmd], work / 'logs', env, timeout)
    data = json.loads((out / 'rp_cost' / 'rp_cost.json').read_text(encoding='utf-8'))
    return {r['mode']: dict(ratio_median=statistics.median(r['ratios']), ratio_min=min(r['ratios']),
                            ratio_max=max(r['ratios']), reps=len(r['ratios']),
                            normal_ms=1e3 * statistics.median(r['seconds_per_step']['normal']),
                            rp_ms=1e3 * statistics.median(r['seconds_per_step']['random']))
            for r in data['results']}


def collect_probes(recipes: Sequence[Path], results: Path) -> Tuple[List[Dict[str, Any]], List[str]]:
    """(the probes that wrote their result, the recipes whose probe did not)."""
    found, missing = [], []
    for r in recipes:
        path = results / f'{r.stem}.json'
        (found.append(json.loads(path.read_text(encoding='utf-8'))) if path.is_file() else missing.append(r.stem))
    return found, missing


def probe_phase(s: Settings, recipes: Sequence[Path], data_root: Path, work: Path, env: Dict[str, str],
                timeout: float) -> Dict[str, Any]:
    """Every recipe's probe at once; their results and the slowest start (spawn to ready). A probe that failed
    costs its own rate, not the plan: the others' are kept (PhaseResult, naming it), and its run is trained too."""
    barrier, results = work / 'probe', work / 'probe_out'
    for d in (barrier, results):
        shutil.rmtree(d, ignore_errors=True)
        d.mkdir(parents=True)
    spawned = time.time()
    cmds = [[sys.executable, HERE / 'probe.py', r, '--device', s.device, '--data-dir', data_root, '--barrier', barrier,
             '--count', str(len(recipes)), *s.probe_args, '--out', results / f'{r.stem}.json'] for r in recipes]
    try:
        run_children('probe', cmds, work / 'logs', dict(env, OMP_NUM_THREADS='1'), timeout)
        problem = None
    except PhaseError as e:
        problem = str(e)
    probes, missing = collect_probes(recipes, results)
    if not probes:
        raise PhaseError(problem or 'failed: no probe wrote a result')
    result = dict(probes=probes, missing=missing, startup_s=max(p['ready_at'] for p in probes) - spawned)
    if problem or missing:
        raise PhaseResult(result, f'{problem or "failed"}: {len(missing)} of {len(recipes)} probes without a result '
                                  f'({", ".join(missing)}); the plan reads the others')
    return result


def train_phase(s: Settings, sweeps: Dict[str, List[Path]], epochs: int, data_root: Path, train_py: Path, work: Path,
                env: Dict[str, str], timeout: float) -> Dict[str, Any]:
    """Both figures' launches side by side, every run at once; stopped at `timeout`. Each run's progress."""
    cmds = []
    for name, recipes in sweeps.items():
        place = (['--gpus', '0', '--runs-per-gpu', str(len(recipes))] if s.device == 'cuda' else
                 ['--workers', str(len(recipes))])
        cmds.append([sys.executable, '-m', 'timm_pkmixer', 'launch', work / name, *place, '--threads', '1',
                     '--data-dir', data_root, '--train-py', train_py, '--', '--epochs', str(epochs), '--workers', '1',
                     '--checkpoint-hist', '1'])
    procs = [start(c, work / 'logs' / f'launch_{i}.log', env) for i, c in enumerate(cmds)]
    in_time = wait_all(procs, timeout)
    from timm_pkmixer.launch.tasks import run_progress
    runs = {}
    for name, recipes in sweeps.items():
        for r in recipes:
            p = run_progress(work / name / 'runs' / r.stem)
            runs[f'{name}/{r.stem}'] = dict(state=p.state, epochs_done=p.done, epochs=p.epochs)
    finished = sum(r['state'] == 'finished' and r['epochs_done'] == epochs for r in runs.values())
    result = dict(epochs=epochs, runs=runs, finished=finished, planned=len(runs), stopped_at_deadline=not in_time,
                  exit_status=[p.returncode for p in procs])
    if not in_time or finished < len(runs):
        for i in range(len(procs)):
            print(tail(work / 'logs' / f'launch_{i}.log'), flush=True)
        raise PhaseResult(result, f'{"stopped at the deadline" if not in_time else "failed"}: {finished} of '
                                  f'{len(runs)} runs finished {epochs} epochs')
    return result


def report_phase(sweeps: Dict[str, List[Path]], work: Path, out: Path, env: Dict[str, str],
                 timeout: float) -> Dict[str, Any]:
    cmds = [[sys.executable, '-m', 'timm_pkmixer', 'report', work / name, '--out-dir', out / name]
            for name in sweeps]
    run_children('report', cmds, work / 'logs', env, timeout)
    return {name: sorted(p.name for p in (out / name).iterdir()) for name in sweeps}


# ------------------------------------------------------------------------------------------------- provenance

def source_commit(carry: Optional[Path]) -> Dict[str, Any]:
    """The commit this checkout is at (git, as train.py's runs record it), else the one prepare_carry.py wrote into
    the carried source.json before the working tree was copied (a device's copy has no .git)."""
    from timm_pkmixer.training.provenance import package_commit
    commit, dirty = package_commit()
    if commit:
        return dict(commit=commit, dirty=dirty, read_from='git')
    path = carry / 'source.json' if carry else None
    if path and path.is_file():
        data = json.loads(path.read_text(encoding='utf-8'))
        return dict(commit=data.get('commit'), dirty=data.get('dirty'),
                    read_from='source.json of prepare_carry.py (the copy has no .git)')
    return dict(commit=None, dirty=None, read_from='nowhere: no git and no source.json')


def gpu_driver() -> Optional[str]:
    try:
        out = subprocess.run(['nvidia-smi', '--query-gpu=driver_version', '--format=csv,noheader'],
                             capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout.strip() else None


def environment(s: Settings, train_py: Path, benchmark_py: Path, carry: Optional[Path]) -> Dict[str, Any]:
    """torch, timm, Python, the device and the scripts (names and sha256; no path)."""
    import numpy
    import torch

    from timm_pkmixer.training.provenance import collect_environment
    env = collect_environment(train_py, s.device)
    for k in ('pkmixer_env', 'started', 'threads', 'processes', 'pkmixer_commit', 'pkmixer_dirty'):
        env.pop(k, None)
    env.update(source=source_commit(carry), numpy=numpy.__version__, torch_cuda=torch.version.cuda,
               cudnn=torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
               cpu_cores=os.cpu_count(), benchmark_py=benchmark_py.name, benchmark_py_sha256=sha256(benchmark_py),
               env={k: os.environ.get(k) for k in ('NVIDIA_TF32_OVERRIDE', 'OMP_NUM_THREADS')} | s.env)
    if s.device == 'cuda':
        env.update(gpu_count=torch.cuda.device_count(), gpu_driver=gpu_driver(),
                   gpu_memory_gib=round(torch.cuda.get_device_properties(0).total_memory / 2 ** 30, 1),
                   gpu_capability='.'.join(map(str, torch.cuda.get_device_capability(0))))
    return env


def run_name(device_name: str, smoke: bool) -> str:
    slug = 'smoke_cpu' if smoke else re.sub(r'[^a-z0-9]+', '_', device_name.lower().replace('nvidia', '')).strip('_')
    return f'{slug or "gpu"}_{datetime.now(timezone.utc).strftime("%Y%m%d_%H%M")}'


def write_probe_csv(probes: Sequence[Dict[str, Any]], path: Path) -> None:
    lines = ['recipe,steps,seconds,steps_per_s,ready_s,measured_with']
    lines += [f'{p["recipe"]},{p["steps"]},{p["seconds"]:.2f},{p["steps_per_s"]:.3f},{p["ready_s"]:.1f},'
              f'{p["measured_with"]}' for p in probes]
    path.write_text('\n'.join(lines) + '\n', encoding='utf-8')


def summary_markdown(prov: Dict[str, Any]) -> str:
    env, plan = prov['environment'], prov.get('plan') or {}
    src = env['source']
    gpu = (f' ({env["gpu_count"]} GPU, {env["gpu_memory_gib"]} GiB, driver {env["gpu_driver"]})'
           if 'gpu_count' in env else f', {env["cpu_cores"]} cores')
    lines = [f'# GPU run {prov["run"]}', '',
             f'{prov["mode"]}; {env["device"]}{gpu}; '
             f'torch {env["torch"]} (CUDA {env["torch_cuda"]}), timm {env["timm"]}, Python {env["python"]}; '
             f'timm-pkmixer {env["pkmixer_version"]} at {src["commit"]}{" with changes" if src["dirty"] else ""} '
             f'({src["read_from"]}); {prov["started"]} – {prov["ended"]}, budget {prov["budget_s"]} s, used '
             f'{prov["wall_s"]} s.', '', '| phase | start (s) | wall (s) | outcome |', '|---|---|---|---|']
    lines += [f'| {r["phase"]} | {r["start_s"]} | {r["wall_s"]} | {r["status"]} |' for r in prov['phases']]
    if plan:
        lines += ['', f'**The schedule.** {plan["reason"]}.']
    bench = prov.get('bench_b_w') or {}
    if 'infer' in bench:
        normal, rp = bench['models']
        lines += ['', f'**{rp} against {normal}** (timm\'s benchmark.py, bf16 autocast, '
                      f'{prov["settings"]["bench"]}; time ratio RP / normal, median [min, max] of '
                      f'{len(bench["infer"]["ratios"])} ABBA repetitions; samples/s medians):', '',
                  '| bench | normal samples/s | RP samples/s | RP / normal time |', '|---|---|---|---|']
        for b in bench_b_w.BENCHES:
            x = bench[b]
            lines.append(f'| {b} | {x["samples_per_s"][normal]:.1f} | {x["samples_per_s"][rp]:.1f} | '
                         f'×{x["ratio_median"]:.3f} [{x["ratio_min"]:.3f}, {x["ratio_max"]:.3f}] |')
    cost = prov.get('rp_cost') or {}
    if cost:
        lines += ['', "**Table S.3's MLP-Mixer** (S = 64, C = 48, L = 3, γ = 2; rp_cost.py, batch 128; "
                      'per step, median [min, max] of the per-repetition ratios; details in rp_cost/):', '',
                  '| mode | normal ms/step | RP ms/step | RP / normal |', '|---|---|---|---|']
        lines += [f'| {m} | {c["normal_ms"]:.2f} | {c["rp_ms"]:.2f} | ×{c["ratio_median"]:.3f} '
                  f'[{c["ratio_min"]:.3f}, {c["ratio_max"]:.3f}] |' for m, c in cost.items()]
    train = prov.get('training') or {}
    if train:
        lines += ['', f'**Training**: {train["finished"]} of {train["planned"]} runs finished {train["epochs"]} '
                      f'epochs{" (stopped at the deadline)" if train["stopped_at_deadline"] else ""}; the figures\' '
                      f'reports: fig6/report.md, fig7/report.md.']
    return '\n'.join(lines) + '\n'


def archive(out: Path, path: Path) -> None:
    with tarfile.open(path, 'w:gz') as tar:
        tar.add(out, arcname=out.name)


# ------------------------------------------------------------------------------------------------- main

def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--smoke', action='store_true', help='the same code paths on a CPU at toy sizes')
    parser.add_argument('--budget-s', type=float, default=None,
                        help=f'wall seconds for everything (default {DEFAULT_BUDGET_S}; --smoke: 1500)')
    parser.add_argument('--carry', default=None, help='the folder prepare_carry.py wrote (scripts, data, source.json)')
    parser.add_argument('--data-dir', default=None, help='a prepared Fashion-MNIST (else from --carry)')
    parser.add_argument('--train-py', default=None, help="timm's train.py (else $TIMM_TRAIN_PY, --carry)")
    parser.add_argument('--benchmark-py', default=None, help="timm's benchmark.py (else $TIMM_BENCHMARK_PY, --carry)")
    parser.add_argument('--seeds', nargs='+', type=int, default=None, help='default 0 1 2 (--smoke: 0)')
    parser.add_argument('--epochs', type=int, default=None, help='train this many epochs instead of the plan\'s')
    parser.add_argument('--pace', default='slowest', choices=('slowest', 'mean'),
                        help='the plan\'s epoch time: the slowest run\'s under full sharing (default: every run '
                             'finishes), or the runs\' mean ×1.25 (more epochs, the slowest at risk)')
    parser.add_argument('--skip', nargs='+', default=[], choices=('bench', 'cost', 'train'), help='leave phases out')
    parser.add_argument('--work-dir', default=None, help='the runs (default: a new temporary folder)')
    parser.add_argument('--out-dir', default=None, help='the results (default benchmarks/gpu/results/<name>)')
    parser.add_argument('--name', default=None, help='the results folder\'s name (default <gpu>_<UTC date>)')
    parser.add_argument('--archive', default=None, help='also pack the results folder into this .tar.gz')
    args = parser.parse_args(argv)
    budget = args.budget_s or (1500.0 if args.smoke else float(DEFAULT_BUDGET_S))
    clock = Clock(budget)
    s = settings(args.smoke, args.seeds)
    os.environ.update(s.env)  # TF32 off in this process too (rp_cost, benchmark.py run as children with it)
    import torch
    if s.device == 'cuda' and not torch.cuda.is_available():
        parser.error('no CUDA device here: run with --smoke on a CPU')
    carry = Path(args.carry).resolve() if args.carry else None
    train_py = find_script('train.py', args.train_py, 'TIMM_TRAIN_PY', carry)
    benchmark_py = find_script('benchmark.py', args.benchmark_py, bench_b_w.BENCHMARK_PY_ENV, carry)
    work = Path(args.work_dir or tempfile.mkdtemp(prefix='pkmixer_gpu_')).resolve()
    (work / 'logs').mkdir(parents=True, exist_ok=True)
    env_info = environment(s, train_py, benchmark_py, carry)
    name = args.name or run_name(env_info['device'], args.smoke)
    out = Path(args.out_dir or HERE / 'results' / name).resolve()
    out.mkdir(parents=True, exist_ok=True)
    env = child_env(s.env)
    started = datetime.now(timezone.utc).strftime('%Y-%m-%d %H:%M UTC')
    say(clock, f'{name}: {env_info["device"]}, torch {env_info["torch"]}, timm {env_info["timm"]}, budget {budget:.0f} '
               f's; runs in {work}, results in {out}')
    phases = Phases(clock)
    prov: Dict[str, Any] = dict(run=name, mode='smoke test (CPU, toy sizes)' if args.smoke else 'GPU',
                                started=started, budget_s=budget, environment=env_info,
                                settings=dict(seeds=s.seeds, bench=' '.join(s.bench_args), cost=' '.join(s.cost_args),
                                              probe=' '.join(s.probe_args), figures={k: [r, *a] for k, (r, a) in
                                                                                     FIGURES.items()}))

    data = sweeps = None
    try:
        data = phases.run('data', prepare_data, work, args.smoke, args.data_dir, carry, env, min(120, clock.left()))
        sweeps = phases.run('sweep', write_sweeps, work, s.seeds, env, min(180, clock.left()))
        if 'bench' in args.skip:
            phases.skip('bench_b_w', '--skip bench')
        else:
            prov['bench_b_w'] = phases.run('bench_b_w', bench_phase, s, benchmark_py, out, work, env,
                                           min(240 if args.smoke else 150, clock.left(REPORT_RESERVE_S)))
        if 'cost' in args.skip:
            phases.skip('rp_cost', '--skip cost')
        else:
            prov['rp_cost'] = phases.run('rp_cost', cost_phase, s, out, work, env,
                                         min(300 if args.smoke else 200, clock.left(REPORT_RESERVE_S)))
        if 'train' in args.skip or not (data and sweeps):
            phases.skip('train', '--skip train' if 'train' in args.skip else 'no data or no sweep')
        else:
            recipes = [r for rs in sweeps.values() for r in rs]
            measured = phases.run('probe', probe_phase, s, recipes, data['root'], work, env,
                                  min(300 if args.smoke else 150, clock.left(REPORT_RESERVE_S)))
            if measured:
                write_probe_csv(measured['probes'], out / 'probe.csv')
                startup = (STARTUP_FACTOR * measured['startup_s']
                           + PLAN_S_PER_RECIPE * max(len(r) for r in sweeps.values()))
                plan = probe.plan_epochs(measured['probes'], clock.left(REPORT_RESERVE_S), startup,
                                         measured['probes'][0]['batch'], s.max_epochs,
                                         train_images=data['train_images'], pace=args.pace)
                if args.epochs:
                    plan.update(epochs=args.epochs, reason=plan['reason'] + f'; --epochs {args.epochs} given instead')
                prov['plan'] = dict(plan, startup_s=round(startup, 1), runs=len(recipes), at_once=len(recipes))
                say(clock, f'plan: {plan["reason"]}')
                if plan['fit'] < 1 and not args.epochs:
                    phases.skip('train', 'not one epoch fits the time left')
                else:
                    prov['training'] = phases.run('train', train_phase, s, sweeps, plan['epochs'], data['root'],
                                                  train_py, work, env, clock.left(REPORT_RESERVE_S))
            if sweeps and any((work / n / 'runs').is_dir() for n in sweeps):
                prov['reports'] = phases.run('report', report_phase, sweeps, work, out, env, max(30.0, clock.left()))
    finally:  # whatever happened above, what there is gets written and packed
        prov.update(ended=datetime.now(timezone.utc).strftime('%Y-%m-%d %H:%M UTC'), wall_s=round(clock.now(), 1),
                    phases=phases.rows, data={k: v for k, v in (data or {}).items() if k != 'root'})
        (out / 'provenance.json').write_text(json.dumps(prov, indent=1, default=str), encoding='utf-8')
        try:
            (out / 'summary.md').write_text(summary_markdown(prov), encoding='utf-8')
        except Exception:  # noqa: BLE001  (the provenance is written: the summary's bug is said, not fatal)
            traceback.print_exc()
        if args.archive:
            archive(out, Path(args.archive))
    say(clock, f'done: {out}' + (f' (packed into {args.archive})' if args.archive else ''))
    if (out / 'summary.md').is_file():
        print((out / 'summary.md').read_text(encoding='utf-8'), flush=True)
    return 0 if all(r['status'] == 'ok' or r['status'].startswith('skipped: --skip') for r in phases.rows) else 1


if __name__ == '__main__':
    sys.exit(main())
