"""`pkmixer push`: publish a trained checkpoint on the Hugging Face Hub in timm's format."""
import argparse
import sys
import tempfile
from pathlib import Path
from typing import Any, Dict, Tuple

from ._common import add_command, add_model_options, in_flag_terms, progress

__all__ = ['add_commands', 'PUBLISH_ARGUMENTS', 'card_repo_id', 'read_and_build', 'write_and_list']

PUBLISH_ARGUMENTS = ('repo_id', 'use_ema', 'out_dir')  # the library's arguments these commands name as flags
HUB_FILES = 'model.safetensors, config.json and the model card'


def read_and_build(args: argparse.Namespace) -> Tuple[Any, Any, str, Dict[str, Any]]:
    """(checkpoint, model, its architecture, its build arguments): ``args.checkpoint`` read and loaded strictly into
    ``args.model``, else into the model the run records (the checkpoint's train.py arguments, else the args.yaml
    beside it), as push and expand both start, saying each step (a large model takes tens of seconds)."""
    from ..publish.checkpoint_file import build_validated_model, read_checkpoint, trained_model_name
    from ..sizes import format_bytes
    path = Path(args.checkpoint)
    size = f' ({format_bytes(path.stat().st_size)})' if path.is_file() else ''
    with in_flag_terms(args, 'model', *PUBLISH_ARGUMENTS):
        progress(f'reading {args.checkpoint}{size}')
        ckpt = read_checkpoint(args.checkpoint, use_ema=args.use_ema)
        name = trained_model_name(ckpt, args.model)
        progress(f'building {name} and loading the weights into it')
        model, build_kwargs = build_validated_model(name, ckpt, args.model_kwargs)
    return ckpt, model, name, build_kwargs


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


def card_repo_id(args: argparse.Namespace) -> str:
    """The repository the card's usage snippet names: ``--repo-id``, else ``your-org/<the --out-dir folder's name>``
    (a folder only written needs no repository)."""
    from ..publish.hub import check_repo_id
    with in_flag_terms(args, *PUBLISH_ARGUMENTS):
        return check_repo_id(args.repo_id or f'your-org/{Path(args.out_dir).resolve().name}')


def run(args: argparse.Namespace) -> int:
    from ..errors import InvalidArgumentError
    from ..publish.hub import upload_to_hub
    if not args.out_dir and not args.repo_id:
        raise InvalidArgumentError('--repo-id ORG/NAME is needed to upload (or --out-dir DIR to only write the '
                                   'folder)')
    repo_id = card_repo_id(args)
    ckpt, model, _, _ = read_and_build(args)
    with tempfile.TemporaryDirectory() as tmp:
        out = args.out_dir or str(Path(tmp) / 'upload')
        folder = write_and_list(args, model, ckpt, out, repo_id, out if args.out_dir else 'a temporary folder',
                                datasets=args.dataset)
        if args.out_dir:
            where = (f'without --out-dir this goes to {args.repo_id}' if args.repo_id else
                     f'to upload it, push again with --repo-id ORG/NAME; the card names {repo_id} until then')
            print(f'wrote {folder.path}; nothing uploaded ({where})')
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
    add_model_options(p, required=False,
                      help="registered architecture, e.g. rp_mixer_b_w (default: the run's, which the checkpoint "
                           "or the args.yaml beside it records)")
    p.add_argument('--repo-id', default=None,
                   help='Hub repository ORG/NAME (created if needed); needed to upload, not with --out-dir')
    p.add_argument('--use-ema', action='store_true', help='push the EMA weights of a train.py checkpoint')
    p.add_argument('--private', action='store_true', help='create the repository as private')
    p.add_argument('--out-dir', default=None, help='only write the folder a push uploads; upload nothing')
    p.add_argument('--license', default=None, help='license of the weights (default: apache-2.0)')
    p.add_argument('--dataset', nargs='+', default=None,
                   help="Hub dataset ids for the card (default: train.py's --dataset)")
    p.add_argument('--commit-message', default='Add model')
