"""Recipes: every key is a train.py argument, the ImageNet values are Appendix C.5, the sweeps are the paper's;
batch planning refuses an impossible batch."""
import argparse
import functools
import itertools
import math
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Tuple

import pytest
import timm
import yaml

from timm_pkmixer.catalog import summarize
from timm_pkmixer.errors import InvalidArgumentError
from timm_pkmixer.sweeps.recipes import (
    RecipeComments,
    RecipeError,
    check_recipe_keys,
    comment_line,
    list_recipes,
    load_recipe,
    parse_recipe_comments,
    read_recipe_comments,
    resolve_batch_and_lr,
)
from timm_pkmixer.sweeps.sweep_plan import experiment_points
from timm_pkmixer.sweeps.sweep_tables import CIFAR_SWEEP_PAIRS, IMAGENET_SWEEP_OMEGA
from timm_pkmixer.sweeps.sweep_write import write_sweep
from timm_pkmixer.width import mixer_omega, tokens_for_omega

ROOT = Path(__file__).resolve().parent.parent
RECIPES = ROOT / 'train_recipes'
ALL_RECIPES = sorted(RECIPES.glob('*/*.yaml'))
IMAGENET = sorted((RECIPES / 'imagenet').glob('*.yaml'))


def train_py_dests() -> set:
    lines = (RECIPES / 'train_py_args.txt').read_text().splitlines()
    return {line.split(':', 1)[0] for line in lines if line and not line.startswith('#')}


def test_train_py_args_file_lists_known_arguments():
    dests = train_py_dests()
    assert len(dests) > 150
    assert {'batch_size', 'grad_accum_steps', 'lr_base', 'model_kwargs', 'device_modules', 'mixup_switch_prob',
            'aa', 'reprob', 'warmup_lr', 'dataset_download', 'train_crop_mode'} <= dests


@pytest.mark.parametrize('path', ALL_RECIPES, ids=lambda p: f'{p.parent.name}/{p.name}')
def test_every_recipe_key_is_a_train_py_argument(path):
    cfg = load_recipe(str(path))
    check_recipe_keys(cfg, train_py_dests(), path.name)
    assert cfg['device_modules'] == ['timm_pkmixer.replica_check']  # registers the models, checks the replicas
    if cfg['model'].startswith('local-dir:'):  # a fine-tuning recipe: the recipe says how that folder is made
        assert f"--out-dir {cfg['model'][len('local-dir:'):]}" in path.read_text() and cfg['pretrained'] is True
    else:
        assert cfg['model'] in timm.list_models(cfg['model'])  # registered under that name


def test_unknown_recipe_key_is_refused_by_name():
    with pytest.raises(ValueError, match=r"\['learning_rate'\] are not arguments of train.py"):
        check_recipe_keys({'lr': 1.0, 'learning_rate': 1.0}, train_py_dests(), 'bad.yaml')


# ---------------------------------------------------------------------------------------------- comment metadata

def test_recipe_comments_are_read_as_a_record():
    text = ('# paper: C.6, Fig. 7 (depth)\n#figure:  fig7 \n# figure: figS4\n# wandb group: fig7\n'
            '# a figure: fig5 is prose, not a key\nmodel: s_mixer_s64c64_32\n')
    assert parse_recipe_comments(text) == RecipeComments(paper='C.6, Fig. 7 (depth)', figures=('fig7', 'figS4'),
                                                         wandb_group='fig7')
    assert parse_recipe_comments('model: x\n') == RecipeComments(paper='', figures=(), wandb_group=None)
    written = comment_line('paper', 'C.1') + comment_line('figure', 'fig2') + comment_line('wandb group', 'g')
    assert parse_recipe_comments(written) == RecipeComments('C.1', ('fig2',), 'g')
    with pytest.raises(ValueError, match="'figures' is not a recipe comment key"):
        comment_line('figures', 'fig2')


@pytest.mark.parametrize('text,message', [
    ('# paper: C.1\nmodel: x\n# paper: C.2\n', 'r.yaml, line 3: a second `# paper:` line (the first is line 1); '
                                                 'a recipe has one'),
    ('# wandb group: a\n# wandb group: a\n', 'r.yaml, line 2: a second `# wandb group:` line (the first is line 1)'),
    ('# figure: fig7\n# figure: figS4\n# figure: fig7\n', 'r.yaml, line 3: `# figure: fig7` again (first on line 1)'),
    ('# figure: fig99\n', 'r.yaml, line 1: `# figure: fig99` names no figure (known: fig4, fig5, '),
    ('# figure: fig5 fig7\n', "r.yaml, line 1: `# figure: fig5 fig7` names no figure"),
    ('# paper:\n', 'r.yaml, line 1: `# paper:` has no value'),
])
def test_recipe_comments_refuse_a_repeated_key_by_name(text, message):
    with pytest.raises(RecipeError) as e:
        parse_recipe_comments(text, 'r.yaml')
    assert str(e.value).startswith(message)


@pytest.mark.parametrize('path', ALL_RECIPES, ids=lambda p: f'{p.parent.name}/{p.name}')
def test_every_packaged_recipe_comments_parse(path):
    comments = read_recipe_comments(path)
    assert comments.paper  # every recipe names its place in the paper
    assert comments.wandb_group is None  # only a sweep's recipes name a W&B group
    info = next(i for i in list_recipes() if i.path == path)
    assert (info.section, info.figures) == (comments.paper, comments.figures)


def test_load_recipe_refuses_a_non_mapping(tmp_path):
    bad = tmp_path / 'list.yaml'
    bad.write_text('- adamw\n- 0.001\n')
    with pytest.raises(ValueError, match='must be a YAML mapping'):
        load_recipe(str(bad))


def test_there_is_an_imagenet_recipe_per_registered_imagenet_model():
    imagenet_models = {n for n in timm.list_models(['pk_mixer_*', 'rp_mixer_*'])
                       if timm.get_pretrained_cfg(n).input_size[-1] == 224}
    assert {p.stem for p in IMAGENET} == imagenet_models
    assert {'rp_mixer_b_w', 'pk_mixer_b_w', 'rp_mixer_b16_224', 'pk_mixer_b16_224'} <= imagenet_models
    for p in IMAGENET:
        assert load_recipe(str(p))['model'] == p.stem


C5 = dict(  # Appendix C.5, as train.py arguments
    opt='adamw', epochs=300, sched='cosine', warmup_epochs=5, warmup_lr=1e-6, min_lr=1e-5, weight_decay=0.05,
    reprob=0.25, aa='rand-m9-mstd0.5-inc1', mixup=0.8, cutmix=1.0, mixup_switch_prob=0.5, smoothing=0.1,
)
# README table of train_recipes/: (GPUs, per-GPU batch, grad_accum_steps) for a global batch of 4096.
GPU_LAYOUTS = [(8, 128, 4), (16, 128, 2), (32, 128, 1), (128, 32, 1)]


@pytest.mark.parametrize('path', IMAGENET, ids=lambda p: p.stem)
def test_imagenet_recipe_is_appendix_c5(path):
    cfg = load_recipe(str(path))
    for key, value in C5.items():
        assert cfg[key] == value, key
    assert cfg.get('cooldown_epochs', 0) == 0 and not cfg.get('warmup_prefix', False)
    # As written (8 GPUs): global batch 4096 and lr exactly 1e-3.
    plan = resolve_batch_and_lr(cfg, world_size=8)
    assert plan.global_batch == 4096
    assert plan.lr == pytest.approx(1e-3, rel=1e-12)
    for gpus, b, accum in GPU_LAYOUTS:
        plan = resolve_batch_and_lr(dict(cfg, batch_size=b, grad_accum_steps=accum), world_size=gpus)
        assert (plan.global_batch, plan.lr) == (4096, pytest.approx(1e-3, rel=1e-12))
    # Another global batch follows timm's sqrt rule for AdamW.
    plan = resolve_batch_and_lr(dict(cfg, batch_size=128, grad_accum_steps=1), world_size=8)
    assert plan.global_batch == 1024 and plan.lr == pytest.approx(1e-3 * math.sqrt(1024 / 4096))


def test_readme_batch_table_matches_the_tested_layouts():
    text = (RECIPES / 'README.md').read_text()
    rows = re.findall(r'^\| (\d+) \| (\d+) \| (\d+) \| 4096 \|', text, flags=re.M)
    assert [tuple(map(int, r)) for r in rows] == GPU_LAYOUTS


def test_resolve_batch_and_lr_follows_train_py_rules():
    # SGD: linear rule; explicit lr wins; sqrt for Ada*/Lamb unless lr_base_scale is given.
    assert resolve_batch_and_lr(dict(opt='sgd', batch_size=128, lr_base=0.1, lr_base_size=256), 4).lr == \
        pytest.approx(0.2)
    assert resolve_batch_and_lr(dict(opt='adamw', batch_size=64, lr=0.02), 3).lr == 0.02
    assert resolve_batch_and_lr(dict(opt='lamb', batch_size=256, lr_base=1e-3, lr_base_size=256), 4).lr == \
        pytest.approx(2e-3)
    assert resolve_batch_and_lr(dict(opt='adamw', batch_size=256, lr_base=1e-3, lr_base_size=256,
                                     lr_base_scale='linear'), 4).lr == pytest.approx(4e-3)


def test_small_data_recipes_match_the_paper():
    for ds, classes in (('cifar10', 10), ('cifar100', 100), ('stl10', 10)):
        fig5 = load_recipe(str(RECIPES / ds / 's_mixer_fig5.yaml'))  # C.4
        assert (fig5['opt'], fig5['momentum'], fig5['batch_size'], fig5['lr'], fig5['epochs'], fig5['sched']) == \
            ('nesterov', 0.9, 128, 0.02, 200, 'cosine')
        assert fig5['num_classes'] == classes and fig5['img_size'] == 32
        fig6 = load_recipe(str(RECIPES / ds / 's_mixer_fig6.yaml'))  # Table S.2
        expected = dict(cifar10=('adamw', 0.02, 1024, 2000), cifar100=('nesterov', 0.1, 128, 600),
                        stl10=('nesterov', 0.1, 128, 2000))[ds]
        assert (fig6['opt'], fig6['lr'], fig6['batch_size'], fig6['epochs']) == expected
        assert fig6['model_kwargs'] == {'num_blocks': 12}
    for ds in ('cifar10', 'cifar100'):  # C.3, Table 1
        for model in ('pk_mixer_ss8_32', 'rp_mixer_ss8_32', 'pk_mixer_ss_w_32', 'rp_mixer_ss_w_32'):
            cfg = load_recipe(str(RECIPES / ds / f'{model}.yaml'))
            lr = 0.06 if (ds == 'cifar100' and 'ss8' in model) else 0.04
            assert (cfg['opt'], cfg['batch_size'], cfg['epochs'], cfg['lr'], cfg['aa']) == \
                ('adamw', 1024, 4000, lr, 'original')
            assert cfg['dataset'] == f'torch/{ds}' and cfg['dataset_download'] is True


def test_imagenet_sweep_is_fig6d():
    points = experiment_points('imagenet/rp_mixer_b_w', permutations=['random'])
    assert [p.coords['P'] for p in points] == [7, 8, 14, 16, 28, 32]
    for p in points:
        c, s = p.coords['C'], p.coords['S']
        assert c == 3 * p.model_kwargs['patch_size'] ** 2 == p.model_kwargs['embed_dim']
        assert s == round(tokens_for_omega(c, IMAGENET_SWEEP_OMEGA, 4.0)) == p.model_kwargs['num_tokens']
        err = [abs(mixer_omega(x, c, 4.0) - IMAGENET_SWEEP_OMEGA) for x in (s - 1, s, s + 1)]
        assert err[1] == min(err)  # the integer S closest to eq. S.44
        assert p.model == 'rp_mixer_b_w' and p.model_kwargs['gamma'] == 4.0
        assert summarize(p.model, **p.model_kwargs).permutation_label == 'random'
    assert (points[3].coords['S'], points[3].coords['C']) == (196, 768)  # P = 16 is Mixer-B/16's geometry at γ = 4
    normal = experiment_points('imagenet/pk_mixer_b_w', permutations=['normal'])
    assert [summarize(p.model, **p.model_kwargs).permutation_label for p in normal] == ['normal'] * 6


def test_cifar_sweep_pairs_solve_eq_s42():
    for omega, pairs in CIFAR_SWEEP_PAIRS.items():
        for c, s in pairs:
            assert s == round(tokens_for_omega(c, omega))
            assert (s, c) in pairs or (c, s) in pairs  # symmetric
    with pytest.raises(ValueError, match=r'omega: the paper lists \(C, S\) pairs for Ω in '
                                         r'\[262144, 2097152, 134217728\], not 1000'):
        experiment_points('cifar10/s_mixer_fig5', omega=1000)


def test_sweep_writes_valid_recipes_that_build_the_requested_geometry(tmp_path):
    paths = write_sweep(str(RECIPES / 'cifar10' / 's_mixer_fig5.yaml'), str(tmp_path), seeds=(0, 1))
    assert len(paths) == 2 * 6 * 2 + 5 * 2  # Mixers (RP, normal) at 6 pairs, and the SW-MLP arm of Fig. 5
    dests = train_py_dests()
    for path in paths:
        cfg = yaml.safe_load(path.read_text())
        check_recipe_keys(cfg, dests, path.name)
        kw = cfg['model_kwargs']
        assert cfg['experiment'] == path.stem and cfg['seed'] in (0, 1)
        assert ('perm_seed' in kw) == (kw.get('permutation') == 'random')
        assert ('mask_seed' in kw) == cfg['model'].startswith('sw_mlp')
        assert cfg['lr'] == 0.02  # the base recipe's values are kept
    first = yaml.safe_load(paths[0].read_text())
    s = summarize(first['model'], **first['model_kwargs'])
    assert (s.num_tokens, s.dim, s.permutation_label) == (173, 16, 'random') and s.width == 173 * 16
    assert (first['model_kwargs']['perm_seed'], first['seed']) == (0, 0)


def test_imagenet_sweep_recipes_build_on_meta(tmp_path):
    paths = write_sweep(str(RECIPES / 'imagenet' / 'rp_mixer_b_w.yaml'), str(tmp_path), permutations=('random',))
    assert [p.name for p in paths][:2] == ['rp_mixer_b_w_p7_s923_c147_seed0.yaml',
                                           'rp_mixer_b_w_p7_s923_c147_seed1.yaml']
    assert len(paths) == 6 * 3  # three seeds by default (C.5)
    for path in paths:
        cfg = yaml.safe_load(path.read_text())
        s = summarize(cfg['model'], **cfg['model_kwargs'])
        assert s.num_tokens * s.dim == s.width == cfg['model_kwargs']['num_tokens'] * cfg['model_kwargs']['embed_dim']
        assert cfg['batch_size'] == 128 and cfg['lr_base'] == 1e-3


def test_sweep_refuses_a_model_without_a_sweep(tmp_path):
    with pytest.raises(ValueError, match="no width sweep for model 'rp_mixer_s16_224'"):
        write_sweep(str(RECIPES / 'imagenet' / 'rp_mixer_s16_224.yaml'), str(tmp_path))
    assert not tmp_path.joinpath('sweep.json').exists()


# ---------------------------------------------------------------------------------------------------- batch planning

@pytest.mark.parametrize('cfg,world_size,message', [
    (dict(batch_size=0), 1, 'batch_size must be a positive integer, got 0'),
    (dict(batch_size=-2), 4, 'batch_size must be a positive integer, got -2'),
    (dict(batch_size=8, grad_accum_steps=0), 1, 'grad_accum_steps must be a positive integer, got 0'),
    (dict(batch_size=8), 0, 'world_size must be a positive integer, got 0'),
])
def test_library_batch_planning_refuses_a_global_batch_of_zero(cfg, world_size, message):
    with pytest.raises(InvalidArgumentError) as e:
        resolve_batch_and_lr(cfg, world_size)
    assert str(e.value) == message and '--' not in str(e.value)


# ------------------------------------------------------------------------------------------- augmentation, as trained

REAL_TRAIN_PY = os.environ.get('TIMM_TRAIN_PY')  # read before a fixture clears it
# train.py's defaults (timm 1.x) of what its train transform and data config read; checked against the real
# train.py where TIMM_TRAIN_PY is set (test_train_py_transform_defaults_are_train_py_s)
TRAIN_PY_TRANSFORM_DEFAULTS = dict(
    no_aug=False, reprob=0.0, remode='pixel', recount=1, resplit=False, train_crop_mode=None, scale=[0.08, 1.0],
    ratio=[3 / 4, 4 / 3], hflip=0.5, vflip=0.0, color_jitter=0.4, color_jitter_prob=None, grayscale_prob=None,
    gaussian_blur_prob=None, aa=None, aug_repeats=0, aug_splits=0, train_interpolation='random', interpolation='',
    no_prefetcher=False, mean=None, std=None, crop_pct=None, img_size=None, input_size=None,
    in_chans=None, num_classes=None, model_kwargs={})
C4_RECIPES = [RECIPES / ds / f's_mixer_{fig}.yaml' for ds in ('cifar10', 'cifar100', 'stl10')
              for fig in ('fig5', 'fig6', 'fig7')] + sorted((RECIPES / 'fashion_mnist').glob('s_mixer_*.yaml'))


def train_py_args(recipe: Path) -> argparse.Namespace:
    """train.py's arguments for `recipe` alone: parsed by the real train.py where TIMM_TRAIN_PY is set, else the
    recipe over train.py's defaults."""
    if REAL_TRAIN_PY:
        from timm_pkmixer.training.train_py import _resolve, load_train_py
        return _resolve(load_train_py(Path(REAL_TRAIN_PY)), [REAL_TRAIN_PY, '--config', str(recipe)])
    return argparse.Namespace(**{**TRAIN_PY_TRANSFORM_DEFAULTS, **load_recipe(str(recipe))})


# a fine-tuning recipe's model is the folder `pkmixer expand` writes (its header says how): its transform is built
# with the registered model the folder expands, whose data config (mean, std, interpolation) the folder keeps
EXPANDED_FROM = {'local-dir:pk_mixer_b16_448': 'pk_mixer_b16_224'}


def train_transform(recipe: Path):
    """The transform train.py gives its training set for `recipe`: its data config (`resolve_data_config` of its
    arguments and the model), its train interpolation and its `create_loader` keywords, as train.py passes them."""
    import torch
    from timm.data import create_loader, resolve_data_config

    args = train_py_args(recipe)
    extra = {k: v for k, v in (('num_classes', args.num_classes), ('in_chans', args.in_chans)) if v is not None}
    model = timm.create_model(EXPANDED_FROM.get(args.model, args.model), device='meta', **extra,
                              **(args.model_kwargs or {}))
    data_config = resolve_data_config(vars(args), model=model)
    interpolation = data_config['interpolation'] if args.no_aug or not args.train_interpolation \
        else args.train_interpolation

    class OneImage(torch.utils.data.Dataset):
        transform = None

        def __len__(self):
            return 1

    dataset = OneImage()
    create_loader(dataset, input_size=data_config['input_size'], batch_size=1, is_training=True, no_aug=args.no_aug,
                  re_prob=args.reprob, re_mode=args.remode, re_count=args.recount, re_split=args.resplit,
                  train_crop_mode=args.train_crop_mode, scale=args.scale, ratio=args.ratio, hflip=args.hflip,
                  vflip=args.vflip, color_jitter=args.color_jitter, color_jitter_prob=args.color_jitter_prob,
                  grayscale_prob=args.grayscale_prob, gaussian_blur_prob=args.gaussian_blur_prob,
                  auto_augment=args.aa, num_aug_repeats=args.aug_repeats, num_aug_splits=args.aug_splits,
                  interpolation=interpolation, num_workers=0, mean=data_config['mean'], std=data_config['std'],
                  use_prefetcher=not args.no_prefetcher, device=torch.device('cpu'))
    return dataset.transform


# C.4: "random crop and horizontal flip": timm's square random-resized crop (scale 0.64-1, ratio 1), the flip, and
# the conversion to a tensor (and the normalisation, where the prefetcher does not do it)
CROP_AND_FLIP = {'RandomResizedCropAndInterpolation', 'RandomHorizontalFlip', 'MaybeToTensor', 'MaybePILToTensor',
                 'ToNumpy', 'Normalize'}
# every recipe that trains at 32 px with a random crop: C.4's and the CIFAR-scale ones of C.1 and C.3
RANDOM_CROP_RECIPES = sorted(p for p in RECIPES.glob('*/*.yaml') if 'train_crop_mode' in load_recipe(str(p)))


@pytest.mark.parametrize('path', C4_RECIPES, ids=lambda p: f'{p.parent.name}/{p.stem}')
def test_c4_recipes_train_with_random_crop_and_flip_only(path):
    """C.4 trains with random crop and horizontal flip only; train.py's default colour jitter (0.4) would add a
    ColorJitter of brightness, contrast and saturation 0.6 … 1.4 to every C.4 recipe that does not switch it off
    (timm adds a ColorJitter of nothing for color_jitter 0: it changes no pixel)."""
    from torchvision.transforms import ColorJitter
    steps = train_transform(path).transforms
    jitters = [t for t in steps if isinstance(t, ColorJitter)]
    assert all((t.brightness, t.contrast, t.saturation, t.hue) == (None, None, None, None) for t in jitters), jitters
    assert {type(t).__name__ for t in steps if not isinstance(t, ColorJitter)} <= CROP_AND_FLIP, steps
    assert any(type(t).__name__ == 'RandomHorizontalFlip' and t.p == 0.5 for t in steps)
    crop, = [t for t in steps if type(t).__name__ == 'RandomResizedCropAndInterpolation']
    assert (tuple(crop.scale), tuple(crop.ratio)) == ((0.64, 1.0), (1.0, 1.0))


def crop_geometry(recipe: Path, source_px: int) -> 'CropGeometry':
    """What the crop of `recipe`'s train transform, as train.py builds it, does to a `source_px`² image
    (:class:`CropGeometry`): measured once per crop (recipes of the same crop share it) over CROP_DRAWS crops."""
    crop = next(t for t in train_transform(recipe).transforms
                if type(t).__name__ == 'RandomResizedCropAndInterpolation')
    key = (repr(crop), source_px)
    if key not in _GEOMETRY:
        _GEOMETRY[key] = _measure_crop(crop, source_px)
    return _GEOMETRY[key]


CROP_DRAWS = 20_000  # crops per measurement: the rarest stated case (side 22 of 28 px, 1.6 %) comes ~320 times
IMAGED_DRAWS = 2_000  # of them, the first this many are applied to the test image, which must show the drawn box
_GEOMETRY: Dict[Tuple[str, int], 'CropGeometry'] = {}


@dataclass(frozen=True)
class CropGeometry:
    """A square random-resized crop of a `source_px`² image, over CROP_DRAWS draws. Zoom: source_px / the crop's
    side, its magnification against a plain resize of the whole image; shift: the crop centre's offset from the
    image's along either axis, in output pixels (the image's content moves by as much)."""
    sides: Tuple[int, int]  # the least and the most side drawn, in source pixels
    zoom: Tuple[float, float]  # the least and the most zoom
    past_1_25: float  # share of crops zooming past x1.25
    shift: float  # the largest shift
    moved: float  # share of crops shifted by 1 output pixel or more


def _measure_crop(crop, source_px: int) -> CropGeometry:
    """Draws CROP_DRAWS crops through `crop`'s own `get_params` (recorded as its `__call__` draws them), the first
    IMAGED_DRAWS of them applied to a black image holding a white square of a quarter of its side near its centre:
    the square's width and centre in the output must be the drawn box's, within the pixel rounding of the edges."""
    import random

    import numpy as np
    from PIL import Image

    size = crop.size[0]
    side = source_px // 4
    start = (source_px - side) // 2
    pixels = np.zeros((source_px, source_px), np.uint8)
    pixels[start:start + side, start:start + side] = 255
    image = Image.fromarray(pixels).convert('RGB')
    boxes = []

    def drawn(img, scale, ratio):
        boxes.append(type(crop).get_params(img, scale, ratio))
        return boxes[-1]

    state = random.getstate()
    random.seed(0)
    crop.get_params = drawn  # the crop's __call__ draws through self.get_params
    try:
        for n in range(CROP_DRAWS):
            if n >= IMAGED_DRAWS:
                crop.get_params(image, crop.scale, crop.ratio)
                continue
            out = np.asarray(crop(image), dtype=np.float32)[..., 0]
            ys, xs = np.nonzero(out > out.max() / 2)
            i, j, h, w = boxes[-1]
            for lo, hi, offset, length in ((xs.min(), xs.max(), j, w), (ys.min(), ys.max(), i, h)):
                scale = size / length
                assert abs(hi - lo + 1 - side * scale) <= 1.5, (boxes[-1], lo, hi)  # the square's width
                assert abs((hi + lo + 1) / 2 - (start + side / 2 - offset) * scale) <= 0.75, (boxes[-1], lo, hi)
    finally:
        del crop.get_params
        random.setstate(state)
    tops, lefts, heights, widths = (np.array(v) for v in zip(*boxes))
    assert (heights == widths).all()  # square crops: ratio [1, 1]
    zoom = source_px / widths
    shift = np.maximum(abs(lefts + widths / 2 - source_px / 2), abs(tops + heights / 2 - source_px / 2)) * size / widths
    return CropGeometry(sides=(int(widths.min()), int(widths.max())), zoom=(float(zoom.min()), float(zoom.max())),
                        past_1_25=float(np.mean(zoom > 1.25)), shift=float(shift.max()),
                        moved=float(np.mean(shift >= 1)))


def recipe_header(path: Path) -> str:
    """A recipe's header, its leading comment lines, as one text (a statement may wrap from line to line)."""
    lines = itertools.takewhile(lambda line: line.startswith('#'), path.read_text(encoding='utf-8').splitlines())
    return ' '.join(' '.join(line.lstrip('#') for line in lines).split())


def stated(pattern: str, header: str, path: Path) -> re.Match:
    """The match of `pattern` in `header`; a header that does not state it fails, naming the recipe and pattern."""
    m = re.search(pattern, header)
    assert m, f'{path.parent.name}/{path.name}: its header does not state {pattern!r}'
    return m


# the images each data set holds before the recipe resizes them to 32 px
SOURCE_PX = {'cifar10': 32, 'cifar100': 32, 'stl10': 96, 'fashion_mnist': 28}
TRANSFORM_BLOCK = 'Train transform, as train.py builds it'  # each header's statement of its transform begins so


def share_tolerance(share: float, rounding: float) -> float:
    """How far a share measured over CROP_DRAWS draws may lie from the header's: four binomial standard errors and
    the rounding of the stated number."""
    return 4 * math.sqrt(share * (1 - share) / CROP_DRAWS) + rounding


@pytest.mark.parametrize('path', RANDOM_CROP_RECIPES, ids=lambda p: f'{p.parent.name}/{p.stem}')
def test_random_crops_zoom_and_shift_as_the_header_says(path):
    """C.4's crop is CIFAR's pad-4 random 32 px crop: no zoom, a shift of up to 4 px. The recipes' square
    random-resized crop of 64-100 % of the area zooms and shifts as each header states, measured over CROP_DRAWS
    crops of the transform train.py builds. The crop's side is rounded to whole pixels, so the largest zoom is the
    source size over the least side: x1.231 from 32 px (side 26), x1.247 from STL-10's 96 (77), x1.273 from
    Fashion-MNIST's 28 (22), whose side-22 crops, 1.6 % of them, zoom past x1.25; train.py's defaults (scale 0.08,
    the recipes' crop before) zoomed up to x3.5."""
    assert load_recipe(str(path))['img_size'] == 32
    header, text = recipe_header(path), path.read_text(encoding='utf-8')
    source_px, least, most = map(int, stated(r'(\d+) px its side is (\d+)-(\d+) px', header, path).groups())
    zoom = float(stated(r'zoom ×1 to ×(\d\.\d{3})', header, path).group(1))
    past = stated(r'(never past ×1\.25|past ×1\.25 in (\d+\.\d) % of crops)', header, path).group(2)
    shift = float(stated(r"its centre up to (\d\.\d) px from the image's", header, path).group(1))
    moved = int(stated(r'1 px or more in (\d+) % of crops', header, path).group(1)) / 100
    assert source_px == SOURCE_PX[path.parent.name]

    measured = crop_geometry(path, source_px)
    assert measured.sides == (least, most) and measured.zoom[0] == 1.0
    assert round(measured.zoom[1], 3) == zoom, measured
    assert round(measured.shift, 1) == shift, measured
    assert abs(measured.moved - moved) <= share_tolerance(moved, 0.005), measured
    if past is None:
        assert measured.past_1_25 == 0.0, measured
    else:
        past = float(past) / 100
        assert abs(measured.past_1_25 - past) <= share_tolerance(past, 0.0005), measured
        # the tail is the rounding's: the least side is drawn when sqrt(area · U(scale)) rounds to it
        exact = ((least + 0.5) ** 2 / source_px ** 2 - 0.64) / (1 - 0.64)
        assert abs(measured.past_1_25 - exact) <= share_tolerance(exact, 0.0), (measured, exact)
    assert measured.zoom[1] < 1.5 and measured.shift <= 5  # near C.4's crop: a pixel of rounding past its 4 px
    assert set(re.findall(r'zoom [x×]1 to [x×]([\d.]+)', text)) == {f'{zoom:.3f}'}  # the file states no other


AA_OPS = r"the ops as timm names them: ([A-Za-z, ]+)\."


@pytest.mark.parametrize('path', ALL_RECIPES, ids=lambda p: f'{p.parent.name}/{p.stem}')
def test_every_recipe_header_states_its_train_transform(path):
    """Every recipe's header states what its train transform does, as train.py builds it: the crop's scale and
    ratio (or no augmentation at all), the flip, the train interpolation actually used (train.py's
    `--train-interpolation`, `random` unless a recipe sets it: bilinear or bicubic drawn per image; a recipe's
    `interpolation` is evaluation's) and the automatic augmentation: AutoAugment's timm policy with its ops as timm
    names them, RandAugment's configuration, or none."""
    from PIL import Image
    from torchvision.transforms import InterpolationMode

    header = recipe_header(path)
    assert TRANSFORM_BLOCK in header, f'{path.parent.name}/{path.name}: its header does not state its transform'
    steps = {type(t).__name__: t for t in train_transform(path).transforms}
    cfg = load_recipe(str(path))
    interpolation = stated(r'train interpolation: (random|bilinear|bicubic)', header, path).group(1)
    if 'RandomResizedCropAndInterpolation' in steps:
        crop = steps['RandomResizedCropAndInterpolation']
        scale_ratio = stated(r'scale \[([\d.]+), ([\d.]+)\], ratio \[([\d.]+), ([\d.]+)\]', header, path).groups()
        assert tuple(crop.scale) + tuple(crop.ratio) == pytest.approx(tuple(map(float, scale_ratio)), abs=1e-3)
        built = crop.interpolation
    else:  # no augmentation: train.py's resize and centre crop
        stated(r'none \(no_aug\)', header, path)
        assert cfg['no_aug'] is True and set(steps) == {'Resize', 'CenterCrop', 'MaybePILToTensor'}, steps
        built = steps['Resize'].interpolation
    random_pair = (InterpolationMode.BILINEAR, InterpolationMode.BICUBIC)
    assert ('random' if built == random_pair else built.value) == interpolation, built
    if interpolation == 'random':
        stated(r'train interpolation: random, bilinear or bicubic drawn per crop', header, path)
    flip = steps.get('RandomHorizontalFlip')
    if flip:
        assert float(stated(r'horizontal flip, p = ([\d.]+)', header, path).group(1)) == flip.p
    else:
        stated(r'no flip', header, path)

    if 'AutoAugment' in steps:
        policy = steps['AutoAugment'].policy
        name = stated(r"AutoAugment: timm's `(\w+)` policy", header, path).group(1)
        pairs = int(stated(r'one of (\d+) pairs of ops', header, path).group(1))
        ops = stated(AA_OPS, header, path).group(1).split(', ')
        assert name == cfg['aa'] and pairs == len(policy) and {len(p) for p in policy} == {2}
        assert ops == sorted({op.name for pair in policy for op in pair}), ops
        assert 'names no policy' in header  # the paper's "auto-augmentation" names none
        # its geometric ops resample as the crop does (timm: the train interpolation, random included)
        resample = {op.kwargs['resample'] for pair in policy for op in pair}
        expected = (Image.Resampling.BILINEAR, Image.Resampling.BICUBIC) if interpolation == 'random' \
            else getattr(Image.Resampling, interpolation.upper())
        assert resample == {expected}, resample
        assert 'ColorJitter' not in steps  # timm adds no colour jitter with AutoAugment
    elif 'RandAugment' in steps:
        ra = steps['RandAugment']
        config, layers, ops = stated(r"RandAugment `(rand-[\w.-]+)`: (\d+) of timm's (\d+) ops", header, path).groups()
        assert (config, int(layers), int(ops)) == (cfg['aa'], ra.num_layers, len(ra.ops))
        assert 'ColorJitter' not in steps  # timm adds no colour jitter with RandAugment
    else:
        stated(r'AutoAugment: none', header, path)
        assert not cfg.get('aa')


@pytest.mark.parametrize('path', [p for p in ALL_RECIPES if load_recipe(str(p)).get('no_aug')],
                         ids=lambda p: f'{p.parent.name}/{p.stem}')
def test_no_aug_recipes_train_on_the_images_as_they_are(path):
    """The shallow MLPs' recipes (no_aug): train.py's resize and centre crop to img_size leave a 28 px image as it
    is, pixel for pixel, as their headers say."""
    import numpy as np
    import torch
    from PIL import Image

    size = load_recipe(str(path))['img_size']
    assert f'leave the {size} px images as they are' in recipe_header(path)
    pixels = np.random.default_rng(0).integers(0, 256, (size, size), dtype=np.uint8)
    out = train_transform(path)(Image.fromarray(pixels, mode='L'))
    assert torch.equal(out, torch.from_numpy(pixels)[None])


def test_fashion_mnist_fig7_header_says_its_curves_still_fall_at_15_epochs():
    """fashion_mnist/s_mixer_fig7's header gives the slopes of its committed 15-epoch runs (rp_c4crop/, rows a1 and
    f of docs/findings.md) by the package's flatness rule (timm_pkmixer/reports/verdicts.py): each arm's least-squares
    slope over the third quarter of the schedule against the seeds' SD pooled over the four arms."""
    from timm_pkmixer.reports.report import build_report
    from timm_pkmixer.reports.verdicts import arm_of_point, flatness, pooled_sd
    path = RECIPES / 'fashion_mnist' / 's_mixer_fig7.yaml'
    number = r'(\d\.\d\d)'
    m = stated(rf'over the third quarter of the schedule \(epochs (\d+)-(\d+)\) the normal S-Mixers\' mean test '
               rf'error fell {number} \(L = 4\) and {number} \(L = 8\) points an epoch, the RP ones\' {number} and '
               rf'{number}, each more than the seeds\' SD of the last epoch pooled over the four arms \({number}\)',
               recipe_header(path), path)
    report = build_report([str(ROOT / 'benchmarks' / 'fashion_mnist' / 'rp_c4crop' / 'epochs.csv')])
    arms = {p.point: arm_of_point(p) for p in report.points}
    scale, _ = pooled_sd(list(arms.values()))
    flat = {(p, L): flatness(arms[f'depth_L{L}_{p}'], scale) for p in ('normal', 'random') for L in (4, 8)}
    assert {a.scheduled for a in arms.values()} == {load_recipe(str(path))['epochs']}
    assert [int(x) for x in m.groups()[:2]] == list(flat['normal', 4].window)
    assert m.groups()[2:] == tuple(f'{v:.2f}' for v in (
        -flat['normal', 4].slope, -flat['normal', 8].slope, -flat['random', 4].slope, -flat['random', 8].slope,
        scale))
    assert all(f.moving and f.slope < 0 for f in flat.values())  # still falling, beyond the seeds' spread


@pytest.mark.skipif(not REAL_TRAIN_PY, reason="TIMM_TRAIN_PY is not set: timm's train.py is not in the timm wheel")
def test_train_py_transform_defaults_are_train_py_s():
    from timm_pkmixer.training.train_py import load_train_py
    defaults = {a.dest: a.default for a in load_train_py(Path(REAL_TRAIN_PY)).parser._actions}
    assert {k: defaults[k] for k in TRAIN_PY_TRANSFORM_DEFAULTS} == TRAIN_PY_TRANSFORM_DEFAULTS


@pytest.mark.parametrize('recipe,figure', [('cifar10/s_mixer_fig6', 'fig6-cifar10'),
                                           ('stl10/s_mixer_fig6', 'fig6-stl10'), ('imagenet/pk_mixer_b_w', 'fig6d')])
def test_hard_aug_readings_say_what_the_recipes_do(tmp_path, recipe, figure):
    """Fig. 6's "hard aug." readings describe the recipes the sweep writes: blank keeps the base recipe's own
    augmentation (C.4's crop and flip; C.5's RandAugment, mixup/cutmix and erasing on ImageNet), autoaugment sets
    AutoAugment (added to C.4's crop and flip; in place of C.5's RandAugment, the rest kept)."""
    from timm_pkmixer.sweeps.sweep_tables import FIGURES
    blank, autoaugment = next(d for d in FIGURES[figure].disagreements if d.key == 'hard-aug').readings
    aug_keys = ('aa', 'color_jitter', 'mixup', 'cutmix', 'reprob')

    def written(reading):
        paths = write_sweep(recipe, str(tmp_path / reading), seeds=(0,), permutations=('normal',), figure=figure,
                            readings={'hard-aug': reading})
        cfgs = [yaml.safe_load(p.read_text()) for p in paths]
        return {tuple(c.get(k) for k in aug_keys) for c in cfgs}

    (aa, jitter, mixup, cutmix, reprob), = written('blank')
    if figure == 'fig6d':  # C.5
        assert (aa, mixup, cutmix, reprob) == ('rand-m9-mstd0.5-inc1', 0.8, 1.0, 0.25)
        assert f'RandAugment {aa}, mixup {mixup} / cutmix {cutmix}, random erasing {reprob}' in blank.says
        assert 'crop and horizontal flip only' not in blank.says
        assert "in place of C.5's RandAugment" in autoaugment.says
    else:  # C.4
        assert (aa, jitter, mixup, cutmix, reprob) == (None, 0.0, 0.0, 0.0, 0.0)
        assert "C.4's random crop and horizontal flip only (no colour jitter: color_jitter 0)" in blank.says
        assert 'added to the crop and flip' in autoaugment.says
    assert written('autoaugment') == {('original', jitter, mixup, cutmix, reprob)}  # AutoAugment; the rest kept


# ------------------------------------------------------------------------- docs/analyses.md: the Fig. 2 and 4 loops

def doc_train_commands(tmp_path) -> list:
    """The `pkmixer train` commands of the GPU loops of docs/analyses.md, as bash expands them (pkmixer recorded,
    not run; `python` is this interpreter): one argv (after `train`) per command."""
    import subprocess
    import sys
    text = (ROOT / 'docs' / 'analyses.md').read_text(encoding='utf-8')
    section = text[text.index('## GPU recipes and commands: Fig. 2 and Fig. 4'):]
    script = section[section.index('```bash\n') + 8:section.index('\n```', section.index('```bash\n'))]
    log = tmp_path / 'calls'
    prelude = (f'pkmixer() {{ local IFS=$\'\\x1f\'; printf "%s\\n" "$*" >> {log}; }}\n'
               f'python() {{ {sys.executable} "$@"; }}\n')
    subprocess.run(['bash', '-euc', prelude + script], check=True, timeout=120)
    calls = [line.split('\x1f') for line in log.read_text().splitlines()]
    return [argv[1:] for argv in calls if argv[0] == 'train']


def built_record(model: str, kwargs: dict, seed: int) -> tuple:
    """What `pkmixer train` builds for `model`, `kwargs` and `--seed`: the model's canonical record (floats to 12
    digits) and its mask_seed, which follows the seed unless given (SW-MLPs; None for other models)."""
    mask_seed = kwargs.get('mask_seed', seed) if model.startswith('sw_mlp') else None
    rest = tuple(sorted((k, repr(v)) for k, v in kwargs.items() if k != 'mask_seed'))
    return model, _record(model, rest), mask_seed


@functools.cache
def _record(model: str, kwargs: tuple) -> tuple:
    import ast
    record = timm.create_model(model, device='meta', num_classes=10,
                               **{k: ast.literal_eval(v) for k, v in kwargs}).model_args
    return tuple((k, float(f'{v:.12g}') if isinstance(v, float) else v) for k, v in record.items() if k != 'mask_seed')


def test_the_docs_fig2_and_fig4_loops_build_what_the_sweeps_build(tmp_path):
    """docs/analyses.md's loops train, seed for seed, the models `pkmixer sweep cifar10/mixer_fig2_fig4` writes for
    Fig. 2 and Fig. 4 (left) — the skip layer at S = S0 (A.2.4), the SW-MLPs' per-patch FC and block — with the
    recipe's training, as the sweep's recipes."""
    from timm.utils import ParseKwargs

    from timm_pkmixer.sweeps.sweep_plan import plan_sweep
    parser = argparse.ArgumentParser()
    parser.add_argument('recipe')
    parser.add_argument('--model', default=None)
    parser.add_argument('--model-kwargs', nargs='*', default=None, action=ParseKwargs)
    parser.add_argument('--seed', type=int)
    parser.add_argument('--experiment')
    doc = {'fig2': [], 'fig4': []}
    for argv in doc_train_commands(tmp_path):
        args, rest = parser.parse_known_args(argv)
        assert rest == ['--output', 'runs'], rest  # the recipe's training, nothing overridden
        base = load_recipe(str(RECIPES / f'{args.recipe}.yaml'))
        kwargs = base['model_kwargs'] if args.model_kwargs is None else args.model_kwargs  # train.py: replaced
        doc[args.experiment[:4]].append((args.recipe, built_record(args.model or base['model'], kwargs, args.seed)))
    for figure, n_seeds in (('fig2', 3), ('fig4', 4)):
        plan = plan_sweep('cifar10/mixer_fig2_fig4', figure=figure)
        assert all(not p.recipe for p in plan.points)  # the sweep's recipes train as the base recipe
        sweep = [('cifar10/mixer_fig2_fig4', built_record(p.model, p.model_kwargs, seed))
                 for seed in range(n_seeds) for p in plan.points]
        assert sorted(doc[figure]) == sorted(sweep), figure
    skip = [dict(record)['skip_layer'] for _, (model, record, _) in doc['fig4'] if model.startswith('pk_mixer')]
    assert skip and all(skip)  # A.2.4: the skip layer in every point of Fig. 4, S = S0 = 64 included
