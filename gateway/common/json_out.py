"""JSON the gateway writes whole: reply bodies (chat completions, responses, errors, models) and the
upstream request (which carries the whole conversation and the tool schemas).

`orjson` when it is installed (a default dependency): far cheaper per reply than
`json.dumps(..., ensure_ascii=False).encode()` (bench/README.md). Anything orjson refuses (integers past 64 bits,
non-string keys, lone surrogates, types it does not know) goes the stdlib way, so the JSON value a
client reads never depends on whether orjson is installed. Only the spacing differs: orjson writes
compact JSON, and non-ASCII text as UTF-8 rather than `\\u` escapes.

Kept to bodies built from our own objects, whose numbers are ints or validated finite floats:
orjson writes NaN as `null` where the stdlib writes the non-standard `NaN`.

A part that is the same in many bodies (the agent's tool schemas, in every upstream request) can be
written once: an `Encoded` in a body is written as its value, orjson copying the bytes it made
at the start (an `orjson.Fragment`, orjson 3.10 and later) instead of walking the value again.
"""

from __future__ import annotations

import json
import operator
from collections.abc import Callable
from typing import Any

try:  # a default dependency, but the gateway also runs without it (checked once here)
    import orjson as _orjson
except ImportError:  # pragma: no cover - depends on the environment
    _orjson = None  # type: ignore[assignment]

#: An encoder faster than the stdlib's, or None: called as `fast(value, default=...)` (orjson's
#: signature), `default` turning an `Encoded` into what to write. Raises TypeError on values it refuses.
FastDumps = Callable[..., bytes]
FAST_DUMPS: FastDumps | None = _orjson.dumps if _orjson is not None else None
#: orjson.Fragment (orjson 3.10 and later, the declared floor), or None
_FRAGMENT_TYPE: Callable[[bytes], Any] | None = getattr(_orjson, "Fragment", None)


class Encoded:
    """A JSON value written once, at construction, and embedded as it is in every body that holds it.

    Read-only: the bytes are not made again, so a change to `value` would reach the stdlib path only."""

    __slots__ = ("value", "fragment")

    def __init__(self, value: Any) -> None:
        self.value = value
        #: what orjson writes for it: the bytes made here, or (orjson refusing the value, or not
        #: installed) the value itself, which then sends the whole body the stdlib way as before
        self.fragment: Any = value
        if _FRAGMENT_TYPE is not None:
            try:
                self.fragment = _FRAGMENT_TYPE(_orjson.dumps(value))
            except TypeError:  # orjson.JSONEncodeError is a TypeError
                pass

    def __repr__(self) -> str:
        return f"Encoded({self.value!r})"


#: orjson's `default` for an Encoded: a C-level attribute read (no Python frame per body);
#: anything else it was asked about has no `fragment`, and orjson refuses it as before
_FRAGMENT = operator.attrgetter("fragment")


def _plain(value: Any) -> Any:
    """The stdlib's `default`: an Encoded as its value, anything else refused as without one."""
    if isinstance(value, Encoded):
        return value.value
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def dumps(value: Any, *, ensure_ascii: bool = False, fast: FastDumps | None = FAST_DUMPS) -> bytes:
    """`value` as a UTF-8 JSON body. `ensure_ascii` applies to the stdlib path only (error bodies
    keep it: their fallback then escapes a lone surrogate instead of failing to encode it)."""
    if fast is not None:
        try:
            return fast(value, default=_FRAGMENT)
        except TypeError:  # orjson.JSONEncodeError is a TypeError
            pass
    return json.dumps(value, ensure_ascii=ensure_ascii, default=_plain).encode()
