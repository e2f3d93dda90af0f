"""JSON from the outside world, made safe to re-encode.

Reading: JSON may carry `\\ud800`-style escapes for lone UTF-16 surrogates; `json.loads` turns them into
Python strings that cannot be encoded as UTF-8, so the first `.encode()` downstream (an SSE frame,
a SQLite row) would fail. Every JSON body the gateway reads from a client or the upstream goes
through `loads`, which replaces lone surrogates with U+FFFD once, at the boundary. Valid pairs
(an escaped emoji) are joined by `json.loads` itself and are untouched.

Writing: `dumps_bytes` uses orjson when it is installed (the optional `fast` extra; ~10x quicker on
the upstream request, which carries the whole conversation and the tool schemas) and the stdlib for
anything orjson refuses (integers beyond 64 bits, non-string keys), so nothing depends on it.
"""

from __future__ import annotations

import json
import re
from typing import Any

try:  # optional (agent-gateway[fast])
    from orjson import dumps as _orjson_dumps
except ImportError:  # pragma: no cover - depends on the environment
    _orjson_dumps = None  # type: ignore[assignment]

_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def _may_hold_surrogate(data: bytes | str) -> bool:
    if isinstance(data, bytes):
        return b"\\ud" in data or b"\\uD" in data
    return "\\ud" in data or "\\uD" in data


def scrub_surrogates(value: Any) -> Any:
    """`value` with every lone surrogate in its strings (keys included) replaced by U+FFFD."""
    if isinstance(value, str):
        return _LONE_SURROGATE.sub("\ufffd", value)
    if isinstance(value, list):
        return [scrub_surrogates(item) for item in value]
    if isinstance(value, dict):
        return {scrub_surrogates(k): scrub_surrogates(v) for k, v in value.items()}
    return value


def loads(data: bytes | str) -> Any:
    """`json.loads`, plus the surrogate scrub only when the text contains a `\\ud...` escape."""
    value = json.loads(data)
    return scrub_surrogates(value) if _may_hold_surrogate(data) else value


def dumps_bytes(value: Any) -> bytes:
    """`value` as compact-enough UTF-8 JSON bytes (orjson when installed, the stdlib otherwise)."""
    if _orjson_dumps is not None:
        try:
            return _orjson_dumps(value)
        except TypeError:  # orjson.JSONEncodeError: e.g. an int past 64 bits; the stdlib takes it
            pass
    return json.dumps(value).encode()
