"""Hugging Face Hub: `pkmixer push` (dry run and upload), loading back through `local-dir:` and `hf-hub:` in fresh
interpreters, timm's Mixer weights through our pretrained tags, refused checkpoints. Offline: the Hub is
replaced by a local cache (HF_HUB_OFFLINE=1) and the upload by a stand-in for its two network calls."""
import argparse
import json
import math
import os
import pathlib
import re
from pathlib import Path

import pytest
import timm
import torch
import yaml
from huggingface_hub import HfApi, RepoUrl
from safetensors.torch import load_file, save_file
from timm.models import get_pretrained_cfg, load_checkpoint, save_for_hf

from timm_pkmixer.catalog import summarize
from timm_pkmixer.cli import main as pkmixer
from timm_pkmixer.errors import CheckpointError, CheckpointMismatchError

from conftest import RP, command_messages, randomize_, run_python
from hf_cache import install_in_hf_cache

RP_NAME = 's_mixer_rp_s64c64_32'
REPO = 'my-org/rp-s-mixer'
# (model, --model-kwargs) of one small model per family, pushed from plain state dicts
FAMILIES = {
    'pk': ('pk_mixer_s16_224', dict(num_blocks=2, embed_dim=64)),
    'rp': ('rp_mixer_ss8_32', dict(embed_dim=32, perm_seed=5, num_classes=7)),
    's': ('s_mixer_s64c64_32', dict(num_blocks=2)),
    'sw': ('sw_mlp_o18_32', dict(width=128, density=0.3, mask_seed=2, num_blocks=2)),
}


def _kwargs_argv(kwargs):
    return ['--model-kwargs', *(f'{k}={v}' for k, v in kwargs.items())] if kwargs else []


@pytest.fixture(scope='module')
def run_dir(tmp_path_factory):
    """A timm train.py run of an RP S-Mixer with perm_seed=7, 4 classes and EMA, written by timm's own
    CheckpointSaver (model_best.pth.tar = epoch 1, last.pth.tar = epoch 2), update_summary and args.yaml."""
    from timm.utils import CheckpointSaver, ModelEmaV3, update_summary
    out = tmp_path_factory.mktemp('run')
    args = argparse.Namespace(
        model=RP_NAME, num_classes=4, in_chans=None, input_size=None, gp=None, model_kwargs={'perm_seed': 7},
        dataset='', val_split='validation', epochs=3, batch_size=16, opt='adamw', lr=1e-3, weight_decay=0.05,
        sched='cosine', smoothing=0.1, model_ema=True, model_ema_force_cpu=False, mean=None, std=None,
        crop_pct=None, interpolation='', img_size=None, seed=42, drop_path=0.1)
    model = randomize_(timm.create_model(RP_NAME, num_classes=4, drop_path_rate=0.1, perm_seed=7), std=0.05)
    ema = ModelEmaV3(model, decay=0.5)
    saver = CheckpointSaver(model, torch.optim.AdamW(model.parameters()), args=args, model_ema=ema,
                            checkpoint_dir=str(out), recovery_dir=str(out), max_history=1)
    (out / 'args.yaml').write_text(yaml.safe_dump(args.__dict__, default_flow_style=False))
    for epoch, top1 in enumerate([40.0, 55.5, 52.25]):
        randomize_(model, std=0.01)
        ema.update(model)
        update_summary(epoch, {'loss': 1.0}, {'loss': 0.9, 'top1': top1, 'top5': 100.0},
                       filename=str(out / 'summary.csv'), lr=1e-3, write_header=epoch == 0)
        saver.save_checkpoint(epoch, metric=top1)
    return out


def _reference(run_dir, name='model_best.pth.tar', key='state_dict_ema'):
    """The run's weights, read without our code."""
    model = timm.create_model(RP_NAME, num_classes=4, perm_seed=7).eval()
    model.load_state_dict(torch.load(run_dir / name, weights_only=False)[key])
    return model


@pytest.fixture(scope='module')
def pushed(run_dir, tmp_path_factory):
    """Dry runs: the RP run (EMA weights of model_best), and one small model of every family."""
    root = tmp_path_factory.mktemp('pushed')
    folders, models = {}, {}
    assert pkmixer(['push', str(run_dir / 'model_best.pth.tar'), '--model', RP_NAME, '--repo-id', REPO,
                    '--use-ema', '--out-dir', str(root / 'rp_s')]) == 0
    folders['rp_s'], models['rp_s'] = root / 'rp_s', _reference(run_dir)
    for key, (name, kwargs) in FAMILIES.items():
        model = randomize_(timm.create_model(name, **kwargs)).eval()
        path = root / f'{key}.pth'
        torch.save(model.state_dict(), path)  # a plain state dict (read with weights_only=True)
        extra = ['--dataset', 'imagenet-1k'] if key == 'pk' else []
        assert pkmixer(['push', str(path), '--model', name, '--repo-id', f'my-org/{key}', '--out-dir',
                        str(root / key), *_kwargs_argv(kwargs), *extra]) == 0
        folders[key], models[key] = root / key, model
    return folders, models


def test_dry_run_writes_exactly_the_hub_files(pushed, run_dir):
    folder = pushed[0]['rp_s']
    assert sorted(os.listdir(folder)) == ['README.md', 'config.json', 'model.safetensors', 'train_hparams.yaml']
    weights = load_file(str(folder / 'model.safetensors'))
    ref = _reference(run_dir).state_dict()
    assert weights.keys() == ref.keys() and all(torch.equal(weights[k], ref[k]) for k in ref)
    assert (folder / 'train_hparams.yaml').read_bytes() == (run_dir / 'args.yaml').read_bytes()

    cfg = json.loads((folder / 'config.json').read_text())
    assert cfg['architecture'] == RP_NAME and cfg['num_classes'] == 4
    # every override and the permutation seed; no training-only argument (drop_path)
    assert cfg['model_args']['perm_seed'] == 7 and 'num_classes' not in cfg['model_args']  # once, at the root
    assert not any('drop' in k for k in cfg['model_args'])
    pc = cfg['pretrained_cfg']
    assert pc['input_size'] == [3, 32, 32] and pc['mean'] == pc['std'] == [0.5, 0.5, 0.5] and pc['crop_pct'] == 1.0
    assert pc['num_classes'] == 4 and pc['paper_ids'] == 'arXiv:2306.01470' and pc['license'] == 'apache-2.0'
    assert not {'hf_hub_id', 'url', 'file', 'tag'} & pc.keys()


def test_model_card(pushed):
    card = (pushed[0]['rp_s'] / 'README.md').read_text()
    header = card.split('---\n')[1].splitlines()
    assert header == ['tags:', '- image-classification', '- timm', '- timm-pkmixer', '- rp-s-mixer',
                      '- arxiv:2306.01470', 'pipeline_tag: image-classification', 'library_name: timm',
                      'license: apache-2.0']
    s = summarize(RP_NAME, num_classes=4, perm_seed=7)
    for line in ('# Model card for rp-s-mixer', f'  - Params (M): {s.params / 1e6:.2f}', f'  - GMACs: {s.gmacs:.3f}',
                 '  - Image size: 32 x 32', '  - permutation seed: 7', '  - top-1 (%): 55.50', '  - top-5 (%): 100.00',
                 '  - epochs: 3', '  - opt: adamw', '# timm-pkmixer registers the PK-family architectures in timm. '
                 'It is not on PyPI: install it from its source,', 'pip install .\n',
                 'The architecture comes from timm-pkmixer (installed from its source, not PyPI: see Usage)',
                 f"model = timm.create_model('hf-hub:{REPO}', pretrained=True).eval()",
                 '  - Understanding MLP-Mixer as a Wide and Sparse MLP: https://arxiv.org/abs/2306.01470',
                 '```bibtex\n@inproceedings{hayase2024understanding,'):
        assert line in card, line
    assert 'pypi.org' not in card and 'pip install timm-pkmixer' not in card  # no such package on PyPI
    assert 'evaluated: epoch 2 (counted from 1), `validation` split, EMA weights as pushed' in card  # train.py's 1
    assert 'datasets:\n- imagenet-1k\n' in (pushed[0]['pk'] / 'README.md').read_text()  # --dataset
    assert 'datasets:' not in card  # an ImageFolder run names no dataset
    # the usage snippet's top-k never exceeds the classes (4 here; the 1000-class model keeps top-5)
    assert '.softmax(-1).topk(4)' in card and 'topk(5)' not in card
    assert '.softmax(-1).topk(5)' in (pushed[0]['pk'] / 'README.md').read_text()


def test_metrics_only_when_they_describe_the_pushed_weights(run_dir, tmp_path, capsys):
    # last.pth.tar is epoch 2; the run evaluated its EMA weights, so the non-EMA weights get no numbers
    assert pkmixer(['push', str(run_dir / 'last.pth.tar'), '--model', RP_NAME, '--repo-id', REPO,
                    '--out-dir', str(tmp_path / 'a')]) == 0
    assert '**Results:**' not in (tmp_path / 'a' / 'README.md').read_text()
    assert "holds the EMA weights' accuracy (pass --use-ema" in capsys.readouterr().err
    assert pkmixer(['push', str(run_dir / 'last.pth.tar'), '--model', RP_NAME, '--repo-id', REPO, '--use-ema',
                    '--out-dir', str(tmp_path / 'b')]) == 0
    assert '  - top-1 (%): 52.25' in (tmp_path / 'b' / 'README.md').read_text()
    weights = load_file(str(tmp_path / 'a' / 'model.safetensors'))
    ref = _reference(run_dir, 'last.pth.tar', 'state_dict').state_dict()
    assert all(torch.equal(weights[k], ref[k]) for k in ref)


def _load_in_fresh_interpreter(names, inputs, tmp_path, env):
    """Create each `names[key]` with pretrained=True in a new interpreter that only imports timm."""
    x_path, y_path = tmp_path / 'x.safetensors', tmp_path / 'y.safetensors'
    save_file(inputs, str(x_path))
    code = f'''
import sys, timm, torch
from safetensors.torch import load_file, save_file
x, out = load_file(r"{x_path}"), {{}}
for key, name in {names!r}.items():
    model = timm.create_model(name, pretrained=True).eval()
    assert model.pretrained_cfg.get("source") == (name.split(":")[0] if ":" in name else None), name
    with torch.no_grad():
        out[key] = model(x[key])
save_file(out, r"{y_path}")
'''
    run_python(code, env_extra=dict(env, TIMM_PKMIXER_AUTOLOAD='1'))
    return load_file(str(y_path))


def _inputs(models):
    gen = torch.Generator().manual_seed(0)
    return {k: torch.randn(2, 3, *m.pretrained_cfg['input_size'][1:], generator=gen) for k, m in models.items()}


def _check_logits(models, inputs, got):
    with torch.no_grad():
        for key, model in models.items():
            want = model(inputs[key])
            assert want.std() > 1e-3 and torch.equal(got[key], want), key


def test_every_family_loads_back_through_local_dir(pushed, tmp_path):
    folders, models = pushed
    inputs = _inputs(models)
    got = _load_in_fresh_interpreter({k: f'local-dir:{f}' for k, f in folders.items()}, inputs, tmp_path, {})
    _check_logits(models, inputs, got)


def test_every_family_loads_back_through_hf_hub_cache(pushed, tmp_path):
    folders, models = pushed
    cache = tmp_path / 'hub'
    for key, folder in folders.items():
        install_in_hf_cache(folder, cache, f'my-org/{key}')
    inputs = _inputs(models)
    env = dict(HF_HUB_OFFLINE='1', HF_HUB_CACHE=str(cache), HF_HOME=str(tmp_path / 'hf_home'))
    got = _load_in_fresh_interpreter({k: f'hf-hub:my-org/{k}' for k in folders}, inputs, tmp_path, env)
    _check_logits(models, inputs, got)


def test_upload_sends_exactly_the_dry_run_files(pushed, run_dir, monkeypatch, capsys):
    """Everything real down to the two network calls of huggingface_hub (create the repo, upload the folder)."""
    calls = {}

    def create_repo(self, repo_id, *, private=None, exist_ok=False, **kwargs):
        calls['create_repo'] = dict(repo_id=repo_id, private=private, exist_ok=exist_ok)
        return RepoUrl(f'https://huggingface.co/{repo_id}')

    def upload_folder(self, *, repo_id, folder_path, commit_message=None, **kwargs):
        files = {p.name: p.read_bytes() for p in Path(folder_path).iterdir()}
        calls['upload_folder'] = dict(repo_id=repo_id, files=files, commit_message=commit_message)

    monkeypatch.setattr(HfApi, 'create_repo', create_repo)
    monkeypatch.setattr(HfApi, 'upload_folder', upload_folder)
    assert pkmixer(['push', str(run_dir / 'model_best.pth.tar'), '--model', RP_NAME, '--repo-id', REPO,
                    '--use-ema', '--private']) == 0
    assert calls['create_repo'] == dict(repo_id=REPO, private=True, exist_ok=True)
    dry_run = pushed[0]['rp_s']
    assert calls['upload_folder']['repo_id'] == REPO and calls['upload_folder']['commit_message'] == 'Add model'
    assert calls['upload_folder']['files'] == {p.name: p.read_bytes() for p in dry_run.iterdir()}
    assert capsys.readouterr().out.splitlines()[-1] == f'uploaded to https://huggingface.co/{REPO}'

    def refused(self, repo_id, **kwargs):
        raise PermissionError('401 Unauthorized: no token')

    monkeypatch.setattr(HfApi, 'create_repo', refused)
    assert pkmixer(['push', str(run_dir / 'model_best.pth.tar'), '--model', RP_NAME, '--repo-id', REPO,
                    '--use-ema']) == 1
    assert capsys.readouterr().err.splitlines()[-2:] == [  # after the progress lines, the one failure
        f'uploading to {REPO}', f'pkmixer push: upload to {REPO} failed: PermissionError: 401 Unauthorized: no token']


@pytest.mark.parametrize('argv, message', [
    (['--model-kwargs', 'perm_seed=3'], '32 of 32 permutation digests .* differ from those of perm_seed=3'),
    (['--model-kwargs', 'embed_dim=32'], r'does not fit s_mixer_rp_s64c64_32 \(S=64, C=32, L=8\): 55 shape '
                                         r'mismatches .* The checkpoint has S=64, C=64, L=8'),
    (['--model', 's_mixer_s64c64_32'], "was trained as 's_mixer_rp_s64c64_32' .*, not 's_mixer_s64c64_32'"),
    (['--repo-id', 'no-org'], '--repo-id must be ORG/NAME'),
    (['--model', 'mixer_b16_224'], "'mixer_b16_224' is not a timm-pkmixer architecture"),
])
def test_push_refuses(run_dir, tmp_path, capsys, argv, message):
    base = {'--model': RP_NAME, '--repo-id': REPO, '--out-dir': str(tmp_path / 'out')}
    opts = dict(zip(argv[::2], argv[1::2]))
    argv = [a for k, v in {**base, **opts}.items() for a in (k, v)]
    assert pkmixer(['push', str(run_dir / 'last.pth.tar'), *argv]) == 2
    err = command_messages(capsys.readouterr().err)
    assert err.startswith('pkmixer push: error: ') and re.search(message, err), err
    assert not (tmp_path / 'out').exists()


def test_push_refuses_unsafe_or_wrong_files(tmp_path, capsys):
    model = timm.create_model('sw_mlp_o18_32', width=64, num_blocks=1)
    cases = []
    torch.save({'state_dict': model.state_dict(), 'path': pathlib.PurePosixPath('x')}, tmp_path / 'pickle.pth')
    cases.append((['pickle.pth'], 'refusing to unpickle it'))
    save_file(model.state_dict(), str(tmp_path / 'w.safetensors'))
    cases.append((['w.safetensors', '--use-ema'], 'holds no EMA weights'))
    cases.append((['w.safetensors', '--model-kwargs', 'width=64', 'num_blocks=1', 'mask_seed=1'],
                  'masks .* differ from those of mask_seed=1'))
    cases.append((['w.safetensors', '--model-kwargs', 'width=80', 'num_blocks=1'],
                  r'does not fit sw_mlp_o18_32 \(m=80, L=1\)'))
    (tmp_path / 'full').mkdir()
    (tmp_path / 'full' / 'x').write_text('')
    cases.append((['w.safetensors', '--model-kwargs', 'width=64', 'num_blocks=1', '--out-dir', str(tmp_path / 'full')],
                  'is not empty'))
    for argv, message in cases:
        out = [] if '--out-dir' in argv else ['--out-dir', str(tmp_path / 'out')]
        assert pkmixer(['push', str(tmp_path / argv[0]), '--model', 'sw_mlp_o18_32', '--repo-id', 'a/b',
                        *argv[1:], *out]) == 2, argv
        err = capsys.readouterr().err
        assert re.search(message, err), (argv, err)
    assert pkmixer(['push', str(tmp_path / 'w.safetensors'), '--model', 'sw_mlp_o18_32', '--repo-id', 'a/b',
                    '--model-kwargs', 'width=64', 'num_blocks=1', '--out-dir', str(tmp_path / 'ok')]) == 0
    cfg = json.loads((tmp_path / 'ok' / 'config.json').read_text())
    assert cfg['num_classes'] == 10 and cfg['model_args']['mask_seed'] == 0  # num_classes read from the head


def test_refused_by_timm_loading(tmp_path):
    """pretrained=True through our checkpoint filters: another S/C/L, another architecture, another width."""
    def load(name, sd, **kwargs):
        path = tmp_path / 'w.safetensors'
        save_file(sd, str(path))
        return timm.create_model(name, pretrained=True, pretrained_cfg_overlay=dict(file=str(path)), **kwargs)

    s64 = randomize_(timm.create_model('s_mixer_s64c64_32')).state_dict()
    with pytest.raises(ValueError, match=r'does not fit s_mixer_s128c128_32 \(S=128, C=128, L=8\): .*'
                                         r'The checkpoint has S=64, C=64, L=8'):
        load('s_mixer_s128c128_32', s64)
    with pytest.raises(ValueError, match=r'does not fit pk_mixer_ss8_32 .*keys missing from the checkpoint'):
        load('pk_mixer_ss8_32', timm.create_model('sw_mlp_o18_32', width=64).state_dict())
    with pytest.raises(ValueError, match=r'does not fit sw_mlp_o18_32 \(m=100, L=8\): .*shape mismatches'):
        load('sw_mlp_o18_32', timm.create_model('sw_mlp_o18_32', width=64).state_dict(), width=100)
    # the classifier and the input channels may differ: timm adapts them
    model = load('s_mixer_s64c64_32', s64, num_classes=3, in_chans=1)
    assert model.head.out_features == 3 and model.stem.proj.weight.shape[1] == 1
    assert torch.equal(model.blocks[3].mlp_tokens.fc1.weight, s64['blocks.3.mlp_tokens.fc1.weight'])


TIMM_TAGS = {
    'mixer_b16_224': ['goog_in21k_ft_in1k', 'goog_in21k', 'miil_in21k', 'miil_in21k_ft_in1k'],
    'mixer_l16_224': ['goog_in21k_ft_in1k', 'goog_in21k'],
}


def test_pretrained_tags_mirror_timms_mixer_weights():
    from timm.models._builder import _resolve_pretrained_source
    for arch, tags in TIMM_TAGS.items():
        assert sorted(timm.list_pretrained(f'{arch}.*')) == sorted(f'{arch}.{t}' for t in tags)
        assert sorted(timm.list_pretrained(f'pk_{arch}.*')) == sorted(f'pk_{arch}.{t}' for t in tags)
        # the default tag is timm's
        assert timm.create_model(f'pk_{arch}', device='meta').pretrained_cfg['tag'] == tags[0]
        for tag in tags:
            ours = get_pretrained_cfg(f'pk_{arch}.{tag}').to_dict()
            theirs = get_pretrained_cfg(f'{arch}.{tag}').to_dict()
            assert _resolve_pretrained_source(ours) == ('hf-hub', (f'timm/{arch}.{tag}', 'model.safetensors'))
            for key in ('num_classes', 'input_size', 'mean', 'std', 'crop_pct', 'interpolation', 'fixed_input_size',
                        'first_conv', 'classifier', 'license'):
                assert ours[key] == theirs[key], (tag, key)
    cfg = get_pretrained_cfg('pk_mixer_b16_224.miil_in21k').to_dict()
    assert cfg['num_classes'] == 11221 and cfg['mean'] == (0., 0., 0.) and cfg['interpolation'] == 'bilinear'
    assert get_pretrained_cfg('pk_mixer_l16_224.goog_in21k').num_classes == 21843
    for name in ('rp_mixer_b16_224', 'rp_mixer_b_w', 's_mixer_rp_s64c64_32', 'sw_mlp_o18_32', 'pk_mixer_s16_224'):
        assert not timm.list_pretrained(f'{name}*')  # no weights exist: no repository is pointed at
        assert summarize(name).row()['weights'] == 'none'
        with pytest.raises(RuntimeError, match='No pretrained weights exist'):
            timm.create_model(name, pretrained=True, device='meta')
    assert summarize('pk_mixer_b16_224').row()['weights'] == '4 tags'
    assert summarize('pk_mixer_l16_224').row()['weights'] == '2 tags'


@pytest.mark.slow  # Mixer-B/16 (the model with timm's Hub weights) in a fresh interpreter: 26 s here
def test_timm_hub_weights_load_into_pk_mixer_b16(tmp_path):
    """A locally written copy of timm/mixer_b16_224.goog_in21k_ft_in1k (timm's own save_for_hf format) in an
    offline Hub cache: `pk_mixer_b16_224` with pretrained=True (its default tag) gives timm's logits."""
    repo = 'timm/mixer_b16_224.goog_in21k_ft_in1k'
    ref = randomize_(timm.create_model('mixer_b16_224')).eval()
    save_for_hf(ref, str(tmp_path / 'repo'), safe_serialization=True)
    install_in_hf_cache(tmp_path / 'repo', tmp_path / 'hub', repo, move=True)
    x = torch.randn(2, 3, 224, 224, generator=torch.Generator().manual_seed(0))
    env = dict(HF_HUB_OFFLINE='1', HF_HUB_CACHE=str(tmp_path / 'hub'), HF_HOME=str(tmp_path / 'hf_home'))
    got = _load_in_fresh_interpreter({'pk': 'pk_mixer_b16_224', 'timm': f'hf-hub:{repo}'},
                                     {'pk': x, 'timm': x.clone()}, tmp_path, env)
    with torch.no_grad():
        want = ref(x)
    assert want.std() > 1e-3 and torch.equal(got['pk'], got['timm'])
    torch.testing.assert_close(got['pk'], want, rtol=0, atol=1e-5)


# ------------------------------------------------------------------ digests, run arguments, the library's terms

def _push(path, name, tmp_path, *extra):
    return pkmixer(['push', str(path), '--model', name, '--repo-id', 'a/b', '--out-dir', str(tmp_path / 'out'),
                    *extra])


@pytest.mark.parametrize('name, kwargs, dtype, message', [
    ('s_mixer_rp_s64c64_32', dict(num_blocks=2), torch.float16,
     r'8 permutation digests were cast to torch\.float16 \(first: blocks\.0\.mlp_tokens\.perm_in\.digest\)'),
    ('rp_mixer_ss8_32', dict(embed_dim=32), torch.bfloat16,
     r'8 permutation digests were cast to torch\.bfloat16 \(first: blocks\.0\.mlp_tokens\.perm_in\.digest\)'),
    ('sw_mlp_o18_32', dict(width=64, num_blocks=1), torch.float16,
     r'2 mask digests were cast to torch\.float16 \(first: in_proj\.mask_digest\)'),
])
def test_push_says_digests_were_cast_not_that_the_run_diverged(tmp_path, capsys, name, kwargs, dtype, message):
    model = randomize_(timm.create_model(name, **kwargs))
    save_file({k: v.to(dtype) for k, v in model.state_dict().items()}, str(tmp_path / 'cast.safetensors'))
    assert _push(tmp_path / 'cast.safetensors', name, tmp_path, *_kwargs_argv(kwargs)) == 2
    err = command_messages(capsys.readouterr().err)
    assert err.startswith('pkmixer push: error: ') and re.search(message, err), err
    assert 'not a weight' in err and 'NaN' not in err and 'diverge' not in err
    # cast as model.half() casts (floating-point weights only): pushed, the digests intact
    save_file(model.half().state_dict(), str(tmp_path / 'half.safetensors'))
    assert _push(tmp_path / 'half.safetensors', name, tmp_path, *_kwargs_argv(kwargs)) == 0


@pytest.mark.parametrize('text, message', [
    ('model: x\nlr: !!python/object/apply:os.system ["touch {marker}"]\n', 'ConstructorError'),
    ('!!python/name:os.system\n', 'ConstructorError'),
    ('model: [unclosed\n', 'ParserError'),
    ('- a list\n- of things\n', 'holds a YAML list, not the mapping of arguments train.py writes'),
])
def test_push_refuses_an_args_yaml_it_cannot_read_safely(tmp_path, capsys, text, message):
    marker = tmp_path / 'executed'
    model = randomize_(timm.create_model('s_mixer_rp_s64c64_32', num_blocks=2))
    save_file(model.state_dict(), str(tmp_path / 'w.safetensors'))
    (tmp_path / 'args.yaml').write_text(text.format(marker=marker))
    assert _push(tmp_path / 'w.safetensors', 's_mixer_rp_s64c64_32', tmp_path, '--model-kwargs', 'num_blocks=2') == 2
    err = command_messages(capsys.readouterr().err)
    assert err.startswith(f'pkmixer push: error: {tmp_path / "args.yaml"}: ') and message in err, err
    assert 'Traceback' not in err and not marker.exists() and not (tmp_path / 'out').exists()


def test_a_train_py_checkpoint_with_an_unsafe_args_yaml_beside_it_is_not_published(run_dir, tmp_path, capsys):
    """The checkpoint carries its own arguments; the args.yaml beside it is still not copied unread."""
    import shutil
    shutil.copyfile(run_dir / 'last.pth.tar', tmp_path / 'last.pth.tar')
    (tmp_path / 'args.yaml').write_text('lr: !!python/object/apply:os.getcwd []\n')
    assert _push(tmp_path / 'last.pth.tar', RP_NAME, tmp_path) == 2
    assert 'args.yaml: not a train.py args.yaml that can be read safely' in capsys.readouterr().err
    assert not (tmp_path / 'out').exists()


def test_the_library_speaks_in_arguments_the_command_in_flags(tmp_path, capsys):
    from timm_pkmixer.errors import CheckpointError, InvalidArgumentError
    from timm_pkmixer.publish.checkpoint_file import read_checkpoint
    from timm_pkmixer.publish.hub import check_repo_id, write_hub_folder
    model = timm.create_model('sw_mlp_o18_32', width=64, num_blocks=1)
    save_file(model.state_dict(), str(tmp_path / 'w.safetensors'))
    (tmp_path / 'file').write_text('')
    with pytest.raises(InvalidArgumentError, match=r"^repo_id must be ORG/NAME, got 'no-org'$"):
        check_repo_id('no-org')
    with pytest.raises(CheckpointError, match=r'^use_ema: .*w\.safetensors holds no EMA weights'):
        read_checkpoint(str(tmp_path / 'w.safetensors'), use_ema=True)
    ckpt = read_checkpoint(str(tmp_path / 'w.safetensors'))
    with pytest.raises(InvalidArgumentError, match=r'^out_dir .*file is a file'):
        write_hub_folder(model, ckpt, str(tmp_path / 'file'), 'a/b')
    for argv, message in ((['--use-ema'], 'pkmixer push: error: --use-ema: '),
                          (['--out-dir', str(tmp_path / 'file')], f'pkmixer push: error: --out-dir {tmp_path / "file"} '
                                                                   f'is a file'),
                          (['--repo-id', 'no-org'], "pkmixer push: error: --repo-id must be ORG/NAME, got 'no-org'")):
        opts = {'--repo-id': 'a/b', '--out-dir': str(tmp_path / 'out'), **dict(zip(argv[::2], argv[1::2] or ['']))}
        flags = [a for k, v in opts.items() for a in ((k, v) if v else (k,))]
        assert pkmixer(['push', str(tmp_path / 'w.safetensors'), '--model', 'sw_mlp_o18_32', '--model-kwargs',
                        'width=64', 'num_blocks=1', *flags]) == 2
        assert command_messages(capsys.readouterr().err).startswith(message), argv


def test_writing_the_folder_leaves_the_model_as_it_was(tmp_path):
    from timm_pkmixer.publish.checkpoint_file import build_validated_model, read_checkpoint
    from timm_pkmixer.publish.hub import write_hub_folder
    model = randomize_(timm.create_model(RP_NAME, num_blocks=2, num_classes=3))
    save_file(model.state_dict(), str(tmp_path / 'w.safetensors'))
    ckpt = read_checkpoint(str(tmp_path / 'w.safetensors'))
    checked, _ = build_validated_model(RP_NAME, ckpt, dict(num_blocks=2))
    cfg, args, state = dict(checked.pretrained_cfg), checked.model_args, dict(checked.state_dict())
    write_hub_folder(checked, ckpt, str(tmp_path / 'out'), 'my-org/x', license='mit')
    assert checked.pretrained_cfg == cfg and checked.pretrained_cfg.get('license') != 'mit'
    assert checked.model_args is args and all(torch.equal(state[k], v) for k, v in checked.state_dict().items())
    exported = json.loads((tmp_path / 'out' / 'config.json').read_text())
    assert exported['pretrained_cfg']['license'] == 'mit'
    assert exported['model_args'] == checked.model_args.to_json(exclude=('drop_rate', 'proj_drop_rate',
                                                                         'drop_path_rate', 'num_classes'))
    assert exported['num_classes'] == 3


# ---------------------------------------------------------------------------------------------- transformers

def _transformers_and_timm_logits(folder, x):
    from transformers import AutoModelForImageClassification
    wrapped = AutoModelForImageClassification.from_pretrained(str(folder)).eval()
    native = timm.create_model(f'local-dir:{folder}', pretrained=True).eval()
    with torch.no_grad():
        return wrapped, wrapped(x).logits, native(x)


def test_transformers_loads_a_written_folder_in_a_fresh_interpreter(pushed, tmp_path):
    """Nothing imports timm_pkmixer: the startup hook registers the models although transformers probes for timm
    (importlib.util.find_spec) before it imports it."""
    folders, models = pushed
    inputs = _inputs({'rp': models['rp']})
    save_file(inputs, str(tmp_path / 'x.safetensors'))
    code = f'''
import torch
from safetensors.torch import load_file, save_file
from transformers import AutoModelForImageClassification
model = AutoModelForImageClassification.from_pretrained(r"{folders['rp']}").eval()
with torch.no_grad():
    save_file({{"rp": model(load_file(r"{tmp_path / 'x.safetensors'}")["rp"]).logits}}, r"{tmp_path / 'y.safetensors'}")
'''
    run_python(code, env_extra=dict(TIMM_PKMIXER_AUTOLOAD='1'))
    _check_logits({'rp': models['rp']}, inputs, load_file(str(tmp_path / 'y.safetensors')))


@pytest.mark.parametrize('key', sorted(FAMILIES))
def test_a_written_folder_loads_through_transformers_with_the_same_logits(key, tmp_path):
    """transformers wraps a timm folder (TimmWrapperForImageClassification) and passes num_classes beside
    config.json's model_args: num_classes is written once, at the root, and the logits are timm's."""
    from timm_pkmixer.publish.checkpoint_file import build_validated_model, read_checkpoint
    from timm_pkmixer.publish.hub import write_hub_folder
    name, kwargs = FAMILIES[key]
    model = randomize_(timm.create_model(name, **kwargs), std=0.05)
    save_file(model.state_dict(), str(tmp_path / 'w.safetensors'))
    ckpt = read_checkpoint(str(tmp_path / 'w.safetensors'))
    checked, _ = build_validated_model(name, ckpt, kwargs)
    write_hub_folder(checked, ckpt, str(tmp_path / 'out'), f'my-org/{key}')
    x = torch.randn(2, 3, *checked.img_size, generator=torch.Generator().manual_seed(0))
    wrapped, got, want = _transformers_and_timm_logits(tmp_path / 'out', x)
    assert type(wrapped).__name__ == 'TimmWrapperForImageClassification'
    assert want.std() > 1e-3 and torch.equal(got, want)
    assert wrapped.config.num_labels == checked.num_classes


def test_an_imagefolder_runs_class_names_are_written_as_label_names(tmp_path):
    """A run on an ImageFolder (args.yaml: no --dataset, data_dir with class folders): config.json's label_names
    are the class folders in timm's order (as train.py indexed them), and transformers shows them."""
    from PIL import Image

    from timm_pkmixer.publish.checkpoint_file import build_validated_model, read_checkpoint
    from timm_pkmixer.publish.hub import write_hub_folder
    classes = ['cat', 'dog', 'class10', 'class9']  # timm's natural order: cat, class9, class10, dog
    for name in classes:
        (tmp_path / 'data' / 'train' / name).mkdir(parents=True)
        Image.new('RGB', (32, 32)).save(tmp_path / 'data' / 'train' / name / 'a.png')
    run = tmp_path / 'run'
    run.mkdir()
    (run / 'args.yaml').write_text(yaml.safe_dump(dict(
        model=RP_NAME, dataset='', data_dir=str(tmp_path / 'data'), train_split='train', num_classes=4,
        model_kwargs={'num_blocks': 2})))
    model = randomize_(timm.create_model(RP_NAME, num_blocks=2, num_classes=4), std=0.05)
    save_file(model.state_dict(), str(run / 'w.safetensors'))
    ckpt = read_checkpoint(str(run / 'w.safetensors'))
    checked, _ = build_validated_model(RP_NAME, ckpt, {})
    folder = write_hub_folder(checked, ckpt, str(tmp_path / 'out'), 'my-org/pets')
    want = ['cat', 'class9', 'class10', 'dog']
    cfg = json.loads((tmp_path / 'out' / 'config.json').read_text())
    assert cfg['label_names'] == want and folder.notes == []
    x = torch.randn(1, 3, 32, 32)
    wrapped, got, native = _transformers_and_timm_logits(tmp_path / 'out', x)
    assert wrapped.config.id2label == dict(enumerate(want)) and torch.equal(got, native)
    assert timm.create_model(f'local-dir:{tmp_path / "out"}').pretrained_cfg['label_names'] == want


def test_label_names_only_where_the_run_read_an_imagefolder_or_a_torchvision_dataset(tmp_path):
    """(torchvision datasets: tests/test_push_reuse.py)"""
    from timm_pkmixer.publish.hub import label_names_of_run
    names, note = label_names_of_run(dict(dataset='torch/cifar10', data_dir=str(tmp_path)), 10)
    assert names is None and note.startswith('label_names not written: torch/cifar10: its class names could not be')
    assert label_names_of_run(dict(dataset='hfds/imagenet-1k'), 1000) == (None, '')
    names, note = label_names_of_run(dict(dataset='', data_dir=str(tmp_path / 'gone')), 10)
    assert names is None and note == f"label_names not written: the run's data_dir {tmp_path / 'gone'} is not a " \
                                     f'folder on this machine'
    for name in ('a', 'b'):
        (tmp_path / 'd' / name).mkdir(parents=True)
        (tmp_path / 'd' / name / 'x.png').write_bytes(b'')
    assert label_names_of_run(dict(dataset='', data_dir=str(tmp_path / 'd')), 2) == (['a', 'b'], '')
    assert label_names_of_run(dict(dataset='', data_dir=str(tmp_path / 'd')), 3) == (
        None, f'label_names not written: {tmp_path / "d"} has 2 classes, the model 3 outputs')


# ---------------------------------------------------------------------------- a config.json that lies about its weights

def _folder_with_config(tmp_path, key, **changes):
    """A written folder of family `key` (seeded: rp perm_seed=5, sw mask_seed=2, num_classes 7 / 10) whose
    config.json then gets `changes` (``num_classes`` at the root, anything else in ``model_args``)."""
    from timm_pkmixer.publish.checkpoint_file import build_validated_model, read_checkpoint
    from timm_pkmixer.publish.hub import write_hub_folder
    name, kwargs = FAMILIES[key]
    model = randomize_(timm.create_model(name, **kwargs), std=0.05)
    save_file(model.state_dict(), str(tmp_path / 'w.safetensors'))
    ckpt = read_checkpoint(str(tmp_path / 'w.safetensors'))
    write_hub_folder(build_validated_model(name, ckpt, kwargs)[0], ckpt, str(tmp_path / 'out'), f'my-org/{key}')
    config = json.loads((tmp_path / 'out' / 'config.json').read_text())
    for arg, value in changes.items():
        (config if arg == 'num_classes' else config['model_args'])[arg] = value
    (tmp_path / 'out' / 'config.json').write_text(json.dumps(config))
    return tmp_path / 'out'


@pytest.mark.parametrize('key,arg,trained,message', [
    ('rp', 'perm_seed', 5, r'made with another permutation seed, perm_seed=5'),
    ('sw', 'mask_seed', 2, r'made with another mask seed, mask_seed=2'),
])
def test_a_config_json_with_another_seed_is_refused_through_transformers(tmp_path, key, arg, trained, message):
    """transformers builds the model from config.json's model_args and assigns the weights itself (not through
    the model's load_state_dict): a seed other than the weights' is refused by name, as timm refuses it."""
    from transformers import AutoModelForImageClassification
    folder = _folder_with_config(tmp_path, key, **{arg: trained + 1})
    with pytest.raises(CheckpointMismatchError, match=message):
        timm.create_model(f'local-dir:{folder}', pretrained=True)
    with pytest.raises(CheckpointMismatchError, match=rf'{arg}={trained + 1}: .*{message}'):
        AutoModelForImageClassification.from_pretrained(str(folder))


@pytest.mark.parametrize('value', [-1, 1.5, 7.0, '7', None, True])
def test_config_json_num_classes_that_is_no_class_count_is_refused_by_name(tmp_path, value):
    """timm passes a negative num_classes on (its model's default, 1000, then drops the trained head) and fails
    on a string inside its own code: the pretrained cfg of a config.json is checked before timm reads it."""
    folder = _folder_with_config(tmp_path, 'rp', num_classes=value)
    want = (rf"^{re.escape(str(folder / 'config.json'))}: num_classes={re.escape(repr(value))} is not a number of "
            rf'classes \(a non-negative integer: the outputs of the trained head, 0 for a model without one\)')
    with pytest.raises(CheckpointError, match=want):
        timm.create_model(f'local-dir:{folder}', pretrained=True)
    with pytest.raises(CheckpointError, match=want):
        timm.create_model(f'local-dir:{folder}')  # the architecture alone would have another head too


@pytest.mark.parametrize('value', [0, 1000])
def test_config_json_num_classes_other_than_the_weights_head_is_refused_by_name(tmp_path, value):
    folder = _folder_with_config(tmp_path, 'rp', num_classes=value)
    with pytest.raises(CheckpointMismatchError, match=rf"^{re.escape(str(folder / 'config.json'))}: num_classes="
                                                      rf'{value} but the weights beside it hold a 7-class head '
                                                      rf'\(\(7, 32\)\).*\(to 7\)\.$'):
        timm.create_model(f'local-dir:{folder}', pretrained=True)
    # asking for another head on purpose (fine-tuning) does not make config.json right: still refused
    with pytest.raises(CheckpointMismatchError, match='hold a 7-class head'):
        timm.create_model(f'local-dir:{folder}', pretrained=True, num_classes=3)


def test_config_json_num_classes_through_the_hub_cache(tmp_path, monkeypatch):
    """The same check on timm's hf-hub: path (offline, from huggingface_hub's cache)."""
    import huggingface_hub.constants
    folder = _folder_with_config(tmp_path, 'rp', num_classes=-1)
    install_in_hf_cache(folder, tmp_path / 'hub', 'my-org/liar')
    monkeypatch.setattr(huggingface_hub.constants, 'HF_HUB_OFFLINE', True)
    with pytest.raises(CheckpointError, match=r'^hf-hub:my-org/liar config\.json: num_classes=-1 is not a number'):
        timm.create_model('hf-hub:my-org/liar', pretrained=True, cache_dir=str(tmp_path / 'hub'))


@pytest.mark.parametrize('value', [-1, 0, 7.0, '7', None])
def test_transformers_refuses_config_json_num_classes_without_a_head_count_itself(tmp_path, value):
    """transformers reads num_classes into num_labels and refuses these before building any model (its own words:
    no classifier head, or a TypeError); none loads."""
    from transformers import AutoModelForImageClassification
    folder = _folder_with_config(tmp_path, 'rp', num_classes=value)
    with pytest.raises((ValueError, TypeError)):
        AutoModelForImageClassification.from_pretrained(str(folder))


# --------------------------------------------------------------------------------- checkpoints refused before a push

@pytest.mark.parametrize('suffix', ['.safetensors', '.pth'])
def test_d_truncated_files_are_refused_naming_the_file(tmp_path, suffix):
    from timm_pkmixer.publish.checkpoint_file import read_checkpoint
    sd = timm.create_model(RP).state_dict()
    path = tmp_path / f'w{suffix}'
    save_file(sd, str(path)) if suffix == '.safetensors' else torch.save(sd, path)
    path.write_bytes(path.read_bytes()[:len(path.read_bytes()) // 2])
    with pytest.raises(CheckpointError, match=f'{path.name}: cannot be read as a checkpoint, it is truncated or '
                                              f'corrupt'):
        read_checkpoint(str(path))
    path.write_bytes(b'not a checkpoint at all')  # identified before it is read: text, not a damaged checkpoint
    with pytest.raises(CheckpointError) as info:
        read_checkpoint(str(path))
    assert str(info.value) == (f"{path} is a text file, not a checkpoint: expected train.py's checkpoint "
                               f"(last.pth.tar or model_best.pth.tar: a torch zip archive), a state dict saved by "
                               f"torch.save, or a .safetensors file")


def test_d_push_refuses_non_finite_weights(tmp_path):
    from timm_pkmixer.publish.checkpoint_file import build_validated_model, read_checkpoint
    sd = timm.create_model(RP).state_dict()
    sd['blocks.3.norm1.weight'] = torch.full_like(sd['blocks.3.norm1.weight'], math.nan)
    save_file(sd, str(tmp_path / 'nan.safetensors'))
    with pytest.raises(CheckpointError, match=r'1 tensors hold NaN or infinite values \(first: '
                                              r'blocks\.3\.norm1\.weight\); refusing to publish them'):
        build_validated_model(RP, read_checkpoint(str(tmp_path / 'nan.safetensors')))


# --------------------------------------------------------------------------------------- timm's loaders on bad files

NAME, KW = 's_mixer_rp_s64c64_32', dict(num_blocks=2, embed_dim=16)


def _files(tmp_path):
    good = timm.create_model(NAME, **KW).state_dict()
    save_file(good, str(tmp_path / 'good.safetensors'))
    torch.save(good, tmp_path / 'good.pth')
    raw_st, raw_pth = (tmp_path / 'good.safetensors').read_bytes(), (tmp_path / 'good.pth').read_bytes()
    files = {
        'empty.safetensors': b'', 'empty.pth': b'',
        'truncated.safetensors': raw_st[:len(raw_st) // 2], 'truncated.pth': raw_pth[:len(raw_pth) // 2],
        'text.pth': b'hello\n', 'text.safetensors': b'hello\n',
    }
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
    save_file({}, str(tmp_path / 'no_tensors.safetensors'))
    torch.save({'foo': torch.zeros(1)}, tmp_path / 'foreign.pth')
    torch.save(timm.create_model(NAME, **dict(KW, num_blocks=3)).state_dict(), tmp_path / 'deeper.pth')
    torch.save(timm.create_model(NAME, **dict(KW, perm_seed=5)).state_dict(), tmp_path / 'seed5.pth')


def _load(loader, path):
    if loader == 'pretrained':
        return timm.create_model(NAME, pretrained=True, pretrained_cfg_overlay=dict(file=str(path)), **KW)
    return load_checkpoint(timm.create_model(NAME, **KW), str(path))


# what timm's reader (timm.models.load_state_dict) raises before any code of this package runs
TIMM_FAILS_FIRST = {
    'empty.safetensors': 'SafetensorError', 'truncated.safetensors': 'SafetensorError',
    'text.safetensors': 'SafetensorError', 'empty.pth': 'EOFError', 'truncated.pth': 'OSError',
    'text.pth': 'KeyError',
}


@pytest.mark.parametrize('loader', ['pretrained', 'load_checkpoint'])
def test_e_timm_loaders_on_bad_files(tmp_path, loader):
    _files(tmp_path)
    for name, raw in TIMM_FAILS_FIRST.items():  # documented: timm's own reader fails, our code is not reached
        with pytest.raises(Exception) as info:
            _load(loader, tmp_path / name)
        assert type(info.value).__name__ == raw, (name, info.value)
    ours = {
        'no_tensors.safetensors': 'the checkpoint holds no tensors at all',
        'foreign.pth': r'unexpected keys \(foo\)',
        'deeper.pth': 'the checkpoint has 3 blocks, the model 2',
        'seed5.pth': 'made with another permutation seed, perm_seed=5',
    }
    for name, fault in ours.items():
        with pytest.raises(CheckpointMismatchError, match=fault) as info:
            _load(loader, tmp_path / name)
        # timm's pretrained path names the file; load_checkpoint hands load_state_dict the tensors alone
        assert str(info.value).startswith(f'{tmp_path / name}: ') == (loader == 'pretrained'), str(info.value)


def test_train_hparams_publish_no_path_of_the_machine_that_trained(pushed, run_dir, tmp_path):
    """A push publishes args.yaml less the machine's paths (data_dir, output, resume, initial_checkpoint): each
    becomes '' (a value continued on indented lines too); every other line is args.yaml's own."""
    from timm_pkmixer.publish.hub import without_machine_paths
    args = yaml.safe_load((run_dir / 'args.yaml').read_text())
    long_dir = '/home/alice/' + ' '.join(['a folder name with spaces'] * 4)  # YAML folds it onto a second line
    args.update(data_dir=long_dir, output='/scratch/alice/runs', resume='/scratch/alice/runs/x/last.pth.tar',
                initial_checkpoint='', dataset='torch/fashion_mnist')
    text = yaml.safe_dump(args, default_flow_style=False)
    assert '\n  ' in text  # the long path is continued on an indented line
    published = without_machine_paths(text)
    assert '/home/alice' not in published and '/scratch' not in published
    assert yaml.safe_load(published) == {**args, 'data_dir': '', 'output': '', 'resume': ''}
    expected, skipping = [], False
    for line in text.splitlines():  # a path key's line and the indented lines that continue it, blanked
        if line.startswith(('data_dir:', 'output:', 'resume:')):
            expected.append(line.split(':')[0] + ": ''")
            skipping = True
        elif not (skipping and line.startswith(' ')):
            expected.append(line)
            skipping = False
    assert published.splitlines() == expected
