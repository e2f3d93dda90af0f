"""A loopback HTTP forward proxy, as a corporate proxy is for `http://` targets: it takes
absolute-form requests (`POST http://host:port/v1/chat/completions HTTP/1.1`), forwards each to its
target and relays the reply piece by piece. It records every target it was asked for.

CONNECT (the tunnel `https://` targets go through) is `TunnellingProxy`'s: aiohttp's server
cannot hand a request's socket over to a tunnel, so that one speaks HTTP/1.1 on asyncio streams.
"""

from __future__ import annotations

import asyncio
import contextlib

import aiohttp
from aiohttp import web

#: hop-by-hop headers (RFC 9110 7.6.1) and the ones the forwarded request sets itself
_NOT_FORWARDED = {"host", "connection", "keep-alive", "proxy-authorization", "proxy-connection", "te",
                  "trailer", "transfer-encoding", "upgrade", "content-length"}


class ForwardProxy:
    def __init__(self) -> None:
        self.targets: list[str] = []  # the absolute URL of each request it forwarded
        self.authorizations: list[str] = []  # each forwarded request's Proxy-Authorization (not passed on)
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
        if "Proxy-Authorization" in request.headers:
            self.authorizations.append(request.headers["Proxy-Authorization"])
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


class TunnellingProxy:
    """A loopback HTTPS proxy: `CONNECT host:port` opens a TCP connection to the target, answers
    200 and relays bytes both ways until either side closes (TLS runs end to end through it, as
    through a corporate proxy). It records each tunnel's target (`host:port`) and each CONNECT's
    Proxy-Authorization; any other method,
    or a target in `refuse`, gets `refusal` (e.g. "403 Forbidden") and no tunnel."""

    def __init__(self, refusal: str = "403 Forbidden") -> None:
        self.tunnels: list[str] = []
        self.authorizations: list[str] = []  # each Proxy-Authorization a CONNECT carried
        self.refuse: set[str] = set()
        self.refusal = refusal
        self.url = ""
        self._server: asyncio.Server | None = None
        self._relays: set[asyncio.Task[None]] = set()

    async def start(self) -> str:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        port = self._server.sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"
        return self.url

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for relay in list(self._relays):
            relay.cancel()
        await asyncio.gather(*self._relays, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._relays.add(task := asyncio.current_task())  # type: ignore[arg-type]
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            method, target, _ = lines[0].split(" ", 2)
            self.authorizations += [line.split(":", 1)[1].strip() for line in lines[1:]
                                    if line.lower().startswith("proxy-authorization:")]
            if method != "CONNECT" or target in self.refuse:
                writer.write(f"HTTP/1.1 {self.refusal}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".encode())
                await writer.drain()
                return
            host, _, port = target.rpartition(":")
            try:
                up_reader, up_writer = await asyncio.open_connection(host.strip("[]"), int(port))
            except OSError:
                writer.write(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                await writer.drain()
                return
            self.tunnels.append(target)
            writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
            await writer.drain()
            try:
                await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))
            finally:
                up_writer.close()
        except (asyncio.IncompleteReadError, ConnectionError, ValueError):
            pass
        finally:
            self._relays.discard(task)  # type: ignore[arg-type]
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()


async def _pipe(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
    """Copy until `source` ends, then end `sink`'s side (half-close, as a TCP relay does)."""
    try:
        while piece := await source.read(65536):
            sink.write(piece)
            await sink.drain()
    except ConnectionError:
        pass
    finally:
        if sink.can_write_eof() and not sink.is_closing():
            with contextlib.suppress(OSError):
                sink.write_eof()
