"""A 2026-07-28 MCP server on asyncio streams that watches its connections: how many were opened,
how many the client closed, and the most open at once. aiohttp's server does not say when a
client lets go of a kept-alive connection; this one sees the EOF.

Speaks Streamable HTTP with JSON replies on HTTP/1.1 kept alive: `server/discover` names
2026-07-28; `tools/call` of `hang` never answers (it waits for the client to close), `slow`
answers after `delay` seconds, anything else answers "fine".
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any


class RawMcpServer:
    def __init__(self, delay: float = 0.2) -> None:
        self.delay = delay
        self.opened = 0
        self.closed = 0  # connections the client ended (EOF or reset)
        self.most_open = 0
        self.calls = 0
        self._server: asyncio.Server | None = None
        self._ended = asyncio.Event()

    @property
    def open_now(self) -> int:
        return self.opened - self.closed

    async def start(self) -> str:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return f"http://127.0.0.1:{self._server.sockets[0].getsockname()[1]}/mcp"

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 2)

    async def wait_closed(self, count: int, within: float = 5.0) -> None:
        """Until `count` connections were closed by the client (TimeoutError after `within` s)."""
        async with asyncio.timeout(within):
            while self.closed < count:
                self._ended.clear()
                await self._ended.wait()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.opened += 1
        self.most_open = max(self.most_open, self.open_now)
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.decode("latin-1").split("\r\n"):
                    name, _, value = line.partition(":")
                    if name.strip().lower() == "content-length":
                        length = int(value)
                message = json.loads(await reader.readexactly(length)) if length else {}
                writer.write(await self._answer(message, reader))
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            self.closed += 1
            self._ended.set()
            writer.close()

    async def _answer(self, message: dict[str, Any], reader: asyncio.StreamReader) -> bytes:
        method = message.get("method")
        if method == "server/discover":
            result: dict[str, Any] = {"supportedVersions": ["2026-07-28"], "capabilities": {"tools": {}},
                                      "serverInfo": {"name": "raw", "version": "1"}}
        elif method == "tools/call":
            self.calls += 1
            name = message["params"]["name"]
            if name == "hang":  # until the client lets go
                await reader.read()
                raise ConnectionError("the client closed the connection")
            if name == "slow":
                await asyncio.sleep(self.delay)
            result = {"content": [{"type": "text", "text": "fine"}], "isError": False}
        else:
            result = {}
        body = json.dumps({"jsonrpc": "2.0", "id": message.get("id"), "result": result}).encode()
        return (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body)
                + body)
