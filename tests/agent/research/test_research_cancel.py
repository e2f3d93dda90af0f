"""Cancel stops a research run within a second: the client going away mid-stream, or a background
research response cancelled, closes every search and model call under way."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from gateway.config.settings import Settings
from gateway.http.app import create_app
from tests.agent.research.site import QUESTION, MiniWeb, StageModel
from tests.fakes.upstream import FakeUpstream
from tests.support.live_gateway import SERVE_RUNNER_OPTIONS

RESEARCH_ID = "agent-gateway-deep-research"


async def until(predicate: Callable[[], bool], seconds: float = 5.0) -> float:
    """Wait for `predicate`; the loop time it became true."""
    async with asyncio.timeout(seconds):
        while not predicate():
            await asyncio.sleep(0.01)
    return time.monotonic()


async def served(aiohttp_client: Any, make_settings: Callable[..., Settings], web: MiniWeb) -> Any:
    """The gateway as `serve` runs it (a handler is cancelled when its client leaves)."""
    settings = make_settings(env={"SEARXNG_URL": web.base_url}, allow_private_urls=True,
                             web_search_backend="searxng", web_extract_backend="fetch")
    return await aiohttp_client(create_app(settings), server_kwargs=SERVE_RUNNER_OPTIONS)


async def test_a_client_leaving_mid_stream_closes_every_search_under_way_within_a_second(
        aiohttp_client, make_settings, web: MiniWeb, model: StageModel):
    web.delay = 30.0
    client = await served(aiohttp_client, make_settings, web)
    resp = await client.post("/v1/chat/completions", json={
        "model": RESEARCH_ID, "stream": True, "messages": [{"role": "user", "content": QUESTION}]})
    await until(lambda: len(web.spans) == 3)  # the three sub-questions' searches are under way
    resp.close()
    gone = time.monotonic()
    assert await until(lambda: web.abandoned == 3) - gone < 1.0


async def test_a_client_leaving_while_the_report_is_written_closes_the_model_call_within_a_second(
        aiohttp_client, make_settings, web: MiniWeb, model: StageModel, upstream: FakeUpstream):
    model.delay["report"] = 30.0
    client = await served(aiohttp_client, make_settings, web)
    resp = await client.post("/v1/responses", json={"model": RESEARCH_ID, "input": QUESTION, "stream": True})
    await until(lambda: "report" in model.stages(), seconds=10)
    resp.close()
    gone = time.monotonic()
    assert await until(lambda: upstream.disconnects == 1) - gone < 1.0
    assert upstream.active == 0


async def test_cancelling_a_background_research_response_closes_its_searches_within_a_second(
        aiohttp_client, make_settings, web: MiniWeb, model: StageModel):
    web.delay = 30.0
    client = await served(aiohttp_client, make_settings, web)
    created = await (await client.post("/v1/responses", json={
        "model": RESEARCH_ID, "input": QUESTION, "background": True})).json()
    assert created["status"] in ("queued", "in_progress") and created["model"] == RESEARCH_ID
    await until(lambda: len(web.spans) == 3)
    cancelled = await client.post(f"/v1/responses/{created['id']}/cancel")
    gone = time.monotonic()
    assert cancelled.status == 200 and (await cancelled.json())["status"] == "cancelled"
    assert await until(lambda: web.abandoned == 3) - gone < 1.0
