"""Put together, here, what `run_all.py` needs on a device machine that only gets a copy of this working tree: one
git-ignored folder (default ``.gpu_carry/``, added to .git/info/exclude) that the device call names in ``carry``:

* timm's ``train.py`` and ``benchmark.py`` (not in the timm wheel): ``--timm-scripts DIR``, default the folder of
  ``$TIMM_TRAIN_PY``;
* the timm wheel of this environment's version (``pip download --no-deps timm==X``, or ``--timm-wheel FILE``): the
  device's image has a timm of its own, and the scripts above belong to this one;
* Fashion-MNIST's four upstream ``.gz`` files (30 MB; decompressed they are 53 MB, and what travels is capped at
  64 MiB): ``--fmnist-source DIR``, default Debian's ``dataset-fashion-mnist``; run_all.py prepares them there with
  ``pkmixer prepare-fashion-mnist --source``;
* ``source.json``: the commit of this checkout and whether it has changes (the copy has no .git, so runs made there
  cannot ask git).

    python benchmarks/gpu/prepare_carry.py --timm-scripts PATH/pytorch-image-models
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Optional, Sequence

ROOT = Path(__file__).resolve().parent.parent.parent
sys.path.insert(0, str(ROOT))
SCRIPTS = ('train.py', 'benchmark.py')
DEVICE_COMMAND = ('set -o pipefail; python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site '
                  '{carry}/timm-*.whl && export PYTHONPATH=/tmp/site && python3 benchmarks/gpu/run_all.py --carry '
                  '{carry} --archive $OUT/results.tar.gz 2>&1 | tee $OUT/log.txt')


def exclude(root: Path, folder: Path) -> bool:
    """Add the folder to .git/info/exclude unless git already ignores it; whether it was added."""
    rel = folder.relative_to(root).as_posix()
    if subprocess.run(['git', '-C', str(root), 'check-ignore', '-q', rel]).returncode == 0:
        return False
    info = root / '.git' / 'info'
    info.mkdir(parents=True, exist_ok=True)
    with open(info / 'exclude', 'a', encoding='utf-8') as f:
        f.write(f'/{rel}/\n')
    return True


def timm_wheel(out: Path, given: Optional[str]) -> Path:
    """The timm wheel of this environment's version in `out` (copied from `given`, else pip's download)."""
    import timm
    for old in out.glob('timm-*.whl'):
        old.unlink()
    if given:
        return Path(shutil.copy2(given, out))
    subprocess.run([sys.executable, '-m', 'pip', 'download', '-q', '--no-deps', '--only-binary=:all:', '-d', str(out),
                    f'timm=={timm.__version__}'], check=True)
    return next(out.glob('timm-*.whl'))


def main(argv: Optional[Sequence[str]] = None) -> None:
    from timm_pkmixer.data.fashion_mnist import DEBIAN_DIR, FASHION_MNIST_FILES
    from timm_pkmixer.training.provenance import package_commit
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--dir', default=str(ROOT / '.gpu_carry'), help='inside this checkout (default .gpu_carry)')
    parser.add_argument('--timm-scripts', default=None, help="the folder of timm's train.py and benchmark.py")
    parser.add_argument('--fmnist-source', default=str(DEBIAN_DIR), help="Fashion-MNIST's four .gz files")
    parser.add_argument('--timm-wheel', default=None, help='a timm wheel to carry (default: pip download)')
    args = parser.parse_args(argv)
    out = Path(args.dir).resolve()
    if ROOT not in out.parents:
        parser.error(f'--dir {args.dir}: must be inside this checkout ({ROOT}): only the checkout travels')
    scripts = Path(args.timm_scripts) if args.timm_scripts else (
        Path(os.environ['TIMM_TRAIN_PY']).parent if os.environ.get('TIMM_TRAIN_PY') else None)
    missing = [n for n in SCRIPTS if scripts is None or not (scripts / n).is_file()]
    if missing:
        parser.error(f"timm's {', '.join(missing)} not found in {scripts or '(no --timm-scripts, no TIMM_TRAIN_PY)'}")
    gz = [Path(args.fmnist_source) / f'{name}.gz' for name in FASHION_MNIST_FILES]
    if not all(p.is_file() for p in gz):
        parser.error(f'--fmnist-source {args.fmnist_source}: needs {", ".join(p.name for p in gz)}')
    (out / 'fashion-mnist').mkdir(parents=True, exist_ok=True)
    for n in SCRIPTS:
        shutil.copy2(scripts / n, out / n)
    for p in gz:
        shutil.copy2(p, out / 'fashion-mnist' / p.name)
    wheel = timm_wheel(out, args.timm_wheel)
    commit, dirty = package_commit()
    (out / 'source.json').write_text(json.dumps(dict(
        commit=commit, dirty=dirty, timm_wheel=wheel.name,
        written=datetime.now(timezone.utc).strftime('%Y-%m-%d %H:%M UTC')), indent=1), encoding='utf-8')
    added = exclude(ROOT, out)
    size = sum(p.stat().st_size for p in out.rglob('*') if p.is_file())
    rel = out.relative_to(ROOT).as_posix()
    print(f'{rel}/: {size / 2 ** 20:.1f} MiB (train.py, benchmark.py, {wheel.name}, 4 Fashion-MNIST .gz, source.json '
          f'at {commit or "no commit"}{" with changes" if dirty else ""}); '
          f'{"added to" if added else "already ignored by"} git')
    print(f'device run: carry ["{rel}"], command:\n{DEVICE_COMMAND.format(carry=rel)}')


if __name__ == '__main__':
    main()
