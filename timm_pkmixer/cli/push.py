"""`pkmixer push`: publish a trained checkpoint on the Hugging Face Hub in timm's format."""
import argparse
import sys
import tempfile
from pathlib import Path

from ._common import add_command, add_model_options, in_flag_terms

__all__ = ['add_commands']

PUBLISH_ARGUMENTS = ('repo_id', 'use_ema', 'out_dir')  # the library's arguments these commands name as flags


def run(args: argparse.Namespace) -> int:
    from ..publish.checkpoint_file import build_validated_model, read_checkpoint
    from ..publish.hub import check_repo_id, upload_to_hub, write_hub_folder
    with in_flag_terms(args, *PUBLISH_ARGUMENTS):
        check_repo_id(args.repo_id)
        ckpt = read_checkpoint(args.checkpoint, use_ema=args.use_ema)
        model, _ = build_validated_model(args.model, ckpt, args.model_kwargs)
    with tempfile.TemporaryDirectory() as tmp:
        with in_flag_terms(args, *PUBLISH_ARGUMENTS):
            folder = write_hub_folder(model, ckpt, args.out_dir or str(Path(tmp) / 'upload'), args.repo_id,
                                      license=args.license, datasets=args.dataset)
        for note in folder.notes:
            print(f'note: {note}', file=sys.stderr)
        for name in folder.files:
            print(f'{(folder.path / name).stat().st_size:>12,d}  {name}')
        if args.out_dir:
            print(f'wrote {folder.path}; nothing uploaded (without --out-dir this goes to {args.repo_id})')
            return 0
        try:
            url = upload_to_hub(str(folder.path), args.repo_id, private=args.private,
                                commit_message=args.commit_message)
        except Exception as e:  # network, authentication, permissions: huggingface_hub says which
            print(f'{args.prog}: upload to {args.repo_id} failed: {type(e).__name__}: {e}', file=sys.stderr)
            return 1
    print(f'uploaded to {url}')
    return 0


def add_commands(subparsers: argparse._SubParsersAction) -> None:
    p = add_command(
        subparsers, 'push',
        run, help='publish a trained checkpoint on the Hugging Face Hub (timm format: safetensors, config, card)',
        description='Build the model, load and validate the weights, write model.safetensors, config.json, '
                    'README.md (model card) and train_hparams.yaml, and upload them (or only write them: --out-dir).')
    p.add_argument('checkpoint',
                   help='train.py checkpoint (model_best.pth.tar, last.pth.tar), state dict or .safetensors')
    add_model_options(p, help='registered architecture, e.g. rp_mixer_b_w')
    p.add_argument('--repo-id', required=True, help='Hub repository ORG/NAME (created if needed)')
    p.add_argument('--use-ema', action='store_true', help='push the EMA weights of a train.py checkpoint')
    p.add_argument('--private', action='store_true', help='create the repository as private')
    p.add_argument('--out-dir', default=None, help='only write the folder a push uploads; upload nothing')
    p.add_argument('--license', default=None, help='license of the weights (default: apache-2.0)')
    p.add_argument('--dataset', nargs='+', default=None,
                   help="Hub dataset ids for the card (default: train.py's --dataset)")
    p.add_argument('--commit-message', default='Add model')
