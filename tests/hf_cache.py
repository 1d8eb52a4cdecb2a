"""Lay a model folder out as huggingface_hub's cache holds a downloaded repository, so that
``hf_hub_download`` (and timm's ``hf-hub:`` loading) finds it with ``HF_HUB_OFFLINE=1``."""
import hashlib
import os
import shutil
from pathlib import Path

from huggingface_hub import scan_cache_dir, try_to_load_from_cache
from huggingface_hub.file_download import repo_folder_name


def install_in_hf_cache(folder: Path, cache_dir: Path, repo_id: str, move: bool = False) -> str:
    """`cache_dir/models--org--name/{blobs/<sha256>, snapshots/<commit>/<file> → blob, refs/main}`.

    Returns the commit hash. `move` moves the files instead of copying them (large weights).
    """
    commit = hashlib.sha1(repo_id.encode()).hexdigest()
    repo = Path(cache_dir) / repo_folder_name(repo_id=repo_id, repo_type='model')
    snapshot = repo / 'snapshots' / commit
    (repo / 'blobs').mkdir(parents=True, exist_ok=True)
    snapshot.mkdir(parents=True, exist_ok=True)
    names = sorted(p.name for p in Path(folder).iterdir())
    for name in names:
        src = Path(folder) / name
        digest = hashlib.sha256()
        with src.open('rb') as f:
            for chunk in iter(lambda: f.read(1 << 24), b''):
                digest.update(chunk)
        blob = repo / 'blobs' / digest.hexdigest()
        (shutil.move if move else shutil.copyfile)(src, blob)
        os.symlink(os.path.relpath(blob, snapshot), snapshot / name)
    (repo / 'refs').mkdir(exist_ok=True)
    (repo / 'refs' / 'main').write_text(commit)

    # the layout is the one huggingface_hub itself reads
    info = scan_cache_dir(cache_dir)
    (repo_info,) = [r for r in info.repos if r.repo_id == repo_id]
    (revision,) = repo_info.revisions
    assert revision.commit_hash == commit and revision.refs == frozenset({'main'}) and not info.warnings
    assert sorted(f.file_name for f in revision.files) == names
    for name in names:
        assert try_to_load_from_cache(repo_id, name, cache_dir=cache_dir) == str(snapshot / name)
    return commit
