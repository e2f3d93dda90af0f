"""One HTTP/1.1 client connection for the plain transport (gateway/upstream/plain_transport.py):
an asyncio protocol that writes a request, parses its reply with httptools (llhttp) as bytes come,
and hands the body over as it arrives. It says how the reply ended (read to its end, kept alive or
not) and fails the waiting reader with the transport's neutral faults: `ClosedUnanswered` when the
server closed without a byte, `Disconnected` mid-reply, `Unreadable` for bytes that are not HTTP,
`TimeoutError` after `read_timeout` seconds without a byte (None: no read timeout, the caller's own
deadline bounds the reply). A cancelled reader closes it at once.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import httptools

from gateway.upstream.transport import ClosedUnanswered, Disconnected, Unreadable

#: a reply's body buffered past this (its reader is slow) pauses reading the socket until it catches up
_HIGH_WATER = 256 * 1024


class Http1Connection(asyncio.Protocol):
    """One TCP connection and the reply being read on it (httptools calls the `on_*` methods)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, read_timeout: float | None,
                 on_lost: Callable[[Http1Connection], None]) -> None:
        self._loop = loop
        self._timeout = read_timeout
        self._on_lost = on_lost
        self._parser = httptools.HttpResponseParser(self)
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.reused = False
        self.idle_since = 0.0
        self.keep_alive = False
        self.status = 0
        #: the reply's header lines as they came (each ending in CRLF), read into `headers` on demand
        self.head_lines = b""
        self._headers: dict[str, str] | None = None
        self._raw: list[bytes] = []  # the bytes fed while the reply's head is not whole
        self._heading = False  # the head is not whole yet: its bytes are kept in `_raw`
        self._interims = 0  # the 1xx heads before the reply's own
        self._active = False  # a request was sent and its reply is not over
        self._head: asyncio.Future[None] | None = None
        self._waiter: asyncio.Future[None] | None = None
        self._pieces: list[bytes] = []
        self._buffered = 0
        self._paused = False
        self._complete = False
        self._interim = False  # a 1xx reply is being parsed: skipped
        self._answered = False  # a byte of the reply came
        self._error: BaseException | None = None
        self._since = 0.0  # the last byte, or the start of the wait if later: the read timeout's start
        self._timer: asyncio.TimerHandle | None = None

    # -- asyncio's callbacks ----------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        if not self._active:  # bytes nobody asked for: this connection is not one to reuse
            self.abort()
            return
        self._answered = True
        self._since = self._loop.time()
        if self._heading:
            self._raw.append(data)
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError as exc:
            if self._complete:  # bytes after the reply: it stands, the connection does not
                self.keep_alive = False
            else:
                self._fail(Unreadable(f"not a readable HTTP reply ({exc})"))
            self.abort()

    def eof_received(self) -> bool:
        return False  # the transport closes itself: connection_lost says what the end means

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self._cancel_timer()
        self._on_lost(self)
        if not self._active or self._complete or self._error is not None:
            return
        if self._head is not None and not self._head.done():
            self._fail(Disconnected("the server closed the connection before its reply's head was whole")
                       if self._answered else ClosedUnanswered(self.reused))
        elif "content-length" in self.headers or "transfer-encoding" in self.headers:
            self._fail(Disconnected("the server closed the connection mid-reply"))
        else:  # a reply framed by the connection's end (HTTP/1.0, no length): its end is the body's
            self._ended()

    # -- httptools' callbacks ---------------------------------------------------------------------

    # No `on_header`: httptools then makes no Python call per header line. The head's bytes are
    # kept as they come and split into headers only when one is asked for (`headers`).

    def on_headers_complete(self) -> None:
        status = self._parser.get_status_code()
        if 100 <= status < 200:  # 100 Continue, 103 Early Hints ...: the reply comes after
            self._interim = True
            self._interims += 1
            return
        self.status = status
        self._heading = False
        raw = self._raw[0] if len(self._raw) == 1 else b"".join(self._raw)
        self._raw = []
        start = 0
        for _ in range(self._interims):  # llhttp took each head whole: each ends at its blank line
            start = raw.index(b"\r\n\r\n", start) + 4
        self.head_lines = raw[raw.index(b"\r\n", start) + 2:raw.index(b"\r\n\r\n", start) + 2]
        head = self._head
        if head is not None and not head.done():
            head.set_result(None)

    @property
    def headers(self) -> dict[str, str]:
        """The reply's headers, names in lower case, repeated ones joined by ", " (read once)."""
        headers = self._headers
        if headers is None:
            headers = self._headers = _header_dict(self.head_lines)
        return headers

    def on_body(self, body: bytes) -> None:
        self._pieces.append(body)
        self._buffered += len(body)
        if self._buffered > _HIGH_WATER and not self._paused and self.transport is not None:
            self._paused = True
            self.transport.pause_reading()
        self._wake()

    def on_message_complete(self) -> None:
        if self._interim:
            self._interim = False
            return
        self.keep_alive = self._parser.should_keep_alive()
        self._ended()

    # -- the exchange -----------------------------------------------------------------------------

    def send(self, data: bytes) -> asyncio.Future[None]:
        """Write one request; the future is done when its reply's head has come."""
        self._active, self._complete, self._answered, self._error = True, False, False, None
        self.keep_alive = False
        self.head_lines, self._headers, self._raw, self._heading, self._interims = b"", None, [], True, 0
        self._since = self._loop.time()
        head = self._head = self._loop.create_future()
        self.transport.write(data)  # type: ignore[union-attr]
        self._arm()
        return head

    async def read(self) -> bytes:
        """The body's bytes that came since the last read (waiting for some), b"" at its end."""
        while True:
            pieces = self._pieces
            if pieces:
                piece = pieces[0] if len(pieces) == 1 else b"".join(pieces)
                pieces.clear()
                self._buffered = 0
                if self._paused:
                    self._paused = False
                    self.transport.resume_reading()  # type: ignore[union-attr]
                return piece
            if self._error is not None:
                raise self._error
            if self._complete:
                return b""
            waiter = self._waiter = self._loop.create_future()
            self._since = self._loop.time()
            self._arm()
            try:
                await waiter
            except asyncio.CancelledError:
                self.abort()  # the reader left: the upstream stops working for nobody
                raise
            finally:
                self._waiter = None

    @property
    def read_to_end(self) -> bool:
        return self._complete and not self._pieces and self._error is None

    def abort(self) -> None:
        self.keep_alive = False
        self._cancel_timer()
        if self.transport is not None:
            self.transport.abort()

    def _ended(self) -> None:
        self._complete = True
        self._active = False
        self._wake()  # the timer stays: the next request on this connection moves it on (`_expire`)

    def _fail(self, error: BaseException) -> None:
        self._error = error
        self._active = False
        self._cancel_timer()
        head = self._head
        if head is not None and not head.done():
            head.set_exception(error)
            head.exception()  # retrieved here: a send cancelled meanwhile would leave it unread
        self._wake()

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    # -- the read timeout: one timer, moved on lazily rather than reset at every byte, and left
    # -- armed past a reply's end, so that back-to-back requests on a connection arm none

    def _arm(self) -> None:
        if self._timer is None and self._timeout is not None:
            self._timer = self._loop.call_at(self._since + self._timeout, self._expire)

    def _expire(self) -> None:
        self._timer = None
        waiting = self._waiter is not None or (self._head is not None and not self._head.done())
        if not waiting or not self._active:
            return
        deadline = self._since + (self._timeout or 0.0)
        if self._loop.time() >= deadline:
            self._fail(TimeoutError())
            self.abort()
        else:
            self._timer = self._loop.call_at(deadline, self._expire)

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None


def _header_dict(head: bytes) -> dict[str, str]:
    """Header lines as llhttp read them (it refused a reply with anything else: a bare LF, a
    space before the colon, a folded line): the value without its leading spaces and tabs."""
    headers: dict[str, str] = {}
    for line in head.split(b"\r\n"):
        if line:
            name, _, value = line.partition(b":")
            key = name.decode("latin-1").lower()
            text = value.lstrip(b" \t").decode("latin-1")
            headers[key] = f"{headers[key]}, {text}" if key in headers else text
    return headers
