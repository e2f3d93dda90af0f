"""A round in which the model calls the gateway's web_search and a client's function together
(issue 48, item 6; Codex CLI always sends `parallel_tool_calls: true`): the search runs and is
reported as a `web_search_call` item, the turn ends with the client's `function_call`, and the next
request, stored (`previous_response_id`) or replayed by the client (`store: false`, the way Codex
CLI replays: no item ids, no sources), gives the model the search results."""

from __future__ import annotations

import json
from typing import Any

import openai
import pytest

from tests.conftest import API_KEY
from tests.fakes.searxng import FakeSearxng, searxng_server  # noqa: F401
from tests.fakes.upstream import text, tool_call

SOURCES = "web_search_call.action.sources"
WEB_SEARCH = {"type": "web_search"}
WEATHER_TOOL = {
    "type": "function", "name": "get_weather", "description": "Weather for a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}
ASK = {"role": "user", "content": [{"type": "input_text", "text": "Weather in Oslo?"}]}


@pytest.fixture
async def client(make_client: Any, searxng_server: FakeSearxng) -> Any:  # noqa: F811
    return await make_client(api_key=API_KEY, env={"SEARXNG_URL": searxng_server.base_url})


@pytest.fixture
async def sdk(client: Any) -> Any:
    sdk = openai.AsyncOpenAI(base_url=str(client.make_url("/v1")), api_key=API_KEY, max_retries=0)
    yield sdk
    await sdk.close()


def searches(searxng: FakeSearxng) -> list[str]:
    return [r.query.get("q", "") for r in searxng.requests if r.path == "/search"]


def search_and_weather(upstream: Any) -> None:
    upstream.queue(tool_call(("web_search", {"query": "oslo weather"}), ("get_weather", {"city": "Oslo"})),
                   text("Sunny, says the forecast [1]."))


def continued_with_results(sent: list[dict[str, Any]]) -> None:
    """The upstream's view of the second request: the search round with its results, then the
    client's call and its output."""
    assert [m["role"] for m in sent] == ["user", "assistant", "tool", "assistant", "tool"]
    assert [c["function"]["name"] for c in sent[1]["tool_calls"]] == ["web_search"]
    assert json.loads(sent[1]["tool_calls"][0]["function"]["arguments"])["query"] == "oslo weather"
    assert sent[2]["tool_call_id"] == sent[1]["tool_calls"][0]["id"]
    assert "https://example.org/1" in sent[2]["content"] and "Snippet 1" in sent[2]["content"]
    assert [c["function"]["name"] for c in sent[3]["tool_calls"]] == ["get_weather"]
    assert sent[4] == {"role": "tool", "tool_call_id": sent[3]["tool_calls"][0]["id"], "content": "21 C, clear"}


@pytest.mark.parametrize("stream", [False, True])
async def test_a_search_called_beside_a_client_function_runs_and_is_reported_before_the_call(
        sdk, upstream, searxng_server, stream):  # noqa: F811
    search_and_weather(upstream)
    asked: dict[str, Any] = dict(model="m", input="Weather in Oslo?", tools=[WEB_SEARCH, WEATHER_TOOL],
                                 include=[SOURCES], parallel_tool_calls=True)
    if stream:
        async with sdk.responses.stream(**asked) as events:
            kinds = [event.type async for event in events]
            created = await events.get_final_response()
        assert kinds.index("response.web_search_call.completed") < kinds.index("response.function_call_arguments.done")
    else:
        created = await sdk.responses.create(**asked)
    assert [item.type for item in created.output] == ["web_search_call", "function_call"]
    search, call = created.output
    assert search.status == "completed" and search.action.query == "oslo weather"
    assert [s.url for s in search.action.sources][:2] == ["https://example.org/1", "https://example.org/2"]
    assert call.name == "get_weather" and json.loads(call.arguments) == {"city": "Oslo"}
    assert searches(searxng_server) == ["oslo weather"]
    assert len(upstream.requests) == 1  # the turn ended with the client's call


async def test_the_stored_turn_gives_the_model_the_search_results_with_the_functions_output(sdk, upstream):
    search_and_weather(upstream)
    first = await sdk.responses.create(model="m", input="Weather in Oslo?", tools=[WEB_SEARCH, WEATHER_TOOL])
    call = first.output[-1]
    second = await sdk.responses.create(
        model="m", previous_response_id=first.id, tools=[WEB_SEARCH, WEATHER_TOOL],
        input=[{"type": "function_call_output", "call_id": call.call_id, "output": "21 C, clear"}])
    assert second.output_text.startswith("Sunny")
    continued_with_results(upstream.requests[-1]["messages"][1:])


@pytest.mark.parametrize("stream", [False, True])
async def test_a_store_false_replay_as_codex_sends_it_gives_the_model_the_search_results(
        client, upstream, searxng_server, stream):  # noqa: F811
    search_and_weather(upstream)
    auth = {"Authorization": f"Bearer {API_KEY}"}
    asked = {"model": "m", "tools": [WEB_SEARCH, WEATHER_TOOL], "store": False, "stream": stream,
             "parallel_tool_calls": True}
    first = await client.post("/v1/responses", json={**asked, "stream": False, "input": [ASK]}, headers=auth)
    output = (await first.json())["output"]
    call = output[-1]
    # Codex CLI keeps neither ids nor sources of a web_search_call: status and action's type and query
    replay = [ASK,
              {"type": "web_search_call", "status": "completed",
               "action": {"type": "search", "query": output[0]["action"]["query"]}},
              {"type": "function_call", "name": call["name"], "arguments": call["arguments"],
               "call_id": call["call_id"]},
              {"type": "function_call_output", "call_id": call["call_id"], "output": "21 C, clear"}]
    second = await client.post("/v1/responses", json={**asked, "input": replay}, headers=auth)
    assert second.status == 200
    body = await second.text()
    assert "Sunny" in body
    continued_with_results(upstream.requests[-1]["messages"][1:])
    # run again for the model, answered by the web tools' cache: the provider was asked once
    assert searches(searxng_server) == ["oslo weather"]
    # and not reported again: this response's output is the answer only
    if not stream:
        assert [item["type"] for item in json.loads(body)["output"]] == ["message"]
    else:
        assert "response.web_search_call" not in body


async def test_a_replayed_search_of_an_earlier_turn_stays_a_note_and_is_not_run_again(
        client, upstream, searxng_server):  # noqa: F811
    upstream.queue(text("Still sunny."))
    replay = [ASK, {"type": "web_search_call", "status": "completed",
                    "action": {"type": "search", "query": "oslo weather"}},
              {"role": "assistant", "content": "Sunny."}, {"role": "user", "content": "Tomorrow?"}]
    resp = await client.post("/v1/responses", json={"input": replay, "store": False},
                             headers={"Authorization": f"Bearer {API_KEY}"})
    assert resp.status == 200
    assert searches(searxng_server) == []
    sent = upstream.requests[-1]["messages"][1:]
    assert [m["role"] for m in sent] == ["user", "assistant", "user"]
    assert sent[1]["content"] == "(searched the web for 'oslo weather')\n\nSunny."


async def test_a_replayed_search_is_not_run_when_the_request_allows_no_tools(client, upstream, searxng_server):  # noqa: F811
    upstream.queue(text("From memory: sunny."))
    replay = [ASK, {"type": "web_search_call", "status": "completed",
                    "action": {"type": "search", "query": "oslo weather"}},
              {"type": "function_call", "name": "get_weather", "arguments": "{}", "call_id": "c1"},
              {"type": "function_call_output", "call_id": "c1", "output": "21 C"}]
    resp = await client.post("/v1/responses", json={"input": replay, "store": False, "tool_choice": "none",
                                                    "tools": [WEATHER_TOOL]},
                             headers={"Authorization": f"Bearer {API_KEY}"})
    assert resp.status == 200
    assert searches(searxng_server) == []
    sent = upstream.requests[-1]["messages"][1:]
    assert sent[2]["role"] == "tool" and sent[2]["content"] == "(searched the web for 'oslo weather')"


async def test_chat_completions_still_drop_a_search_called_beside_a_client_function(client, upstream,
                                                                                   searxng_server):  # noqa: F811
    # a chat client's history brings back only its own calls: a search's results would be lost
    upstream.queue(tool_call(("web_search", {"query": "oslo weather"}), ("get_weather", {"city": "Oslo"})))
    resp = await client.post("/v1/chat/completions", headers={"Authorization": f"Bearer {API_KEY}"}, json={
        "messages": [{"role": "user", "content": "Weather in Oslo?"}],
        "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": WEATHER_TOOL["parameters"]}}]})
    assert resp.status == 200
    [call] = (await resp.json())["choices"][0]["message"]["tool_calls"]
    assert call["function"]["name"] == "get_weather"
    assert searches(searxng_server) == []
