"""Codex CLI's request shapes through the app and the official openai SDK: namespace tools, custom
(freeform) tools, `additional_tools` input items, and images in a tool's output, on the stored
(`previous_response_id`) and the `store: false` (whole input replayed) paths."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from openai import AsyncOpenAI
from openai.types.responses import ResponseCustomToolCall, ResponseFunctionToolCall

from gateway.config.settings import OPTIONS_BY_KEY, Settings, parse_option
from gateway.http.app import create_app
from gateway.wire.images import IMAGE_NOTE
from tests.fakes.upstream import FakeUpstream, text, tool_call
from tests.support.helpers import assert_error_envelope

SHELL = {"type": "function", "name": "shell", "description": "Run a command.",
         "parameters": {"type": "object", "properties": {"command": {"type": "string"}}}}
AGENTS = {"type": "namespace", "name": "agents", "description": "Sub-agents.", "tools": [
    {"type": "function", "name": "spawn_agent", "parameters": {"type": "object", "properties": {}}},
    {"type": "function", "name": "shell", "description": "A sub-agent's shell."}]}
APPLY_PATCH = {"type": "custom", "name": "apply_patch", "description": "Edit files.",
               "format": {"type": "grammar", "syntax": "lark", "definition": 'start: "*** Begin Patch"'}}
PATCH = "*** Begin Patch\n*** Add File: hello.txt\n+hi\n*** End Patch\n"
PICTURE = ("data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGNgYGD4DwABBAEAwS2OUA"
           "AAAABJRU5ErkJggg==")  # one pixel


@pytest.fixture
async def sdk(client: Any) -> AsyncIterator[AsyncOpenAI]:
    async with AsyncOpenAI(base_url=str(client.make_url("/v1")), api_key="unused", max_retries=0) as oai:
        yield oai


def offered(upstream: FakeUpstream) -> list[str]:
    return [tool["function"]["name"] for tool in upstream.requests[-1].get("tools", [])]


async def test_a_namespace_call_comes_back_with_its_namespace_and_replays_under_the_flat_name(
    sdk: AsyncOpenAI, upstream: FakeUpstream
) -> None:
    upstream.queue(tool_call(("agents__shell", {"command": "ls"})), text("Listed."))
    first = await sdk.responses.create(model="m", input="list files", tools=[SHELL, AGENTS], store=False)  # type: ignore[list-item]
    assert {"shell", "spawn_agent", "agents__shell"} <= set(offered(upstream))
    [call] = first.output
    assert isinstance(call, ResponseFunctionToolCall)
    assert (call.name, call.namespace, json.loads(call.arguments)) == ("shell", "agents", {"command": "ls"})

    second = await sdk.responses.create(model="m", tools=[SHELL, AGENTS], store=False, input=[  # type: ignore[list-item]
        {"role": "user", "content": "list files"},
        {"type": "function_call", "call_id": call.call_id, "name": "shell", "namespace": "agents",
         "arguments": call.arguments},
        {"type": "function_call_output", "call_id": call.call_id, "output": "a.txt"},
    ])
    assert second.output_text == "Listed."
    sent = upstream.requests[-1]["messages"][1:]
    assert sent[1]["tool_calls"][0]["function"]["name"] == "agents__shell"
    assert sent[2] == {"role": "tool", "tool_call_id": call.call_id, "content": "a.txt"}


async def test_a_streamed_custom_tool_call_reaches_the_sdk_as_a_custom_tool_call(
    sdk: AsyncOpenAI, upstream: FakeUpstream
) -> None:
    upstream.queue(tool_call(("apply_patch", {"input": PATCH})))
    kinds: list[str] = []
    async with sdk.responses.stream(model="m", input="add hello.txt", tools=[APPLY_PATCH, SHELL]) as stream:  # type: ignore[list-item]
        async for event in stream:
            kinds.append(event.type)
        final = await stream.get_final_response()
    [call] = final.output
    assert isinstance(call, ResponseCustomToolCall)
    assert (call.name, call.input) == ("apply_patch", PATCH)
    assert "response.custom_tool_call_input.delta" in kinds and "response.custom_tool_call_input.done" in kinds
    assert "response.function_call_arguments.delta" not in kinds
    [function] = [t["function"] for t in upstream.requests[-1]["tools"] if t["function"]["name"] == "apply_patch"]
    assert 'start: "*** Begin Patch"' in function["description"]


@pytest.mark.parametrize("store", [True, False])
async def test_a_custom_tool_call_and_its_output_continue_the_turn(
    sdk: AsyncOpenAI, upstream: FakeUpstream, store: bool
) -> None:
    upstream.queue(tool_call(("apply_patch", {"input": PATCH})), text("Added hello.txt."))
    first = await sdk.responses.create(model="m", input="add hello.txt", tools=[APPLY_PATCH], store=store)  # type: ignore[list-item]
    [call] = first.output
    assert isinstance(call, ResponseCustomToolCall)
    output = {"type": "custom_tool_call_output", "call_id": call.call_id, "output": "Done!"}
    if store:
        second = await sdk.responses.create(model="m", previous_response_id=first.id, tools=[APPLY_PATCH],  # type: ignore[list-item]
                                            input=[output])  # type: ignore[list-item]
    else:
        second = await sdk.responses.create(model="m", store=False, tools=[APPLY_PATCH], input=[  # type: ignore[list-item]
            {"role": "user", "content": "add hello.txt"}, call.model_dump(exclude_none=True), output])  # type: ignore[list-item]
    assert second.output_text == "Added hello.txt."
    sent = upstream.requests[-1]["messages"][1:]
    assert [m["role"] for m in sent] == ["user", "assistant", "tool"]
    assert sent[1]["tool_calls"][0]["function"]["name"] == "apply_patch"
    assert json.loads(sent[1]["tool_calls"][0]["function"]["arguments"]) == {"input": PATCH}
    assert sent[2] == {"role": "tool", "tool_call_id": call.call_id, "content": "Done!"}


async def test_additional_tools_are_offered_and_listed_with_the_input_items(
    sdk: AsyncOpenAI, upstream: FakeUpstream
) -> None:
    upstream.queue(tool_call(("apply_patch", {"input": PATCH})))
    extra = {"type": "additional_tools", "role": "developer", "tools": [APPLY_PATCH, AGENTS]}
    response = await sdk.responses.create(model="m", tools=[SHELL], input=[  # type: ignore[list-item]
        extra, {"role": "user", "content": "add hello.txt"}])  # type: ignore[list-item]
    assert offered(upstream)[-4:] == ["shell", "apply_patch", "spawn_agent", "agents__shell"]
    assert isinstance(response.output[0], ResponseCustomToolCall)
    listed = await sdk.responses.input_items.list(response.id, order="asc")
    first = listed.data[0].model_dump(exclude_none=True, by_alias=True)  # the SDK reads it as its own type
    assert first["type"] == "additional_tools" and first["tools"] == extra["tools"] and first["id"]


async def test_an_unknown_tool_type_is_a_400_naming_it_and_a_client_type_is_never_called_hosted(client: Any) -> None:
    for kind, hosted in (("local_shell", False), ("code_interpreter", True), ("made_up", False)):
        resp = await client.post("/v1/responses", json={
            "input": "hi", "tools": [SHELL, AGENTS, APPLY_PATCH, {"type": kind}]})
        body = await resp.json()
        assert resp.status == 400
        assert_error_envelope(body, param="tools[3].type")
        assert ("hosted tool type" in body["error"]["message"]) == hosted and kind in body["error"]["message"]


# ---- images in a tool's output ------------------------------------------------------------------


def view_image_turn(call_id: str = "call_view") -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": "what is in the picture?"},
        {"type": "function_call", "call_id": call_id, "name": "view_image", "arguments": '{"path": "a.png"}'},
        {"type": "function_call_output", "call_id": call_id, "output": [
            {"type": "input_image", "image_url": PICTURE}, {"type": "input_text", "text": "a.png"}]},
    ]


VIEW_IMAGE = {"type": "function", "name": "view_image", "parameters": {"type": "object", "properties": {}}}


@pytest.fixture
def routed(aiohttp_client: Any, make_settings: Callable[..., Settings], upstream: FakeUpstream) -> Callable[..., Any]:
    async def make(table: dict[str, Any]) -> Any:
        models = parse_option(OPTIONS_BY_KEY["models"], table, "config.yaml")
        return await aiohttp_client(create_app(make_settings(llm_models=models), tools=[]))
    return make


async def test_a_tool_image_is_a_note_for_a_model_without_vision_and_the_session_goes_on(
    client: Any, upstream: FakeUpstream
) -> None:
    for _ in range(2):  # the same item replayed next turn works as well
        resp = await client.post("/v1/responses", json={"input": view_image_turn(), "tools": [VIEW_IMAGE],
                                                         "store": False})
        assert resp.status == 200, await resp.text()
        sent = upstream.requests[-1]["messages"][1:]
        assert [m["role"] for m in sent] == ["user", "assistant", "tool"]
        assert sent[2]["content"].startswith("a.png") and IMAGE_NOTE in sent[2]["content"]
        assert PICTURE not in json.dumps(upstream.requests[-1])


@pytest.mark.parametrize("how", ["configured", "discovered"])
async def test_a_tool_image_follows_the_tool_message_on_a_vision_route(
    routed: Any, upstream: FakeUpstream, how: str
) -> None:
    if how == "configured":
        client = await routed({"eyes": {"model": "fake-model", "base_url": upstream.base_url, "vision": True}})
    else:  # OpenRouter's way of saying so in its model list
        upstream.model_fields["fake-model"] = {"architecture": {"input_modalities": ["text", "image"]}}
        client = await routed({"eyes": {"model": "fake-model", "base_url": upstream.base_url}})
    resp = await client.post("/v1/responses", json={"model": "eyes", "input": view_image_turn(),
                                                     "tools": [VIEW_IMAGE]})
    body = await resp.json()
    assert resp.status == 200, body
    sent = upstream.requests[-1]["messages"][1:]
    assert [m["role"] for m in sent] == ["user", "assistant", "tool", "user"]
    assert sent[2]["content"] == "a.png"
    assert sent[3]["content"][1] == {"type": "image_url", "image_url": {"url": PICTURE}}
    items = await (await client.get(f"/v1/responses/{body['id']}/input_items?order=asc")).json()
    assert items["data"][2]["output"][0] == {"type": "input_image", "image_url": PICTURE}


async def test_a_route_that_says_no_vision_gets_the_note_whatever_discovery_says(
    routed: Any, upstream: FakeUpstream
) -> None:
    upstream.model_fields["fake-model"] = {"architecture": {"input_modalities": ["text", "image"]}}
    client = await routed({"blind": {"model": "fake-model", "base_url": upstream.base_url, "vision": False}})
    resp = await client.post("/v1/responses", json={"model": "blind", "input": view_image_turn(),
                                                     "tools": [VIEW_IMAGE]})
    assert resp.status == 200
    assert PICTURE not in json.dumps(upstream.requests[-1])
