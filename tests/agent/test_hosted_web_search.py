"""OpenAI's hosted web search options honoured end to end: Responses `web_search` tools and Chat
`web_search_options` reach the fake providers (domains, location), shape what the model gets
(context size, off-domain hits dropped) and steer the upstream (tool_choice, API_SERVER_WEB_TOOLS)."""

from __future__ import annotations

import json
from typing import Any

import openai
import pytest

from tests.fakes.brave import VALID_TOKEN, FakeBrave, brave_server  # noqa: F401
from tests.fakes.exa import API_KEY as EXA_KEY
from tests.fakes.exa import ExaFake, exa_fake  # noqa: F401
from tests.fakes.searxng import FakeSearxng, searxng_server  # noqa: F401
from tests.fakes.tavily import API_KEY as TAVILY_KEY
from tests.fakes.tavily import TavilyFake, tavily_fake  # noqa: F401
from tests.fakes.upstream import FakeUpstream, text, tool_call

QUESTION = "What is new in Python?"
SEARCH = tool_call(("web_search", {"query": "python news"}))


def tool_results(upstream: FakeUpstream) -> list[dict[str, Any]]:
    return [json.loads(m["content"]) for m in upstream.requests[-1]["messages"] if m["role"] == "tool"]


def hit_urls(upstream: FakeUpstream) -> list[str]:
    [result] = tool_results(upstream)
    return [hit["url"] for hit in result["data"]["web"]]


@pytest.fixture
async def tavily_client(make_client, tavily_fake: TavilyFake):  # noqa: F811
    tavily_fake.search_results = [
        {"title": "Docs", "url": "https://docs.python.org/3/whatsnew/", "content": "What's new."},
        {"title": "Elsewhere", "url": "https://example.com/python", "content": "Off the list."},
        {"title": "Home", "url": "https://python.org/news", "content": "News."},
    ]
    env = {"TAVILY_API_KEY": TAVILY_KEY, "TAVILY_API_URL": tavily_fake.base_url}
    return await make_client(web_search_backend="tavily", env=env)


@pytest.fixture
async def searxng_client(make_client, searxng_server: FakeSearxng):  # noqa: F811
    return await make_client(web_search_backend="searxng", env={"SEARXNG_URL": searxng_server.base_url})


def responses_body(tool: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"model": "agent-gateway", "input": QUESTION, "tools": [tool], **extra}


async def test_allowed_domains_reach_tavily_natively_and_an_off_domain_hit_is_dropped(
    tavily_client, upstream: FakeUpstream, tavily_fake: TavilyFake  # noqa: F811
):
    upstream.queue(SEARCH, text("Python 3.14 is out."))
    tool = {"type": "web_search", "filters": {"allowed_domains": ["python.org"]}}
    resp = await tavily_client.post("/v1/responses", json=responses_body(tool))

    assert resp.status == 200, await resp.text()
    [search] = tavily_fake.requests_to("/search")
    assert search.body["include_domains"] == ["python.org"]
    assert search.body["query"] == "python news"  # filtered natively: no site: operators
    assert hit_urls(upstream) == ["https://docs.python.org/3/whatsnew/", "https://python.org/news"]
    assert (await resp.json())["tools"] == [tool]


async def test_allowed_domains_reach_exa_natively_with_the_user_country(
    make_client, upstream: FakeUpstream, exa_fake: ExaFake  # noqa: F811
):
    client = await make_client(web_search_backend="exa",
                               env={"EXA_API_KEY": EXA_KEY, "EXA_API_URL": exa_fake.base_url})
    upstream.queue(SEARCH, text("Done."))
    tool = {"type": "web_search_2025_08_26", "filters": {"allowed_domains": ["https://www.arxiv.org/"]},
            "user_location": {"type": "approximate", "country": "no", "city": "Oslo"}}
    resp = await client.post("/v1/responses", json=responses_body(tool))

    assert resp.status == 200, await resp.text()
    [search] = exa_fake.requests_to("/search")
    assert search.body["includeDomains"] == ["arxiv.org"]
    assert search.body["userLocation"] == "NO"


async def test_a_provider_without_a_domain_filter_gets_site_operators_and_off_domain_hits_dropped(
    searxng_client, upstream: FakeUpstream, searxng_server: FakeSearxng  # noqa: F811
):
    upstream.queue(SEARCH, text("Nothing on those sites."))
    tool = {"type": "web_search", "filters": {"allowed_domains": ["python.org", "pypi.org"]}}
    resp = await searxng_client.post("/v1/responses", json=responses_body(tool))

    assert resp.status == 200, await resp.text()
    assert searxng_server.requests[0].query["q"] == "python news (site:python.org OR site:pypi.org)"
    assert hit_urls(upstream) == []  # the fake answers from example.org whatever the query said


@pytest.mark.parametrize(("size", "count"), [("low", 3), ("medium", 5), ("high", 8)])
async def test_search_context_size_sets_how_many_results_the_model_gets(
    searxng_client, upstream: FakeUpstream, size: str, count: int
):
    upstream.queue(SEARCH, text("Summed up."))
    tool = {"type": "web_search_preview", "search_context_size": size}
    resp = await searxng_client.post("/v1/responses", json=responses_body(tool))

    assert resp.status == 200, await resp.text()
    assert len(hit_urls(upstream)) == count  # high asks for 10; the fake SearXNG has 8


async def test_user_location_reaches_brave_and_tavily_as_country(
    make_client, upstream: FakeUpstream, brave_server: FakeBrave, tavily_fake: TavilyFake  # noqa: F811
):
    tool = {"type": "web_search", "user_location": {"type": "approximate", "country": "GB", "city": "London",
                                                    "timezone": "Europe/London"}}
    brave = await make_client(web_search_backend="brave-free", env={
        "BRAVE_SEARCH_API_KEY": VALID_TOKEN, "BRAVE_SEARCH_API_URL": brave_server.base_url})
    upstream.queue(SEARCH, text("Brave."))
    assert (await brave.post("/v1/responses", json=responses_body(tool))).status == 200
    assert brave_server.requests[0].query["country"] == "GB"

    tavily = await make_client(web_search_backend="tavily", env={
        "TAVILY_API_KEY": TAVILY_KEY, "TAVILY_API_URL": tavily_fake.base_url})
    upstream.queue(SEARCH, text("Tavily."))
    assert (await tavily.post("/v1/responses", json=responses_body(tool))).status == 200
    assert tavily_fake.requests_to("/search")[0].body["country"] == "united kingdom"


@pytest.mark.parametrize("choice", [{"type": "web_search"}, {"type": "web_search_preview"}, "required"])
async def test_tool_choice_web_search_forces_a_first_round_search(
    searxng_client, upstream: FakeUpstream, choice: Any
):
    upstream.queue(SEARCH, text("Found it."))
    resp = await searxng_client.post(
        "/v1/responses", json=responses_body({"type": "web_search_preview"}, tool_choice=choice))

    assert resp.status == 200, await resp.text()
    assert upstream.requests[0]["tool_choice"] == {"type": "function", "function": {"name": "web_search"}}
    assert upstream.requests[1]["tool_choice"] == "auto"  # the model answers freely afterwards


async def test_without_a_web_search_tool_choice_the_model_decides(searxng_client, upstream: FakeUpstream):
    upstream.queue(text("No search needed."))
    resp = await searxng_client.post("/v1/responses", json=responses_body({"type": "web_search"}))
    assert resp.status == 200
    assert upstream.requests[0]["tool_choice"] == "auto"  # said, not left to the server


async def test_on_request_offers_web_tools_only_to_requests_that_ask_for_web_search(
    make_client, upstream: FakeUpstream, searxng_server: FakeSearxng  # noqa: F811
):
    client = await make_client(web_tools="on_request", web_search_backend="searxng",
                               env={"SEARXNG_URL": searxng_server.base_url})
    offered = []
    for body, path in (
        ({"input": QUESTION}, "/v1/responses"),
        ({"input": QUESTION, "tools": [{"type": "web_search"}]}, "/v1/responses"),
        ({"messages": [{"role": "user", "content": QUESTION}]}, "/v1/chat/completions"),
        ({"messages": [{"role": "user", "content": QUESTION}], "web_search_options": {}}, "/v1/chat/completions"),
    ):
        upstream.queue(text("Answer."))
        resp = await client.post(path, json=body)
        assert resp.status == 200, await resp.text()
        offered.append([t["function"]["name"] for t in upstream.requests[-1].get("tools", [])])
    assert offered == [[], ["web_search", "web_extract"], [], ["web_search", "web_extract"]]


async def test_always_offers_web_tools_without_a_hosted_tool(searxng_client, upstream: FakeUpstream):
    upstream.queue(text("Answer."))
    assert (await searxng_client.post("/v1/responses", json={"input": QUESTION})).status == 200
    assert [t["function"]["name"] for t in upstream.requests[0]["tools"]] == ["web_search", "web_extract"]


async def test_chat_web_search_options_set_context_size_and_location(
    make_client, upstream: FakeUpstream, tavily_fake: TavilyFake  # noqa: F811
):
    tavily_fake.search_results = [
        {"title": f"R{n}", "url": f"https://example.com/{n}", "content": "x"} for n in range(1, 9)]
    client = await make_client(web_search_backend="tavily",
                               env={"TAVILY_API_KEY": TAVILY_KEY, "TAVILY_API_URL": tavily_fake.base_url})
    upstream.queue(SEARCH, text("Done."))
    options = {"search_context_size": "low",
               "user_location": {"type": "approximate", "approximate": {"country": "US", "city": "Boston"}}}
    resp = await client.post("/v1/chat/completions", json={
        "messages": [{"role": "user", "content": QUESTION}], "web_search_options": options})

    assert resp.status == 200, await resp.text()
    [search] = tavily_fake.requests_to("/search")
    assert search.body["country"] == "united states"
    assert search.body["max_results"] == 3
    assert len(hit_urls(upstream)) == 3


@pytest.mark.parametrize(("tool", "param"), [
    ({"type": "file_search", "vector_store_ids": ["vs_1"]}, "tools[0].type"),
    ({"type": "computer_use_preview"}, "tools[0].type"),
    ({"type": "code_interpreter"}, "tools[0].type"),
    ({"type": "image_generation"}, "tools[0].type"),
    # an mcp tool without server_url names a configured server; there is none
    ({"type": "mcp", "server_label": "x"}, "tools[0].server_url"),
    ({"type": "web_search", "filters": "python.org"}, "tools[0].filters"),
    ({"type": "web_search", "filters": {"allowed_domains": "python.org"}}, "tools[0].filters.allowed_domains"),
    ({"type": "web_search", "filters": {"allowed_domains": ["ok.org", "not a domain"]}},
     "tools[0].filters.allowed_domains[1]"),
    ({"type": "web_search", "filters": {"allowed_domains": [7]}}, "tools[0].filters.allowed_domains[0]"),
    ({"type": "web_search_preview", "filters": {"allowed_domains": ["python.org"]}}, "tools[0].filters"),
    ({"type": "web_search", "search_context_size": "huge"}, "tools[0].search_context_size"),
    ({"type": "web_search", "search_context_size": 3}, "tools[0].search_context_size"),
    ({"type": "web_search", "user_location": "Oslo"}, "tools[0].user_location"),
    ({"type": "web_search", "user_location": {"type": "exact", "city": "Oslo"}}, "tools[0].user_location.type"),
    ({"type": "web_search", "user_location": {"country": "Norway"}}, "tools[0].user_location.country"),
    ({"type": "web_search", "user_location": {"city": 12}}, "tools[0].user_location.city"),
    ({"type": "web_search", "user_location": {"timezone": "Oslo time!"}}, "tools[0].user_location.timezone"),
])
async def test_malformed_or_unsupported_hosted_tools_are_a_400_naming_the_field(
    client, upstream: FakeUpstream, tool: dict[str, Any], param: str
):
    resp = await client.post("/v1/responses", json=responses_body(tool))

    assert resp.status == 400
    error = (await resp.json())["error"]
    assert error["param"] == param
    assert error["type"] == "invalid_request_error"
    if param.endswith(".type") and param.count(".") == 1:
        assert tool["type"] in error["message"]
    assert upstream.requests == []


async def test_tool_choice_web_search_without_the_tool_is_a_400(client):
    resp = await client.post("/v1/responses", json={"input": QUESTION, "tool_choice": {"type": "web_search"}})
    assert resp.status == 400
    assert (await resp.json())["error"]["param"] == "tool_choice"


@pytest.mark.parametrize(("options", "param"), [
    ("low", "web_search_options"),
    ({"search_context_size": "max"}, "web_search_options.search_context_size"),
    ({"user_location": []}, "web_search_options.user_location"),
    ({"user_location": {"type": "approximate", "approximate": "Paris"}},
     "web_search_options.user_location.approximate"),
    ({"user_location": {"type": "approximate", "approximate": {"country": "FRA"}}},
     "web_search_options.user_location.approximate.country"),
])
async def test_malformed_chat_web_search_options_are_a_400_naming_the_field(
    client, upstream: FakeUpstream, options: Any, param: str
):
    resp = await client.post("/v1/chat/completions", json={
        "messages": [{"role": "user", "content": QUESTION}], "web_search_options": options})
    assert resp.status == 400
    assert (await resp.json())["error"]["param"] == param
    assert upstream.requests == []


async def test_openai_sdk_responses_create_with_a_filtered_web_search_tool(
    tavily_client, upstream: FakeUpstream, tavily_fake: TavilyFake  # noqa: F811
):
    upstream.queue(SEARCH, text("From python.org only."))
    sdk = openai.AsyncOpenAI(base_url=str(tavily_client.make_url("/v1")), api_key="unused", max_retries=0)
    try:
        response = await sdk.responses.create(
            model="agent-gateway", input=QUESTION,
            tools=[{"type": "web_search", "filters": {"allowed_domains": ["python.org"]},
                    "search_context_size": "high"}])
    finally:
        await sdk.close()

    assert response.output_text == "From python.org only."
    assert tavily_fake.requests_to("/search")[0].body["include_domains"] == ["python.org"]
    assert "https://example.com/python" not in hit_urls(upstream)


async def test_every_agent_tool_call_gets_the_request_options_in_its_context(client, upstream: FakeUpstream,
                                                                            lookup_tool):
    upstream.queue(tool_call(("lookup", {"term": "sky"})), text("Green."))
    tool = {"type": "web_search", "filters": {"allowed_domains": ["python.org"]}, "search_context_size": "low",
            "user_location": {"type": "approximate", "timezone": "Europe/Oslo"}}
    assert (await client.post("/v1/responses", json=responses_body(tool))).status == 200

    [context] = lookup_tool.contexts
    assert context.web.allowed_domains == ("python.org",)
    assert context.web.context_size == "low"
    assert context.web.timezone == "Europe/Oslo"
