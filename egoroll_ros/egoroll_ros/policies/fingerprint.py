"""Policy fingerprints and the cache directory for derived artefacts."""

from __future__ import annotations

from collections.abc import Mapping
import hashlib
import os
from pathlib import Path

from egoroll_ros.errors import CheckpointError

_BLOCK = 1 << 20


def file_sha256(path: str | Path) -> str:
    """Lowercase sha256 hex of a file's bytes.

    Raises:
        CheckpointError: the file cannot be read.
    """
    h = hashlib.sha256()
    try:
        with open(path, 'rb') as fh:
            while block := fh.read(_BLOCK):
                h.update(block)
    except OSError as exc:
        raise CheckpointError(f'cannot read {path}: {exc.strerror}') from None
    return h.hexdigest()


def fingerprint(parts: Mapping[str, str | Path | bytes]) -> str:
    """sha256 over named parts (weights, config, normalisation statistics).

    Each part is a file path or bytes; the digest covers each part's role name and content
    hash in sorted role order, so renaming a file does not change it but swapping roles does.

    Returns:
        Lowercase sha256 hex (64 characters).
    """
    outer = hashlib.sha256(b'egoroll-fingerprint-v1\n')
    for role in sorted(parts):
        value = parts[role]
        digest = hashlib.sha256(value).hexdigest() if isinstance(value, bytes) \
            else file_sha256(value)
        outer.update(f'{role}\0{digest}\n'.encode())
    return outer.hexdigest()


def cache_dir(create: bool = True) -> Path:
    """The directory for derived artefacts: ``$EGOROLL_CACHE_DIR``, else
    ``$XDG_CACHE_HOME/egoroll``, else ``~/.cache/egoroll``. Never next to a checkpoint.
    """
    env = os.environ.get('EGOROLL_CACHE_DIR')
    if env:
        path = Path(env)
    else:
        base = os.environ.get('XDG_CACHE_HOME') or str(Path.home() / '.cache')
        path = Path(base) / 'egoroll'
    if create:
        path.mkdir(parents=True, exist_ok=True)
    return path
