"""An upstream that answers with scripted bytes on a raw TCP socket (optionally TLS), for what an
HTTP server library will not send: HTTP/1.0 replies framed by the close, interim 100s, bytes that
are not HTTP, a connection closed unanswered. It counts connections and what the client closed.

    raw = await RawUpstream.start(lambda conn, n, request: ok_completion("hi"))
    ... LLM_BASE_URL = raw.base_url ...
"""

from __future__ import annotations

import asyncio
import json
import ssl
from collections.abc import Callable
from dataclasses import dataclass, field


class Close(bytes):
    """Bytes to send, after which the server closes the connection."""


#: answer(connection number, request number on that connection, request bytes) -> bytes to send
#: (a `Close` to send them and close); None closes the connection without answering.
Script = Callable[[int, int, bytes], bytes | None]


def completion_body(text: str = "raw hello") -> bytes:
    return json.dumps({
        "id": "chatcmpl-raw", "object": "chat.completion", "created": 0, "model": "m",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}).encode()


def ok(body: bytes | None = None, *, extra: bytes = b"") -> bytes:
    """A whole HTTP/1.1 200 reply with a JSON body (a chat completion by default)."""
    body = completion_body() if body is None else body
    return b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n%s\r\n%s" % (
        len(body), extra, body)


@dataclass
class RawUpstream:
    """Reads one request at a time (head + Content-Length body) and sends what the script says."""

    script: Script
    port: int = 0
    connections: int = 0
    requests: list[bytes] = field(default_factory=list)
    closed_by_client: int = 0
    scheme: str = "http"
    host: str = "127.0.0.1"
    _server: asyncio.Server | None = None

    @classmethod
    async def start(cls, script: Script, *, tls: ssl.SSLContext | None = None, host: str = "127.0.0.1",
                    url_host: str | None = None) -> RawUpstream:
        raw = cls(script, scheme="https" if tls else "http", host=url_host or host)
        raw._server = await asyncio.start_server(raw._handle, host, 0, ssl=tls)
        raw.port = raw._server.sockets[0].getsockname()[1]
        return raw

    @property
    def base_url(self) -> str:
        return f"{self.scheme}://{self.host}:{self.port}/v1"

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        number = self.connections
        served = 0
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                               if line.lower().startswith(b"content-length:")), 0)
                request = head + await reader.readexactly(length)
                self.requests.append(request)
                served += 1
                answer = self.script(number, served, request)
                if answer is None:
                    break
                writer.write(answer)
                await writer.drain()
                if isinstance(answer, Close):
                    break
        except (asyncio.IncompleteReadError, ConnectionError, ssl.SSLError):
            self.closed_by_client += 1
        finally:
            writer.close()
