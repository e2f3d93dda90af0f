"""Raw HTTP/1.1 exchanges over asyncio streams, for requests aiohttp's client refuses to send, and a
real gateway (gateway/http_server.py, as `serve` runs it) started in the test's own loop."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from gateway.config.settings import Settings
from gateway.http.app import create_app
from gateway.http.server import start_site
from tests.fakes.tools import LookupTool


@dataclass
class Reply:
    status: int
    headers: dict[str, str]
    body: bytes
    closed: bool  # the server closed the connection after it

    def json(self) -> Any:
        return json.loads(self.body)


def parse_reply(raw: bytes, closed: bool) -> Reply:
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    length = headers.get("content-length")
    if length is not None:
        body = body[: int(length)]
    return Reply(status, headers, body, closed)


def _complete(data: bytes) -> bool:
    head, sep, body = data.partition(b"\r\n\r\n")
    if not sep:
        return False
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return len(body) >= int(value)
    return False


async def read_reply(reader: asyncio.StreamReader, quiet: float = 1.0) -> tuple[bytes, bool]:
    """One reply, and whether the server closed the connection after it (seen within 0.2 s of a
    complete reply; without a Content-Length, the reply ends at close or after `quiet` seconds)."""
    data = b""
    while True:
        wait = 0.2 if _complete(data) else quiet
        try:
            chunk = await asyncio.wait_for(reader.read(65536), wait)
        except TimeoutError:
            return data, False
        if not chunk:
            return data, True
        data += chunk


async def exchange(port: int, data: bytes, *, quiet: float = 1.0) -> Reply:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(data)
        raw, closed = await read_reply(reader, quiet)
    finally:
        writer.close()
    assert raw, "no reply at all"
    return parse_reply(raw, closed)


def request(method: str, path: str, headers: dict[str, str] | None = None, body: bytes = b"") -> bytes:
    lines = [f"{method} {path} HTTP/1.1", "Host: 127.0.0.1"]
    for name, value in (headers or {}).items():
        lines.append(f"{name}: {value}")
    if body:
        lines.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


@asynccontextmanager
async def serving(settings: Settings) -> AsyncIterator[int]:
    """The gateway for `settings` on 127.0.0.1 (its port yielded), on serve's HTTP server."""
    runner = await start_site(create_app(settings, tools=[LookupTool()]), settings, "127.0.0.1", 0)
    try:
        yield next(iter(runner.addresses))[1]
    finally:
        await runner.cleanup()
