"""A stage that gets junk or an error falls back and the run goes on to a report; an upstream that
fails before any work is the client's error; research can be switched off."""

from __future__ import annotations

from typing import Any

from gateway.config.routes import parse_models
from tests.agent.research.site import QUESTION, MiniWeb, StageModel

RESEARCH_ID = "agent-gateway-deep-research"


async def research(client: Any, question: str = QUESTION) -> dict[str, Any]:
    resp = await client.post("/v1/responses", json={"model": RESEARCH_ID, "input": question})
    assert resp.status == 200, await resp.text()
    return await resp.json()


def report_of(body: dict[str, Any]) -> str:
    [message] = [item for item in body["output"] if item["type"] == "message"]
    return str(message["content"][0]["text"])


async def test_a_junk_plan_searches_the_question_itself(research_client, web: MiniWeb, model: StageModel):
    model.overrides["plan"] = lambda prompt: "lol what"
    body = await research(await research_client())
    assert body["status"] == "completed"
    assert [span.query for span in web.spans][0] == QUESTION


async def test_failed_notes_and_a_failed_report_still_end_in_a_cited_report_written_from_the_pages(
        research_client, web: MiniWeb, model: StageModel):
    model.errors.update(notes=500, report=500)
    body = await research(await research_client(research_max_rounds=0))
    assert body["status"] == "completed"
    report = report_of(body)
    assert report.startswith(f"# {QUESTION}\n\n## Findings")  # the run's own report, from the pages' own words
    assert "Kestrel Island. [" in report
    part = [item for item in body["output"] if item["type"] == "message"][0]["content"][0]
    assert part["annotations"] and "## Sources" in report


async def test_a_model_server_failing_at_the_plan_is_the_clients_error_before_any_search(
        research_client, web: MiniWeb, model: StageModel):
    model.errors["plan"] = 503
    client = await research_client()
    resp = await client.post("/v1/responses", json={"model": RESEARCH_ID, "input": QUESTION})
    assert resp.status == 502
    assert (await resp.json())["error"]["message"].startswith("upstream model error (HTTP 503)")
    assert web.spans == []


async def test_nothing_found_and_no_report_is_an_incomplete_response(research_client, web: MiniWeb,
                                                                    model: StageModel):
    model.overrides["plan"] = lambda prompt: "1. zzz qqq"
    model.errors["report"] = 500
    body = await research(await research_client(research_max_rounds=0), question="zzz qqq?")
    assert body["status"] == "incomplete"
    assert report_of(body).startswith("No report could be written")


async def test_research_off_lists_no_research_id_and_treats_it_as_a_plain_model_name(research_client,
                                                                                    web: MiniWeb, model: StageModel):
    client = await research_client(research=False)
    assert [m["id"] for m in (await (await client.get("/v1/models")).json())["data"]] == ["agent-gateway"]
    assert (await client.get(f"/v1/models/{RESEARCH_ID}")).status == 404
    resp = await client.post("/v1/chat/completions", json={
        "model": RESEARCH_ID, "messages": [{"role": "user", "content": "hi"}], "tool_choice": "none"})
    assert resp.status == 200 and model.stages() == ["other"] and web.spans == []


async def test_a_route_with_research_false_has_no_research_id(research_client, model: StageModel):
    routes = parse_models({"qwen": {"model": "fake-model"}, "llama": {"model": "other-model", "research": False}},
                          url=str)
    client = await research_client(llm_models=routes)
    ids = [m["id"] for m in (await (await client.get("/v1/models")).json())["data"]]
    assert "qwen-deep-research" in ids and "llama-deep-research" not in ids
    resp = await client.post("/v1/chat/completions", json={
        "model": "llama-deep-research", "messages": [{"role": "user", "content": QUESTION}]})
    assert resp.status == 404 and (await resp.json())["error"]["code"] == "model_not_found"
    resp = await client.post("/v1/chat/completions", json={
        "model": "qwen-deep-research", "messages": [{"role": "user", "content": QUESTION}]})
    assert resp.status == 200 and (await resp.json())["model"] == "qwen-deep-research"
    assert model.stages()[0] == "plan"


async def test_a_plain_relay_route_has_no_research_id_unless_it_asks_for_one(research_client, model: StageModel):
    routes = parse_models({"relay": {"model": "fake-model", "web_tools": "off"},
                           "relay-r": {"model": "fake-model", "web_tools": "off", "research": True}}, url=str)
    client = await research_client(llm_models=routes, web_tools="off")
    ids = [m["id"] for m in (await (await client.get("/v1/models")).json())["data"]]
    assert ids == ["agent-gateway", "relay", "relay-r", "relay-r-deep-research"]


async def test_a_model_server_failing_at_the_plan_of_a_stream_is_still_a_real_http_status(
        research_client, web: MiniWeb, model: StageModel):
    model.errors["plan"] = 503
    client = await research_client()
    resp = await client.post("/v1/chat/completions", json={
        "model": RESEARCH_ID, "stream": True, "messages": [{"role": "user", "content": QUESTION}]})
    assert resp.status == 502 and (await resp.json())["error"]["type"]
