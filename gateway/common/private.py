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
    """Create `path` empty if missing, 0600; an existing one loses its group and other bits. Best
    effort: a file that cannot be made or changed (read-only, immutable) is left for its opener to
    report with its own words."""
    try:
        os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
    except FileExistsError:
        pass
    except OSError:
        return
    _tighten(path)


def _tighten(path: Path) -> None:
    try:
        found = path.stat()
        if stat.S_IMODE(found.st_mode) & 0o077 and found.st_uid == os.getuid():
            os.chmod(path, stat.S_IMODE(found.st_mode) & 0o700)
    except OSError:
        pass  # not ours to change (read-only, immutable): the access bits stay as they are
