"""A fast fake OpenAI-compatible upstream for benchmarks, run as its own process.

`python -m bench.fake_upstream --port 0` prints `fake upstream listening on http://127.0.0.1:PORT`.
It uses aiohttp's low-level server (no router, no middlewares) and answers from prebuilt bytes,
so that it costs far less CPU per request than the gateway it is measured against.

Behaviour is chosen per request, so the direct and the through-gateway runs get the very same
replies (the gateway forwards the messages unchanged):
- a non-streaming request gets one short `chat.completion` at once;
- a streaming request gets a role chunk, N content chunks, a finish chunk, the usage chunk when
  `stream_options.include_usage` is set, then `data: [DONE]`;
- a last user message starting `bench:` tunes the reply: `bench: chunks=50 delay=0.01 chunk_delay=0.1`
  (delay before the first byte, and between stream chunks, in seconds);
- tool mode (`bench: tool` in the first user message): when the request offers a `web_search`
  tool and the last message is not a tool result, the reply is one `web_search` call; once the
  result is back, a text answer. Without it the tools a gateway offers are ignored, so that
  plain scenarios measure one upstream call through the gateway as well as direct.
`GET /_bench/stats` returns counters (requests, streams, tool calls sent, web_search offered, searches).
`GET /search?q=..&format=json` answers as SearXNG does (see bench/fake_search.py).
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from bench.fake_search import handle_search
from bench.serving import run_main, serve_forever

MODEL = "bench-model"
ANSWER = "Hello from the bench upstream."
DEFAULT_CHUNKS = 50
USAGE = {"prompt_tokens": 12, "completion_tokens": 50, "total_tokens": 62}


@dataclass(frozen=True)
class Directive:
    chunks: int = DEFAULT_CHUNKS
    delay: float = 0.0
    chunk_delay: float = 0.0
    tool: bool = False


def parse_directive(text: str) -> Directive:
    values: dict[str, Any] = {}
    for field in text[len("bench:"):].split():
        key, _, value = field.partition("=")
        if key == "tool":
            values["tool"] = True
        elif key == "chunks":
            values["chunks"] = max(1, min(int(value), 10_000))
        elif key in ("delay", "chunk_delay"):
            values[key] = max(0.0, min(float(value), 60.0))
    return Directive(**values)


def _frame(obj: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(obj, separators=(",", ":")).encode() + b"\n\n"


def _chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
    return _frame({"id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": 1700000000,
                   "model": MODEL, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})


def completion_body(message: dict[str, Any], finish: str) -> bytes:
    return json.dumps({
        "id": "chatcmpl-bench", "object": "chat.completion", "created": 1700000000, "model": MODEL,
        "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
        "usage": USAGE,
    }, separators=(",", ":")).encode()


def stream_frames(chunks: int, include_usage: bool) -> list[bytes]:
    frames = [_chunk({"role": "assistant", "content": ""})]
    frames += [_chunk({"content": f"tok{i} "}) for i in range(chunks)]
    frames.append(_chunk({}, "stop"))
    if include_usage:
        frames.append(_frame({"id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": 1700000000,
                              "model": MODEL, "choices": [], "usage": USAGE}))
    frames.append(b"data: [DONE]\n\n")
    return frames


TOOL_ARGS = json.dumps({"query": "latest aiohttp release"})
TOOL_MESSAGE = {"role": "assistant", "content": None, "tool_calls": [
    {"id": "call_bench", "type": "function", "function": {"name": "web_search", "arguments": TOOL_ARGS}}]}
TOOL_STREAM = [
    _chunk({"role": "assistant", "content": None}),
    _chunk({"tool_calls": [{"index": 0, "id": "call_bench", "type": "function",
                            "function": {"name": "web_search", "arguments": ""}}]}),
    _chunk({"tool_calls": [{"index": 0, "function": {"arguments": TOOL_ARGS}}]}),
    _chunk({}, "tool_calls"),
    b"data: [DONE]\n\n",
]


class FakeUpstream:
    """Per-process state: prebuilt replies and counters (no module-level mutable state)."""

    def __init__(self) -> None:
        self.text_body = completion_body({"role": "assistant", "content": ANSWER, "refusal": None}, "stop")
        self.tool_body = completion_body(TOOL_MESSAGE, "tool_calls")
        self.models_body = json.dumps({"object": "list", "data": [
            {"id": MODEL, "object": "model", "created": 1700000000, "owned_by": "bench"}]}).encode()
        self._streams: dict[tuple[int, bool], tuple[list[bytes], bytes]] = {}
        self._directives: dict[str, Directive] = {}
        self.stats = {"requests": 0, "streams": 0, "tool_calls_sent": 0, "web_search_offered": 0, "searches": 0}

    def _stream_bytes(self, chunks: int, include_usage: bool) -> tuple[list[bytes], bytes]:
        key = (chunks, include_usage)
        cached = self._streams.get(key)
        if cached is None:
            frames = stream_frames(chunks, include_usage)
            cached = self._streams[key] = (frames, b"".join(frames))
        return cached

    def _directive(self, messages: list[Any]) -> Directive:
        """From the first user message (the last one is a tool result in a tool round)."""
        first = next((m for m in messages if isinstance(m, dict) and m.get("role") == "user"), None)
        content = first.get("content") if first is not None else None
        if not isinstance(content, str) or not content.startswith("bench:"):
            return Directive()
        directive = self._directives.get(content)
        if directive is None:
            if len(self._directives) > 256:
                self._directives.clear()
            directive = self._directives[content] = parse_directive(content)
        return directive

    async def handle(self, request: web.BaseRequest) -> web.StreamResponse:
        if request.method == "POST" and request.path.endswith("/chat/completions"):
            return await self._chat(request)
        if request.path.endswith("/models"):
            return web.Response(body=self.models_body, content_type="application/json")
        if request.path == "/search":
            self.stats["searches"] += 1
            return await handle_search(request)
        if request.path == "/_bench/stats":
            return web.json_response(self.stats)
        return web.Response(status=404, text="not found")

    async def _chat(self, request: web.BaseRequest) -> web.StreamResponse:
        # the stream itself, not `read()`: a model takes requests past aiohttp's 1 MB default
        # (bench/followers.py sends megabytes of instructions)
        body = json.loads(await request.content.read())
        messages = body.get("messages") or []
        self.stats["requests"] += 1
        offered = any((t.get("function") or {}).get("name") == "web_search" for t in body.get("tools") or ())
        if offered:
            self.stats["web_search_offered"] += 1
        directive = self._directive(messages)
        wants_tool = directive.tool and offered and messages[-1].get("role") != "tool"
        if wants_tool:
            self.stats["tool_calls_sent"] += 1
        if directive.delay:
            await asyncio.sleep(directive.delay)
        if not body.get("stream"):
            return web.Response(body=self.tool_body if wants_tool else self.text_body,
                                content_type="application/json")

        self.stats["streams"] += 1
        include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
        if wants_tool:
            frames, whole = TOOL_STREAM, b"".join(TOOL_STREAM)
        else:
            frames, whole = self._stream_bytes(directive.chunks, include_usage)
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        await response.prepare(request)
        if directive.chunk_delay and not wants_tool:
            for frame in frames:
                await response.write(frame)
                await asyncio.sleep(directive.chunk_delay)
        else:
            await response.write(whole)
        await response.write_eof()
        return response


async def serve(port: int) -> None:
    await serve_forever(web.ServerRunner(web.Server(FakeUpstream().handle, access_log=None)), port,
                        "fake upstream", backlog=4096)


def main() -> None:
    run_main("fast fake OpenAI-compatible upstream for benchmarks", serve)


if __name__ == "__main__":
    main()
