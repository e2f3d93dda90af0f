"""A fake OpenAI-compatible upstream model: a real aiohttp server on 127.0.0.1, scripted per test.

Queue replies with `fake.queue(...)`; each POST /v1/chat/completions takes the next one (or, with
none queued, what `fake.responder(body)` makes of the request when one is set, else a default text
reply). Every request body is recorded in `fake.requests`; a client that goes away
mid-reply is counted in `fake.disconnects` (with the loop time in `fake.disconnect_times`).

Misbehaviour on demand: `delay` (before the headers), `body_delay` (headers sent, body late),
`drop_after` (stream cut after N chunks), `cut_body_at` (non-stream body cut after N bytes),
`endless` (a stream, or a JSON body, that never ends), `raw` (any bytes: malformed SSE, HTML ...),
`echo_headers` (an error repeating the request's headers, key included),
and a huge single chunk via `chunk_size` as large as `text`. `empty_stream_with_tools` (on the fake,
not a reply): a streamed request that carries `tools` gets an empty 200 event stream and takes no
reply from the script, as llama-cpp-python's server with `chat_format: chatml-function-calling`
answers it; the same request unstreamed is answered. A model that thinks: `reasoning`,
sent before the text under `reasoning_field` (reasoning_content, reasoning or reasoning_text) as
reasoning servers do, streamed in `chunk_size` pieces or on the whole message. `usage_extra`: more
fields for the reply's `usage` object, such as `completion_tokens_details: {reasoning_tokens}`.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web


@dataclass
class Reply:
    text: str = "Hello from the fake model."
    tool_calls: list[tuple[str, str]] = field(default_factory=list)  # (name, arguments JSON)
    finish: str | None = None
    usage: tuple[int, int] = (10, 5)
    status: int = 200
    error_body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0  # before the first byte
    chunk_delay: float = 0.0  # between stream chunks
    chunk_size: int = 8  # characters of text per stream chunk
    drop_after: int | None = None  # stream: close the connection after this many chunks
    raw: bytes | None = None  # answer these bytes verbatim
    raw_content_type: str = "application/json"
    body_delay: float = 0.0  # headers sent at once, then this long before the first body byte
    cut_body_at: int | None = None  # non-stream: send this many bytes of the JSON body, then close
    endless: bool = False  # never finish: stream deltas (or JSON whitespace) every `chunk_delay`
    echo_headers: bool = False  # with `status`: the error message repeats the request's headers
    reasoning: str = ""  # the model's thinking, sent before its text
    reasoning_field: str = "reasoning_content"
    usage_extra: dict[str, Any] = field(default_factory=dict)  # merged into `usage` (token details)


def text(content: str = "Hello from the fake model.", **kw: Any) -> Reply:
    return Reply(text=content, **kw)


def tool_call(*calls: tuple[str, dict[str, Any] | str], text: str = "", **kw: Any) -> Reply:
    encoded = [(name, args if isinstance(args, str) else json.dumps(args)) for name, args in calls]
    return Reply(text=text, tool_calls=encoded, **kw)


def error(status: int, message: str = "upstream exploded", **kw: Any) -> Reply:
    return Reply(status=status, error_body={"error": {"message": message, "type": "server_error"}}, **kw)


class FakeUpstream:
    def __init__(self, models: list[str] | None = None) -> None:
        self.models = models if models is not None else ["fake-model", "other-model"]
        #: more fields of a model's `/models` entry, by id (vLLM's max_model_len, llama.cpp's meta ...)
        self.model_fields: dict[str, dict[str, Any]] = {}
        self.model_list_headers: list[dict[str, str]] = []  # one per GET /v1/models
        self.models_status = 200  # another status: GET /v1/models answers it with an error body
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.disconnects = 0
        self.disconnect_times: list[float] = []
        self.active = 0  # replies being written right now
        self.completed = 0
        self.base_url = ""
        self._script: list[Reply] = []
        self.default = Reply()
        #: answers from the request itself, as a model would (tests/clients/ script whole sessions)
        self.responder: Callable[[dict[str, Any]], Reply] | None = None
        self.empty_stream_with_tools = False

    def queue(self, *replies: Reply) -> None:
        self._script.extend(replies)

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/v1/models", self._models)
        app.router.add_post("/v1/chat/completions", self._chat)
        return app

    async def _models(self, request: web.Request) -> web.Response:
        self.model_list_headers.append(dict(request.headers))
        if self.models_status != 200:
            return web.json_response({"error": {"message": "model list unavailable", "type": "server_error"}},
                                     status=self.models_status)
        return web.json_response({"object": "list", "data": [
            {"id": m, "object": "model", "created": 0, "owned_by": "fake", **self.model_fields.get(m, {})}
            for m in self.models]})

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        self.requests.append(body)
        self.headers.append(dict(request.headers))
        if self.empty_stream_with_tools and body.get("stream") and body.get("tools"):
            return web.Response(body=b"", content_type="text/event-stream")
        if self._script:
            reply = self._script.pop(0)
        else:
            reply = self.responder(body) if self.responder is not None else self.default
        self.active += 1
        try:
            if reply.delay:
                await asyncio.sleep(reply.delay)
            if reply.raw is not None:
                return web.Response(body=reply.raw, content_type=reply.raw_content_type)
            if reply.status >= 400:
                body = reply.error_body
                if reply.echo_headers:  # as some proxies do: "you sent {...}"
                    body = {"error": {"message": f"bad request; you sent {dict(request.headers)}"}}
                return web.json_response(body, status=reply.status, headers=reply.headers)
            if reply.endless or reply.body_delay or reply.cut_body_at is not None:
                return await self._misbehave(request, body, reply)
            if body.get("stream"):
                response = await self._stream(request, body, reply)
            else:
                response = web.json_response(self._completion(body, reply))
            self.completed += 1
            return response
        except asyncio.CancelledError:  # handler cancellation: the client went away
            self._disconnected()
            raise
        except ConnectionError:
            # a failed write (the client closed as the reply began): a quiet end, as a server's
            # own reply to a client that left would be, not an "Error handling request" log
            self._disconnected()
            return web.Response(status=499)
        finally:
            self.active -= 1

    def _disconnected(self) -> None:
        self.disconnects += 1
        self.disconnect_times.append(time.monotonic())

    async def _misbehave(self, request: web.Request, body: dict[str, Any], reply: Reply) -> web.StreamResponse:
        streaming = bool(body.get("stream"))
        response = web.StreamResponse(
            headers={"Content-Type": "text/event-stream" if streaming else "application/json"})
        await response.prepare(request)
        if reply.body_delay:
            await asyncio.sleep(reply.body_delay)
        if reply.cut_body_at is not None:
            encoded = json.dumps(self._completion(body, reply)).encode()
            await response.write(encoded[:reply.cut_body_at])
            assert request.transport is not None
            request.transport.close()
            return response
        if reply.endless:
            base = {"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 0, "model": body.get("model")}
            await response.write(b'{"choices": ' if not streaming else b"")
            while True:
                if streaming:
                    frame = {**base, "choices": [{"index": 0, "delta": {"content": "more "}, "finish_reason": None}]}
                    await response.write(f"data: {json.dumps(frame)}\n\n".encode())
                else:
                    await response.write(b" ")
                await asyncio.sleep(reply.chunk_delay or 0.01)
        if streaming:
            return await self._stream_body(request, response, body, reply)
        await response.write(json.dumps(self._completion(body, reply)).encode())
        await response.write_eof()
        return response

    def _finish(self, reply: Reply) -> str:
        return reply.finish or ("tool_calls" if reply.tool_calls else "stop")

    def _completion(self, body: dict[str, Any], reply: Reply) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": reply.text or None}
        if reply.reasoning:
            message[reply.reasoning_field] = reply.reasoning
        if reply.tool_calls:
            message["tool_calls"] = [
                {"id": f"call_{i}", "type": "function", "function": {"name": n, "arguments": a}}
                for i, (n, a) in enumerate(reply.tool_calls)
            ]
        prompt, completion = reply.usage
        return {
            "id": "chatcmpl-fake", "object": "chat.completion", "created": 0, "model": body.get("model"),
            "choices": [{"index": 0, "message": message, "finish_reason": self._finish(reply)}],
            "usage": {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion,
                      **reply.usage_extra},
        }

    async def _stream(self, request: web.Request, body: dict[str, Any], reply: Reply) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        return await self._stream_body(request, response, body, reply)

    async def _stream_body(self, request: web.Request, response: web.StreamResponse, body: dict[str, Any],
                           reply: Reply) -> web.StreamResponse:
        base = {"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 0, "model": body.get("model")}

        chunks: list[dict[str, Any]] = [{"role": "assistant", "content": ""}]
        size = max(1, reply.chunk_size)
        chunks += [{"content": None, reply.reasoning_field: reply.reasoning[i:i + size]}
                   for i in range(0, len(reply.reasoning), size)]
        chunks += [{"content": reply.text[i:i + size]} for i in range(0, len(reply.text), size)]
        for i, (name, arguments) in enumerate(reply.tool_calls):
            half = len(arguments) // 2
            chunks.append({"tool_calls": [{"index": i, "id": f"call_{i}", "type": "function",
                                           "function": {"name": name, "arguments": arguments[:half]}}]})
            chunks.append({"tool_calls": [{"index": i, "function": {"arguments": arguments[half:]}}]})

        for sent, delta in enumerate(chunks):
            if reply.drop_after is not None and sent >= reply.drop_after:
                assert request.transport is not None
                request.transport.close()
                return response
            frame = {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}
            await response.write(f"data: {json.dumps(frame)}\n\n".encode())
            if reply.chunk_delay:
                await asyncio.sleep(reply.chunk_delay)
        finish = {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": self._finish(reply)}]}
        await response.write(f"data: {json.dumps(finish)}\n\n".encode())
        if (body.get("stream_options") or {}).get("include_usage"):
            prompt, completion = reply.usage
            usage = {**base, "choices": [], "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
                                                      "total_tokens": prompt + completion, **reply.usage_extra}}
            await response.write(f"data: {json.dumps(usage)}\n\n".encode())
        await response.write(b"data: [DONE]\n\n")
        await response.write_eof()
        return response
