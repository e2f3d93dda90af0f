"""JSON from the outside world, made safe to re-encode.

Reading: JSON may carry `\\ud800`-style escapes for lone UTF-16 surrogates; `json.loads` turns them into
Python strings that cannot be encoded as UTF-8, so the first `.encode()` downstream (an SSE frame,
a SQLite row) would fail. Every JSON body the gateway reads from a client or the upstream goes
through `loads`, which replaces lone surrogates with U+FFFD once, at the boundary. Valid pairs
(an escaped emoji) are joined by `json.loads` itself and are untouched.

Speed: client bodies and upstream replies are parsed by orjson (a default dependency; several times
quicker, bench/README.md), with the stdlib's result in every case where the two could differ:
orjson refuses NaN/Infinity, a byte-order mark and lone surrogates (the stdlib then parses them as
before), and it would turn an integer past 64 bits into a float, so text with an integer literal of
19 or more digits goes to the stdlib directly.
"""

from __future__ import annotations

import json
import re
from typing import Any

try:  # a default dependency, but the gateway also runs without it (checked once here)
    from orjson import loads as _orjson_loads
except ImportError:  # pragma: no cover - depends on the environment
    _orjson_loads = None  # type: ignore[assignment]

# 19 digits in a row: an integer that may not fit 64 bits, which orjson would read as a float.
# Found by mapping every digit to b"1" and looking for 19 of them: both steps run in C, an order of
# magnitude faster per byte than the regex `\d{19}` (bench/README.md has the figure).
_DIGITS_AS_ONES = bytes.maketrans(b"0123456789", b"1111111111")
_LONG_DIGIT_RUN = b"1" * 19
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def _may_hold_surrogate(data: bytes | str) -> bool:
    if isinstance(data, bytes):
        return data.find(b"\\ud") != -1 or data.find(b"\\uD") != -1  # find: see has_long_integer
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


def has_long_integer(data: bytes) -> bool:
    """Whether `data` holds 19 or more digits in a row (a translated copy lives for the check)."""
    # find, not `in`: `bytes in bytes` first tries the needle as an integer (a byte value), so each
    # test raises and clears a formatted TypeError inside CPython before it searches
    return data.translate(_DIGITS_AS_ONES).find(_LONG_DIGIT_RUN) != -1


def loads(data: bytes | str) -> Any:
    """`json.loads`' result, plus the surrogate scrub only when the text contains a `\\ud...` escape."""
    if _orjson_loads is not None and type(data) is bytes and not has_long_integer(data):
        try:
            return _orjson_loads(data)  # it refuses lone surrogates: what it returns needs no scrub
        except ValueError:  # orjson.JSONDecodeError: not JSON, or JSON only the stdlib reads
            pass
    value = json.loads(data)
    return scrub_surrogates(value) if _may_hold_surrogate(data) else value

