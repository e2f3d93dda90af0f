"""The upstream's SSE body, frame by frame: `data:` payloads and their JSON, on the hot path.

A 50-chunk stream goes through here 52 times, so the common frame (a text delta) takes a fast
lane: `orjson` when it is installed (a default dependency), and a shape check that knows the
frame carries nothing but text. Everything else, and any frame orjson refuses, goes the stdlib
way exactly as before, so results never depend on whether orjson is installed.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from gateway.common import json_in
from gateway.errors import UpstreamError

try:  # a default dependency, but the gateway also runs without it (checked once here)
    import orjson as _orjson
except ImportError:  # pragma: no cover - depends on the environment
    _orjson = None  # type: ignore[assignment]

#: A frame decoder faster than `json.loads`, or None. Raises ValueError on input it refuses.
FastLoads = Callable[[bytes], Any]
FAST_LOADS: FastLoads | None = _orjson.loads if _orjson is not None else None

MAX_SSE_LINE = 16 * 1024 * 1024  # one upstream frame larger than this is not a model reply
DONE = b"[DONE]"


def is_done(payload: bytes) -> bool:
    return len(payload) <= 16 and payload.strip() == DONE


def load_stdlib(payload: bytes) -> Any:
    """What the gateway always did: lenient UTF-8 (bad bytes become U+FFFD), then `json.loads`."""
    return json_in.loads(payload.strip().decode("utf-8", "replace"))


def fast_chunk(payload: bytes, fast: FastLoads | None = FAST_LOADS) -> Any:
    """`fast`'s reading of the frame, None when it refuses it (NaN, lone surrogates, bad UTF-8 ...)
    or there is no `fast`: the stdlib path decides then. Only a text delta may be taken from it
    (`usual_text`, `is_text_delta`): it turns integers past 64 bits into floats, and a text delta
    holds no number the gateway reads."""
    if fast is None:
        return None
    try:
        return fast(payload)
    except ValueError:
        return None


def load_text_delta(payload: bytes, fast: FastLoads | None = FAST_LOADS) -> dict[str, Any] | None:
    """The frame's object when `fast` can read it and it is a plain text delta (`is_text_delta`);
    None sends the caller down the stdlib path, which then decides."""
    chunk = fast_chunk(payload, fast)
    return chunk if is_text_delta(chunk) else None


def usual_text(chunk: Any) -> str | None:
    """The text ("" for none) of the frame nearly every chunk of a stream is: a text delta
    (`is_text_delta`) with one choice, no finish reason and no reasoning; None for anything else
    (the caller then asks `is_text_delta`, and `deltas_of` reads the chunk). One pass where the
    shape check and the text's lookup were two, paid on every frame."""
    if type(chunk) is not dict or chunk.get("usage") is not None or "error" in chunk:
        return None
    choices = chunk.get("choices")
    if type(choices) is not list or len(choices) != 1:
        return None
    choice = choices[0]
    if type(choice) is not dict or choice.get("finish_reason") is not None:
        return None
    delta = choice.get("delta")
    if type(delta) is not dict:
        return None
    content = delta.get("content")
    # {"content": ...} alone, the usual frame, holds no tool call nor reasoning: no lookups for it
    if (len(delta) > 1 or content is None) and (
            delta.get("tool_calls") is not None or delta.get("reasoning_content") or delta.get("reasoning")
            or delta.get("reasoning_text")):
        return None
    if content is None:
        return ""
    return content if type(content) is str else None


#: In a JSON string's bytes, what ends it or needs decoding: a quote, a backslash, a control character.
_NOT_PLAIN = re.compile(rb'["\\\x00-\x1f]').search
#: Frames a stream may learn its template from without it serving once: a server whose frames
#: differ beyond their text (per-frame timings, OpenAI's `obfuscation`) stops trying after these;
#: one whose frames change now and then (a `created` of the second) learns again each time.
MAX_LEARNS = 8


class UsualFrames:
    """A stream's usual text frame told by its bytes, without parsing it: most servers send each
    text delta as the same bytes around a different string (id, model, created and every other
    field unchanged within the stream). Learnt from a frame the parse found to be a usual text
    (`usual_text`): its bytes before the content string's opening quote (`head`) and from its
    closing quote (`tail`). A later frame that starts with `head`, ends with `tail` and holds
    between them only plain string bytes (no quote, backslash or control character; valid UTF-8)
    is that same JSON document with another text, so its text is those bytes decoded: what
    orjson and `usual_text` would have returned, for a sixth of the instructions (bench/README.md).
    Anything else returns None and takes the parse, as before."""

    __slots__ = ("_head", "_tail", "_least", "_learns")

    def __init__(self) -> None:
        self._head = b"\0"  # matches no frame (a frame is the bytes after `data:`) until learnt
        self._tail = b""
        self._least = 0
        self._learns = 0

    def text(self, frame: bytes) -> str | None:
        """The frame's text when it is the learnt frame with another text; None otherwise."""
        if len(frame) < self._least or not frame.startswith(self._head) or not frame.endswith(self._tail):
            return None
        middle = frame[len(self._head):len(frame) - len(self._tail)]
        if _NOT_PLAIN(middle) is not None:
            return None
        try:
            text = middle.decode()
        except UnicodeDecodeError:
            return None
        self._learns = 0  # a template that serves may be learnt afresh when the frames change
        return text

    def learn(self, frame: bytes, text: str) -> None:
        """`frame` was parsed and found a usual text frame holding `text` (not empty): keep its
        template if its bytes show the text plainly, under the document's only `"content"` key,
        with no escape anywhere around it (so no other key can be spelled `content`)."""
        if self._learns >= MAX_LEARNS:
            return
        self._learns += 1
        key = frame.find(b'"content"')
        if key < 0 or frame.find(b'"content"', key + 1) >= 0:
            return
        at = key + 9
        while frame[at:at + 1] in (b" ", b"\t"):
            at += 1
        if frame[at:at + 1] != b":":
            return
        at += 1
        while frame[at:at + 1] in (b" ", b"\t"):
            at += 1
        if frame[at:at + 1] != b'"':
            return
        close = frame.find(b'"', at + 1)
        head, middle, tail = frame[:at + 1], frame[at + 1:close], frame[close:]
        # find, not `in`: a bytes needle costs `in` a raised and cleared TypeError (common/json_in.py)
        if close < 0 or head.find(b"\\") != -1 or tail.find(b"\\") != -1 or _NOT_PLAIN(middle) is not None:
            return
        if middle.decode("utf-8", "replace") != text:
            return
        self._head, self._tail, self._least = head, tail, len(head) + len(tail)


def is_text_delta(chunk: Any) -> bool:
    """A well-formed chunk holding at most text and a finish reason: no usage, tool calls or error.
    (A stricter, quicker `shapes.well_formed(chunk, "delta")` for the frame a stream is made of.)"""
    if type(chunk) is not dict or chunk.get("usage") is not None or "error" in chunk:
        return False
    choices = chunk.get("choices")
    if type(choices) is not list:
        return False
    for choice in choices:
        if type(choice) is not dict:
            return False
        delta = choice.get("delta")
        finish = choice.get("finish_reason")
        if type(delta) is not dict or (finish is not None and type(finish) is not str):
            return False
        content = delta.get("content")
        if (content is not None and type(content) is not str) or delta.get("tool_calls") is not None:
            return False
    return True


class SSELines:
    """The `data:` payloads of an SSE body (bytes after `data:`, unstripped), one per `data:` line
    (LLM servers send one JSON a line), tolerant of CRLF, comments and event lines. Fed each
    received piece (`feed`), it returns the lines that piece completes; `end()` the last line of
    a body that ends without a newline. Plain calls, not an async generator between the socket
    and the client: a stream's reader awaits the socket itself, one async step fewer per piece."""

    __slots__ = ("_pending", "_size")

    def __init__(self) -> None:
        self._pending: list[bytes] = []  # a line's start, joined once its end arrives (never re-copied)
        self._size = 0

    def feed(self, piece: bytes) -> list[bytes]:
        if piece.find(b"\n") == -1:  # not `in`: see above
            self._pending.append(piece)
            self._size += len(piece)
            if self._size > MAX_SSE_LINE:
                raise UpstreamError("the upstream model sent a stream line larger than 16 MiB")
            return []
        if self._pending:
            self._pending.append(piece)
            piece = b"".join(self._pending)
        *lines, rest = piece.split(b"\n")
        self._pending = [rest] if rest else []
        self._size = len(rest)
        return [line[5:] for line in lines if line.startswith(b"data:")]

    def end(self) -> list[bytes]:
        rest = b"".join(self._pending)
        self._pending, self._size = [], 0
        return [rest[5:]] if rest.startswith(b"data:") else []
