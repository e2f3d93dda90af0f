"""Folders and files only their owner may read: the profile home holds keys' hashes, stored
conversations and the upstream's key in `.env`, so other users of the machine get no access bits,
whatever the umask, and a home made by an older version (0755, 0644) is tightened when opened."""

from __future__ import annotations

import os
import stat
from pathlib import Path


def private_dir(path: Path) -> None:
    """Make `path` (and missing parents) if needed; leave the owner alone with it (0700 at most)."""
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    _tighten(path)


def private_file(path: Path) -> None:
    """Create `path` empty if missing, 0600; an existing one loses its group and other bits."""
    try:
        os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
    except FileExistsError:
        pass
    _tighten(path)


def _tighten(path: Path) -> None:
    mode = stat.S_IMODE(path.stat().st_mode)
    if mode & 0o077 and path.stat().st_uid == os.getuid():
        os.chmod(path, mode & 0o700)
