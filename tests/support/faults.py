"""Shared pieces for the fault tests: the four ways a client can ask, and what came back."""

from __future__ import annotations

import json
import socket
from dataclasses import dataclass
from typing import Any

from tests.support.helpers import sse_frames

#: (api, stream): chat and responses, each as one JSON reply and as a stream.
MODES = [("chat", False), ("chat", True), ("responses", False), ("responses", True)]
MODE_IDS = ["chat", "chat-stream", "responses", "responses-stream"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def request_for(api: str, stream: bool, prompt: str = "hi") -> tuple[str, dict[str, Any]]:
    if api == "chat":
        return "/v1/chat/completions", {"messages": [{"role": "user", "content": prompt}], "stream": stream}
    return "/v1/responses", {"input": prompt, "stream": stream}


@dataclass
class Outcome:
    status: int
    text: str = ""  # the answer's text when it succeeded
    error: dict[str, Any] | None = None  # the error object (envelope body or stream error)
    headers: Any = None
    max_line: int = 0  # longest line of a stream, in bytes
    max_delta: int = 0  # longest text delta of a stream, in characters

    @property
    def ok(self) -> bool:
        return self.error is None and self.status == 200


async def ask(client: Any, api: str, stream: bool, prompt: str = "hi", **extra: Any) -> Outcome:
    """Send one request and read the whole answer, checking the stream ends the way clients need."""
    path, body = request_for(api, stream, prompt)
    resp = await client.post(path, json={**body, **extra})
    raw = await resp.read()
    if resp.status != 200 or not resp.headers.get("Content-Type", "").startswith("text/event-stream"):
        data = json.loads(raw)
        return Outcome(resp.status, error=data.get("error"), headers=resp.headers,
                       text=_text_of(api, data) if resp.status == 200 else "")
    max_line = max((len(line) for line in raw.split(b"\n")), default=0)
    frames = sse_frames(raw.decode())
    if api == "chat":
        assert frames and frames[-1][1] == "[DONE]", f"a chat stream must end with [DONE]: {raw[-300:]!r}"
        chunks = [json.loads(data) for _, data in frames[:-1]]
        errors = [c["error"] for c in chunks if "error" in c]
        deltas = [(c["choices"][0]["delta"].get("content") or "") for c in chunks if c.get("choices")]
        return Outcome(200, text="".join(deltas), error=errors[-1] if errors else None, headers=resp.headers,
                       max_line=max_line, max_delta=max(map(len, deltas), default=0))
    events = [json.loads(data) for _, data in frames]
    last = events[-1]
    assert last["type"] in ("response.completed", "response.failed", "response.incomplete"), last["type"]
    error = last["response"]["error"] if last["type"] == "response.failed" else None
    deltas = [e["delta"] for e in events if e["type"] == "response.output_text.delta"]
    return Outcome(200, text="".join(deltas), error=error, headers=resp.headers, max_line=max_line,
                   max_delta=max(map(len, deltas), default=0))


def _text_of(api: str, data: dict[str, Any]) -> str:
    if api == "chat":
        return data["choices"][0]["message"]["content"] or ""
    return "".join(part["text"] for item in data["output"] if item["type"] == "message"
                   for part in item["content"] if part["type"] == "output_text")
