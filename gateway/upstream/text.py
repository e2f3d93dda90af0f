"""What the gateway repeats of the upstream to its own clients and logs, made safe to repeat.

- `without_credentials`: a base URL without its credentials (`http://user:PASSWORD@host/v1` -> `http://host/v1`).
- `error_message`: an upstream error body's message, cut short and scrubbed: an upstream that echoes
  the request (its `Authorization` header, say) must not hand the gateway's key to a client.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable

from yarl import URL

#: The most of an upstream's words a client gets (after scrubbing).
MAX_RELAYED = 300
#: How much of the body is scrubbed before the cut, so a secret across the cut cannot leave half of itself.
_SCRUB_WINDOW = 4096
REDACTED = "[redacted]"

# `Authorization: Bearer x`, `"x-api-key": "x"`, `api_key=x` ...: the value goes, the name stays.
_HEADER_VALUE = re.compile(
    r"""(?ix)
    (\b(?:proxy-)?authorization|\bx-api-key|\bapi[-_]?key|\bcookie|\bset-cookie|\b[a-z-]*token|\bpassword|\bsecret)
    (["']?\s*[:=]\s*["']?)
    (?:(?:bearer|basic|token)\s+)?
    [^\s"',;}]+
    """)
_SCHEME_VALUE = re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]{6,}")
# what a key looks like: a known prefix, or a long run mixing letters and digits
_KEY_LIKE = re.compile(
    r"\b(?:sk|pk|rk|ak|gsk|xai|tvly|fc|key|api)[-_][A-Za-z0-9_-]{6,}"
    r"|\b(?=[A-Za-z]*[0-9])(?=[0-9]*[A-Za-z])[A-Za-z0-9]{32,}")
_URL_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/\s@]+@")


def without_credentials(url: str) -> str:
    """`url` without user and password; unchanged when it holds none."""
    try:
        parsed = URL(url)
    except (TypeError, ValueError):
        return _URL_USERINFO.sub(r"\1", url)
    if parsed.user is None and parsed.password is None:
        return url
    return str(parsed.with_user(None))


def scrub(text: str, secrets: Iterable[str | None] = ()) -> str:
    """`text` with the given secrets, header values, credentials in URLs and key-looking strings
    replaced by `[redacted]`."""
    for secret in secrets:
        if secret and len(secret) >= 4:
            text = text.replace(secret, REDACTED)
    text = _URL_USERINFO.sub(r"\1" + REDACTED + "@", text)
    text = _HEADER_VALUE.sub(lambda m: m.group(1) + m.group(2) + REDACTED, text)
    text = _SCHEME_VALUE.sub(lambda m: m.group(1) + " " + REDACTED, text)
    return _KEY_LIKE.sub(REDACTED, text)


def relayed(text: str, secrets: Iterable[str | None] = ()) -> str:
    """Upstream words fit to relay: scrubbed, then cut to `MAX_RELAYED` characters."""
    cleaned = scrub(text[:_SCRUB_WINDOW], secrets).strip()
    return cleaned if len(cleaned) <= MAX_RELAYED else cleaned[:MAX_RELAYED] + "..."


def error_message(body: bytes, secrets: Iterable[str | None] = ()) -> str:
    """The message of an upstream error body (OpenAI's `{"error": {"message"}}`, FastAPI's
    `{"detail"}`, plain text ...), fit to relay."""
    return relayed(_raw_message(body) or "no details", secrets)


def _raw_message(body: bytes) -> str:
    try:
        data = json.loads(body)
    except (ValueError, RecursionError):
        return body[:_SCRUB_WINDOW].decode("utf-8", "replace").strip()
    if isinstance(data, dict):
        error = data.get("error", data)
        if isinstance(error, dict):
            message = error.get("message") or error.get("detail")
            if message:
                return str(message)
        elif isinstance(error, str):
            return error
        if "detail" in data:
            return str(data["detail"])
    return body[:_SCRUB_WINDOW].decode("utf-8", "replace").strip()
