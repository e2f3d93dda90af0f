"""xAI provider against a fake xAI Responses API on 127.0.0.1."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import aclosing
from pathlib import Path

import pytest

from plugins.web.xai import XaiProvider
from tests.fakes.exa import API_KEY as EXA_KEY
from tests.fakes.exa import ExaFake, exa_fake  # noqa: F401 - fixture
from tests.fakes.scripted import Reply
from tests.fakes.xai import API_KEY, XaiFake, xai_fake  # noqa: F401 - fixture
from tests.support import provider_cases as shared
from tests.support.web_tools import run_tool, web_tools_maker


@pytest.fixture
async def provider(xai_fake: XaiFake) -> AsyncIterator[XaiProvider]:  # noqa: F811
    async with aclosing(TestXaiSharedBehaviour().make(xai_fake)) as provider:
        yield provider


async def test_search_asks_grok_with_the_web_search_tool_and_parses_its_json_list(
    provider: XaiProvider,
    xai_fake: XaiFake,  # noqa: F811
) -> None:
    result = await provider.search("grok web search", limit=2)

    assert result["data"]["web"] == [
        {
            "title": "Result one",
            "url": "https://example.com/one",
            "description": "Model-written summary (xAI Grok): What page one says.",
            "position": 1,
        },
        {
            "title": "Result two",
            "url": "https://example.com/two",
            "description": "Model-written summary (xAI Grok): What page two says.",
            "position": 2,
        },
    ]
    [sent] = xai_fake.requests_to("/v1/responses")
    assert sent.body["tools"] == [{"type": "web_search"}]
    assert sent.body["include"] == ["no_inline_citations"]
    assert sent.body["model"] == "grok-4.3"  # the replacement xAI named for the retired grok-4-1 family
    assert sent.body["reasoning"] == {"effort": "low"}  # so an agentic search fits the tool timeout
    assert sent.body["store"] is False
    assert "grok web search" in sent.body["input"][-1]["content"]


async def test_json_inside_a_fence_with_preamble_is_still_parsed(
    provider: XaiProvider,
    xai_fake: XaiFake,  # noqa: F811
) -> None:
    hit = '{"title": "T", "url": "https://a.example/x", "snippet": "S"}'
    xai_fake.output_text = f'Here you go [1]:\n```json\n{{"results": [{hit}]}}\n```'

    result = await provider.search("q")

    assert [h["url"] for h in result["data"]["web"]] == ["https://a.example/x"]


async def test_a_prose_answer_falls_back_to_its_url_citations(
    provider: XaiProvider,
    xai_fake: XaiFake,  # noqa: F811
) -> None:
    xai_fake.output_text = "Python 3.14 was released in October."
    xai_fake.annotations = [
        {
            "type": "url_citation",
            "url": "https://python.org/news",
            "title": "Python News",
            "start_index": 0,
            "end_index": 10,
        },
        {
            "type": "url_citation",
            "url": "https://python.org/news",
            "title": "Python News",
            "start_index": 11,
            "end_index": 20,
        },
        {
            "type": "url_citation",
            "url": "https://docs.python.org/3.14/",
            "title": "",
            "start_index": 21,
            "end_index": 30,
        },
    ]

    result = await provider.search("python release")

    web = result["data"]["web"]
    assert [h["url"] for h in web] == ["https://python.org/news", "https://docs.python.org/3.14/"]
    assert web[0]["title"] == "Python News"
    assert all("model-written" in h["description"] for h in web)


async def test_without_annotations_the_citations_list_is_the_last_resort(
    provider: XaiProvider,
    xai_fake: XaiFake,  # noqa: F811
) -> None:
    xai_fake.output_text = "I could not format the results."
    xai_fake.citations = ["https://x.example/a", "not a url", "https://x.example/b"]

    result = await provider.search("q")

    assert [h["url"] for h in result["data"]["web"]] == ["https://x.example/a", "https://x.example/b"]


async def test_an_answer_citing_nothing_is_a_clear_failure(
    provider: XaiProvider,
    xai_fake: XaiFake,  # noqa: F811
) -> None:
    xai_fake.output_text = "I don't know."
    xai_fake.citations = []

    result = await provider.search("q")

    assert result == {"success": False, "error": "xAI returned no results (the model cited no pages)"}


async def test_the_model_can_be_chosen_with_xai_model(xai_fake: XaiFake) -> None:  # noqa: F811
    async with aclosing(TestXaiSharedBehaviour().make(xai_fake, XAI_MODEL="grok-4")) as provider:
        await provider.search("q")

    assert xai_fake.requests[0].body["model"] == "grok-4"


async def test_a_200_carrying_an_error_is_a_failure(
    provider: XaiProvider,
    xai_fake: XaiFake,  # noqa: F811
) -> None:
    failed = {"id": "r", "status": "failed", "error": {"message": "Model overloaded"}}
    xai_fake.script(Reply(200, failed), route="responses")

    result = await provider.search("q")

    assert result == {"success": False, "error": "xAI reported an error: Model overloaded"}


class TestXaiSharedBehaviour(shared.KeyedService):
    name, label, provider_class, api_key = "xai", "xAI", XaiProvider, API_KEY
    route = "responses"
    empty_search = {"output": []}
    service_errors = [
        (401, {}, "xAI rejected the API key (401): Incorrect API key provided"),
        (403, {}, "xAI refused the request (403"),
        (429, {"Retry-After": "5"}, "xAI rate limit reached (429); retry after 5 s"),
        (503, {}, "xAI had a server error (503)"),
    ]
    error_body = {"code": "x", "error": "Incorrect API key provided"}
    wrong_shape_json = {"id": "r", "status": "completed"}
    wrong_shape_error = "xAI returned an unexpected response (no 'output')"
    capabilities = (True, False, False)

    def check_registered(self, provider: XaiProvider) -> None:
        assert "model-written" in provider.display_name


async def test_a_retired_model_is_a_fallback_worthy_failure_that_says_to_set_xai_model(
    xai_fake: XaiFake,  # noqa: F811
) -> None:
    # xAI retired grok-4-1-fast-reasoning (the old default) on 2026-05-15: it answers 404.
    async with aclosing(TestXaiSharedBehaviour().make(xai_fake, XAI_MODEL="grok-4-1-fast-reasoning")) as provider:
        result = await provider.search("q")

    assert result == {
        "success": False,
        "error": "xAI does not serve the model 'grok-4-1-fast-reasoning' (retired or unknown; HTTP 404): "
        "set XAI_MODEL to a current model, e.g. grok-4.3",
        "retryable": True,  # the fallback chain moves on to the next provider
        "kind": "model_retired",
    }


async def test_reasoning_effort_can_be_raised_or_left_out(xai_fake: XaiFake) -> None:  # noqa: F811
    for setting, sent in (("high", {"effort": "high"}), ("none", None)):
        async with aclosing(TestXaiSharedBehaviour().make(xai_fake, XAI_REASONING_EFFORT=setting)) as provider:
            assert (await provider.search("q"))["success"] is True
        assert xai_fake.requests[-1].body.get("reasoning") == sent


async def test_the_fallback_chain_steps_past_a_retired_model_and_logs_why(
    tmp_path: Path, xai_fake: XaiFake, exa_fake: ExaFake, caplog: pytest.LogCaptureFixture,  # noqa: F811
) -> None:
    exa_fake.search_results[0].update(id="https://exa.example/one", url="https://exa.example/one")
    env = {"XAI_API_KEY": API_KEY, "XAI_API_URL": xai_fake.base_url, "XAI_MODEL": "grok-3",
           "EXA_API_KEY": EXA_KEY, "EXA_API_URL": exa_fake.base_url}
    async with web_tools_maker(tmp_path, env, tool_timeout=5.0, web_cache_ttl=0.0,
                               web_search_backend="xai", web_search_fallback=("exa",)) as make:
        search, _ = make()
        with caplog.at_level(logging.WARNING, logger="agent_gateway.web"):
            result = await run_tool(search, query="otters")

    assert (result["success"], result["provider"], result["fallback_from"]) == (True, "exa", "xai")
    assert result["data"]["web"][0]["url"] == "https://exa.example/one"
    assert "xai failed [model retired]" in caplog.text and "falling back to exa" in caplog.text


async def test_allowed_domains_go_to_the_web_search_tool_at_most_five(
    provider: XaiProvider,
    xai_fake: XaiFake,  # noqa: F811
) -> None:
    domains = [f"d{n}.example" for n in range(7)]

    result = await provider.search("q", allowed_domains=domains)

    assert result["success"] is True  # the fake refuses more than five, like xAI
    assert xai_fake.requests[0].body["tools"] == [{"type": "web_search", "allowed_domains": domains[:5]}]
    assert "site:" not in xai_fake.requests[0].body["input"][-1]["content"]
