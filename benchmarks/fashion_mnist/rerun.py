"""Rerun one seed of a committed experiment and compare it with the committed runs.

    python benchmarks/fashion_mnist/rerun.py benchmarks/fashion_mnist/fig2d --seed 0 --data-dir data/fmnist \\
        --train-py PATH/train.py [--work-dir W] [--epochs-check N] [--arms GLOB ...] [--parallel K]
        [-- train.py arguments]

From the experiment's committed ``epochs.csv`` (every run's configuration is there) it rebuilds the recipe of each
arm's run of seed S (an arm: the committed runs equal in every argument but the seed), with ``data_dir`` set to
``--data-dir``, runs each with ``pkmixer launch ARM_DIR --workers 1 --threads 1`` (train.py arguments after ``--``;
default ``--workers 1``, the data-loading workers the committed CPU experiments used) and compares each rerun with
the committed run of that seed, epoch by epoch:

* **exact**: every epoch compared has the committed ``eval_top1``, ``eval_loss`` and ``train_loss`` to the printed
  digits (the values as train.py wrote them). Expected where the arithmetic is the same: the same code, torch,
  device kind and thread count (the ``env`` column compares what made the committed run, when it recorded it, with
  what made the rerun);
* else **within spread** or **OUTSIDE spread**: whether the rerun's error (100 − ``eval_top1``) at the last epoch
  compared lies within the committed arm's range over its seeds (min–max) at that epoch.

``--epochs-check N`` compares the first N epochs only: each rerun is stopped after its N-th epoch (train.py keeps
the committed schedule, so those epochs are the committed run's first N, not a shorter run's). The table is printed
and written to ``W/rerun.csv``; the exit status is 1 when a rerun lies outside the committed spread (or did not
reach the epochs compared), 0 otherwise. A work folder is reused: an arm whose run already has the epochs compared is
not run again. ``--arms`` reruns only the arms whose names match one of the shell patterns (``'sw_mlp_*'``); an arm
left out has a row of its own, verdict ``not rerun``, and a later call in the same work folder that matches it
compares it too (the runs already there are not run again).

Input that cannot be used (no such experiment folder or no epochs.csv in it, an empty one or one that is not the
report's, a value that is not a number, no run of the seed, a folder or FIFO where the work folder takes a file, a
``--parallel`` below 1) is one line, ``rerun.py: error: …``, exit status 2, before anything is launched or written.
"""
import argparse
import csv
import fnmatch
import math
import os
import signal
import subprocess
import sys
import time
from collections import OrderedDict
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

import yaml

from timm_pkmixer.cli import USER_ERRORS
from timm_pkmixer.errors import InvalidArgumentError
from timm_pkmixer.markdown import markdown_table
from timm_pkmixer.reports.report import canonical_json
from timm_pkmixer.runs.epochs_csv import read_epochs_csv
from timm_pkmixer.runs.provenance import ENVIRONMENT_KEYS, NOT_RECORDED, environment_key, read_provenance
from timm_pkmixer.runs.run_folder import SUMMARY_CSV, Run, RunFileError, read_run, read_summary
from timm_pkmixer.validation import cli_type, positive_int

NOT_RERUN = 'not rerun'  # the verdict of an arm left out by --arms (a row of its own in rerun.csv)
COMPARED = ('eval_top1', 'eval_loss', 'train_loss')  # the per-epoch values an exact rerun repeats
DEFAULT_TRAIN_ARGS = ('--workers', '1')
CSV_COLUMNS = ('arm', 'run', 'seed', 'epochs_compared', 'verdict', 'top1_err', 'committed_top1_err', 'spread_min',
               'spread_max', 'spread_seeds', 'first_differing_epoch', 'max_abs_top1_diff', 'env')
_STRIP_SEED = ('_seed', '-seed', 'seed')


def _key(run: Run) -> str:
    return canonical_json(run.identity())


def arm_name(run: Run) -> str:
    """The run's name without its folder and seed suffix: ``runs/shallow_kron_28_seed0`` → ``shallow_kron_28``."""
    name = Path(run.name).name
    for suffix in _STRIP_SEED:
        head, sep, tail = name.rpartition(suffix)
        if sep and tail.isdigit():
            return head or name
    return name


def committed_runs(experiment: Path) -> List[Run]:
    """The runs of the committed experiment folder `experiment` (its ``epochs.csv``).

    Raises:
        InvalidArgumentError: no such folder, no epochs.csv in it, an empty one or one without runs.
        RunFileError: an epochs.csv that is not the report's (named with the line and column at fault).
    """
    path = experiment / 'epochs.csv'
    if not experiment.is_dir():
        raise InvalidArgumentError(f'{experiment}: no such folder (give a committed experiment folder, holding the '
                                   f'epochs.csv `pkmixer report` wrote)')
    if not os.path.lexists(path):
        raise InvalidArgumentError(f'{experiment} holds no epochs.csv: not a committed experiment folder (`pkmixer '
                                   f'report` writes one)')
    if path.is_file() and path.stat().st_size == 0:
        raise InvalidArgumentError(f'{path} is empty')
    runs = read_epochs_csv(path)
    if not runs:
        raise InvalidArgumentError(f'{path} holds no run')
    return runs


def _check_writable(path: Path) -> None:
    """Where the script writes the file `path`, something else (a folder, a FIFO) is an
    :class:`InvalidArgumentError`, before anything runs."""
    if os.path.lexists(path) and not path.is_file():
        raise InvalidArgumentError(f'{path} is in the way: not a file, where the rerun writes one (remove it, or give '
                                   f'another --work-dir)')


def arms(committed: Sequence[Run]) -> List[List[Run]]:
    """The committed runs in arms: equal in every argument but the seed (and the seed-tied model arguments)."""
    groups: OrderedDict[str, List[Run]] = OrderedDict()
    for run in committed:
        groups.setdefault(_key(run), []).append(run)
    return list(groups.values())


def recipe(run: Run, data_dir: Path) -> Dict[str, Any]:
    """The committed run's train.py configuration as a recipe, reading its data from `data_dir`."""
    return {**run.args, 'data_dir': str(data_dir.resolve())}


def _epochs_done(folder: Path) -> int:
    try:
        return len(read_summary(folder / SUMMARY_CSV).epochs) if (folder / SUMMARY_CSV).is_file() else 0
    except (RunFileError, OSError):
        return 0


def _launch(arm_dir: Path, run_dir: Path, train_py: str, train_args: Sequence[str], stop_after: Optional[int]
            ) -> subprocess.Popen:
    log = open(arm_dir / 'launch.out', 'ab')
    proc = subprocess.Popen([sys.executable, '-m', 'timm_pkmixer', 'launch', str(arm_dir), '--workers', '1',
                             '--threads', '1', '--train-py', train_py, '--', *train_args],
                            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    log.close()
    proc.run_dir, proc.stop_after, proc.stopped = run_dir, stop_after, False
    return proc


def run_arms(jobs: List[Tuple[Path, Path, int]], train_py: str, train_args: Sequence[str], epochs_check: Optional[int],
             parallel: int = 1, poll: float = 1.) -> List[str]:
    """Launch each (arm folder, run folder, epochs wanted) whose run lacks those epochs, `parallel` at a time; a
    launch is stopped (SIGTERM: pkmixer launch stops its run as Ctrl-C does) once its run has the `epochs_check`
    epochs. Returns what went wrong, one line per arm ('' when nothing)."""
    positive_int('parallel', parallel)  # none at a time would wait for ever
    todo = [(a, r, n) for a, r, n in jobs if _epochs_done(r) < n]
    running: List[subprocess.Popen] = []
    problems: List[str] = []
    while todo or running:
        while todo and len(running) < parallel:
            arm_dir, run_dir, _ = todo.pop(0)
            print(f'[rerun] launching {arm_dir.name} (log {arm_dir / "launch.out"})', flush=True)
            running.append(_launch(arm_dir, run_dir, train_py, train_args, epochs_check))
        time.sleep(poll)
        for proc in list(running):
            if proc.stop_after and not proc.stopped and _epochs_done(proc.run_dir) >= proc.stop_after:
                proc.send_signal(signal.SIGTERM)
                proc.stopped = True
            if proc.poll() is None:
                continue
            running.remove(proc)
            if proc.returncode and not proc.stopped:
                problems.append(f'{proc.run_dir.parent.parent.name}: pkmixer launch exited {proc.returncode} '
                                f'(see {proc.run_dir.parent.parent / "launch.out"})')
    return problems


def _err(run: Run, epoch: int) -> float:
    return 100. - run.epochs[epoch]['eval_top1']


def _env_words(committed: Optional[Dict[str, Any]], rerun: Optional[Dict[str, Any]]) -> str:
    """'same', 'differs: torch, device' or 'not recorded' (the committed run's, or the rerun's)."""
    if not committed or not rerun:
        return f'{NOT_RECORDED} ({"committed" if not committed else "rerun"})'
    a, b = environment_key(committed)[0], environment_key(rerun)[0]
    differ = [k for k, x, y in zip(ENVIRONMENT_KEYS, a, b) if x != y]
    return 'same' if not differ else 'differs: ' + ', '.join(differ)


def compare(committed_run: Run, arm: Sequence[Run], rerun: Optional[Run], epochs_check: Optional[int]
            ) -> Dict[str, Any]:
    """One row of the table: the rerun against the committed run of its seed and its arm's spread."""
    wanted = sorted(committed_run.epochs)
    if epochs_check:
        wanted = wanted[:epochs_check]
    row: Dict[str, Any] = dict(arm=arm_name(committed_run), run=committed_run.name, seed=committed_run.seed,
                               epochs_compared=len(wanted), spread_seeds=' '.join(str(r.seed) for r in arm))
    missing = [e for e in wanted if rerun is None or e not in rerun.epochs]
    if not wanted or missing:
        row.update(verdict='incomplete', env='')
        row['note'] = f'no rerun epoch {missing[0]}' if missing else 'no committed epoch'
        return row
    last = wanted[-1]
    diffs = [e for e in wanted if any(committed_run.epochs[e].get(k) != rerun.epochs[e].get(k) for k in COMPARED
                                      if k in committed_run.epochs[e] or k in rerun.epochs[e])]
    spread = [_err(r, last) for r in arm if last in r.epochs and 'eval_top1' in r.epochs[last]]
    err = _err(rerun, last)
    lo, hi = min(spread), max(spread)
    verdict = 'exact' if not diffs else 'within spread' if lo <= err <= hi else 'OUTSIDE spread'
    row.update(verdict=verdict, top1_err=err, committed_top1_err=_err(committed_run, last), spread_min=lo,
               spread_max=hi, first_differing_epoch=diffs[0] if diffs else '',
               max_abs_top1_diff=max(abs(committed_run.epochs[e]['eval_top1'] - rerun.epochs[e]['eval_top1'])
                                     for e in wanted),
               env=_env_words(committed_run.environment, rerun.environment))
    return row


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return '' if math.isnan(value) else f'{value:.4g}'
    return str(value)


def rerun(experiment: Path, seed: int, data_dir: Path, train_py: str, work_dir: Path,
          epochs_check: Optional[int] = None, train_args: Sequence[str] = DEFAULT_TRAIN_ARGS, parallel: int = 1,
          only: Sequence[str] = ()) -> Tuple[List[Dict[str, Any]], List[str]]:
    """Rebuild, run and compare seed `seed` of each arm of `experiment` (see the module docstring), or of the arms
    whose names match a pattern of `only`: (the rows, problems that are not a comparison: arms without the seed or
    left out, launches that failed, configurations that differ)."""
    committed = committed_runs(experiment)
    problems: List[str] = []
    chosen: List[Tuple[Run, List[Run], Path, Path]] = []
    left_out: List[Dict[str, Any]] = []
    for arm in arms(committed):
        if only and not any(fnmatch.fnmatchcase(arm_name(arm[0]), pattern) for pattern in only):
            problems.append(f'{arm_name(arm[0])}: not rerun (not matched by --arms {" ".join(only)})')
            left_out.append(dict(arm=arm_name(arm[0]), run=arm[0].name, seed=seed, epochs_compared=0,
                                 verdict=NOT_RERUN, spread_seeds=' '.join(str(r.seed) for r in arm)))
            continue
        of_seed = [r for r in arm if r.seed == seed]
        if not of_seed:
            problems.append(f'{arm_name(arm[0])}: no committed run of seed {seed} (seeds '
                            f'{" ".join(str(r.seed) for r in arm)})')
            continue
        run = of_seed[0]
        arm_dir = work_dir / arm_name(run)
        chosen.append((run, arm, arm_dir, arm_dir / 'runs' / Path(run.name).name))
    if not chosen:
        raise InvalidArgumentError(f'no committed run of seed {seed} in {experiment / "epochs.csv"}'
                                   + (f' matched by --arms {" ".join(only)}' if only else ''))
    for path in [work_dir / 'rerun.csv'] + [a / f for _, _, a, r in chosen for f in ('launch.out', f'{r.name}.yaml')]:
        _check_writable(path)
    for run, _, arm_dir, run_dir in chosen:
        arm_dir.mkdir(parents=True, exist_ok=True)
        text = yaml.safe_dump(recipe(run, data_dir), sort_keys=True)
        path = arm_dir / f'{run_dir.name}.yaml'
        if not path.is_file() or path.read_text(encoding='utf-8') != text:
            path.write_text(text, encoding='utf-8')
    jobs = [(a, r, min(epochs_check or len(c.epochs), len(c.epochs))) for c, _, a, r in chosen]
    problems += run_arms(jobs, train_py, train_args, epochs_check, parallel)
    rows = []
    for run, arm, _, run_dir in chosen:
        again = None
        if (run_dir / 'args.yaml').is_file():
            again = read_run(run_dir)
            try:
                again.environment = read_provenance(run_dir)
            except RunFileError as e:
                problems.append(str(e))
            differ = sorted(k for k in set(run.identity()) | set(again.identity()) if k != 'data_dir'
                            and canonical_json(run.identity().get(k)) != canonical_json(again.identity().get(k)))
            if differ:
                problems.append(f'{run.name}: the rerun\'s train.py configuration differs from the committed one on '
                                f'{", ".join(differ)}')
        rows.append(compare(run, arm, again, epochs_check))
    return rows + left_out, problems


def write_csv(rows: Sequence[Dict[str, Any]], path: Path) -> None:
    with open(path, 'w', newline='', encoding='utf-8') as f:
        writer = csv.DictWriter(f, fieldnames=CSV_COLUMNS, extrasaction='ignore')
        writer.writeheader()
        for row in rows:
            writer.writerow({k: repr(v) if isinstance(v, float) else v for k, v in row.items()})


def _check_paths(data_dir: Path, train_py: str) -> None:
    """The runs' data and train.py are there (else every launch would fail alike, after the work folder is made)."""
    if not data_dir.is_dir():
        raise InvalidArgumentError(f'--data-dir {data_dir}: no such folder')
    if not Path(train_py).is_file():
        raise InvalidArgumentError(f'--train-py {train_py}: no such file')


# ------------------------------------------------------------------ the committed reruns, read back (findings.py)
HERE = Path(__file__).resolve().parent


def reruns(folder: Path) -> List[Dict[str, str]]:
    rows: List[Dict[str, str]] = []
    for path in sorted(folder.glob('reruns/seed*.csv')):
        if not path.name.endswith('_cka_summary.csv'):
            with open(path, newline='', encoding='utf-8') as fh:
                rows += list(csv.DictReader(fh))
    return rows


def committed_epochs(folder: Path) -> Dict[str, int]:
    counts: Dict[str, int] = {}
    with open(folder / 'epochs.csv', newline='', encoding='utf-8') as fh:
        for line in csv.DictReader(fh):
            counts[line['run']] = counts.get(line['run'], 0) + 1
    return counts


def cka_rerun(folder: Path) -> Optional[Tuple[int, int, float]]:
    """(pairs repeated to the printed digits, pairs rerun, the largest |difference|) of reruns/seed*_cka_summary.csv."""
    def read(path: Path) -> Dict[Tuple[str, str], str]:
        with open(path, newline='', encoding='utf-8') as fh:
            return {(r['model_a'], r['model_b']): r['mean_diagonal'] for r in csv.DictReader(fh)}
    paths = sorted(folder.glob('reruns/seed*_cka_summary.csv'))
    if not paths:
        return None
    committed, again = read(folder / 'cka_summary.csv'), {k: v for p in paths for k, v in read(p).items()}
    if set(again) - set(committed):
        extra = sorted(set(again) - set(committed))
        raise ValueError(f'{folder.name}: rerun pairs not in the committed cka_summary.csv: {extra}')
    return sum(committed[k] == v for k, v in again.items()), len(again), max(abs(float(committed[k]) - float(v))
                                                                             for k, v in again.items())


def _rerun_counts(rows: Sequence[Dict[str, str]], totals: Dict[str, int]) -> str:
    groups: Dict[Tuple[str, int], List[str]] = {}
    for r in rows:
        if r['verdict'] != NOT_RERUN:
            groups.setdefault((r['epochs_compared'], totals.get(r['run'], 0)), []).append(r['verdict'])
    phrases = []
    for (compared, total), vs in groups.items():
        span = f'all {total} epochs' if int(compared) == total else f'the first {compared} of {total} epochs'
        phrases.append(f'{len(vs)} arm{"s" * (len(vs) > 1)}, {span}: ' +
                       ', '.join(f'{vs.count(v)} {v}' for v in dict.fromkeys(vs)))
    left = sum(r['verdict'] == NOT_RERUN for r in rows)
    return '; '.join(phrases + ([f'{left} arm{"s" * (left > 1)} not rerun'] if left else []))


def rerun_found(where: Path) -> Optional[Tuple[str, str]]:
    rows = reruns(where)
    if not rows:
        return None
    return ', '.join(sorted({r['seed'] for r in rows})), _rerun_counts(rows, committed_epochs(where))


def rerun_note(folder: str, root: Path = HERE) -> Optional[str]:
    """One sentence of what the committed reruns of a findings row's folder found ('fashion_mnist/EXP', under
    `root`), or None."""
    if not folder.startswith('fashion_mnist/'):
        return None
    where = root / folder.split('/', 1)[1]
    if found := rerun_found(where):
        return (f'Rerun with the code of this page (rerun.py, seed {found[0]}; each arm in the Reruns table): '
                f'{found[1]}.')
    cka = cka_rerun(where) if (where / 'cka_summary.csv').is_file() else None
    return (f"Rebuilt with the code of this page (cka_untrained.py --seeds): {cka[0]} of {cka[1]} pairs' mean diagonal "
            f'CKA repeated to the printed digits (largest difference {cka[2]:.2g}).') if cka else None


def old_rerun(experiment: str, root: Path = HERE) -> str:
    """What the committed reruns of an experiment cited in another row's notes found, as a clause."""
    found = rerun_found(root / experiment)
    return f'`{experiment}/` rerun with the code of this page on this CPU (seed {found[0]}): {found[1]}' if found else \
        f'`{experiment}/` {NOT_RERUN}'


def rerun_table(root: Path = HERE) -> List[str]:
    lines = ['| experiment | arm | seed | epochs compared | verdict | error %: rerun / committed [committed range] | '
             'what made them (committed against rerun) |', '|---|---|---|---|---|---|---|']
    for folder in sorted(d for d in (root.iterdir() if root.is_dir() else ()) if d.is_dir()):
        name = f'`{folder.name}/`'
        if (folder / 'epochs.csv').is_file():
            rows, totals = reruns(folder), committed_epochs(folder)
            for r in rows:
                if r['verdict'] == NOT_RERUN:
                    lines.append(f'| {name} | {r["arm"]} | {r["seed"]} | — | not rerun | — | — |')
                    continue
                lines.append(f'| {name} | {r["arm"]} | {r["seed"]} | {r["epochs_compared"]} of '
                             f'{totals.get(r["run"], "?")} | '
                                  f'{r["verdict"]} | {float(r["top1_err"]):.2f} / {float(r["committed_top1_err"]):.2f} '
                                  f'[{float(r["spread_min"]):.2f}, {float(r["spread_max"]):.2f}] | {r["env"]} |')
            if not rows:
                lines.append(f'| {name} | — | — | — | not rerun | — | — |')
        elif (folder / 'cka_summary.csv').is_file():
            cka = cka_rerun(folder)
            verdict = NOT_RERUN if cka is None else 'exact' if cka[0] == cka[1] else \
                f'{cka[1] - cka[0]} of {cka[1]} pairs differ (largest {cka[2]:.2g})'
            pairs = f'{cka[1]} CKA pairs rebuilt' if cka else '—'
            lines.append(f'| {name} | {pairs} | — | untrained | {verdict} | — | — |')
    return lines


RERUNS = """Each committed experiment rerun with the code of this page, one seed an arm, by
`benchmarks/fashion_mnist/rerun.py` (on this project's 2-core CPU, one thread a run): **exact** when every epoch
compared repeats the committed `eval_top1`, `eval_loss` and `train_loss` to the digits train.py printed, else
**within spread** or **OUTSIDE spread** as the rerun's error at the last epoch compared lies inside or outside the
committed seeds' range at that epoch. A GPU experiment rerun on the CPU cannot be exact (other arithmetic)."""



def main(argv: Optional[Sequence[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    train_args = DEFAULT_TRAIN_ARGS
    if '--' in argv:
        i = argv.index('--')
        argv, train_args = argv[:i], tuple(argv[i + 1:])
    p = argparse.ArgumentParser(prog='rerun.py', description=__doc__.split('\n\n')[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    p.add_argument('experiment', type=Path, help='a committed experiment folder (holding epochs.csv)')
    p.add_argument('--seed', type=int, required=True, help='the seed whose runs are rerun, one per arm')
    p.add_argument('--data-dir', type=Path, required=True, help="the runs' data (e.g. data/fmnist)")
    p.add_argument('--train-py', default=os.environ.get('TIMM_TRAIN_PY'), help="timm's train.py ($TIMM_TRAIN_PY)")
    p.add_argument('--work-dir', type=Path, default=None,
                   help='where the recipes and runs go (default ./rerun-<experiment>-seed<S>); reused')
    p.add_argument('--epochs-check', type=int, default=None,
                   help='compare the first N epochs only (each rerun is stopped after its N-th)')
    p.add_argument('--arms', nargs='+', default=(), metavar='GLOB',
                   help="rerun only the arms whose names match one of these shell patterns (e.g. 'sw_mlp_*')")
    p.add_argument('--parallel', type=cli_type(positive_int, name='parallel'), default=1,
                   help='arms run at once (default 1, one thread each)')
    args = p.parse_args(argv)
    if not args.train_py:
        p.error('--train-py (or $TIMM_TRAIN_PY) is required')
    if args.epochs_check is not None and args.epochs_check < 1:
        p.error('--epochs-check must be a positive number of epochs')
    work = args.work_dir or Path(f'rerun-{args.experiment.resolve().name}-seed{args.seed}')
    try:
        _check_paths(args.data_dir, args.train_py)
        rows, problems = rerun(args.experiment, args.seed, args.data_dir, args.train_py, work, args.epochs_check,
                               train_args, args.parallel, args.arms)
    except USER_ERRORS as e:
        message = str(e) if not isinstance(e, OSError) or not e.filename else f'{e.strerror}: {e.filename}'
        print(f'{p.prog}: error: {message}', file=sys.stderr)
        return 2
    shown = ('arm', 'seed', 'epochs_compared', 'verdict', 'top1_err', 'committed_top1_err', 'spread_min',
             'spread_max', 'first_differing_epoch', 'max_abs_top1_diff', 'env')
    print(markdown_table(shown, ([_fmt(r.get(c, '')) for c in shown] for r in rows)))
    for line in problems:
        print(f'[rerun] {line}')
    write_csv(rows, work / 'rerun.csv')
    print(f'[rerun] written {work / "rerun.csv"}')
    bad = [r for r in rows if r['verdict'] in ('OUTSIDE spread', 'incomplete')]
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main())
