"""`agent-gateway serve`: bind guard, startup line, graceful SIGTERM."""

from __future__ import annotations

import argparse
import asyncio
import errno
import gc
import ipaddress
import logging
import signal
import socket
import sys
from collections.abc import Callable, Coroutine, Sequence
from typing import IO, TYPE_CHECKING, Any

from gateway.cli.commands import help_line
from gateway.common.redact import redact_url
from gateway.config.settings import Settings, load_settings
from gateway.errors import AgentGatewayError
from gateway.store.api import SchemaVersionError

if TYPE_CHECKING:  # the server's modules load only for `serve`
    from gateway.keys.ring import KeyRing

log = logging.getLogger("agent_gateway")

PORT_HINT = "choose another port with API_SERVER_PORT or `serve --port`"
HOST_HINT = "set API_SERVER_HOST or `serve --host`"
#: gc generation-0 threshold while serving (700 by default in 3.11, 2000 from 3.13; see freeze_startup_objects)
GC_YOUNG_THRESHOLD = 2000


class BindError(AgentGatewayError):
    """The listening socket cannot be opened; the message says why and which setting to change."""


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("serve", help=help_line("serve"))
    parser.add_argument("--host", help="bind address (API_SERVER_HOST)")
    parser.add_argument("--port", help="port (API_SERVER_PORT); 0 picks a free one")
    parser.set_defaults(func=run)


def is_loopback(host: str) -> bool:
    if host.lower() in ("localhost", "localhost."):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a hostname may resolve anywhere: treat it as exposed


def say(settings: Settings, text: str, *, level: str = "INFO", stream: IO[str] | None = None) -> None:
    """One line of `serve`'s own (the banner, start-up warnings), as JSON with API_SERVER_LOG_FORMAT=json."""
    if settings.log_format == "json":
        from gateway.observe.json_log import json_line

        text = json_line(text.removeprefix("agent-gateway: "), level=level)
    print(text, file=stream or sys.stderr, flush=True)


def bind_problem(host: str, port: int, exc: OSError) -> str:
    """One sentence for a failed bind, naming the setting that fixes it."""
    if isinstance(exc, socket.gaierror):
        return f"cannot listen on {host}: the name does not resolve ({exc.strerror}); {HOST_HINT} to an address"
    if exc.errno == errno.EADDRINUSE:
        return (f"port {port} on {host} is already in use (another gateway or profile?): stop that one, "
                f"or {PORT_HINT}")
    if exc.errno == errno.EACCES:
        return (f"not allowed to listen on port {port} of {host} (permission denied; ports below 1024 need "
                f"root): {PORT_HINT}")
    if exc.errno == errno.EADDRNOTAVAIL:
        return (f"cannot listen on {host}: that address is not one of this machine's; {HOST_HINT} to one "
                "of them (127.0.0.1: this machine only, 0.0.0.0: every interface)")
    return f"cannot listen on {host} port {port}: {exc.strerror or exc}"


def probe_bind(host: str, port: int) -> str | None:
    """What would stop `serve` from listening on host:port (bound and released at once), or None."""
    try:
        infos = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        return bind_problem(host, port, exc)
    for family, kind, proto, _canonical, address in infos:
        with socket.socket(family, kind, proto) as probe:
            # as asyncio's create_server does, so a socket in TIME_WAIT is no false alarm
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                probe.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            try:
                probe.bind(address)
            except OSError as exc:
                return bind_problem(host, port, exc)
    return None


def run(args: argparse.Namespace) -> int:
    settings = load_settings(profile=args.profile, overrides={"host": args.host, "port": args.port})
    if settings.profile is not None and not settings.profile_dir.is_dir():
        # A typo in -p would otherwise serve an unconfigured gateway with defaults.
        say(settings, f"agent-gateway: profile {settings.profile!r} does not exist: create it with "
            f"`agent-gateway profile create {settings.profile}`", level="ERROR")
        return 2
    if not settings.enabled:
        say(settings, "agent-gateway: API_SERVER_ENABLED is false, so the API server is not started.")
        return 0
    if not is_loopback(settings.host) and not settings.api_key:
        say(settings, f"agent-gateway: refusing to listen on {settings.host} without a key: set API_SERVER_KEY "
            "(or bind 127.0.0.1).", level="ERROR")
        return 2
    from gateway.observe.access_log import configure_logging  # the server's imports load only for `serve`
    from gateway.observe.json_log import JsonFormatter

    configure_logging(logging.INFO, JsonFormatter() if settings.log_format == "json" else None)
    warnings = []  # said once listening, so that a failure to start is one line alone
    if "*" in settings.cors_origins:
        warnings.append("API_SERVER_CORS_ORIGINS=* lets any web page call the gateway from a visitor's browser; "
                        "list the exact origins instead.")
    try:
        event_loop_runner()(serve(settings, warnings))
    except (BindError, SchemaVersionError) as exc:
        say(settings, f"agent-gateway: {exc}", level="ERROR")
        return 1
    return 0


def event_loop_runner() -> Callable[[Coroutine[Any, Any, None]], None]:
    """uvloop's runner where it is installed (a default dependency, except on Windows), else asyncio's.

    Same behaviour either way; uvloop's C event loop costs less CPU per request (bench/README.md).
    """
    try:
        import uvloop
    except ImportError:
        return asyncio.run
    return uvloop.run


def freeze_startup_objects() -> None:
    """Move everything built at startup (modules, the app, providers, sessions) out of the cyclic
    garbage collector's reach: they live as long as the process, and every full collection walked
    them all (tens of thousands of objects), a real share of the CPU at high concurrency
    (bench/README.md has the gc.callbacks timing).

    The youngest generation is then collected after GC_YOUNG_THRESHOLD net allocations instead of
    700: at high concurrency each request's upstream call (aiohttp's client objects) is still alive
    at most collections, so a small threshold walks the same in-flight objects again and again and
    promotes them to the older generations, whose collections cost more (bench/README.md)."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(GC_YOUNG_THRESHOLD, *gc.get_threshold()[1:])


async def drain(app: Any, grace: float) -> None:
    """SIGTERM: refuse new requests and claim no queued run; in-flight requests and background runs
    get `grace` seconds to end (the runs still going are then stopped, stored `incomplete`, as the
    app's cleanup does; queued ones stay queued for another replica or the restarted one)."""
    from gateway.http import appkeys
    from gateway.runs.background import BACKGROUND_RUNS

    lifecycle, background = app[appkeys.LIFECYCLE], app[BACKGROUND_RUNS]
    background.draining = True
    log.info("shutting down: %d request(s) in flight, %d background run(s), grace %.0f s", lifecycle.in_flight,
             len(background.running()), grace)
    requests_ended, runs_ended = await asyncio.gather(lifecycle.drain(grace), background.wait_all(grace))
    if not requests_ended:
        log.warning("grace period over with %d request(s) still running; closing them", lifecycle.in_flight)
    if not runs_ended:
        log.warning("grace period over with %d background run(s) still running; stopping them (stored "
                    "incomplete)", len(background.running()))


def _key_warnings(ring: KeyRing) -> list[str]:
    if ring.keyless:
        return ["no API_SERVER_KEY set and no key made with `agent-gateway keys create`; anyone on this machine "
                "can use the gateway."]
    if ring.unread:
        return ["the API keys could not be read from the store yet; every request that needs a key is "
                "refused (503) until they are."]
    return []


async def serve(settings: Settings, warnings: Sequence[str] = ()) -> None:
    from gateway.http import appkeys
    from gateway.http.app import create_app
    from gateway.http.server import raise_fd_limit, start_site
    from gateway.observe.tracing import tracer_provider_from_env
    from gateway.upstream.route_report import report as route_report

    # Binding comes after the app's start-up (plugins, store, upstream pool), which logs; a port
    # that is taken is found first, so that its one line is all a failed start prints.
    problem = probe_bind(settings.host, settings.port)
    if problem is not None:
        raise BindError(problem)
    raise_fd_limit()  # idle keep-alive clients, streams and the upstream pool all hold descriptors
    tracer_provider = tracer_provider_from_env()  # None unless OTEL_TRACES_EXPORTER names an exporter
    app = create_app(settings, tracer_provider=tracer_provider)
    try:
        runner = await start_site(app, settings, settings.host, settings.port, shutdown_timeout=1.0)
    except OSError as exc:
        raise BindError(bind_problem(settings.host, settings.port, exc)) from None
    except SchemaVersionError:
        await app.cleanup()  # what started before the store (the upstream pool) closes cleanly
        raise
    try:
        # said after the start, which read the store's keys: whether it is open depends on them too
        for warning in [*_key_warnings(app[appkeys.KEYRING]), *warnings]:
            say(settings, f"agent-gateway: warning: {warning}", level="WARNING")
        freeze_startup_objects()
        port = next(iter(runner.addresses))[1]
        host = f"[{settings.host}]" if ":" in settings.host else settings.host
        say(settings, f"agent-gateway listening on http://{host}:{port}/v1 (model {settings.model_name}, "
            f"upstream {redact_url(settings.llm_base_url)})", stream=sys.stdout)
        route_lines, route_warnings = route_report(app[appkeys.ROUTES])  # with `models:` only
        for line in route_lines:
            say(settings, line)
        for warning in route_warnings:
            say(settings, f"agent-gateway: warning: {warning}", level="WARNING")
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await stop.wait()
        await drain(app, settings.shutdown_grace)
    finally:
        await runner.cleanup()
        if tracer_provider is not None:
            tracer_provider.shutdown()  # sends the spans still batched
