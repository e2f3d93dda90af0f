"""JSON-RPC framing for MCP, both protocol eras, and the SSE event reader of Streamable HTTP.

Eras (WIRE.md "MCP"): 2025-11-25 opens a session with `initialize` and sends `MCP-Session-Id` and
`MCP-Protocol-Version` on every later request; 2026-07-28 has no session: every request carries
`_meta` (protocol version, client info and capabilities) and the `MCP-Protocol-Version`,
`Mcp-Method` and (for tools/call) `Mcp-Name` headers, and `server/discover` says what a server speaks.
"""

from __future__ import annotations

import base64
import re
from collections.abc import AsyncIterator
from typing import Any

from gateway import __version__
from gateway.agent.mcp.results import INVALID_REPLY, PARSE_ERROR, McpProtocolError
from gateway.common import json_in, json_out

LEGACY = "2025-11-25"
MODERN = "2026-07-28"
#: initialize versions we accept a server answering with (the handshake era's revisions)
HANDSHAKE_VERSIONS = frozenset({"2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"})
CLIENT_INFO = {"name": "agent-gateway", "version": __version__}
#: a single reply (a JSON body or one SSE event) larger than this fails the call
MAX_REPLY_BYTES = 4 * 1024 * 1024
#: JSON-RPC error of 2026-07-28 naming the versions a server supports
UNSUPPORTED_PROTOCOL_VERSION = -32022

_HEADER_SAFE = re.compile(r"^[\x20-\x7E]*$")


def request(request_id: int, method: str, params: dict[str, Any] | None) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params is not None:
        message["params"] = params
    return message


def notification(method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        message["params"] = params
    return message


def initialize_params() -> dict[str, Any]:
    return {"protocolVersion": LEGACY, "capabilities": {}, "clientInfo": CLIENT_INFO}


def modern_params(params: dict[str, Any] | None) -> dict[str, Any]:
    """`params` with the `_meta` every 2026-07-28 request carries (a copy; the caller's is kept)."""
    body = dict(params or {})
    meta = dict(body.get("_meta") or {})
    meta["io.modelcontextprotocol/protocolVersion"] = MODERN
    meta["io.modelcontextprotocol/clientInfo"] = CLIENT_INFO
    meta["io.modelcontextprotocol/clientCapabilities"] = {}
    body["_meta"] = meta
    return body


def header_value(text: str) -> str:
    """A tool name as the `Mcp-Name` header carries it: as is when it is visible ASCII, else the
    spec's `=?base64?...?=` form."""
    if _HEADER_SAFE.match(text) and text == text.strip():
        return text
    return "=?base64?" + base64.b64encode(text.encode("utf-8", "replace")).decode("ascii") + "?="


def modern_headers(method: str, params: dict[str, Any] | None) -> dict[str, str]:
    headers = {"MCP-Protocol-Version": MODERN, "Mcp-Method": method}
    if method == "tools/call" and params and isinstance(params.get("name"), str):
        headers["Mcp-Name"] = header_value(params["name"])
    return headers


def dumps(message: dict[str, Any]) -> bytes:
    # orjson where it can (the gateway's JSON everywhere else); a model's arguments may hold lone
    # surrogates, which UTF-8 cannot encode: those go the stdlib way, as ASCII escapes
    return json_out.dumps(message, ensure_ascii=True)


def load(body: bytes) -> Any:
    """A reply's JSON (orjson where it reads the same; lone surrogates made U+FFFD, as from the upstream)."""
    try:
        return json_in.loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise McpProtocolError(PARSE_ERROR, "the server's reply is not JSON") from exc


def outcome(message: Any) -> dict[str, Any]:
    """The `result` of a JSON-RPC response, or its error raised as McpProtocolError."""
    if not isinstance(message, dict):
        raise McpProtocolError(INVALID_REPLY, "the server's reply is not a JSON-RPC response")
    error = message.get("error")
    if isinstance(error, dict):
        code = error.get("code")
        text = error.get("message")
        raise McpProtocolError(code if isinstance(code, int) and not isinstance(code, bool) else INVALID_REPLY,
                               str(text)[:2000] if text is not None else "the server returned an error")
    result = message.get("result")
    if not isinstance(result, dict):
        raise McpProtocolError(INVALID_REPLY, "the server's reply has neither a result object nor an error")
    if result.get("resultType") == "input_required":
        # 2026-07-28's multi-round requests (elicitation, sampling): the gateway has no user to ask.
        raise McpProtocolError(INVALID_REPLY, "the server asked for input the gateway cannot give")
    return result


def is_response_to(message: Any, request_id: int) -> bool:
    return isinstance(message, dict) and message.get("id") == request_id and (
        "result" in message or "error" in message)


class SseEvents:
    """An SSE body split into its events' data as it arrives: `feed(chunk)` returns the payloads
    (each event's `data:` lines joined by newlines) of the events the chunk completed, `end()`
    the last one when the body ended without its blank line. Comments, `event:`/`id:`/`retry:`
    lines and events without data are skipped. The caller parses each payload (`load`) in order.
    A plain object, not an async generator: one left before its end is finalized by a task the
    event loop schedules, a cost on every reply."""

    __slots__ = ("_buffer", "_data", "_size", "_max")

    def __init__(self, max_event: int = MAX_REPLY_BYTES) -> None:
        self._buffer = b""
        self._data: list[bytes] = []
        self._size = 0
        self._max = max_event

    def feed(self, chunk: bytes) -> list[bytes]:
        buffer = self._buffer + chunk
        if len(buffer) > self._max:
            raise McpProtocolError(INVALID_REPLY, f"the server sent an event over {self._max:,} bytes")
        *lines, self._buffer = buffer.split(b"\n")
        payloads = []
        data = self._data
        for raw in lines:
            line = raw[:-1] if raw.endswith(b"\r") else raw
            if not line:
                payload = b"\n".join(data)
                if payload.strip():  # 2025-11-25 servers open with an empty "priming" event
                    payloads.append(payload)
                data.clear()
                self._size = 0
            elif line.startswith(b"data:"):
                value = line[5:]
                data.append(value[1:] if value.startswith(b" ") else value)
                self._size += len(value)
                if self._size > self._max:
                    raise McpProtocolError(INVALID_REPLY, f"the server sent an event over {self._max:,} bytes")
        return payloads

    def end(self) -> list[bytes]:
        data = self._data
        if self._buffer.startswith(b"data:"):
            data.append(self._buffer[5:].lstrip(b" "))
        self._buffer = b""
        payload = b"\n".join(data)
        data.clear()
        return [payload] if payload.strip() else []


async def sse_messages(chunks: AsyncIterator[bytes], max_event: int = MAX_REPLY_BYTES) -> AsyncIterator[Any]:
    """The JSON messages of an SSE body, one per event (SseEvents over an async iterator of chunks)."""
    events = SseEvents(max_event)
    async for chunk in chunks:
        for payload in events.feed(chunk):
            yield load(payload)
    for payload in events.end():
        yield load(payload)
