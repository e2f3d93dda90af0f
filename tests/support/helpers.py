"""Small helpers for reading what the gateway sent."""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any


def sse_frames(body: str) -> list[tuple[str | None, str]]:
    """(event name or None, data) for each frame; comments are skipped."""
    frames = []
    for block in body.split("\n\n"):
        event = None
        data = []
        for line in block.split("\n"):
            if line.startswith("event: "):
                event = line[len("event: "):]
            elif line.startswith("data: "):
                data.append(line[len("data: "):])
        if data:
            frames.append((event, "\n".join(data)))
    return frames


def chat_chunks(body: str) -> list[dict[str, Any]]:
    """The JSON chunks of a chat stream (without the final [DONE])."""
    frames = sse_frames(body)
    assert frames and frames[-1][1] == "[DONE]", f"stream did not end with [DONE]: {body[-200:]!r}"
    return [json.loads(data) for _, data in frames[:-1]]


def streamed_text(chunks: list[dict[str, Any]]) -> str:
    return "".join(
        (c["choices"][0]["delta"].get("content") or "") for c in chunks if c.get("choices")
    )


def assert_error_envelope(body: Any, *, code: str | None | object = ..., param: str | None | object = ...) -> None:
    assert set(body) == {"error"}, body
    error = body["error"]
    assert set(error) == {"message", "type", "param", "code"}, error
    assert isinstance(error["message"], str) and error["message"]
    if code is not ...:
        assert error["code"] == code, error
    if param is not ...:
        assert error["param"] == param, error


async def access_lines(caplog: Any, count: int) -> list[logging.LogRecord]:
    """The access lines `caplog` holds, once `count` are written: a reply's line is written after
    the reply (gateway/observe/after_reply.py), once the next request waits or the gateway is quiet."""
    lines: list[logging.LogRecord] = []
    for _ in range(100):
        lines = [r for r in caplog.records if r.name == "agent_gateway.access"]
        if len(lines) >= count:
            return lines
        await asyncio.sleep(0.01)
    raise AssertionError(f"expected {count} access lines, got {len(lines)}")
