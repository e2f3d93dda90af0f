"""A real gateway and fake upstream served from a background thread, for synchronous clients
(schemathesis, requests) that cannot share the test's event loop.

The gateway runs on the same server as `agent-gateway serve` (gateway/http_server.py: handler
cancellation on, parser rejections enveloped, connection cap), so a client that goes away cancels its
handler as it would in production. Everything its loggers write while it runs is kept in `records`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from aiohttp import web

from gateway.config.settings import Settings
from gateway.http.app import create_app
from gateway.http.server import start_site
from tests.fakes.tools import LookupTool
from tests.fakes.upstream import FakeUpstream

SERVE_RUNNER_OPTIONS: dict[str, Any] = {"handler_cancellation": True, "access_log": None, "shutdown_timeout": 1.0}


class _Keep(logging.Handler):
    def __init__(self, records: list[logging.LogRecord]) -> None:
        super().__init__(logging.DEBUG)
        self.records = records

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@dataclasses.dataclass
class LiveGateway:
    base_url: str
    upstream: FakeUpstream
    loop: asyncio.AbstractEventLoop
    records: list[logging.LogRecord] = dataclasses.field(default_factory=list)

    @property
    def port(self) -> int:
        return int(self.base_url.rsplit(":", 1)[1])

    def call(self, coro: Any, timeout: float = 10) -> Any:
        """Run a coroutine on the gateway's loop (e.g. to queue upstream replies or inspect state)."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)


async def _start_site(app: web.Application) -> tuple[web.AppRunner, str]:
    runner = web.AppRunner(app, **SERVE_RUNNER_OPTIONS)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    host, port = next(iter(runner.addresses))[:2]
    return runner, f"http://{host}:{port}"


@contextmanager
def live_gateway(home: Path, **overrides: Any) -> Iterator[LiveGateway]:
    loop = asyncio.new_event_loop()
    ready: dict[str, Any] = {}
    stop = asyncio.Event()
    started = threading.Event()

    async def main() -> None:
        upstream = FakeUpstream()
        upstream_runner, upstream_url = await _start_site(upstream.app())
        upstream.base_url = f"{upstream_url}/v1"
        settings = dataclasses.replace(
            Settings(home=home, profile=None, llm_base_url=upstream.base_url, llm_model="fake-model"), **overrides)
        gateway_runner = await start_site(create_app(settings, tools=[LookupTool()]), settings, "127.0.0.1", 0)
        host, port = next(iter(gateway_runner.addresses))[:2]
        gateway_url = f"http://{host}:{port}"
        ready.update(upstream=upstream, url=gateway_url)
        started.set()
        try:
            await stop.wait()
        finally:
            await gateway_runner.cleanup()
            await upstream_runner.cleanup()

    def run() -> None:
        asyncio.set_event_loop(loop)
        try:
            loop.run_until_complete(main())
        except BaseException as exc:  # noqa: BLE001 - reported to the waiting test below
            ready["error"] = exc
            started.set()
        finally:
            loop.close()

    records: list[logging.LogRecord] = []
    keep = _Keep(records)
    logging.getLogger().addHandler(keep)
    thread = threading.Thread(target=run, name="live-gateway", daemon=True)
    thread.start()
    started.wait(20)
    try:
        if "error" in ready or "url" not in ready:
            raise RuntimeError(f"the live gateway did not start: {ready.get('error')!r}")
        yield LiveGateway(ready["url"], ready["upstream"], loop, records)
    finally:
        loop.call_soon_threadsafe(stop.set)
        thread.join(20)
        logging.getLogger().removeHandler(keep)
