"""The HTTP transport under `UpstreamClient`: send one request, get its status and headers, read the
body (whole or piece by piece), close. Two, chosen by `LLM_HTTP_CLIENT` (gateway/upstream/transport_choice.py):
- `auto` (the default): a plain `http://` upstream reached without a proxy (the self-hosted model
  on the host or the LAN) gets the lean one, asyncio and httptools
  (gateway/upstream/plain_transport.py: a quarter fewer instructions per chat request); an `https://`
  upstream, or one a proxy applies to (HTTP(S)_PROXY, NO_PROXY), gets aiohttp's client
  (gateway/upstream/aiohttp_transport.py), which does TLS and proxies;
- `aiohttp`: aiohttp's client for every upstream (the fallback).
bench/reqwest_transport.py puts pyreqwest's in their place for issue 33's A/B (bench/README.md: it
cannot abort a request waiting for its reply's head, so it is not the product's).

A transport raises its library's own exceptions (the client catches `Transport.errors`) and names
what they mean in the library-neutral terms below (`Transport.neutral`), which gateway/upstream/
faults.py turns into the client's error; timeouts stay `TimeoutError`. Everything the client
does with a reply (typed errors, Retry-After, SSE framing, the model list) is written once, in
gateway/upstream/client.py.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Protocol

from gateway.errors import AgentGatewayError, UpstreamError

#: What `LLM_HTTP_CLIENT` chooses between (gateway/config/options.py).
CLIENTS = ("auto", "aiohttp")
KEEPALIVE = 30.0  # seconds an idle upstream connection is kept
JSON = "application/json"


class TransportFault(AgentGatewayError):
    """A failed exchange, said the same whatever the library; `__cause__` holds the library's error."""


class Unreachable(TransportFault):
    """No connection: refused, no such host, TLS refused ... `reason` in the OS's (or TLS's) words."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class ClosedUnanswered(TransportFault):
    """The server closed the connection before any byte of a reply. On a pooled connection
    (`reused`) that is its keep-alive running out as the request went: the request never reached
    it, and the client sends it once more."""

    def __init__(self, reused: bool) -> None:
        super().__init__("the server closed the connection before replying")
        self.reused = reused


class Disconnected(TransportFault):
    """The connection closed in the middle of a reply."""


class Unreadable(TransportFault):
    """Bytes that are not a readable HTTP reply (not HTTP, a body that does not decode ...)."""


class Reply(Protocol):
    """One reply's head (`status`, `header`) and its body, read once."""

    status: int
    #: The body's next bytes as they arrive, b"" at its end (the library's own read where it can
    #: be: a stream calls it once per piece).
    read_chunk: Callable[[], Awaitable[bytes]]

    def header(self, name: str) -> str | None: ...

    async def read_whole(self, limit: int) -> bytes:
        """The whole (decoded) body, refused past `limit` bytes; the connection goes back to the pool."""

    async def finish(self, seconds: float, most: int) -> None:
        """After the last frame: read the rest (for at most `seconds` and `most` bytes) so the
        connection can be reused; one that keeps talking is closed by `close`."""

    async def close(self) -> None:
        """Let go of the reply: a connection not read to its end is closed. Idempotent."""


class Transport(Protocol):
    """One connection pool to the upstream for the client's lifetime."""

    #: the library's exceptions (and the OS's) that `send` and a reply's reads raise
    errors: tuple[type[BaseException], ...]

    def neutral(self, exc: BaseException) -> BaseException:
        """`exc` (one of `errors`) as a `TransportFault`, or the `TimeoutError` it is."""

    async def send(self, method: str, url: str, body: bytes | None,
                   headers: Mapping[str, str] | None, *, stream: bool = False) -> Reply:
        """Send one request and return its reply's head as soon as it comes (its body read as it
        arrives for a `stream`); `ClosedUnanswered` when the server closed the connection unanswered."""

    async def close(self) -> None: ...


@dataclass(frozen=True)
class TransportSettings:
    """What every transport is built from."""

    url: str  # the upstream's base URL, without credentials
    headers: Mapping[str, str]  # sent with every request (Accept, User-Agent, Authorization)
    connect_timeout: float
    read_timeout: float | None  # None: none (the MCP client's calls have a deadline of their own)
    client: str = "auto"  # LLM_HTTP_CLIENT, one of CLIENTS


def os_reason(error: OSError) -> str:
    """A connect failure in the OS's words: "Connection refused", "Name or service not known" ...
    (asyncio words it "Connect call failed (address)", and "Multiple exceptions: ..." when each of
    a name's addresses refused: the address is the operator's business, the OS's reason is not)."""
    if error.errno and error.errno > 0 and not isinstance(error, socket.gaierror):
        return os.strerror(error.errno)
    if error.errno is None and str(error).startswith("Multiple exceptions: [Errno "):
        number = str(error).removeprefix("Multiple exceptions: [Errno ").partition("]")[0]
        if number.isdigit():
            return os.strerror(int(number))
    return error.strerror or str(error) or type(error).__name__


def too_large(limit: int) -> UpstreamError:
    return UpstreamError(f"the upstream model's reply is larger than {limit // (1024 * 1024)} MiB")
