"""The Hub model card (README.md) of a pushed model, in timm's form (timm's own `generate_readme`).

It states what can be read from the model and its training run, nothing else: params and GMACs
(counted by `catalog.summarize`), the PK-family geometry, the recipe (timm train.py's `args.yaml`),
and top-1 / top-5 of the pushed epoch from the run's `summary.csv`, when they describe the pushed weights.
"""
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from .._timm import generate_readme
from ..catalog import summarize
from ..description import built_label
from ..permutation_kinds import PERMUTATION_KINDS
from ..runs.run_folder import RunFileError, epoch_words, read_summary, row_problem

__all__ = ['PAPER_ARXIV', 'PAPER_BIBTEX', 'RunMetrics', 'read_run_metrics', 'validate_command', 'build_model_card',
           'render_model_card']

PAPER_ARXIV = '2306.01470'
PAPER_TITLE = 'Understanding MLP-Mixer as a Wide and Sparse MLP'
PAPER_BIBTEX = '''@inproceedings{hayase2024understanding,
  title={Understanding MLP-Mixer as a Wide and Sparse MLP},
  author={Hayase, Tomohiro and Karakida, Ryo},
  booktitle={International Conference on Machine Learning (ICML)},
  year={2024},
  eprint={2306.01470},
  archivePrefix={arXiv}
}'''

# train.py arguments shown in the card (all of them are in train_hparams.yaml)
_RECIPE_KEYS = ('epochs', 'batch_size', 'opt', 'lr', 'weight_decay', 'sched', 'warmup_epochs', 'smoothing',
                'mixup', 'cutmix', 'aa', 'drop_path', 'model_ema', 'amp', 'seed')
_DATASET_PREFIXES = ('hfds', 'hfids', 'torch', 'tfds', 'wds')


@dataclass(frozen=True)
class RunMetrics:
    top1: float
    top5: Optional[float]
    epoch: int
    ema: bool            # the numbers are those of the EMA weights


def _article(phrase: str) -> str:
    """'A' or 'An' before `phrase`, by its sound: an initialism (MLP, RP, S-Mixer, SW-MLP) by its first letter's
    name ('an S-Mixer'), a word by its first letter ('a Shallow Monarch', 'a Mixed RP S-Mixer')."""
    first = phrase.split()[0].split('-')[0]
    if first.isupper():  # an initialism, read letter by letter
        return 'An' if first[0] in 'AEFHILMNORSX' else 'A'
    return 'An' if first[0].lower() in 'aeiou' else 'A'


def read_run_metrics(
        summary_csv: Path,
        epoch: Optional[int],
        weights_are_ema: bool,
        run_had_ema_eval: bool,
) -> Tuple[Optional[RunMetrics], str]:
    """Top-1 / top-5 of `epoch` from timm train.py's summary.csv, if they describe the pushed weights.

    train.py evaluates the EMA weights in place of the model's when the run keeps an EMA (on the device),
    so the numbers describe the pushed weights only if `weights_are_ema == run_had_ema_eval`.
    Returns (metrics or None, a note saying why none).

    Raises:
        RunFileError: the summary.csv has a faulty row, or the pushed epoch's values are not a measurement
            (:func:`timm_pkmixer.runs.run_folder.row_problem`), as the report refuses them.
    """
    if not summary_csv.is_file():
        return None, ''
    if epoch is None:
        return None, f'{summary_csv.name} not used: the checkpoint records no epoch (train.py checkpoints do)'
    if weights_are_ema != run_had_ema_eval:
        which = 'EMA' if run_had_ema_eval else 'non-EMA'
        hint = 'pass --use-ema' if run_had_ema_eval else 'drop --use-ema'
        return None, f'{summary_csv.name} not used: it holds the {which} weights\' accuracy ({hint} to push those)'
    summary = read_summary(summary_csv)  # as the report reads it: resumed runs, the last row of an epoch wins
    keep_out = '; refusing to put it on the model card (move the file away to push without the run\'s metrics)'
    if summary.faults:
        raise RunFileError(f'{summary_csv}, {summary.faults[0]}{keep_out}')
    row = summary.epochs.get(epoch)
    if row is None or 'eval_top1' not in row:
        return None, f'{summary_csv.name} not used: no validation row for epoch {epoch_words([epoch])}'
    problem = row_problem(epoch, row)  # the report's rule: finite, top-1 and top-5 in [0, 100]
    if problem:
        raise RunFileError(f'{summary_csv}, line {summary.lines[epoch]}: {problem}{keep_out}')
    return RunMetrics(top1=row['eval_top1'], top5=row.get('eval_top5'), epoch=epoch, ema=weights_are_ema), ''


def datasets_from_args(train_args: Dict[str, Any]) -> List[str]:
    """Dataset id of a train.py run ('hfds/imagenet-1k' → 'imagenet-1k'); none for an ImageFolder."""
    name = str(train_args.get('dataset') or '')
    prefix, sep, rest = name.partition('/')
    if sep and prefix in _DATASET_PREFIXES:
        name = rest
    return [name] if name else []


def _num_classes(model_name: str, model_args: Dict[str, Any]) -> int:
    from timm.models import get_pretrained_cfg
    return int(model_args.get('num_classes', get_pretrained_cfg(model_name).num_classes))


def _image_line(in_chans: int, input_size: Tuple[int, int]) -> str:
    """The snippet's input: a PIL image converted to the model's channels (1: grayscale 'L', 3: 'RGB'), else a
    tensor of the model's shape (PIL has no N-channel mode to convert to)."""
    if in_chans in _PIL_MODES:
        mode, what = _PIL_MODES[in_chans]
        return (f"img = Image.open('image.png').convert('{mode}')  # the model takes {in_chans}-channel ({what}) "
                f"images\nx = transform(img).unsqueeze(0)")
    h, w = input_size
    return (f'x = torch.randn(1, {in_chans}, {h}, {w})  # the model takes {in_chans}-channel input: your data, '
            f'normalised as in training')


_PIL_MODES = {1: ('L', 'grayscale'), 3: ('RGB', 'colour')}


def validate_command(model: str, in_chans: int, train_args: Dict[str, Any], data: str = 'DATA') -> str:
    """timm's validate.py on the data a model was trained on, as the run evaluated it (its ``--dataset`` and
    ``val_split``; the size, crop, mean and std come from the model's config): `model` as validate.py's ``--model``
    (``hf-hub:ORG/NAME``), `data` its ``--data-dir``. ``--in-chans`` for a model that does not take 3 channels
    (validate.py builds 3 unless told), ``--class-map`` where the run had one, ``--device cpu`` (validate.py's
    default is cuda)."""
    parts = ['python validate.py', f'--model {model}', '--pretrained']
    dataset = str(train_args.get('dataset') or '')
    if dataset:
        parts.append(f'--dataset {dataset}')
    parts += [f"--split {train_args.get('val_split') or 'validation'}", f'--data-dir {data}']
    if in_chans != 3:
        parts.append(f'--in-chans {in_chans}')
    if train_args.get('class_map'):
        parts.append('--class-map CLASS_MAP')
    return ' '.join(parts + ['--device cpu'])


def _data_line(train_args: Dict[str, Any]) -> str:
    """What the validate command's ``DATA`` is, for the run's dataset."""
    dataset = str(train_args.get('dataset') or '')
    prefix, _, name = dataset.partition('/')
    split = train_args.get('val_split') or 'validation'
    if dataset.lower() == 'torch/fashion_mnist':
        where = 'the folder `pkmixer prepare-fashion-mnist DATA` writes Fashion-MNIST into'
    elif prefix.lower() == 'torch':
        where = f"where torchvision keeps {name} (validate.py's `--dataset-download` fetches it there)"
    elif not dataset or dataset.lower() == 'folder':
        where = f'an image folder whose `{split}/` holds one folder of images per class, named as in training'
    else:
        where = "the dataset's root, as train.py's `--data-dir` took it"
    class_map = '; `CLASS_MAP`: the class map file of the run' if train_args.get('class_map') else ''
    return f'`DATA`: {where}{class_map}.'


def _validation(repo_id: str, in_chans: int, train_args: Dict[str, Any]) -> str:
    """The card's validation section: timm's validate.py on the model's own data, the command as it runs."""
    channels = ('' if in_chans == 3 else
                f" timm's `train.py`, `validate.py` and `inference.py` build a 3-channel model unless told: the "
                f'command gives them `--in-chans {in_chans}`.')
    return f"""
Validate it with timm's `validate.py` (in timm's repository, at your timm version; not in the timm wheel):

```bash
{validate_command(f'hf-hub:{repo_id}', in_chans, train_args)}
```

{_data_line(train_args)}{channels} On a GPU, `--device cuda`.
"""


def _usage(repo_id: str, num_classes: int, in_chans: int = 3, input_size: Tuple[int, int] = (224, 224),
           label_names: bool = False, train_args: Optional[Dict[str, Any]] = None) -> str:
    """The card's usage snippet, which runs as written for the model's input channels (`in_chans`); its top-k is
    never larger than the number of classes; with `label_names` (config.json has them) it prints the classes by
    name. Then timm's validate.py on the run's data (`train_args`: its dataset and split), with the flags it needs."""
    k = max(1, min(5, num_classes))
    show = (f"names = model.pretrained_cfg['label_names']\n"
            f"print([(names[i], round(p, 3)) for p, i in zip(top{k}_prob[0].tolist(), top{k}_idx[0].tolist())])\n"
            if label_names else f'print(top{k}_idx[0].tolist(), top{k}_prob[0].tolist())\n')
    return f'''```bash
# timm-pkmixer registers the PK-family architectures in timm. It is not on PyPI: install it from its source,
# e.g. in a checkout of its repository (or pip install a wheel built there: pip wheel --no-deps -w dist .)
pip install .
```

```python
import timm, torch
from PIL import Image

model = timm.create_model('hf-hub:{repo_id}', pretrained=True).eval()
transform = timm.data.create_transform(**timm.data.resolve_model_data_config(model), is_training=False)
{_image_line(in_chans, input_size)}
with torch.no_grad():
    top{k}_prob, top{k}_idx = model(x).softmax(-1).topk({k})
{show}```
{_validation(repo_id, in_chans, train_args or {})}'''


def _pattern_legend(permutation: Tuple[str, ...]) -> str:
    """The letters of a per-block pattern: 'R: random, N: normal' (the kinds that name the family first)."""
    kinds = sorted((name for name in PERMUTATION_KINDS if name in permutation),
                   key=lambda name: not PERMUTATION_KINDS[name].family_prefix)
    return ', '.join(f'{PERMUTATION_KINDS[name].label}: {name}' for name in kinds)


def build_model_card(
        model_name: str,
        repo_id: str,
        model_args: Dict[str, Any],
        license: str,
        datasets: List[str],
        train_args: Optional[Dict[str, Any]] = None,
        has_hparams_file: bool = False,
        metrics: Optional[RunMetrics] = None,
        expanded_from: Optional[Dict[str, Any]] = None,
        label_names: Optional[List[str]] = None,
) -> Dict[str, Any]:
    """The `model_card` dict that timm's `generate_readme` renders (`expanded_from`: an 'Expanded from' section
    for a model made by `expand_resolution`; `label_names`: the classes config.json names, shown and printed by
    the usage snippet)."""
    s = summarize(model_name, **model_args)
    in_chans = int(model_args.get('in_chans', 3))
    built = built_label(model_name, s, summarize(model_name))  # the registered name alone misnames a reshaped model
    arch = {'family': s.family, 'timm architecture': f'`{model_name}`' + built[len(model_name):]}
    if s.num_tokens is not None:
        arch.update({'tokens S': s.num_tokens, 'channels C': s.dim})
    arch.update({'depth L': s.depth, 'expansion γ (tokens/channels)': s.gamma_label,
                 'effective width m': s.width, 'density p': f'{s.density:.4f}'})
    if s.permutation and s.permutation_label not in PERMUTATION_KINDS:
        arch['permutation per block'] = f'{s.permutation_label} ({_pattern_legend(s.permutation)})'
    if s.perm_seed is not None:
        arch['permutation seed'] = s.perm_seed
    if s.mask_seed is not None:
        arch['mask seed'] = s.mask_seed
    arch['model_args'] = f'`{json.dumps(model_args, sort_keys=True)}`'
    details: Dict[str, Any] = {
        'Model Type': 'Image classification / feature backbone',
        'Model Stats': {'Params (M)': f'{s.params / 1e6:.2f}', 'GMACs': f'{s.gmacs:.3f}',
                        'Image size': f'{s.img_size} x {s.img_size}',
                        'Input channels': in_chans if in_chans == 3 else
                        f'{in_chans} (timm\'s train.py / validate.py / inference.py: `--in-chans {in_chans}`)'},
        'Architecture': arch,
        'Papers': [f'{PAPER_TITLE}: https://arxiv.org/abs/{PAPER_ARXIV}'],
    }
    if datasets:
        details['Dataset'] = datasets if len(datasets) > 1 else datasets[0]
    if label_names:
        details['Classes'] = ', '.join(f'{i}: {name}' for i, name in enumerate(label_names))
    if train_args:
        script = 'timm `train.py`' + (', every argument in `train_hparams.yaml`' if has_hparams_file else '')
        recipe = {'script': script}
        recipe.update({k: train_args[k] for k in _RECIPE_KEYS if train_args.get(k) not in (None, '')})
        details['Training'] = recipe
    if metrics is not None:
        details['Results'] = _results(metrics, train_args or {})
    if expanded_from:
        details['Expanded from'] = expanded_from
    how = ('expanded from a trained model to a larger image size, for fine-tuning (MLP-Mixer App. C)'
           if expanded_from else 'trained with timm')
    description = (
        f'{_article(s.family)} {s.family} ({s.geometry}) of the PK family of Hayase & Karakida, "{PAPER_TITLE}" '
        f'(ICML 2024, arXiv:{PAPER_ARXIV}), '
        f'{how}. The architecture comes from timm-pkmixer (installed from its source, not PyPI: see Usage), '
        f'which registers it in timm.')
    return {
        'tags': ['image-classification', 'timm', 'timm-pkmixer', s.family_tag, f'arxiv:{PAPER_ARXIV}'],
        'license': license,
        'description': description,
        'details': details,
        'usage': _usage(repo_id, _num_classes(model_name, model_args), in_chans, (s.img_size, s.img_size),
                        label_names=bool(label_names), train_args=train_args),
        'citation': PAPER_BIBTEX,
    }


def _results(metrics: RunMetrics, train_args: Dict[str, Any]) -> Dict[str, str]:
    res = {'top-1 (%)': f'{metrics.top1:.2f}'}
    if metrics.top5 is not None:
        res['top-5 (%)'] = f'{metrics.top5:.2f}'
    split = train_args.get('val_split') or 'validation'
    res['evaluated'] = (f'epoch {metrics.epoch + 1} (counted from 1), `{split}` split, '
                        f'{"EMA " if metrics.ema else ""}weights as pushed, '
                        f'by train.py (`summary.csv` of the run)')
    return res


def render_model_card(card: Dict[str, Any], repo_id: str) -> str:
    """README.md text: timm's `generate_readme` (YAML header, details, usage, citation)."""
    return generate_readme(card, repo_id.split('/')[-1])
