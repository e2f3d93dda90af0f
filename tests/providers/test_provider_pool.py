"""A provider's pooled HTTP client keeps few idle connections: httpcore polls every idle pooled
socket on each request start and response close, so each kept connection costs every later call
(issue 33; bench/provider_pool.py has the figures)."""

from __future__ import annotations

import asyncio
from typing import Any

from plugins.web.searxng.provider import SearxngProvider
from providers.http import MAX_IDLE_CONNECTIONS
from tests.fakes.scripted import Reply
from tests.fakes.searxng import FakeSearxng, searxng_result

BURST = 12


async def open_connections_settle(server: Any, at_most: int) -> int:
    """The server's open connections once the client has closed its surplus (or 3 s have gone by)."""
    for _ in range(60):
        count = len(server.runner.server.connections)
        if count <= at_most:
            return count
        await asyncio.sleep(0.05)
    return len(server.runner.server.connections)


async def test_a_burst_of_searches_leaves_only_a_few_idle_connections_open(aiohttp_server: Any) -> None:
    fake = FakeSearxng()
    server = await aiohttp_server(fake.app())
    body = {"query": "otters", "results": [searxng_result(1, "otters")], "unresponsive_engines": []}
    # held long enough that all of them are in flight at once: one connection each
    fake.script(*(Reply(json=body, delay=0.3) for _ in range(BURST)))
    provider = SearxngProvider({"SEARXNG_URL": str(server.make_url("")).rstrip("/")})
    try:
        results = await asyncio.gather(*(provider.search(f"otters {n}") for n in range(BURST)))
        assert all(r["data"]["web"][0]["url"] == "https://example.org/1" for r in results)
        assert len(fake.requests) == BURST

        assert await open_connections_settle(server, MAX_IDLE_CONNECTIONS) <= MAX_IDLE_CONNECTIONS

        # the kept ones still serve the next call
        again = await provider.search("otters again")
        assert again["data"]["web"]
    finally:
        await provider.aclose()
