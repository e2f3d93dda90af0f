"""Deep research end to end on the multi-hop corpus (issue 45): the real app, the scripted model
(tests/fakes/research_model.py) and the corpus with its timed SearXNG (tests/fakes/research_web.py).

What a user would check: the second hop is found only by reading the first page, the report cites
only pages the run read and loses the invented URL, searches for different sub-questions overlap on
the search engine's own clock without ever exceeding the concurrency bound, a client that goes away
closes every search in flight, and a 16k-token model completes."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from tests.fakes.research_model import INVENTED_URL, ResearchModel
from tests.fakes.research_web import LIGHTHOUSE_B, SANCTUARY_A, ResearchWeb, research_web  # noqa: F401
from tests.fakes.upstream import FakeUpstream

MODEL = "agent-gateway-deep-research"


@pytest.fixture
def research_client(make_client: Callable[..., Any], upstream: FakeUpstream,
                    research_web: ResearchWeb) -> Callable[..., Any]:  # noqa: F811
    """`await research_client(model=ResearchModel(...), **settings)`: the app on the corpus."""

    async def make(model: ResearchModel | None = None, **overrides: Any) -> Any:
        upstream.responder = model or ResearchModel(research_web.corpus)
        return await make_client(env={"SEARXNG_URL": research_web.base_url}, allow_private_urls=True,
                                 **overrides)

    return make


def _opened(response: dict[str, Any]) -> set[str]:
    return {item["action"]["url"] for item in response["output"]
            if item["type"] == "web_search_call" and item["action"]["type"] == "open_page"}


def _report(response: dict[str, Any]) -> dict[str, Any]:
    message = response["output"][-1]
    assert message["type"] == "message", [item["type"] for item in response["output"]]
    [part] = message["content"]
    return dict(part)


async def test_the_second_hop_is_found_by_reading_the_first_page_and_the_report_cites_only_read_pages(
        research_client, research_web: ResearchWeb) -> None:  # noqa: F811
    model = ResearchModel(research_web.corpus)
    client = await research_client(model)
    resp = await client.post("/v1/responses", json={"model": MODEL, "input": research_web.corpus.question})
    assert resp.status == 200, await resp.text()
    response = await resp.json()
    assert response["status"] == "completed", response
    report = _report(response)
    assert SANCTUARY_A in report["text"] and LIGHTHOUSE_B in report["text"]
    follow_up = research_web.corpus.hops[0].follow_up
    assert follow_up in research_web.queries()  # asked by the reflection, after page A was read
    assert research_web.queries().index(follow_up) >= len(research_web.corpus.sub_questions)
    read = {research_web.url(slug) for slug in research_web.read_slugs()}
    cited = {a["url"] for a in report["annotations"] if a["type"] == "url_citation"}
    assert cited and cited <= read and cited <= _opened(response)
    assert INVENTED_URL not in report["text"] and INVENTED_URL not in cited
    assert {"plan", "notes", "reflect", "report"} <= set(model.stages())


async def test_searches_for_different_sub_questions_overlap_and_never_exceed_the_bound(
        research_client, research_web: ResearchWeb) -> None:  # noqa: F811
    research_web.delay = 0.3
    client = await research_client(research_concurrency=2)
    resp = await client.post("/v1/responses", json={"model": MODEL, "input": research_web.corpus.question})
    assert (await resp.json())["status"] == "completed"
    assert research_web.overlapping()
    assert research_web.max_in_flight == 2


async def test_a_client_that_goes_away_closes_every_search_in_flight_within_a_second(
        research_client, research_web: ResearchWeb, upstream: FakeUpstream) -> None:  # noqa: F811
    research_web.delay = 30.0
    client = await research_client()
    request = asyncio.ensure_future(client.post("/v1/chat/completions", json={
        "model": MODEL, "stream": True, "messages": [{"role": "user", "content": research_web.corpus.question}]}))
    async with asyncio.timeout(20):
        while research_web.in_flight < 2:
            await asyncio.sleep(0.02)
    request.cancel()
    await asyncio.gather(request, return_exceptions=True)
    await client.close()  # the client is gone: its connection closed
    async with asyncio.timeout(1.0):
        while research_web.in_flight:
            await asyncio.sleep(0.01)
    assert all(span.abandoned for span in research_web.searches)


async def test_a_16k_token_model_completes_with_every_prompt_inside_its_window(
        research_client, research_web: ResearchWeb, upstream: FakeUpstream) -> None:  # noqa: F811
    research_web.page_padding = 40_000  # every page read whole would not fit 16k tokens together
    model = ResearchModel(research_web.corpus, context_tokens=16_384)
    client = await research_client(model, llm_context_window=16_384)
    resp = await client.post("/v1/responses", json={"model": MODEL, "input": research_web.corpus.question})
    response = await resp.json()
    assert response["status"] == "completed", response
    assert "refused" not in model.stages()
    assert LIGHTHOUSE_B in _report(response)["text"]
