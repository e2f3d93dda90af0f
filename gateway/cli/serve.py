"""`agent-gateway serve`: bind guard, startup line, graceful SIGTERM."""

from __future__ import annotations

import argparse
import asyncio
import gc
import ipaddress
import logging
import signal
import sys
from collections.abc import Callable, Coroutine
from typing import Any

from gateway.config.settings import Settings, load_settings
from providers.upstream_text import redact_url

log = logging.getLogger("agent_gateway")


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("serve", help="start the HTTP gateway")
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


def run(args: argparse.Namespace) -> int:
    settings = load_settings(profile=args.profile, overrides={"host": args.host, "port": args.port})
    if settings.profile is not None and not settings.profile_dir.is_dir():
        # A typo in -p would otherwise serve an unconfigured gateway with defaults.
        print(f"agent-gateway: profile {settings.profile!r} does not exist: create it with "
              f"`agent-gateway profile create {settings.profile}`", file=sys.stderr)
        return 2
    if not settings.enabled:
        print("agent-gateway: API_SERVER_ENABLED is false, so the API server is not started.", file=sys.stderr)
        return 0
    if not is_loopback(settings.host) and not settings.api_key:
        print(
            f"agent-gateway: refusing to listen on {settings.host} without a key: set API_SERVER_KEY "
            "(or bind 127.0.0.1).",
            file=sys.stderr,
        )
        return 2
    from gateway.http.access_log import configure_logging  # the server's imports load only for `serve`

    configure_logging(logging.INFO)
    if not settings.api_key:
        print("agent-gateway: warning: no API_SERVER_KEY set; anyone on this machine can use the gateway.",
              file=sys.stderr)
    if "*" in settings.cors_origins:
        print("agent-gateway: warning: API_SERVER_CORS_ORIGINS=* lets any web page call the gateway from a "
              "visitor's browser; list the exact origins instead.", file=sys.stderr)
    event_loop_runner()(serve(settings))
    return 0


def event_loop_runner() -> Callable[[Coroutine[Any, Any, None]], None]:
    """uvloop's runner when it is installed (`pip install agent-gateway[fast]`), else asyncio's.

    Same behaviour either way; uvloop's C event loop cut the gateway's CPU per request by about
    15% in bench/ (non-streamed and streamed chat alike).
    """
    try:
        import uvloop
    except ImportError:
        return asyncio.run
    return uvloop.run


def freeze_startup_objects() -> None:
    """Move everything built at startup (modules, the app, providers, sessions) out of the cyclic
    garbage collector's reach: they live as long as the process, and every full collection walked
    them all (~60k objects). Garbage collection took ~15% of the CPU at c=64, ~4 points of it in
    full collections; after freezing those cost a tenth (bench, gc.callbacks timing)."""
    gc.collect()
    gc.freeze()


async def serve(settings: Settings) -> None:
    from aiohttp import web

    from gateway.http import appkeys
    from gateway.http.app import create_app

    app = create_app(settings)
    runner = web.AppRunner(app, handler_cancellation=True, access_log=None, shutdown_timeout=1.0)
    await runner.setup()
    try:
        site = web.TCPSite(runner, settings.host, settings.port)
        await site.start()
        freeze_startup_objects()
        port = next(iter(runner.addresses))[1]
        host = f"[{settings.host}]" if ":" in settings.host else settings.host
        print(f"agent-gateway listening on http://{host}:{port}/v1 (model {settings.model_name}, "
              f"upstream {redact_url(settings.llm_base_url)})", flush=True)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await stop.wait()
        lifecycle = app[appkeys.LIFECYCLE]
        log.info("shutting down: %d request(s) in flight, grace %.0f s", lifecycle.in_flight,
                 settings.shutdown_grace)
        if not await lifecycle.drain(settings.shutdown_grace):
            log.warning("grace period over with %d request(s) still running; closing them", lifecycle.in_flight)
    finally:
        await runner.cleanup()
