"""The gateway's own searches as OpenAI's hosted `web_search_call` items, through the official SDK:
typed actions, `include` sources, streamed events, GET and input_items, a failed search, chaining
(the model still gets the results), and a response's output replayed as the next input."""

from __future__ import annotations

import json
from typing import Any

import openai
import pytest
from openai.types.responses import ResponseFunctionWebSearch, ResponseOutputMessage
from openai.types.responses.response_function_web_search import ActionSearch

from tests.conftest import API_KEY
from tests.fakes.searxng import FakeSearxng, searxng_server  # noqa: F401
from tests.fakes.upstream import text, tool_call
from tests.support.helpers import assert_error_envelope

SOURCES = "web_search_call.action.sources"
WEB_SEARCH = {"type": "web_search"}
WEATHER_TOOL = {
    "type": "function", "name": "get_weather", "description": "Weather for a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}


@pytest.fixture
async def client(make_client: Any, searxng_server: FakeSearxng) -> Any:  # noqa: F811
    return await make_client(api_key=API_KEY, env={"SEARXNG_URL": searxng_server.base_url})


@pytest.fixture
async def sdk(client: Any) -> Any:
    sdk = openai.AsyncOpenAI(base_url=str(client.make_url("/v1")), api_key=API_KEY, max_retries=0)
    yield sdk
    await sdk.close()


def search_then_answer(upstream: Any, query: str = "otter diet") -> None:
    upstream.queue(tool_call(("web_search", {"query": query})), text("Otters eat fish."))


def searches(searxng: FakeSearxng) -> list[str]:
    return [r.query.get("q", "") for r in searxng.requests if r.path == "/search"]


async def test_a_search_is_a_typed_web_search_call_item_with_sources_when_included(sdk, upstream):
    search_then_answer(upstream)
    created = await sdk.responses.create(model="m", input="otters?", tools=[WEB_SEARCH], include=[SOURCES])
    assert [item.type for item in created.output] == ["web_search_call", "message"]
    call = created.output[0]
    assert isinstance(call, ResponseFunctionWebSearch) and call.id.startswith("ws_") and call.status == "completed"
    assert isinstance(call.action, ActionSearch)
    assert call.action.query == "otter diet" and call.action.queries == ["otter diet"]
    assert call.action.sources is not None
    assert [s.url for s in call.action.sources][:2] == ["https://example.org/1", "https://example.org/2"]
    assert created.output_text == "Otters eat fish."
    # the stored response (GET) is the same record; its input items are the client's input only
    assert (await sdk.responses.retrieve(created.id)).model_dump() == created.model_dump()
    items = (await sdk.responses.input_items.list(created.id)).data
    assert [item.type for item in items] == ["message"]


async def test_search_sources_are_left_out_unless_included(client, upstream):
    search_then_answer(upstream)
    body = await (await client.post("/v1/responses", json={"input": "otters?"},
                                    headers={"Authorization": f"Bearer {API_KEY}"})).json()
    call = body["output"][0]
    assert call["type"] == "web_search_call"
    assert call["action"] == {"type": "search", "query": "otter diet", "queries": ["otter diet"]}
    assert "function_call" not in json.dumps(body["output"])


async def test_sdk_stream_of_a_search_runs_to_the_end_with_its_events_in_order(sdk, upstream):
    search_then_answer(upstream)
    events = []
    async with sdk.responses.stream(model="m", input="otters?", tools=[WEB_SEARCH], include=[SOURCES]) as stream:
        async for event in stream:
            events.append(event)
        final = await stream.get_final_response()
    assert [e.sequence_number for e in events] == list(range(len(events)))
    ws = final.output[0]
    assert isinstance(ws, ResponseFunctionWebSearch) and ws.status == "completed"
    of_call = [e for e in events if getattr(e, "item_id", None) == ws.id
               or getattr(getattr(e, "item", None), "id", None) == ws.id]
    assert [e.type for e in of_call] == [
        "response.output_item.added", "response.web_search_call.in_progress", "response.web_search_call.searching",
        "response.web_search_call.completed", "response.output_item.done",
    ]
    assert {e.output_index for e in of_call} == {0}
    assert of_call[0].item.status == "in_progress" and of_call[-1].item.status == "completed"
    assert isinstance(final.output[1], ResponseOutputMessage) and final.output_text == "Otters eat fish."
    assert (await sdk.responses.retrieve(final.id)).output[0].id == ws.id


async def test_a_search_whose_provider_fails_is_a_failed_web_search_call(sdk, upstream, searxng_server):  # noqa: F811
    searxng_server.json_enabled = False  # the instance answers 403
    search_then_answer(upstream)
    created = await sdk.responses.create(model="m", input="otters?", tools=[WEB_SEARCH], include=[SOURCES])
    call = created.output[0]
    assert isinstance(call, ResponseFunctionWebSearch) and call.status == "failed"
    assert isinstance(call.action, ActionSearch) and call.action.sources == []


@pytest.mark.parametrize("link", ["previous_response_id", "conversation"])
async def test_a_chained_turn_still_gives_the_model_the_search_results(sdk, upstream, link):
    search_then_answer(upstream)
    upstream.queue(text("Yes, fish."))
    chain = {"conversation": "otter-chat"} if link == "conversation" else {}
    first = await sdk.responses.create(model="m", input="otters?", **chain)
    if link == "previous_response_id":
        chain = {"previous_response_id": first.id}
    await sdk.responses.create(model="m", input="Sure?", **chain)
    sent = upstream.requests[-1]["messages"][1:]
    assert [m["role"] for m in sent] == ["user", "assistant", "tool", "assistant", "user"]
    assert sent[1]["tool_calls"][0]["function"]["name"] == "web_search"
    assert "https://example.org/1" in sent[2]["content"] and "Snippet 1" in sent[2]["content"]


async def test_replayed_output_is_kept_in_input_items_and_not_searched_again(sdk, upstream, searxng_server):  # noqa: F811
    search_then_answer(upstream)
    upstream.queue(text("Fish, mostly."))
    first = await sdk.responses.create(model="m", input="otters?", include=[SOURCES])
    assert searches(searxng_server) == ["otter diet"]
    # what the Agents SDK's to_input_list() sends: the input, the output items as given, the next turn
    replay = [{"role": "user", "content": "otters?"},
              *(item.model_dump(exclude_unset=True) for item in first.output),
              {"role": "user", "content": "Sure?"}]
    second = await sdk.responses.create(model="m", input=replay)
    assert second.output_text == "Fish, mostly."
    assert searches(searxng_server) == ["otter diet"]  # nothing ran again
    items = (await sdk.responses.input_items.list(second.id, order="asc")).data
    assert [item.type for item in items] == ["message", "web_search_call", "message", "message"]
    assert items[1].id == first.output[0].id and isinstance(items[1], ResponseFunctionWebSearch)
    sent = upstream.requests[-1]["messages"][1:]
    # no tool call without its result goes upstream: a note of the search leads the replayed answer
    assert [m["role"] for m in sent] == ["user", "assistant", "user"] and "tool_calls" not in sent[1]
    assert sent[1]["content"].startswith("(searched the web for 'otter diet'; found https://example.org/1")
    assert sent[1]["content"].endswith("\n\nOtters eat fish.")


async def test_a_client_tool_after_a_search_comes_back_as_a_function_call(sdk, upstream):
    upstream.queue(tool_call(("web_search", {"query": "oslo weather"})), tool_call(("get_weather", {"city": "Oslo"})))
    created = await sdk.responses.create(model="m", input="Weather in Oslo?", tools=[WEB_SEARCH, WEATHER_TOOL])
    assert [item.type for item in created.output] == ["web_search_call", "function_call"]
    assert created.output[1].name == "get_weather" and json.loads(created.output[1].arguments) == {"city": "Oslo"}


@pytest.mark.parametrize(("include", "param"), [
    (["web_search_call.action.source"], "include[0]"),
    ([SOURCES, 7], "include[1]"),
    ("web_search_call.action.sources", "include"),
])
async def test_an_unknown_include_value_is_a_400_naming_it(client, include, param):
    resp = await client.post("/v1/responses", json={"input": "x", "include": include},
                             headers={"Authorization": f"Bearer {API_KEY}"})
    assert resp.status == 400
    assert_error_envelope(await resp.json(), param=param)


@pytest.mark.parametrize(("item", "param"), [
    ({"type": "web_search_call", "id": "ws_1", "status": "completed"}, "input[1].action"),
    ({"type": "web_search_call", "id": "ws_1", "status": "completed", "action": {"type": "browse"}}, "input[1].action"),
    ({"type": "web_search_call", "id": "ws_1", "status": "done", "action": {"type": "search"}}, "input[1].status"),
])
async def test_a_malformed_web_search_call_input_item_is_a_400_naming_the_field(client, item, param):
    resp = await client.post("/v1/responses", json={"input": [{"role": "user", "content": "x"}, item]},
                             headers={"Authorization": f"Bearer {API_KEY}"})
    assert resp.status == 400
    assert_error_envelope(await resp.json(), param=param)
