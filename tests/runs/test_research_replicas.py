"""Deep research in background mode across two real `serve` processes on one PostgreSQL (issue 45):
a run created and streamed on A, resumed on B from a sequence number and retrieved, every event and
item parsed by the official `openai` SDK; kill -9 of the replica running a research run is marked
`failed` by the other within 30 s.

The research corpus (tests/fakes/research_web.py) and the scripted model (research_model.py) run in
the test process; the gateways reach them on 127.0.0.1 (`WEB_ALLOW_PRIVATE_URLS`, no fallback)."""

from __future__ import annotations

import asyncio
import time
import typing
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import openai
import pytest
from openai.lib.streaming.responses._responses import ResponseStreamState
from openai.types.responses import (
    Response,
    ResponseFunctionWebSearch,
    ResponseOutputMessage,
    ResponseReasoningItem,
    ResponseStreamEvent,
)
from openai.types.responses.response_function_web_search import ActionOpenPage, ActionSearch
from pydantic import TypeAdapter

from tests.conftest import API_KEY
from tests.fakes.research_model import INVENTED_URL, ResearchModel
from tests.fakes.research_web import LIGHTHOUSE_B, ResearchWeb, research_web  # noqa: F401
from tests.fakes.upstream import FakeUpstream
from tests.support.gateway_process import ServerProcess, gateway_env, start_gateway

pytestmark = pytest.mark.timeout(180)
AUTH = {"Authorization": f"Bearer {API_KEY}"}
ENDED = {"completed", "failed", "incomplete", "cancelled"}
MODEL = "agent-gateway-deep-research"
#: As on OpenAI's API, a search action's sources are shown when the request asks for them.
SOURCES: list[Any] = ["web_search_call.action.sources"]
EVENTS: TypeAdapter[Any] = TypeAdapter(ResponseStreamEvent)


def _event_classes() -> dict[str, type[Any]]:
    """Each stream event type -> the SDK class that must parse it."""
    union = typing.get_args(typing.get_args(ResponseStreamEvent)[0])
    return {typing.get_args(cls.model_fields["type"].annotation)[0]: cls for cls in union}


@pytest.fixture
async def replicas(tmp_path: Path, upstream: FakeUpstream, postgres_url: str,
                   research_web: ResearchWeb) -> AsyncIterator[list[ServerProcess]]:  # noqa: F811
    upstream.responder = ResearchModel(research_web.corpus)
    env = {"LLM_BASE_URL": upstream.base_url, "LLM_MODEL": "fake-model", "API_SERVER_KEY": API_KEY,
           "API_SERVER_DATABASE_URL": postgres_url, "SEARXNG_URL": research_web.base_url,
           "WEB_SEARCH_BACKEND": "searxng", "WEB_ALLOW_PRIVATE_URLS": "true", "WEB_SEARCH_FALLBACK": "none",
           "WEB_EXTRACT_FALLBACK": "none", "API_SERVER_KEEPALIVE_SECONDS": "1"}
    started = list(await asyncio.gather(*(start_gateway(env=gateway_env(tmp_path / name, env))
                                          for name in ("a", "b"))))
    for gateway in started:
        gateway.keep_draining()
    yield started
    await asyncio.gather(*(gateway.stop() for gateway in started))


def _sdk(gateway: ServerProcess) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=gateway.base_url + "/v1", api_key=API_KEY, max_retries=0)


async def _get(http: aiohttp.ClientSession, gateway: ServerProcess, response_id: str) -> dict[str, Any]:
    async with http.get(f"{gateway.base_url}/v1/responses/{response_id}", headers=AUTH) as reply:
        assert reply.status == 200, await reply.text()
        return dict(await reply.json())


async def _resume(sdk: openai.AsyncOpenAI, response_id: str, seen: list[Any]) -> list[Any]:
    """`seen` and the events after it, resumed on `sdk`'s replica; the resumed stream must end with
    the response's end. (About 1 run in 15 on a host at load 12 to 16 it did not: the run's row in
    the store ended `failed` by lease expiry at event 69 of 91 while GET said `completed`, and B's
    stream ended cleanly mid-report. Reported with issue 45; the message below names it.)"""
    rest = [event async for event in await sdk.responses.retrieve(
        response_id, stream=True, starting_after=seen[-1].sequence_number, include=SOURCES)]
    events = seen + rest
    if events[-1].type not in ("response.completed", "response.failed", "response.incomplete"):
        status = (await sdk.responses.retrieve(response_id)).status
        raise AssertionError(f"the resumed stream ended at event {events[-1].sequence_number} "
                             f"({events[-1].type}) without the response's end; GET says {status!r} "
                             "(the run's lease lost while it finished?)")
    return events


def _check_events(events: list[Any]) -> Response:
    """Every event is the SDK class of its type and validates strictly; the SDK's own stream state
    accepts them in order; the final response validates."""
    classes = _event_classes()
    state = ResponseStreamState(input_tools=openai.omit, text_format=openai.omit)
    for event in events:
        assert isinstance(event, classes[event.type]), (event.type, type(event))
        EVENTS.validate_python(event.model_dump(mode="json", exclude_unset=True))
        state.handle_event(event)
    assert events[-1].type == "response.completed"
    return Response.model_validate(events[-1].response.model_dump(mode="json", exclude_unset=True))


def _check_output(response: Response, web: ResearchWeb) -> None:
    """OpenAI's deep-research shape: reasoning, searches (query, sources), pages opened, one report
    whose citations name only pages the run read."""
    kinds = [type(item) for item in response.output]
    assert ResponseReasoningItem in kinds and kinds[-1] is ResponseOutputMessage, kinds
    calls = [item for item in response.output if isinstance(item, ResponseFunctionWebSearch)]
    searches = [c.action for c in calls if isinstance(c.action, ActionSearch)]
    opened = {c.action.url for c in calls if isinstance(c.action, ActionOpenPage)}
    assert searches and all(s.query for s in searches) and any(s.sources for s in searches)
    assert web.url("kestrel-lighthouse") in opened  # the second hop was found and read
    report = response.output[-1]
    assert isinstance(report, ResponseOutputMessage)
    [text] = report.content
    assert text.type == "output_text" and LIGHTHOUSE_B in text.text
    cited = {a.url for a in text.annotations if a.type == "url_citation"}
    assert cited and cited <= opened, (cited, opened)
    assert INVENTED_URL not in text.text and INVENTED_URL not in cited
    assert response.usage is not None and response.usage.total_tokens > 0


async def test_a_research_run_streamed_on_a_resumes_on_b_and_every_event_and_item_parses(
        replicas: list[ServerProcess], research_web: ResearchWeb) -> None:  # noqa: F811
    a, b = replicas
    research_web.delay = 0.3  # searches in flight when the client drops
    sdk_a, sdk_b = _sdk(a), _sdk(b)
    try:
        stream = await sdk_a.responses.create(model=MODEL, input=research_web.corpus.question, background=True,
                                              stream=True, include=SOURCES)
        seen: list[Any] = []
        async for event in stream:
            seen.append(event)
            if len(seen) == 4:
                break
        await stream.close()  # the client drops; the run goes on, on A
        response_id = seen[0].response.id
        events = await _resume(sdk_b, response_id, seen)
        assert [e.sequence_number for e in events] == list(range(len(events)))
        final = _check_events(events)
        _check_output(final, research_web)
        retrieved = await sdk_b.responses.retrieve(response_id, include=SOURCES)
        assert retrieved.status == "completed"
        assert [item.model_dump() for item in retrieved.output] == [item.model_dump() for item in final.output]
        _check_output(retrieved, research_web)
        again = [event async for event in await sdk_a.responses.retrieve(response_id, stream=True, include=SOURCES)]
        assert [e.model_dump() for e in again] == [e.model_dump() for e in events]
    finally:
        await asyncio.gather(sdk_a.close(), sdk_b.close())
    assert research_web.overlapping()  # searches of several sub-questions went at once


async def test_kill_9_of_the_replica_running_a_research_run_is_marked_failed_by_the_other_within_30_s(
        replicas: list[ServerProcess], research_web: ResearchWeb) -> None:  # noqa: F811
    a, b = replicas
    research_web.delay = 60.0  # the run waits on its searches when A dies
    async with aiohttp.ClientSession() as http:
        async with http.post(a.base_url + "/v1/responses", headers=AUTH, json={
                "model": MODEL, "input": research_web.corpus.question, "background": True}) as reply:
            assert reply.status == 200, await reply.text()
            created = await reply.json()
        async with asyncio.timeout(30):
            while not research_web.searches:
                await asyncio.sleep(0.05)
        await a.kill()
        assert (await _get(http, b, created["id"]))["status"] == "in_progress"
        killed = time.monotonic()
        while (response := await _get(http, b, created["id"]))["status"] not in ENDED:
            assert time.monotonic() - killed < 30, response
            await asyncio.sleep(0.2)
    assert response["status"] == "failed", response
    assert response["error"]["code"] == "server_error"
    async with asyncio.timeout(5):  # the dead replica's searches ended with it
        while research_web.in_flight:
            await asyncio.sleep(0.05)
    assert all(span.abandoned for span in research_web.searches)
