"""MCP approvals on the Responses API, OpenAI's way: a call to a tool that needs approval ends the
response (`completed`) with an `mcp_approval_request`; the client's `mcp_approval_response`
(through previous_response_id or a store:false replay) runs the call or tells the model it was
denied. Against a real Streamable HTTP server (the `mcp` SDK's), read through the openai SDK and
driven by the Agents SDK's `HostedMCPTool` with `on_approval_request`."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import openai
import pytest
from agents import Agent, HostedMCPTool, RunConfig, Runner
from agents.models.openai_responses import OpenAIResponsesModel
from openai.types.responses.response_output_item import McpApprovalRequest, McpCall

from tests.conftest import API_KEY
from tests.fakes.upstream import text, tool_call
from tests.support.mcp_servers import sdk_server

SECRET = "tok-never-stored-456"


@pytest.fixture(scope="module")
def sdk_url() -> Iterator[str]:
    with sdk_server() as url:
        yield url


def mcp_tool(url: str, **kw: Any) -> dict[str, Any]:
    return {"type": "mcp", "server_label": "sdk", "server_url": url, "headers": {"X-Api-Key": SECRET}, **kw}


@pytest.fixture
async def gateway(make_client: Any, lookup_tool: Any) -> Any:
    return await make_client(tools=[lookup_tool], mcp_allowed_hosts=("127.0.0.1",))


@pytest.fixture
async def sdk(gateway: Any) -> Any:
    made = openai.AsyncOpenAI(base_url=str(gateway.make_url("/v1")), api_key=API_KEY, max_retries=0)
    yield made
    await made.close()


def tool_messages(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [m for m in body["messages"] if m["role"] == "tool"]


async def test_without_require_approval_a_call_ends_the_response_with_an_approval_request(sdk, upstream, sdk_url):
    upstream.queue(tool_call(("sdk__echo", {"text": "otters"})), text("It said otters."))
    asked = await sdk.responses.create(model="m", input="echo otters", tools=[mcp_tool(sdk_url)])
    assert asked.status == "completed"
    assert [item.type for item in asked.output] == ["mcp_list_tools", "mcp_approval_request"]
    request = asked.output[1]
    assert isinstance(request, McpApprovalRequest) and request.server_label == "sdk" and request.name == "echo"
    assert json.loads(request.arguments) == {"text": "otters"} and request.id.startswith("mcpr_")
    assert len(upstream.requests) == 1  # the call was not run, so the model was not asked again

    done = await sdk.responses.create(model="m", previous_response_id=asked.id, tools=[mcp_tool(sdk_url)], input=[
        {"type": "mcp_approval_response", "approval_request_id": request.id, "approve": True}])
    assert [item.type for item in done.output] == ["mcp_call", "message"]
    call = done.output[0]
    assert isinstance(call, McpCall) and call.approval_request_id == request.id and call.output == "otters"
    assert done.output_text == "It said otters."
    assert tool_messages(upstream.requests[1])[-1] == {"role": "tool", "tool_call_id": request.id,
                                                         "content": "otters"}
    stored = await sdk.responses.retrieve(done.id)
    assert stored.output[0].approval_request_id == request.id


async def test_a_denied_call_is_not_run_and_the_model_is_told_why(sdk, upstream, sdk_url):
    upstream.queue(tool_call(("sdk__fail", {"reason": "x"})), text("Understood, I did not run it."))
    asked = await sdk.responses.create(model="m", input="break it", tools=[mcp_tool(sdk_url)])
    request = asked.output[-1]
    done = await sdk.responses.create(model="m", previous_response_id=asked.id, tools=[mcp_tool(sdk_url)], input=[
        {"type": "mcp_approval_response", "approval_request_id": request.id, "approve": False,
         "reason": "not today"}])
    assert [item.type for item in done.output] == ["message"]
    told = tool_messages(upstream.requests[1])[-1]
    assert told["tool_call_id"] == request.id and "denied" in told["content"] and "not today" in told["content"]


async def test_an_approval_replayed_with_store_false_runs_the_call(sdk, upstream, sdk_url):
    upstream.queue(tool_call(("sdk__echo", {"text": "kept"})), text("Done."), text("Later."))
    tools = [mcp_tool(sdk_url)]
    asked = await sdk.responses.create(model="m", input="echo kept", tools=tools, store=False)
    replay = [{"role": "user", "content": "echo kept"}, *[item.model_dump(exclude_none=True) for item in asked.output]]
    request_id = asked.output[-1].id
    answer = {"type": "mcp_approval_response", "approval_request_id": request_id, "approve": True}
    done = await sdk.responses.create(model="m", input=[*replay, answer], tools=tools, store=False)
    assert [item.type for item in done.output] == ["mcp_call", "message"] and done.output[0].output == "kept"
    # the whole history again: the answered approval is not run a second time
    again = await sdk.responses.create(model="m", tools=tools, store=False, input=[
        *replay, answer, *[item.model_dump(exclude_none=True) for item in done.output],
        {"role": "user", "content": "and?"}])
    assert [item.type for item in again.output] == ["message"]
    assert sum(1 for m in upstream.requests[2]["messages"] if m.get("tool_calls")) == 1


async def test_the_filter_form_asks_only_for_the_tools_it_names(sdk, upstream, sdk_url):
    upstream.queue(tool_call(("sdk__echo", {"text": "free"}), ("sdk__add", {"a": 1, "b": 2})))
    policy = {"never": {"tool_names": ["echo"]}}
    created = await sdk.responses.create(model="m", input="both", tools=[mcp_tool(sdk_url, require_approval=policy)])
    assert [item.type for item in created.output] == ["mcp_list_tools", "mcp_call", "mcp_approval_request"]
    assert created.output[1].name == "echo" and created.output[1].output == "free"
    assert created.output[2].name == "add"
    read_only = {"never": {"read_only": True}}
    upstream.queue(tool_call(("sdk__fail", {"reason": "y"})))
    asked = await sdk.responses.create(model="m", input="fail", tools=[mcp_tool(sdk_url, require_approval=read_only)])
    assert asked.output[-1].type == "mcp_approval_request"  # fail is not read-only


@pytest.mark.parametrize(("answer", "message"), [
    ({"approval_request_id": "mcpr_nowhere", "approve": True}, "no mcp_approval_request"),
    ({"approval_request_id": "mcpr_nowhere"}, "'approve'"),
])
async def test_an_unknown_or_malformed_approval_is_a_400_naming_the_field(sdk, upstream, sdk_url, answer, message):
    upstream.queue(tool_call(("sdk__echo", {"text": "a"})))
    asked = await sdk.responses.create(model="m", input="a", tools=[mcp_tool(sdk_url)])
    with pytest.raises(openai.BadRequestError) as caught:
        await sdk.responses.create(model="m", previous_response_id=asked.id, tools=[mcp_tool(sdk_url)],
                                   input=[{"type": "mcp_approval_response", **answer}])
    error = caught.value.body
    assert message in error["message"] and error["param"].startswith("input[0].approv")
    assert len(upstream.requests) == 1


async def test_an_approval_answered_twice_is_a_400(sdk, upstream, sdk_url):
    upstream.queue(tool_call(("sdk__echo", {"text": "once"})), text("Once."))
    asked = await sdk.responses.create(model="m", input="once", tools=[mcp_tool(sdk_url)])
    answer = [{"type": "mcp_approval_response", "approval_request_id": asked.output[-1].id, "approve": True}]
    done = await sdk.responses.create(model="m", previous_response_id=asked.id, tools=[mcp_tool(sdk_url)],
                                      input=answer)
    with pytest.raises(openai.BadRequestError) as caught:
        await sdk.responses.create(model="m", previous_response_id=done.id, tools=[mcp_tool(sdk_url)], input=answer)
    assert caught.value.body["param"] == "input[0].approval_request_id"


async def test_an_mcp_tool_in_additional_tools_is_stored_without_its_secrets(sdk, upstream, sdk_url):
    upstream.queue(tool_call(("sdk__echo", {"text": "late"})), text("Late."))
    created = await sdk.responses.create(model="m", input=[
        {"type": "additional_tools", "role": "developer", "tools": [mcp_tool(sdk_url, require_approval="never")]},
        {"role": "user", "content": "echo late"}])
    assert [item.type for item in created.output] == ["mcp_list_tools", "mcp_call", "message"]
    stored = await sdk.responses.input_items.list(created.id)
    dumped = json.dumps([item.model_dump() for item in stored.data])
    assert SECRET not in dumped and sdk_url not in dumped


async def test_the_agents_sdk_hosted_mcp_tool_runs_with_its_approval_callback(sdk, upstream, sdk_url):
    asked: list[str] = []

    def on_approval(request: Any) -> Any:
        asked.append(request.data.name)
        return {"approve": request.data.name == "echo", "reason": "only echo"}

    tool = HostedMCPTool(tool_config=mcp_tool(sdk_url, require_approval="always"), on_approval_request=on_approval)
    agent = Agent(name="helper", instructions="Be brief.", tools=[tool],
                  model=OpenAIResponsesModel(model="m", openai_client=sdk))
    upstream.queue(tool_call(("sdk__echo", {"text": "sdk"})), text("It said sdk."))
    result = await Runner.run(agent, "echo sdk", run_config=RunConfig(tracing_disabled=True))
    assert result.final_output == "It said sdk." and asked == ["echo"]
    raw = [getattr(item, "raw_item", None) for item in result.new_items]
    calls = [item for item in raw if getattr(item, "type", None) == "mcp_call"
             or (isinstance(item, dict) and item.get("type") == "mcp_call")]
    assert calls, [type(item) for item in raw]
    assert tool_messages(upstream.requests[1])[-1]["content"] == "sdk"


async def test_a_configured_server_needing_approval_asks_on_responses_and_is_not_offered_on_chat(
        make_client, lookup_tool, upstream):
    from tests.http.test_mcp_configured import TIME_TOOL, time_server

    client = await make_client(tools=[lookup_tool], mcp_servers=(time_server(require_approval="always"),))
    made = openai.AsyncOpenAI(base_url=str(client.make_url("/v1")), api_key=API_KEY, max_retries=0)
    try:
        upstream.queue(text("No tools here."))
        await made.chat.completions.create(model="m", messages=[{"role": "user", "content": "time?"}])
        assert TIME_TOOL not in [t["function"]["name"] for t in upstream.requests[0].get("tools", [])]
        upstream.queue(tool_call((TIME_TOOL, {"timezone": "UTC"})), text("It is now."))
        asked = await made.responses.create(model="m", input="time?")
        assert [item.type for item in asked.output] == ["mcp_list_tools", "mcp_approval_request"]
        done = await made.responses.create(model="m", previous_response_id=asked.id, input=[
            {"type": "mcp_approval_response", "approval_request_id": asked.output[-1].id, "approve": True}])
        # a configured server's list is an item of every response (its tools are offered each turn)
        assert [item.type for item in done.output] == ["mcp_list_tools", "mcp_call", "message"]
        assert done.output[1].status == "completed" and "UTC" in (done.output[1].output or "")
    finally:
        await made.close()


async def test_a_streamed_approval_request_is_an_item_added_and_done_before_completed(sdk, upstream, sdk_url):
    upstream.queue(tool_call(("sdk__echo", {"text": "s"})))
    stream = await sdk.responses.create(model="m", input="echo s", tools=[mcp_tool(sdk_url)], stream=True)
    events = [event async for event in stream]
    kinds = [(event.type, getattr(getattr(event, "item", None), "type", None)) for event in events]
    assert kinds[-3:] == [("response.output_item.added", "mcp_approval_request"),
                          ("response.output_item.done", "mcp_approval_request"), ("response.completed", None)]
    assert events[-1].response.output[-1].type == "mcp_approval_request"


async def test_an_approval_in_a_conversation_answers_the_request_kept_in_it(sdk, upstream, sdk_url):
    conversation = await sdk.conversations.create()
    upstream.queue(tool_call(("sdk__echo", {"text": "conv"})), text("Said conv."))
    asked = await sdk.responses.create(model="m", input="echo conv", tools=[mcp_tool(sdk_url)],
                                       conversation=conversation.id)
    assert asked.output[-1].type == "mcp_approval_request"
    done = await sdk.responses.create(model="m", conversation=conversation.id, tools=[mcp_tool(sdk_url)], input=[
        {"type": "mcp_approval_response", "approval_request_id": asked.output[-1].id, "approve": True}])
    assert [item.type for item in done.output][-2:] == ["mcp_call", "message"]
    assert done.output[-2].output == "conv"
