"""Every stage of a research run fits the route's context window: long pages are cut for their note,
many long notes are condensed for the report, the instructions and the question never cut."""

from __future__ import annotations

from typing import Any

import pytest

from tests.agent.research.site import PAGES, QUESTION, MiniWeb, Page, StageModel
from tests.fakes.scripted import serve

RESEARCH_ID = "agent-gateway-deep-research"
FILLER = "The coast path runs past tide pools, a shingle beach and a row of old net lofts. "


@pytest.mark.parametrize(("window", "page_chars", "note_chars"), [(16384, 200_000, 300), (3072, 40_000, 1900)],
                         ids=["16k", "3k-long-notes"])
async def test_a_small_context_window_completes_with_every_prompt_within_it(
        make_client, aiohttp_server: Any, model: StageModel, window: int, page_chars: int, note_chars: int):
    padded = tuple(Page(p.slug, p.title, p.words, p.facts, FILLER * (page_chars // len(FILLER))) for p in PAGES)
    web = await serve(MiniWeb(padded), aiohttp_server)
    model.window = window

    def long_notes(prompt: str) -> str:  # a model that writes long notes: the report must condense them
        return model.answer("notes", prompt) + "\n- " + FILLER * (note_chars // len(FILLER))

    model.overrides["notes"] = long_notes
    client = await make_client(env={"SEARXNG_URL": web.base_url}, allow_private_urls=True,
                               web_search_backend="searxng", web_extract_backend="fetch",
                               llm_context_window=window, max_extract_chars=page_chars)
    resp = await client.post("/v1/responses", json={"model": RESEARCH_ID, "input": QUESTION})
    assert resp.status == 200, await resp.text()
    body = await resp.json()
    assert body["status"] == "completed"
    assert all(len(prompt) // 4 + max_tokens <= window for _, prompt, max_tokens in model.prompts)
    stages = model.stages()
    assert stages.count("notes") == 4 and stages[-1] == "report"
    [message] = [item for item in body["output"] if item["type"] == "message"]
    assert "Tomas Varga" in message["content"][0]["text"]  # the notes were condensed, not cut off
    report_prompt = model.prompts[-1][1]
    assert QUESTION in report_prompt and report_prompt.rstrip().endswith("it is added for you.")
    assert ("…" in report_prompt) == (window == 3072)  # long notes shortened only where they had to be
