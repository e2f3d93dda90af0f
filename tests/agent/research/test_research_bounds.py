"""A research run's bounds: the concurrency of its searches, and each budget (calls, time, tokens)
ending the searching with a report that says which one did."""

from __future__ import annotations

from typing import Any

from tests.agent.research.site import QUESTION, MiniWeb, StageModel

RESEARCH_ID = "agent-gateway-deep-research"


async def research(client: Any, **extra: Any) -> dict[str, Any]:
    resp = await client.post("/v1/responses", json={"model": RESEARCH_ID, "input": QUESTION, **extra})
    assert resp.status == 200, await resp.text()
    return await resp.json()


def report_of(body: dict[str, Any]) -> str:
    [message] = [item for item in body["output"] if item["type"] == "message"]
    return str(message["content"][0]["text"])


def calls_of(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [item for item in body["output"] if item["type"] == "web_search_call"]


async def test_searches_for_different_sub_questions_overlap_within_the_concurrency_bound(
        research_client, web: MiniWeb, model: StageModel):
    web.delay = 0.3
    client = await research_client(research_concurrency=2, research_max_rounds=0)
    body = await research(client)
    assert body["status"] == "completed"
    assert len(web.spans) == 3 and web.overlapping()  # three sub-questions, searched side by side
    assert web.max_in_flight == 2  # never more than the bound


async def test_the_call_budget_ends_the_searching_and_the_report_says_so(research_client, web: MiniWeb,
                                                                        model: StageModel):
    client = await research_client()
    body = await research(client, max_tool_calls=2)
    assert body["status"] == "completed" and body["max_tool_calls"] == 2
    assert len(calls_of(body)) == 2
    report = report_of(body)
    assert report.startswith("*The research stopped at its limit of 2 searches and page reads")
    assert model.stages()[-1] == "report"  # still written by the model, from what was found


async def test_the_time_budget_ends_the_searching_and_closes_the_searches_under_way(research_client, web: MiniWeb,
                                                                                   model: StageModel):
    web.delay = 5.0
    client = await research_client(research_timeout=0.5)
    body = await research(client)
    assert body["status"] == "completed"
    assert report_of(body).startswith("*The research stopped at its time limit of 0.5 s")
    assert len(web.spans) == 3 and await web.all_abandoned_within(1.0)  # closed, not waited for
    assert {call["status"] for call in calls_of(body)} == {"failed"}


async def test_the_token_budget_ends_the_searching_and_the_report_is_still_written(research_client, web: MiniWeb,
                                                                                  model: StageModel):
    client = await research_client(research_max_tokens=2400)
    body = await research(client)
    assert body["status"] == "completed"
    report = report_of(body)
    assert report.startswith("*The research stopped at its token budget of 2400 tokens")
    assert model.stages().count("notes") < 4  # stopped before every page was noted
    assert body["usage"]["total_tokens"] <= 2400
