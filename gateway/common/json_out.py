"""JSON the gateway writes whole: reply bodies (chat completions, responses, errors, models) and the
upstream request (which carries the whole conversation and the tool schemas).

`orjson` when it is installed (a default dependency): far cheaper per reply than
`json.dumps(..., ensure_ascii=False).encode()` (bench/README.md). Anything orjson refuses (integers past 64 bits,
non-string keys, lone surrogates, types it does not know) goes the stdlib way, so the JSON value a
client reads never depends on whether orjson is installed. Only the spacing differs: orjson writes
compact JSON, and non-ASCII text as UTF-8 rather than `\\u` escapes.

Kept to bodies built from our own objects, whose numbers are ints or validated finite floats:
orjson writes NaN as `null` where the stdlib writes the non-standard `NaN`.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

try:  # a default dependency, but the gateway also runs without it (checked once here)
    import orjson as _orjson
except ImportError:  # pragma: no cover - depends on the environment
    _orjson = None  # type: ignore[assignment]

#: An encoder faster than the stdlib's, or None. Raises TypeError on values it refuses.
FastDumps = Callable[[Any], bytes]
FAST_DUMPS: FastDumps | None = _orjson.dumps if _orjson is not None else None


def dumps(value: Any, *, ensure_ascii: bool = False, fast: FastDumps | None = FAST_DUMPS) -> bytes:
    """`value` as a UTF-8 JSON body. `ensure_ascii` applies to the stdlib path only (error bodies
    keep it: their fallback then escapes a lone surrogate instead of failing to encode it)."""
    if fast is not None:
        try:
            return fast(value)
        except TypeError:  # orjson.JSONEncodeError is a TypeError
            pass
    return json.dumps(value, ensure_ascii=ensure_ascii).encode()
