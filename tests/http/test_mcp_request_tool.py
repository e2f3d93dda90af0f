"""The Responses API's per-request `mcp` tool with `require_approval: "never"`: a real Streamable
HTTP server (the official `mcp` SDK's, tests/fakes/mcp_sdk_server.py) named by `server_url`, called by
the fake upstream model, read through the openai SDK; secrets never echoed or stored; a private
URL a 400 unless AGENT_MCP_ALLOWED_HOSTS lists its host."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import openai
import pytest
from openai.types.responses.response_output_item import McpCall, McpListTools

from tests.conftest import API_KEY
from tests.fakes.upstream import text, tool_call
from tests.support.mcp_servers import sdk_server

SECRET = "tok-never-echoed-123"


@pytest.fixture(scope="module")
def sdk_url() -> Iterator[str]:
    with sdk_server() as url:
        yield url


def mcp_tool(url: str, **kw: Any) -> dict[str, Any]:
    return {"type": "mcp", "server_label": "sdk", "server_url": url, "require_approval": "never",
            "headers": {"X-Api-Key": SECRET}, **kw}


@pytest.fixture
async def sdk(make_client: Any, lookup_tool: Any) -> Any:
    client = await make_client(tools=[lookup_tool], mcp_allowed_hosts=("127.0.0.1",))
    made = openai.AsyncOpenAI(base_url=str(client.make_url("/v1")), api_key=API_KEY, max_retries=0)
    yield made
    await made.close()


async def test_a_named_server_is_listed_and_called_and_its_secrets_are_never_echoed(sdk, upstream, sdk_url):
    upstream.queue(tool_call(("sdk__echo", {"text": "otters"})), text("It said otters."))
    created = await sdk.responses.create(model="m", input="echo otters", tools=[mcp_tool(sdk_url)])
    assert [item.type for item in created.output] == ["mcp_list_tools", "mcp_call", "message"]
    listed, call = created.output[0], created.output[1]
    assert isinstance(listed, McpListTools) and {"echo", "add"} <= {t.name for t in listed.tools}
    assert isinstance(call, McpCall) and call.server_label == "sdk" and call.name == "echo"
    assert call.output == "otters" and call.status == "completed"
    assert "sdk__echo" in [t["function"]["name"] for t in upstream.requests[0]["tools"]]
    stored = await sdk.responses.retrieve(created.id)
    for shown in (created, stored):
        dumped = json.dumps(shown.model_dump())
        assert SECRET not in dumped and sdk_url not in dumped
        (tool,) = shown.tools
        assert tool.server_url == sdk_url.rsplit("/", 1)[0] and tool.headers is None


async def test_authorization_is_sent_as_a_bearer_token_and_not_echoed(sdk, upstream, sdk_url):
    upstream.queue(text("Hi."))
    created = await sdk.responses.create(model="m", input="hi",
                                         tools=[mcp_tool(sdk_url, authorization=SECRET)])
    assert SECRET not in json.dumps(created.model_dump())
    assert created.output[0].type == "mcp_list_tools" and created.output[0].error is None


async def test_allowed_tools_and_read_only_filter_what_the_model_is_offered(sdk, upstream, sdk_url):
    upstream.queue(text("A."), text("B."))
    await sdk.responses.create(model="m", input="a", tools=[mcp_tool(sdk_url, allowed_tools=["add"])])
    assert [t["function"]["name"] for t in upstream.requests[0]["tools"] if t["function"]["name"].startswith("sdk__")] \
        == ["sdk__add"]
    created = await sdk.responses.create(model="m", input="b",
                                         tools=[mcp_tool(sdk_url, allowed_tools={"read_only": True})])
    names = {t.name for t in created.output[0].tools}
    assert "echo" in names and "fail" not in names


async def test_a_private_server_url_is_a_clear_400(make_client, lookup_tool, upstream, sdk_url):
    client = await make_client(tools=[lookup_tool])
    response = await client.post("/v1/responses", json={"input": "hi", "tools": [mcp_tool(sdk_url)]},
                                 headers={"Authorization": f"Bearer {API_KEY}"})
    body = await response.json()
    assert response.status == 400 and body["error"]["param"] == "tools[0].server_url"
    assert "AGENT_MCP_ALLOWED_HOSTS" in body["error"]["message"] and SECRET not in json.dumps(body)
    assert upstream.requests == []


@pytest.mark.parametrize(("change", "param"), [
    ({"require_approval": "sometimes"}, "tools[0].require_approval"),
    ({"require_approval": {"always": {"tool_names": "echo"}}}, "tools[0].require_approval.always.tool_names"),
    ({"server_label": "a__b"}, "tools[0].server_label"),
    ({"server_url": "ftp://example.com/mcp"}, "tools[0].server_url"),
    ({"allowed_tools": "echo"}, "tools[0].allowed_tools"),
    ({"server_url": None}, "tools[0].server_url"),  # no URL and no configured server of that label
])
async def test_a_malformed_mcp_tool_is_a_400_naming_the_field(make_client, lookup_tool, upstream, change, param):
    client = await make_client(tools=[lookup_tool])
    tool = {k: v for k, v in {**mcp_tool("https://example.com/mcp"), **change}.items() if v is not None}
    if "require_approval" not in change:
        tool["require_approval"] = "never"
    response = await client.post("/v1/responses", json={"input": "hi", "tools": [tool]},
                                 headers={"Authorization": f"Bearer {API_KEY}"})
    body = await response.json()
    assert response.status == 400 and body["error"]["param"] == param, body


async def test_the_tools_list_is_reused_through_previous_response_id(sdk, upstream, sdk_url):
    upstream.queue(text("Listed."), tool_call(("sdk__echo", {"text": "again"})), text("Said again."))
    first = await sdk.responses.create(model="m", input="hi", tools=[mcp_tool(sdk_url)])
    assert first.output[0].type == "mcp_list_tools"
    second = await sdk.responses.create(model="m", input="echo again", tools=[mcp_tool(sdk_url)],
                                        previous_response_id=first.id)
    # the list is in the context: no second mcp_list_tools item, and the call still runs
    assert [item.type for item in second.output] == ["mcp_call", "message"]
    assert second.output[0].output == "again"


async def test_a_replayed_list_with_store_false_is_what_the_model_is_offered(sdk, upstream, sdk_url):
    # the replayed item lists one tool with its own description: offered as it says, so not refetched
    listed = {"type": "mcp_list_tools", "id": "mcpl_replayed", "server_label": "sdk",
              "tools": [{"name": "echo", "description": "FROM-THE-CONTEXT",
                         "input_schema": {"type": "object", "properties": {"text": {"type": "string"}}}}]}
    earlier_call = {"type": "mcp_call", "id": "mcp_earlier", "server_label": "sdk", "name": "echo",
                    "arguments": "{\"text\": \"one\"}", "output": "one", "error": "a string error, as older clients"}
    upstream.queue(text("Fine."))
    created = await sdk.responses.create(model="m", store=False, tools=[mcp_tool(sdk_url)], input=[
        {"role": "user", "content": "echo one"}, listed, earlier_call, {"role": "user", "content": "and now?"}])
    assert [item.type for item in created.output] == ["message"]
    offered = {t["function"]["name"]: t["function"] for t in upstream.requests[0]["tools"]}
    assert offered["sdk__echo"]["description"] == "FROM-THE-CONTEXT" and "sdk__add" not in offered
    # the earlier call reached the model as a call and its result
    messages = upstream.requests[0]["messages"]
    assert any(m.get("tool_calls") and m["tool_calls"][0]["function"]["name"] == "sdk__echo" for m in messages)
    assert {"role": "tool", "tool_call_id": "mcp_earlier", "content": "one"} in messages


async def test_max_tool_calls_counts_mcp_calls_and_the_rest_are_not_made(sdk, upstream, sdk_url):
    upstream.queue(tool_call(("sdk__echo", {"text": "one"}), ("sdk__echo", {"text": "two"})), text("Only one."))
    created = await sdk.responses.create(model="m", input="echo twice", tools=[mcp_tool(sdk_url)], max_tool_calls=1)
    assert [item.type for item in created.output] == ["mcp_list_tools", "mcp_call", "message"]
    assert created.output[1].output == "one" and created.max_tool_calls == 1
    # the model was told the second call was not run, and answered without tools
    second = upstream.requests[1]
    assert "max_tool_calls" in second["messages"][-1]["content"] and "tools" not in second
