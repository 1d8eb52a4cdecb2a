"""The model card's validate.py command runs as written on the model's own data and gives the run's top-1: a
Fashion-MNIST S-Mixer trained one epoch by timm's train.py (`pkmixer train`, the packaged recipe), pushed, and
validated by timm's real validate.py loading it from an offline Hub cache (``hf-hub:``), with the card's command
unchanged but for its placeholders (``python``, ``validate.py``, ``DATA``). The command alone is checked everywhere;
the run needs timm's train.py and validate.py (``TIMM_TRAIN_PY``: validate.py is beside it) and Debian's Fashion-MNIST.
"""
import csv
import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from test_fashion_mnist import debian_prepared, synthetic_source, write_subset  # noqa: F401 (fixtures)
from test_push_reuse import fashion_mnist_run

from timm_pkmixer.cli import main as pkmixer

from hf_cache import install_in_hf_cache

REAL_TRAIN_PY = os.environ.get('TIMM_TRAIN_PY')  # read before a fixture clears it
VALIDATE_PY = Path(REAL_TRAIN_PY).with_name('validate.py') if REAL_TRAIN_PY else None
REPO = 'my-org/fm-s-mixer'
COMMAND = re.compile(r"Validate it with timm's `validate.py`.*?```bash\n(python validate\.py [^\n]*)\n```", re.S)


def card_command(readme: str) -> str:
    (command,) = COMMAND.findall(readme)
    return command


@pytest.mark.parametrize('in_chans,dataset,command,data', [
    (1, 'torch/fashion_mnist', f'python validate.py --model hf-hub:{REPO} --pretrained --dataset torch/fashion_mnist '
                               f'--split validation --data-dir DATA --in-chans 1 --device cpu',
     '`DATA`: the folder `pkmixer prepare-fashion-mnist DATA` writes Fashion-MNIST into. timm\'s `train.py`, '
     '`validate.py` and `inference.py` build a 3-channel model unless told: the command gives them `--in-chans 1`. '
     'On a GPU, `--device cuda`.'),
    (3, '', f'python validate.py --model hf-hub:{REPO} --pretrained --split validation --data-dir DATA --device cpu',
     '`DATA`: an image folder whose `validation/` holds one folder of images per class, named as in training. On a '
     'GPU, `--device cuda`.'),
])
def test_the_card_says_the_validate_command_of_the_models_data(tmp_path, capsys, in_chans, dataset, command, data):
    """It used to say `--in-chans 1 --data-dir DATA …`, which finds no images for Fashion-MNIST: validate.py needs
    the run's --dataset and split; 3 channels need no flag."""
    run = fashion_mnist_run(tmp_path / 'run', in_chans=in_chans, dataset=dataset)
    assert pkmixer(['push', str(run / 'last.pth.tar'), '--repo-id', REPO, '--out-dir', str(tmp_path / 'out')]) == 0
    readme = (tmp_path / 'out' / 'README.md').read_text()
    assert card_command(readme) == command
    assert data in readme.split(command)[1].split('\n\n')[1]


def test_prepare_fashion_mnist_says_how_to_validate(tmp_path, cli, synthetic_source):  # noqa: F811
    """Its last line is the card's command for the folder it wrote."""
    code, out, err = cli('prepare-fashion-mnist', str(tmp_path / 'fm'), '--source', str(synthetic_source))
    assert code == 0, err
    assert out.splitlines()[-1] == (
        f"validate a model trained on it (pushed to the Hub as ORG/NAME) with timm's validate.py: python validate.py "
        f"--model hf-hub:ORG/NAME --pretrained --dataset torch/fashion_mnist --split validation --data-dir "
        f"{tmp_path / 'fm'} --in-chans 1 --device cpu")


@pytest.mark.slow  # train.py 100 steps and two passes over the 10,000 test images: about 2 min on a busy 2-core machine
@pytest.mark.skipif(not REAL_TRAIN_PY, reason="TIMM_TRAIN_PY is not set: timm's train.py and validate.py are not in "
                                              "the timm wheel")
def test_the_cards_validate_command_gives_the_runs_top1(debian_prepared, tmp_path, capsys):  # noqa: F811
    """train.py trains the packaged Fashion-MNIST S-Mixer one epoch on the first 3,200 real training images and
    evaluates it on all 10,000 test images; the card of its pushed checkpoint gives a validate.py command that, run
    as written on the prepared Fashion-MNIST, prints the top-1 train.py recorded (summary.csv, the card's Results)."""
    assert VALIDATE_PY.is_file(), f'no validate.py beside {REAL_TRAIN_PY}'
    data = write_subset(debian_prepared, tmp_path / 'data', 3200, 10000)
    proc = subprocess.run(
        [sys.executable, '-m', 'timm_pkmixer', 'train', 'fashion_mnist/s_mixer_fig7', '--train-py', REAL_TRAIN_PY,
         '--data-dir', str(data), '--epochs', '1', '-b', '32', '-j', '1', '--threads', '1', '--device', 'cpu',
         '--output', str(tmp_path / 'runs'), '--experiment', 'fm'], capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    run = tmp_path / 'runs' / 'fm'
    with open(run / 'summary.csv', newline='') as f:
        (row,) = list(csv.DictReader(f))
    recorded = float(row['eval_top1'])
    assert 50 < recorded < 100  # trained: far above chance

    out = tmp_path / 'out'
    assert pkmixer(['push', str(run / 'last.pth.tar'), '--repo-id', REPO, '--out-dir', str(out)]) == 0, \
        capsys.readouterr().err
    readme = (out / 'README.md').read_text()
    assert f'  - top-1 (%): {recorded:.2f}\n' in readme
    command = card_command(readme)
    cache = tmp_path / 'hub'
    install_in_hf_cache(out, cache, REPO)
    argv = shlex.split(command)
    assert argv[:2] == ['python', 'validate.py'] and argv.count('DATA') == 1
    argv = [sys.executable, str(VALIDATE_PY), *(str(debian_prepared) if a == 'DATA' else a for a in argv[2:])]
    env = dict(os.environ, HF_HUB_OFFLINE='1', HF_HUB_CACHE=str(cache), HF_HOME=str(tmp_path / 'hf_home'),
               OMP_NUM_THREADS='1')  # one thread, as train.py evaluated: a sum's order may follow the thread count
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=600, env=env, cwd=str(tmp_path))
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.split('--result\n', 1)[1])
    assert result['model'] == f'hf-hub:{REPO}'
    assert result['top1'] == round(recorded, 4), (result, recorded)
