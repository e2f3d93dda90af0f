"""The profile's seal key (gateway/common/seal.py): where it lives, read or made once at start.

`API_SERVER_SEAL_KEY` set: the key is derived from it (HKDF-SHA256), so every replica given the same
secret, as replicas sharing one PostgreSQL database must be, opens the others' values. Unset: 32
random bytes in `<profile home>/seal.key`, made on first start with mode 0600 (never replaced:
values handed out before a restart still open), which suits one gateway on one machine.
"""

from __future__ import annotations

import base64
import logging
import os
from pathlib import Path

from gateway.common.seal import KEY_BYTES
from gateway.config.settings import Settings

log = logging.getLogger("agent_gateway.config")
KEY_FILE = "seal.key"


def seal_key(settings: Settings) -> bytes:
    if settings.seal_key:
        # imported here: a gateway with a key file loads `cryptography` only when it first seals
        # or opens a value (gateway/common/seal.py)
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.kdf.hkdf import HKDF

        return HKDF(algorithm=hashes.SHA256(), length=KEY_BYTES, salt=None,
                    info=b"agent-gateway seal key").derive(settings.seal_key.encode())
    if settings.database_url:
        log.warning("API_SERVER_SEAL_KEY is not set: this replica seals with its own key file, which other "
                    "replicas on the same database cannot open; give them all the same API_SERVER_SEAL_KEY")
    try:
        return _key_file(settings.profile_dir / KEY_FILE)
    except OSError as exc:  # a read-only home (a container's): serve on, with a key of this run's
        log.warning("cannot keep a seal key in %s (%s): sealed values will not open after a restart; "
                    "set API_SERVER_SEAL_KEY", settings.profile_dir, exc.strerror or exc)
        return os.urandom(KEY_BYTES)


def _key_file(path: Path) -> bytes:
    try:
        return _read(path)
    except FileNotFoundError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        # O_EXCL: two processes starting at once keep one key (the later one reads the first's)
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return _read(path)
    with os.fdopen(descriptor, "w", encoding="ascii") as file:
        file.write(base64.b64encode(os.urandom(KEY_BYTES)).decode("ascii") + "\n")
    return _read(path)


def _read(path: Path) -> bytes:
    key = base64.b64decode(path.read_text(encoding="ascii").strip())
    if len(key) != KEY_BYTES:
        raise ValueError(f"{path} does not hold a {KEY_BYTES}-byte key (base64); remove it to make a new one")
    return key
