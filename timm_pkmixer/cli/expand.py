"""`pkmixer expand CHECKPOINT [--model NAME] --factor K --out-dir DIR`: a trained Mixer, expanded to K-times larger
images (MLP-Mixer App. C), written as a folder that timm loads with `local-dir:` (and the Hub with `hf-hub:`)."""
import argparse
import json
from pathlib import Path

from ..validation import cli_type, integer
from ._common import add_command, add_model_options, progress
from .push import card_repo_id, read_and_build, write_and_list

__all__ = ['add_commands']


def run(args: argparse.Namespace) -> int:
    from ..models.expand import expand_resolution
    repo_id = card_repo_id(args)
    ckpt, model, name, build_kwargs = read_and_build(args)
    k, d = args.factor, model.describe()
    c, h, w = model.pretrained_cfg['input_size']
    progress(f'expanding {name} {k}× ({h}→{k * h} px)')
    expanded = expand_resolution(model, args.factor)
    how = (f'the tokens are grouped by image tile (a fixed permutation after the per-patch FC) and every token-mixing '
           f'weight W becomes I_{k * k} ⊗ W (block-diagonal copies; hidden {d.token_hidden or d.num_tokens} → '
           f'{(d.token_hidden or d.num_tokens) * k * k}, tokens {d.num_tokens} → {d.num_tokens * k * k})'
           + ('; random permutations lifted tile by tile from the same perm_seed' if d.random_blocks else ''))
    origin = {'model': f'`{name}`', 'model_args': f'`{json.dumps(build_kwargs, sort_keys=True)}`',
              'weights': Path(args.checkpoint).name, 'factor': f'{k} (images {h}×{w} → {k * h}×{k * w})',
              'how': how, 'exactness': f'on an image of {k}×{k} tiles of the original size, every tile gets exactly '
                                      f"the original model's tokens"}
    folder = write_and_list(args, expanded, ckpt, args.out_dir, repo_id, args.out_dir, expanded_from=origin)
    params = (sum(p.numel() for p in model.parameters()), sum(p.numel() for p in expanded.parameters()))
    print(f'wrote {folder.path}: {name} expanded {k}× ({h}→{k * h} px), params {params[0] / 1e6:.2f}M → '
          f'{params[1] / 1e6:.2f}M; fine-tune with train.py --model local-dir:{folder.path} --pretrained')
    return 0


def add_commands(subparsers: argparse._SubParsersAction) -> None:
    p = add_command(
        subparsers, 'expand', run,
        help='expand a trained Mixer to K-times larger images for fine-tuning (exact on tiled images)',
        description='Load a checkpoint into its model (validated as for push), expand it to K-times larger images '
                    '(MLP-Mixer App. C: block-diagonal copies of the token mixing, tokens grouped by tile) and write '
                    'model.safetensors, config.json and a model card into a new folder.')
    p.add_argument('checkpoint', help='train.py checkpoint, state dict or .safetensors of the original model')
    add_model_options(p, required=False, help="registered architecture of the checkpoint, e.g. pk_mixer_b16_224 "
                                              "(default: the run's, which the checkpoint or its args.yaml records)")
    p.add_argument('--factor', type=cli_type(integer, name='factor'), required=True,
                   help='K ≥ 2: the image grows K times per side (224 → 448 for K = 2)')
    p.add_argument('--out-dir', required=True, help='a new or empty folder')
    p.add_argument('--repo-id', default=None, help='ORG/NAME for the card\'s usage snippet (default: your-org/OUT_DIR)')
    p.add_argument('--use-ema', action='store_true', help='expand the EMA weights of a train.py checkpoint')
    p.add_argument('--license', default=None, help='license of the weights (default: apache-2.0)')
