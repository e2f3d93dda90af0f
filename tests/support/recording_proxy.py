"""A recording reverse proxy on 127.0.0.1 in front of a real upstream server: what reached the
server (each request's JSON body) and what it answered (status and the body's bytes as they came).

The tests against a real model server (tests/real_upstream/) assert on this wire, not on what the
model wrote: the gateway's request to the server, and the server's reply it had to read.

    proxy = RecordingProxy("http://127.0.0.1:8000")
    server = await aiohttp_server(proxy.app())   # the gateway's LLM_BASE_URL: server.make_url("/v1")
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import aiohttp
from aiohttp import web

#: Request headers passed on (the rest, hop-by-hop or aiohttp's own, are the proxy's to set).
_PASSED = ("Content-Type", "Accept", "Authorization", "traceparent")


@dataclass
class Exchange:
    method: str
    path: str
    #: The request body as JSON (None for a request without one, or one that is not JSON).
    request: Any
    status: int
    content_type: str
    #: The reply's body, every byte the server sent so far, in order.
    body: bytearray

    def frames(self) -> list[Any]:
        """A streamed reply's `data:` payloads, JSON decoded ("[DONE]" kept as the string)."""
        out: list[Any] = []
        for line in self.body.decode("utf-8", "replace").splitlines():
            if line.startswith("data:"):
                payload = line[5:].strip()
                out.append(payload if payload == "[DONE]" else json.loads(payload))
        return out


class RecordingProxy:
    def __init__(self, target: str, *, max_tokens_cap: int | None = None) -> None:
        self.target = target.rstrip("/")
        self.exchanges: list[Exchange] = []
        #: lowers every chat request's `max_tokens` to this on its way (recorded as the client sent
        #: it): for tests of mechanics on a slow CPU model, where each token costs
        self.max_tokens_cap = max_tokens_cap

    def app(self) -> web.Application:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._forward)
        app.cleanup_ctx.append(self._session)
        return app

    async def _session(self, app: web.Application) -> Any:
        # no read timeout: a CPU-bound model may think for a while before its first byte
        self._client = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=300))
        yield
        await self._client.close()

    def chat_requests(self) -> list[dict[str, Any]]:
        """The chat-completion request bodies that reached the server, in order."""
        return [e.request for e in self.exchanges if e.path == "/v1/chat/completions"]

    def chat_exchanges(self) -> list[Exchange]:
        return [e for e in self.exchanges if e.path == "/v1/chat/completions"]

    async def _forward(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        headers = {name: request.headers[name] for name in _PASSED if name in request.headers}
        if self.max_tokens_cap is not None and isinstance(body, dict) and "max_tokens" in body:
            raw = json.dumps({**body, "max_tokens": min(body["max_tokens"], self.max_tokens_cap)}).encode()
        async with self._client.request(request.method, self.target + request.path_qs, data=raw or None,
                                        headers=headers) as upstream:
            content_type = upstream.headers.get("Content-Type", "")
            # recorded before a byte is relayed, each piece before it is: whatever the client has
            # seen, a test finds here
            exchange = Exchange(request.method, request.path, body, upstream.status, content_type, bytearray())
            self.exchanges.append(exchange)
            reply = web.StreamResponse(status=upstream.status, headers={"Content-Type": content_type})
            await reply.prepare(request)
            async for piece in upstream.content.iter_any():
                exchange.body += piece
                await reply.write(piece)
            await reply.write_eof()
        return reply
