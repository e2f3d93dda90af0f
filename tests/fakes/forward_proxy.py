"""A loopback HTTP forward proxy, as a corporate proxy is for `http://` targets: it takes
absolute-form requests (`POST http://host:port/v1/chat/completions HTTP/1.1`), forwards each to its
target and relays the reply piece by piece. It records every target it was asked for.

CONNECT (the tunnel `https://` targets go through) is not served: the tests aim it at http upstreams.
"""

from __future__ import annotations

import aiohttp
from aiohttp import web

#: hop-by-hop headers (RFC 9110 7.6.1) and the ones the forwarded request sets itself
_NOT_FORWARDED = {"host", "connection", "keep-alive", "proxy-authorization", "proxy-connection", "te",
                  "trailer", "transfer-encoding", "upgrade", "content-length"}


class ForwardProxy:
    def __init__(self) -> None:
        self.targets: list[str] = []  # the absolute URL of each request it forwarded
        self.refused: list[str] = []  # request targets that were not absolute-form
        self.url = ""
        self._session: aiohttp.ClientSession | None = None

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()

    async def handle(self, request: web.BaseRequest) -> web.StreamResponse:
        target = request.raw_path  # the request target as sent: absolute-form for a proxy
        if not target.startswith("http://"):
            self.refused.append(target)
            return web.Response(status=400, text="this is a proxy: send absolute-form requests")
        self.targets.append(target)
        if self._session is None:
            self._session = aiohttp.ClientSession(auto_decompress=False)  # trust_env off: no proxy loop
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _NOT_FORWARDED}
        async with self._session.request(request.method, target, headers=headers,
                                         data=await request.read()) as upstream:
            response = web.StreamResponse(status=upstream.status, headers={
                k: v for k, v in upstream.headers.items() if k.lower() not in _NOT_FORWARDED})
            await response.prepare(request)
            async for piece in upstream.content.iter_any():
                await response.write(piece)
            await response.write_eof()
            return response
