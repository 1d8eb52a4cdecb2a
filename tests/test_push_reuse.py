"""`pkmixer push` as a researcher reuses a run: the model and its arguments read from the run (no --model), a folder
written without a repository (no --repo-id), the card's usage snippet run as written against the written folder for
the model's input channels, Fashion-MNIST's class names in config.json and transformers, and the flag timm's
scripts need for a model that does not take 3 channels."""
import argparse
import gzip
import json
import re
from pathlib import Path

import numpy as np
import pytest
import timm
import torch
import yaml
from safetensors.torch import save_file

from timm_pkmixer.cli import main as pkmixer
from timm_pkmixer.data.fashion_mnist import DEBIAN_DIR, FASHION_MNIST_CLASSES
from timm_pkmixer.errors import InputShapeError

from conftest import command_messages, randomize_, run_python
from hf_cache import install_in_hf_cache

NAME = 's_mixer_s64c64_32'


def fashion_mnist_run(root: Path, in_chans: int = 1, dataset: str = 'torch/fashion_mnist', **extra) -> Path:
    """A train.py run folder of a 1-block S-Mixer on Fashion-MNIST as the packaged recipes train it (32 px,
    `in_chans` channels, 10 classes, the recipes' mean / std): last.pth.tar recording its arguments, args.yaml."""
    root.mkdir(parents=True, exist_ok=True)
    model = randomize_(timm.create_model(NAME, num_blocks=1, in_chans=in_chans, num_classes=10), std=0.05)
    args = argparse.Namespace(
        model=NAME, model_kwargs={'num_blocks': 1}, num_classes=10, in_chans=in_chans, input_size=None, img_size=32,
        gp=None, seed=0, epochs=1, model_ema=False, dataset=dataset, data_dir=str(root / 'no-data'),
        train_split='train', val_split='validation', mean=[0.2860] * in_chans, std=[0.3530] * in_chans,
        crop_pct=1.0, interpolation='bicubic', **extra)
    torch.save({'epoch': 0, 'arch': NAME, 'state_dict': model.state_dict(), 'args': args}, root / 'last.pth.tar')
    (root / 'args.yaml').write_text(yaml.safe_dump(vars(args)))
    return root


def push(capsys, *argv):
    code = pkmixer(['push', *map(str, argv)])
    out, err = capsys.readouterr()
    return code, out, err


def test_push_out_dir_reads_the_model_and_its_arguments_from_the_run(tmp_path, capsys):
    """No --model, no --model-kwargs, no --repo-id: the checkpoint's record says s_mixer_s64c64_32 with num_blocks=1,
    in_chans=1 and 10 classes; the card's snippet names your-org/<folder>, and nothing is uploaded."""
    run = fashion_mnist_run(tmp_path / 'run')
    code, out, err = push(capsys, run / 'last.pth.tar', '--out-dir', tmp_path / 'fm-hub')
    assert code == 0, err
    assert f'building {NAME} and loading the weights into it' in err
    config = json.loads((tmp_path / 'fm-hub' / 'config.json').read_text())
    assert config['architecture'] == NAME and config['num_classes'] == 10
    assert config['model_args']['num_blocks'] == 1 and config['model_args']['in_chans'] == 1
    card = (tmp_path / 'fm-hub' / 'README.md').read_text()
    assert "timm.create_model('hf-hub:your-org/fm-hub', pretrained=True)" in card
    assert out.splitlines()[-1] == ('wrote {}; nothing uploaded (to upload it, push again with --repo-id ORG/NAME; the '
                                    'card names your-org/fm-hub until then)'.format(tmp_path / 'fm-hub'))


def test_push_reads_the_model_from_the_args_yaml_beside_a_plain_state_dict(tmp_path, capsys):
    run = fashion_mnist_run(tmp_path / 'run')
    state = torch.load(run / 'last.pth.tar', weights_only=False)['state_dict']
    save_file(state, str(run / 'weights.safetensors'))
    code, _, err = push(capsys, run / 'weights.safetensors', '--out-dir', tmp_path / 'out')
    assert code == 0, err
    assert json.loads((tmp_path / 'out' / 'config.json').read_text())['model_args']['num_blocks'] == 1
    # --model still names it, and one the run did not train is refused as before
    code, _, err = push(capsys, run / 'last.pth.tar', '--model', 's_mixer_rp_s64c64_32', '--out-dir', tmp_path / 'o2')
    assert code == 2 and "was trained as 's_mixer_s64c64_32' (the run's model), not 's_mixer_rp_s64c64_32'" in err


def test_push_asks_for_what_the_run_does_not_say(tmp_path, capsys):
    model = timm.create_model(NAME, num_blocks=1)
    save_file(model.state_dict(), str(tmp_path / 'w.safetensors'))  # no record, no args.yaml beside it
    code, _, err = push(capsys, tmp_path / 'w.safetensors', '--out-dir', tmp_path / 'out')
    assert code == 2 and command_messages(err) == (
        f'pkmixer push: error: --model must be given: {tmp_path / "w.safetensors"} does not record its model (no '
        f'train.py arguments in it and no args.yaml beside it)\n')
    code, _, err = push(capsys, tmp_path / 'w.safetensors', '--model', NAME)  # an upload names its repository
    assert code == 2 and command_messages(err) == ('pkmixer push: error: --repo-id ORG/NAME is needed to upload (or '
                                                   '--out-dir DIR to only write the folder)\n')
    assert 'reading' not in err  # refused before anything is read


def _fashion_mnist_image(path: Path) -> np.ndarray:
    """The first Fashion-MNIST test image (Debian's dataset-fashion-mnist) as a grayscale PNG at `path`; a
    Fashion-MNIST-like 28 × 28 grayscale image where the package is not installed."""
    from PIL import Image
    gz = DEBIAN_DIR / 't10k-images-idx3-ubyte.gz'
    if gz.is_file():
        pixels = np.frombuffer(gzip.decompress(gz.read_bytes())[16:16 + 28 * 28], dtype=np.uint8).reshape(28, 28)
    else:
        pixels = (np.random.default_rng(0).random((28, 28)) * 255).astype(np.uint8)
    Image.fromarray(pixels, mode='L').save(path)
    return pixels


def _snippet(readme: str) -> str:
    (code,) = re.findall(r'```python\n(.*?)```', readme, re.S)
    return code


@pytest.mark.parametrize('in_chans', [1, 3, 2])
def test_the_cards_snippet_runs_as_written_on_the_written_folder(tmp_path, capsys, in_chans):
    """The snippet of README.md, unchanged, in a fresh interpreter that loads the folder from an offline Hub cache
    (as `hf-hub:` would after the upload), on a real Fashion-MNIST image saved as `image.png`: 1 channel converts
    to 'L', 3 to 'RGB' (it used to convert to 'RGB' always: InputShapeError on a 1-channel model), 2 (no PIL mode)
    feeds a tensor of the model's shape. It prints the classes by name, and its top-1 is the model's."""
    run = fashion_mnist_run(tmp_path / 'run', in_chans=in_chans)
    code, _, err = push(capsys, run / 'last.pth.tar', '--repo-id', 'my-org/fm', '--out-dir', tmp_path / 'out')
    assert code == 0, err
    readme = (tmp_path / 'out' / 'README.md').read_text()
    snippet = _snippet(readme)
    assert "timm.create_model('hf-hub:my-org/fm', pretrained=True)" in snippet
    mode = {1: ".convert('L')", 3: ".convert('RGB')", 2: 'torch.randn(1, 2, 32, 32)'}[in_chans]
    assert mode in snippet
    cache = tmp_path / 'hub'
    install_in_hf_cache(tmp_path / 'out', cache, 'my-org/fm')
    work = tmp_path / 'work'
    work.mkdir()
    _fashion_mnist_image(work / 'image.png')
    proc = run_python(snippet, cwd=str(work), env_extra=dict(HF_HUB_OFFLINE='1', HF_HUB_CACHE=str(cache),
                                                             HF_HOME=str(tmp_path / 'hf_home')))
    printed = eval(proc.stdout.strip().splitlines()[-1])  # [(name, probability), …], top-5
    assert len(printed) == 5 and all(name in FASHION_MNIST_CLASSES for name, _ in printed)
    assert all(a[1] >= b[1] for a, b in zip(printed, printed[1:])) and 0 < sum(p for _, p in printed) <= 1.001
    if in_chans == 1:  # the top-1 is the model's own on the image as timm's eval transform prepares it
        from PIL import Image
        model = timm.create_model(f'local-dir:{tmp_path / "out"}', pretrained=True).eval()
        transform = timm.data.create_transform(**timm.data.resolve_model_data_config(model), is_training=False)
        with torch.no_grad():
            top1 = int(model(transform(Image.open(work / 'image.png')).unsqueeze(0)).argmax())
        assert printed[0][0] == FASHION_MNIST_CLASSES[top1]
    says_flag = f'`--in-chans {in_chans}`' in readme
    assert says_flag == (in_chans != 3)  # the card says the flag timm's scripts need, for a model that needs it


def test_fashion_mnist_class_names_reach_config_json_and_transformers(tmp_path, capsys):
    """A run on torch/fashion_mnist (its data need not be on this machine): config.json's label_names are the ten
    classes in label order, transformers' id2label shows them (it showed LABEL_0 … LABEL_9), and the card lists them."""
    run = fashion_mnist_run(tmp_path / 'run')
    code, _, err = push(capsys, run / 'last.pth.tar', '--out-dir', tmp_path / 'out')
    assert code == 0 and 'label_names not written' not in err, err
    want = ['T-shirt/top', 'Trouser', 'Pullover', 'Dress', 'Coat', 'Sandal', 'Shirt', 'Sneaker', 'Bag', 'Ankle boot']
    assert json.loads((tmp_path / 'out' / 'config.json').read_text())['label_names'] == want
    from transformers import AutoModelForImageClassification
    wrapped = AutoModelForImageClassification.from_pretrained(str(tmp_path / 'out'))
    assert wrapped.config.id2label == dict(enumerate(want))
    assert timm.create_model(f'local-dir:{tmp_path / "out"}').pretrained_cfg['label_names'] == want
    assert '- **Classes:** 0: T-shirt/top, 1: Trouser, 2: Pullover' in (tmp_path / 'out' / 'README.md').read_text()


def test_another_torchvision_dataset_names_its_classes_only_where_its_data_are(tmp_path):
    from timm_pkmixer.publish.hub import label_names_of_run
    names, note = label_names_of_run(dict(dataset='torch/cifar10', data_dir=str(tmp_path / 'none')), 10)
    assert names is None and note.startswith(f'label_names not written: torch/cifar10: its class names could not be '
                                             f'read from {tmp_path / "none"} (')
    assert label_names_of_run(dict(dataset='torch/fashion_mnist'), 10) == (list(FASHION_MNIST_CLASSES), '')
    assert label_names_of_run(dict(dataset='torch/fashion_mnist'), 7) == (
        None, 'label_names not written: torch/fashion_mnist has 10 classes, the model 7 outputs')


def test_a_channel_mismatch_names_the_flag_of_timms_scripts():
    """What timm's validate.py hits on a pushed 1-channel model without --in-chans (it builds 3 channels, the
    data config gives 1-channel images): the error says the flag."""
    model = timm.create_model(NAME, num_blocks=1, in_chans=3)
    with pytest.raises(InputShapeError, match=r"Input channels \(1\) don't match model \(3\).*pass --in-chans 1 to "
                                              r"build it for 1-channel images"):
        model(torch.randn(2, 1, 32, 32))
