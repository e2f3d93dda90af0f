"""Deep research against a real model server (issue 45): llama-cpp-python with Gemma 3 270M, the
model's own chat template (one system message, strict alternation), a 4,096-token context window.

Mechanics, not quality: a 270M model answers every stage's prompt with something, rarely what was
asked (and at most ANSWER_CAP tokens of it: the recording proxy lowers each request's max_tokens, so
that a run costs a minute or two on a shared CPU rather than ten); the run must still end in a
report within its budgets and a bounded time, every call the
gateway made must have been answered by the server (no prompt over the window, no template refusal),
and the Responses API shape must hold. The web is the tests' research corpus on 127.0.0.1.
"""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path
from typing import Any

import pytest
from openai.types.responses import Response

from gateway.config.settings import Settings
from gateway.http.app import create_app
from tests.fakes.research_web import ResearchWeb, research_web  # noqa: F401
from tests.real_upstream.conftest import MODEL_ALIAS, N_CTX, LlamaServer
from tests.support.recording_proxy import RecordingProxy

pytestmark = pytest.mark.timeout(900)  # a real model on a shared machine: generous, never a measure
#: The run's own wall-time budget for planning, searching and reading; the report comes after it.
#: Generous: on two cores shared with other jobs a 270M model writes a few tokens a second.
RUN_SECONDS = 180
#: The bound the test holds the whole run to: the budget, then the report (the model's timeout).
LLM_SECONDS = 150
BOUND_SECONDS = RUN_SECONDS + LLM_SECONDS + 60
#: Searches and page reads in all, and the report's length: each model call costs seconds here.
MAX_CALLS = 3
REPORT_TOKENS = 128
#: What the model may write per call whatever the gateway asks (the proxy lowers max_tokens): each
#: stage's answer needs only to exist, and a 270M model given 600 tokens uses them all.
ANSWER_CAP = 48


async def test_a_short_research_run_on_gemma_ends_in_a_report_within_its_budget(
        aiohttp_server: Any, aiohttp_client: Any, tmp_path: Path, gemma_server: LlamaServer,
        research_web: ResearchWeb) -> None:  # noqa: F811
    proxy = RecordingProxy(gemma_server.base_url, max_tokens_cap=ANSWER_CAP)
    proxy_server = await aiohttp_server(proxy.app())
    settings = Settings(home=tmp_path, profile=None, llm_base_url=str(proxy_server.make_url("/v1")),
                        llm_model=MODEL_ALIAS, keepalive_interval=10.0, llm_context_window=N_CTX,
                        web_search_fallback=(), web_extract_fallback=(), allow_private_urls=True,
                        env={"SEARXNG_URL": research_web.base_url})
    settings = dataclasses.replace(settings, research_timeout=float(RUN_SECONDS), research_max_calls=MAX_CALLS,
                                   research_concurrency=2, research_max_rounds=1, llm_timeout=float(LLM_SECONDS))
    research_web.match_all = True  # whatever the model's sub-questions, the search finds pages
    client = await aiohttp_client(create_app(settings))

    started = time.monotonic()
    resp = await client.post("/v1/responses", json={
        "model": "agent-gateway-deep-research", "input": research_web.corpus.question,
        "max_tool_calls": MAX_CALLS, "max_output_tokens": REPORT_TOKENS, "temperature": 0})
    elapsed = time.monotonic() - started
    assert resp.status == 200, await resp.text()
    response = Response.model_validate(await resp.json())

    assert elapsed < BOUND_SECONDS, elapsed
    assert response.status == "completed", (response.status, response.incomplete_details, response.error)
    report = response.output[-1]
    assert report.type == "message" and report.content[0].type == "output_text"
    assert report.content[0].text.strip()
    assert response.usage is not None and response.usage.input_tokens > 0
    exchanges = proxy.chat_exchanges()
    assert len(exchanges) >= 2  # at least a plan and a report reached the model
    for exchange in exchanges:
        assert exchange.status == 200, exchange.body[:500]  # nothing over the window, nothing refused
        assert exchange.request["max_tokens"] + len(json.dumps(exchange.request["messages"])) // 4 < N_CTX
    calls = [item for item in response.output if item.type == "web_search_call"]
    assert 1 <= len(calls) <= MAX_CALLS and len(research_web.searches) + len(research_web.pages_read) <= MAX_CALLS

