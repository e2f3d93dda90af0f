"""Open WebUI and a research id: a status line that moves with the run, the pages as its sources, the
report as content; its housekeeping requests (`### Task:` title, tags) get a plain answer."""

from __future__ import annotations

from tests.agent.research.site import QUESTION, MiniWeb, StageModel
from tests.support.helpers import chat_chunks, streamed_text

RESEARCH_ID = "agent-gateway-deep-research"
OPEN_WEBUI = {"X-OpenWebUI-User-Id": "u1", "X-OpenWebUI-Chat-Id": "c1"}


async def test_open_webui_sees_a_moving_status_line_its_sources_and_the_report(research_client, web: MiniWeb,
                                                                             model: StageModel):
    client = await research_client()
    resp = await client.post("/v1/chat/completions", headers=OPEN_WEBUI, json={
        "model": RESEARCH_ID, "stream": True, "messages": [{"role": "user", "content": QUESTION}]})
    assert resp.status == 200
    chunks = chat_chunks(await resp.text())
    statuses = [c["event"]["data"]["description"] for c in chunks
                if c.get("event", {}).get("type") == "status"]
    counts = [s for s in statuses if " of " in s and "sources read" in s]
    assert counts[0] == "Searching: 0 of 3 questions, 0 sources read"
    assert any(s.startswith("Done;") for s in statuses) and statuses[-1].endswith("sources read")
    assert len(set(counts)) > 3  # it moves: questions done and pages read climb
    sources = [c["event"]["data"]["source"]["url"] for c in chunks if c.get("event", {}).get("type") == "source"]
    assert f"{web.base_url}/page/lighthouse" in sources
    content = streamed_text(chunks)
    assert content.startswith("<think>\nResearch brief:")  # plan and reflections as Open WebUI's thinking
    assert "Tomas Varga" in content.split("</think>")[-1]


async def test_a_task_request_to_a_research_id_gets_a_plain_answer_without_research(research_client, web: MiniWeb,
                                                                                   model: StageModel):
    client = await research_client()
    resp = await client.post("/v1/chat/completions", json={
        "model": RESEARCH_ID, "messages": [{"role": "user", "content": "### Task:\nGenerate a concise title."}]})
    assert resp.status == 200
    assert (await resp.json())["choices"][0]["message"]["content"] == "OK."
    assert model.stages() == ["other"] and web.spans == []


async def test_a_task_request_to_a_routes_research_id_gets_a_plain_answer_on_that_route(research_client,
                                                                                       model: StageModel):
    from gateway.config.routes import parse_models

    client = await research_client(llm_models=parse_models({"qwen": {"model": "fake-model"}}, url=str))
    resp = await client.post("/v1/chat/completions", json={
        "model": "qwen-deep-research", "messages": [{"role": "user", "content": "### Task:\nSuggest tags."}]})
    assert resp.status == 200
    body = await resp.json()
    assert body["model"] == "qwen-deep-research" and model.stages() == ["other"]


async def test_a_long_report_keeps_the_stream_alive_with_status_and_keepalives(research_client, model: StageModel):
    model.delay["report"] = 5.5  # the model writes for a while: nothing else would reach the client
    client = await research_client()
    resp = await client.post("/v1/chat/completions", headers=OPEN_WEBUI, json={
        "model": RESEARCH_ID, "stream": True, "messages": [{"role": "user", "content": QUESTION}]})
    body = await resp.text()
    statuses = [c["event"]["data"]["description"] for c in chat_chunks(body)
                if c.get("event", {}).get("type") == "status"]
    writing = [s for s in statuses if s.startswith("Writing the report")]
    assert len(writing) >= 2  # said again while the model wrote (a status every 3 s of silence)
    plain = await client.post("/v1/responses", json={"model": RESEARCH_ID, "input": QUESTION, "stream": True})
    assert ": keepalive" in await plain.text()  # no Responses event for progress: an SSE comment instead
