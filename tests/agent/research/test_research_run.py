"""A deep-research run end to end on the small web of site.py: planned sub-questions searched, pages
read into notes, a reflection that searches again, and a report whose citations are checked."""

from __future__ import annotations

from typing import Any

from tests.agent.research.site import FOLLOW_UP, INVENTED, QUESTION, SUB_QUESTIONS, MiniWeb, StageModel

RESEARCH_ID = "agent-gateway-deep-research"


def items_of(response: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    return [item for item in response["output"] if item["type"] == kind]


async def test_a_research_id_runs_the_plan_searches_reflection_and_a_cited_report(research_client, web: MiniWeb,
                                                                                  model: StageModel):
    client = await research_client()
    resp = await client.post("/v1/responses", json={"model": RESEARCH_ID, "input": QUESTION})
    assert resp.status == 200, await resp.text()
    body = await resp.json()

    assert body["model"] == RESEARCH_ID and body["status"] == "completed"
    assert model.stages()[0] == "plan" and "reflect" in model.stages() and model.stages()[-1] == "report"
    searches = [item["action"]["query"] for item in items_of(body, "web_search_call")
                if item["action"]["type"] == "search"]
    assert set(SUB_QUESTIONS) | {FOLLOW_UP} == set(searches)
    opened = [item["action"]["url"] for item in items_of(body, "web_search_call")
              if item["action"]["type"] == "open_page"]
    assert f"{web.base_url}/page/lighthouse" in opened  # found only by the reflection's follow-up
    assert [item["type"] for item in body["output"]][0] == "reasoning"
    [message] = items_of(body, "message")
    part = message["content"][0]
    report = part["text"]
    assert "Tomas Varga in 1887" in report
    assert INVENTED not in report and "[44]" not in report  # the invented citations are gone
    cited = {a["url"] for a in part["annotations"]}
    assert cited and cited <= {f"{web.base_url}/page/{slug}" for slug in web.page_reads}
    for annotation in part["annotations"]:
        assert report[annotation["start_index"]:annotation["end_index"]] in (f"[{n}]" for n in range(1, 40)) \
            or annotation["url"] in report[annotation["start_index"]:annotation["end_index"]]
    assert body["usage"]["total_tokens"] > 0


async def test_removed_citations_are_counted_in_the_metric(research_client, model: StageModel):
    client = await research_client()
    resp = await client.post("/v1/responses", json={"model": RESEARCH_ID, "input": QUESTION})
    assert resp.status == 200
    metrics = await (await client.get("/metrics")).text()
    [line] = [line for line in metrics.splitlines()
              if line.startswith("agent_gateway_research_citations_removed_total ")]
    assert float(line.split()[1]) == 2.0  # the invented number and the invented link


async def test_models_lists_the_research_id_and_a_chat_stream_shows_progress_as_reasoning(research_client,
                                                                                          model: StageModel):
    client = await research_client()
    listed = [m["id"] for m in (await (await client.get("/v1/models")).json())["data"]]
    assert listed == ["agent-gateway", RESEARCH_ID]
    assert (await client.get(f"/v1/models/{RESEARCH_ID}")).status == 200
    resp = await client.post("/v1/chat/completions", json={
        "model": RESEARCH_ID, "stream": True, "messages": [{"role": "user", "content": QUESTION}]})
    text = await resp.text()
    assert resp.status == 200
    assert '"reasoning_content":"Research brief:' in text
    assert "Tomas Varga" in text and f'"model":"{RESEARCH_ID}"' in text
    assert "🔍" not in text  # no inline markers: progress is the reasoning's
