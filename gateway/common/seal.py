"""Values the gateway hands a client to give back unchanged, sealed: the client can neither read
nor forge them, and another profile's or deployment's do not open here.

AES-256-GCM (authenticated encryption, `cryptography`'s AESGCM) under the profile's seal key
(gateway/config/seal_key.py), with a fresh 96-bit nonce per value and the purpose and profile as
associated data: a value sealed for one purpose or profile fails to open for another, as one
sealed under another key or changed by one bit does. A value that does not open is None, never an
error: the caller goes on without it. Pure: no I/O.
"""

from __future__ import annotations

import base64
import binascii
import os
from typing import TYPE_CHECKING, Any

from gateway.common import json_in, json_out

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

#: What a sealed value starts with: its format, so that a later one can change it.
PREFIX = "agw1."
NONCE_BYTES = 12
KEY_BYTES = 32
#: A value longer than this is not one of ours (a reasoning text is far shorter): not decoded.
MAX_SEALED_CHARS = 8 * 1024 * 1024


class Sealer:
    """Seals and opens JSON objects for one `purpose` of one profile (`scope`)."""

    __slots__ = ("_key", "_aead", "_aad")

    def __init__(self, key: bytes, purpose: str, scope: str) -> None:
        if len(key) != KEY_BYTES:
            raise ValueError(f"a seal key is {KEY_BYTES} bytes")
        self._key = key
        self._aead: AESGCM | None = None
        self._aad = f"agent-gateway\0{purpose}\0{scope}".encode()

    def _cipher(self) -> AESGCM:
        # `cryptography` is imported on the first value sealed or opened, not when the app is built:
        # most gateways never seal anything, and it is the largest part of an idle gateway's
        # imports (bench/README.md, idle RSS)
        if self._aead is None:
            from cryptography.hazmat.primitives.ciphers.aead import AESGCM

            self._aead = AESGCM(self._key)
        return self._aead

    def seal(self, value: dict[str, Any]) -> str:
        nonce = os.urandom(NONCE_BYTES)
        sealed = self._cipher().encrypt(nonce, json_out.dumps(value), self._aad)
        return PREFIX + base64.urlsafe_b64encode(nonce + sealed).decode("ascii").rstrip("=")

    def open(self, token: object) -> dict[str, Any] | None:
        """The object sealed in `token`; None for anything that is not one of ours, intact."""
        if not isinstance(token, str) or not token.startswith(PREFIX) or len(token) > MAX_SEALED_CHARS:
            return None
        body = token[len(PREFIX):]
        cipher = self._cipher()
        from cryptography.exceptions import InvalidTag  # imported by _cipher: a lookup in sys.modules

        try:
            raw = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
            plain = cipher.decrypt(raw[:NONCE_BYTES], raw[NONCE_BYTES:], self._aad)
            value = json_in.loads(plain)
        except (binascii.Error, ValueError, InvalidTag):
            return None
        return value if isinstance(value, dict) else None
