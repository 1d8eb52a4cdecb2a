"""`pkmixer push`: publish a trained checkpoint on the Hugging Face Hub in timm's format."""
import argparse
import sys
import tempfile
from pathlib import Path
from typing import Any, Dict, Tuple

from ._common import add_command, add_model_options, in_flag_terms, progress

__all__ = ['add_commands', 'PUBLISH_ARGUMENTS', 'read_and_build', 'write_and_list']

PUBLISH_ARGUMENTS = ('repo_id', 'use_ema', 'out_dir')  # the library's arguments these commands name as flags
HUB_FILES = 'model.safetensors, config.json and the model card'


def read_and_build(args: argparse.Namespace) -> Tuple[Any, Any, Dict[str, Any]]:
    """(checkpoint, model, its build arguments): ``args.checkpoint`` read and loaded strictly into ``args.model``,
    as push and expand both start, saying each step (a large model takes tens of seconds)."""
    from ..publish.checkpoint_file import build_validated_model, read_checkpoint
    from ..sizes import format_bytes
    path = Path(args.checkpoint)
    size = f' ({format_bytes(path.stat().st_size)})' if path.is_file() else ''
    with in_flag_terms(args, *PUBLISH_ARGUMENTS):
        progress(f'reading {args.checkpoint}{size}')
        ckpt = read_checkpoint(args.checkpoint, use_ema=args.use_ema)
        progress(f'building {args.model} and loading the weights into it')
        model, build_kwargs = build_validated_model(args.model, ckpt, args.model_kwargs)
    return ckpt, model, build_kwargs


def write_and_list(args: argparse.Namespace, model: Any, ckpt: Any, out: str, repo_id: str, shown_as: str,
                   **card: Any) -> Any:
    """The Hub folder of `model` written into `out` (``publish.hub.write_hub_folder``, `card`: its model-card
    arguments), as push and expand both end: saying so first (`out` as `shown_as`), then its notes on stderr and
    its files with their sizes on stdout."""
    from ..publish.hub import write_hub_folder
    progress(f'writing {HUB_FILES} into {shown_as}')
    with in_flag_terms(args, *PUBLISH_ARGUMENTS):
        folder = write_hub_folder(model, ckpt, out, repo_id, license=args.license, **card)
    for note in folder.notes:
        print(f'note: {note}', file=sys.stderr)
    for name in folder.files:
        print(f'{(folder.path / name).stat().st_size:>12,d}  {name}')
    return folder


def run(args: argparse.Namespace) -> int:
    from ..publish.hub import check_repo_id, upload_to_hub
    with in_flag_terms(args, *PUBLISH_ARGUMENTS):
        check_repo_id(args.repo_id)
    ckpt, model, _ = read_and_build(args)
    with tempfile.TemporaryDirectory() as tmp:
        out = args.out_dir or str(Path(tmp) / 'upload')
        folder = write_and_list(args, model, ckpt, out, args.repo_id, out if args.out_dir else 'a temporary folder',
                                datasets=args.dataset)
        if args.out_dir:
            print(f'wrote {folder.path}; nothing uploaded (without --out-dir this goes to {args.repo_id})')
            return 0
        progress(f'uploading to {args.repo_id}')
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
