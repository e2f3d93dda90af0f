"""The HTTP server around the app: aiohttp's, with what an open port needs on top.

- Requests aiohttp's parser rejects (bad request line, bad header, CL+TE, a header over 8,190
  bytes...) get a 400 with the OpenAI envelope and one rate-limited log line naming what was wrong,
  never the request's bytes: those may hold a key. A body aiohttp cannot decode (bad gzip) while it
  drains it is one such line too, not a traceback.
- aiohttp's own text/plain refusals raised outside the middleware (an unknown `Expect`, 417) leave
  as the envelope as well.
- A connection must send a whole request head within API_SERVER_HEADER_TIMEOUT seconds of opening
  or of its previous reply (aiohttp's keep-alive timer, which also runs before the first request,
  closes it otherwise), so slow-header clients cannot hold connections.
- At most API_SERVER_MAX_CONNECTIONS connections are open: at the cap the site stops accepting,
  and new connections wait in the kernel's backlog until one closes. The site runs its own accept
  loop for that (asyncio has no public way to pause accepting), which also turns a failing
  accept (out of file descriptors) into one rate-limited line and a short pause.

`start_site` is what `serve` and the tests' live gateways use.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import re
import resource
import socket
from collections.abc import Coroutine
from typing import Any

from aiohttp import web
from aiohttp.http_exceptions import BadHttpMethod, HttpProcessingError, LineTooLong
from aiohttp.web_protocol import RequestHandler
from aiohttp.web_request import BaseRequest
from aiohttp.web_server import Server

from gateway.config.settings import Settings
from gateway.errors import InvalidRequestError
from gateway.http.checks import add_security_headers, error_response, from_http_exception
from gateway.http.middleware import direct_handler
from gateway.observe.log_limits import RateLimitedLog

log = logging.getLogger("agent_gateway.http")

ACCEPT_RETRY_DELAY = 0.5  # seconds; asyncio's own pause after a failed accept is 1 s
_OUT_OF_RESOURCES = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})
# llhttp's reasons are fixed phrases ("Invalid header value char:\n\n  b'...'"): the phrase
# before the colon is safe to repeat, what follows it is the client's bytes and never is.
_FIXED_REASON = re.compile(r"[A-Za-z][A-Za-z '-]{0,79}")
FD_RESERVE = 64  # descriptors kept for the store, the upstream pool, providers and logs


def describe_rejection(exc: BaseException) -> str:
    """What was wrong with a rejected request, in words that never quote it."""
    if isinstance(exc, LineTooLong):
        return "a request line or header is longer than 8190 bytes"
    if isinstance(exc, BadHttpMethod):
        return "the request method is not valid"
    if isinstance(exc, HttpProcessingError):
        reason, colon, _ = str(exc.message).partition(":")
        reason = reason.strip()
        if colon and _FIXED_REASON.fullmatch(reason) and "'" not in reason.replace("can't", ""):
            return reason
    return f"it could not be read ({type(exc).__name__})"


class GatewayRequestHandler(RequestHandler):
    """aiohttp's protocol with parser rejections answered and logged as described above."""

    __slots__ = ("_rejections",)

    def __init__(self, manager: GatewayServer, **kwargs: Any) -> None:
        super().__init__(manager, **kwargs)
        self._rejections = manager.rejections

    def handle_error(self, request: BaseRequest, status: int = 500, exc: BaseException | None = None,
                     message: str | None = None) -> web.StreamResponse:
        if isinstance(exc, ConnectionError):  # the client left while its reply was written
            self.log_debug("client gone: %r", exc)
            gone = web.Response(status=status)
            gone.force_close()
            return gone
        if exc is None:
            return super().handle_error(request, status, exc, message)
        # The front door answers everything raised inside it, so what arrives here failed in
        # aiohttp's own handling of an odd request: the parser, or the `Expect` check before the
        # middleware (which fails on a value that is not UTF-8). Its message may quote the request.
        reason = describe_rejection(exc)
        self._rejections.log(logging.INFO, "rejected a malformed request from %s: %s (%d)", request.remote,
                             reason, status)
        if request.writer.output_size > 0:
            raise ConnectionError("a reply was already sent; cannot send the error")  # as aiohttp does
        error = InvalidRequestError(f"malformed HTTP request: {reason}", code="malformed_request")
        error.status = status if 400 <= status < 500 else 400  # 500 here is aiohttp's, the fault the client's
        response = error_response(error)
        add_security_headers(response)
        response.force_close()
        return response

    def log_exception(self, *args: Any, **kwargs: Any) -> None:
        exc = kwargs.get("exc_info")
        if isinstance(exc, web.RequestPayloadError | HttpProcessingError):
            # the rest of a body aiohttp drains after the reply did not decode (bad gzip): the
            # connection is closed, and a traceback would say nothing more
            self._rejections.log(logging.INFO, "closed a connection whose request body could not be read: %s",
                                 describe_rejection(exc.__cause__ or exc))
            return
        super().log_exception(*args, **kwargs)

    def finish_response(self, request: BaseRequest, resp: web.StreamResponse,
                        start_time: float | None) -> Coroutine[Any, Any, tuple[web.StreamResponse, bool]]:
        # a plain function handing back aiohttp's coroutine: no coroutine of its own wrapped
        # around every reply's write (the caller awaits what it returns, as before)
        if isinstance(resp, web.HTTPException) and resp.status >= 400 and resp.content_type == "text/plain":
            # raised by aiohttp outside the middleware (an unknown Expect): same envelope as the rest
            resp = error_response(from_http_exception(resp, request))
        return super().finish_response(request, resp, start_time)


class GatewayServer(Server):
    """aiohttp's connection manager, making GatewayRequestHandlers and counting open connections."""

    def __init__(self, *args: Any, max_connections: int, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.rejections = RateLimitedLog(log)
        self.accept_errors = RateLimitedLog(log, per_interval=3)
        self.max_connections = max_connections
        self.open_connections = 0
        self.below_cap = asyncio.Event()
        self.below_cap.set()

    def __call__(self) -> RequestHandler:
        return GatewayRequestHandler(self, loop=self._loop, **self._kwargs)

    def connection_made(self, handler: RequestHandler, transport: asyncio.Transport) -> None:
        super().connection_made(handler, transport)
        self.open_connections += 1
        if self.open_connections >= self.max_connections:
            self.below_cap.clear()

    def connection_lost(self, handler: RequestHandler, exc: BaseException | None = None) -> None:
        super().connection_lost(handler, exc)
        self.open_connections -= 1
        if self.open_connections < self.max_connections:
            self.below_cap.set()


class GatewayRunner(web.AppRunner):
    def __init__(self, app: web.Application, *, max_connections: int, **kwargs: Any) -> None:
        super().__init__(app, **kwargs)
        self._max_connections = max_connections

    async def _make_server(self) -> Server:
        plain = await super()._make_server()  # runs the app's startup and freezes it
        # the factory and protocol options aiohttp chose, in our Server subclass; the handler calls
        # the front door directly (http/middleware.py)
        return GatewayServer(direct_handler(self.app), request_factory=plain.request_factory,
                             handler_cancellation=plain.handler_cancellation, loop=plain._loop,
                             max_connections=self._max_connections, **plain._kwargs)


class _Listener(asyncio.AbstractServer):
    """The listening sockets and their accept loops, shaped as what BaseSite keeps in `_server`."""

    def __init__(self, loop: asyncio.AbstractEventLoop, sockets: list[socket.socket]) -> None:
        self._loop = loop
        self.sockets = sockets
        self.tasks: list[asyncio.Task[None]] = []

    def close(self) -> None:
        for task in self.tasks:
            task.cancel()
        for sock in self.sockets:
            sock.close()

    def get_loop(self) -> asyncio.AbstractEventLoop:
        return self._loop

    def is_serving(self) -> bool:
        return any(not task.done() for task in self.tasks)

    async def start_serving(self) -> None:
        pass

    async def serve_forever(self) -> None:
        await asyncio.gather(*self.tasks)

    async def wait_closed(self) -> None:
        await asyncio.gather(*self.tasks, return_exceptions=True)


class CappedSite(web.BaseSite):
    """A TCP site that stops accepting while the server is at its connection cap."""

    def __init__(self, runner: web.BaseRunner, host: str, port: int, *, backlog: int = 128) -> None:
        super().__init__(runner, backlog=backlog)
        self._host = host
        self._port = port

    @property
    def name(self) -> str:
        host = f"[{self._host}]" if ":" in self._host else self._host
        return f"http://{host}:{self._port}"

    async def start(self) -> None:
        await super().start()
        server = self._runner.server
        assert isinstance(server, GatewayServer)
        loop = asyncio.get_running_loop()
        infos = await loop.getaddrinfo(self._host, self._port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
        sockets: list[socket.socket] = []
        try:
            for family, kind, proto, _, address in dict.fromkeys(infos):
                sock = socket.socket(family, kind, proto)
                sockets.append(sock)
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                if family == socket.AF_INET6:
                    sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
                sock.bind(address)
                sock.listen(self._backlog)
                sock.setblocking(False)
        except BaseException:
            for sock in sockets:
                sock.close()
            raise
        listener = _Listener(loop, sockets)
        listener.tasks = [asyncio.create_task(self._accept(server, sock)) for sock in sockets]
        self._server = listener

    async def _accept(self, server: GatewayServer, sock: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        while True:
            await server.below_cap.wait()
            try:
                conn, _ = await loop.sock_accept(sock)
            except OSError as exc:
                if exc.errno in _OUT_OF_RESOURCES:
                    # the connection stays in the backlog; retrying at once would spin and log
                    server.accept_errors.log(logging.WARNING, "cannot accept a connection: %s; retrying in %.1f s",
                                             exc.strerror, ACCEPT_RETRY_DELAY)
                    await asyncio.sleep(ACCEPT_RETRY_DELAY)
                continue  # ECONNABORTED and the like: that client is gone
            try:
                await loop.connect_accepted_socket(server, conn)
            except OSError:
                conn.close()


def raise_fd_limit() -> int:
    """Raise the soft limit on open files to the hard one; returns the soft limit now in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    # an unlimited hard limit (macOS) cannot be the soft one: the kernel caps it (OPEN_MAX, 10240)
    for target in ((hard,) if hard != resource.RLIM_INFINITY else (65536, 10240)):
        if soft != resource.RLIM_INFINITY and soft >= target:
            return soft
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        except (ValueError, OSError):
            continue
        return target
    return soft


def connection_cap(wanted: int) -> int:
    """`wanted`, lowered so the connections (each with an upstream socket of its own at worst) fit
    in the open-files limit with room to spare."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return wanted
    return max(1, min(wanted, (soft - FD_RESERVE) // 2))


def make_runner(app: web.Application, settings: Settings, **options: Any) -> GatewayRunner:
    cap = connection_cap(settings.max_connections)
    if cap < settings.max_connections:
        log.warning("API_SERVER_MAX_CONNECTIONS lowered from %d to %d to fit the open-files limit (ulimit -n)",
                    settings.max_connections, cap)
    return GatewayRunner(app, max_connections=cap, keepalive_timeout=settings.header_timeout,
                         handler_cancellation=True, access_log=None, **options)


async def start_site(app: web.Application, settings: Settings, host: str, port: int,
                     **options: Any) -> GatewayRunner:
    """Set up the runner and listen on host:port; `runner.addresses` has the bound address."""
    runner = make_runner(app, settings, **options)
    await runner.setup()
    try:
        await CappedSite(runner, host, port).start()
    except BaseException:
        await runner.cleanup()
        raise
    return runner
