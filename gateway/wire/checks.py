"""Small checks shared by the request parsers; each failure is a 400 naming the field."""

from __future__ import annotations

import math
from typing import Any

from gateway.errors import InvalidRequestError, echo

#: `tool_choice` as a string, in both APIs.
TOOL_CHOICE_MODES = ("none", "auto", "required")


def expect(value: Any, kinds: type | tuple[type, ...], param: str, what: str) -> Any:
    ok = isinstance(value, kinds) and not (isinstance(value, bool) and bool not in _as_tuple(kinds))
    if not ok:
        raise InvalidRequestError(f"'{param}' must be {what}", param=param)
    return value


def _as_tuple(kinds: type | tuple[type, ...]) -> tuple[type, ...]:
    return kinds if isinstance(kinds, tuple) else (kinds,)


def in_range(value: float, low: float | None, high: float | None) -> bool:
    """A finite number within [low, high]; NaN and the infinities (which Python's JSON reads) are not."""
    return math.isfinite(value) and (low is None or value >= low) and (high is None or value <= high)


def optional_number(body: dict[str, Any], name: str, low: float | None = None, high: float | None = None) -> None:
    value = body.get(name)
    if value is None:
        return
    expect(value, (int, float), name, "a number")
    if not in_range(value, low, high):
        if low is None or high is None:
            raise InvalidRequestError(f"'{name}' must be a finite number", param=name)
        raise InvalidRequestError(f"'{name}' must be between {low:g} and {high:g}", param=name)


def optional_int(body: dict[str, Any], name: str, low: int = 1) -> None:
    value = body.get(name)
    if value is None:
        return
    expect(value, int, name, "an integer")
    if value < low:
        raise InvalidRequestError(f"'{name}' must be at least {low}", param=name)


def chat_tool_choice(value: Any) -> None:
    """Chat Completions' `tool_choice`: a mode or `{"type": "function", "function": {"name": ...}}`.
    Any other type (`file_search`, `mcp`, ...) is a 400, as OpenAI answers, not passed upstream."""
    if isinstance(value, str):
        if value not in TOOL_CHOICE_MODES:
            raise InvalidRequestError(f"'tool_choice' must be none, auto, required or a function; "
                                      f"got {echo(repr(value))}", param="tool_choice")
        return
    if not isinstance(value, dict) or value.get("type") != "function":
        kind = value.get("type") if isinstance(value, dict) else value
        raise InvalidRequestError(f"'tool_choice' must be none, auto, required or "
                                  f"{{\"type\": \"function\", \"function\": {{\"name\": ...}}}}; got type "
                                  f"{echo(repr(kind))}", param="tool_choice")
    function = value.get("function")
    if not isinstance(function, dict) or not isinstance(function.get("name"), str):
        raise InvalidRequestError("'tool_choice.function.name' must be a string", param="tool_choice.function.name")
