"""The OpenAI Agents SDK (`openai-agents`) against the gateway, unchanged: an Agent with
`WebSearchTool()` and one `@function_tool` runs to its final output, streamed and not. The search
is run by the gateway (reported as a hosted `web_search_call`, which the SDK does not try to run),
the function tool by the SDK; `result.to_input_list()` sent back as the next turn works."""

from __future__ import annotations

from typing import Any

import openai
import pytest
from agents import Agent, RunConfig, Runner, WebSearchTool, function_tool
from agents.models.openai_responses import OpenAIResponsesModel

from tests.conftest import API_KEY
from tests.fakes.searxng import FakeSearxng, searxng_server  # noqa: F401
from tests.fakes.upstream import text, tool_call

NO_TRACING = RunConfig(tracing_disabled=True)  # the SDK would otherwise send traces to OpenAI


@pytest.fixture
async def agent_and_calls(make_client: Any, searxng_server: FakeSearxng) -> Any:  # noqa: F811
    client = await make_client(api_key=API_KEY, env={"SEARXNG_URL": searxng_server.base_url})
    oai = openai.AsyncOpenAI(base_url=str(client.make_url("/v1")), api_key=API_KEY, max_retries=0)
    calls: list[str] = []

    @function_tool
    def get_weather(city: str) -> str:
        """The weather in a city."""
        calls.append(city)
        return f"{city}: 3C and cloudy"

    agent = Agent(name="helper", instructions="Be brief.", tools=[WebSearchTool(), get_weather],
                  model=OpenAIResponsesModel(model="m", openai_client=oai))
    yield agent, calls, oai
    await oai.close()


def searches(searxng: FakeSearxng) -> list[str]:
    return [r.query.get("q", "") for r in searxng.requests if r.path == "/search"]


@pytest.mark.parametrize("streamed", [False, True])
async def test_agents_sdk_runs_a_web_search_and_a_function_tool_to_a_final_output_and_continues(
        agent_and_calls, upstream, searxng_server, streamed):  # noqa: F811
    agent, calls, _ = agent_and_calls
    upstream.queue(tool_call(("web_search", {"query": "oslo weather"})), tool_call(("get_weather", {"city": "Oslo"})),
                   text("Oslo: 3C and cloudy."), text("Still 3C."))
    if streamed:
        result: Any = Runner.run_streamed(agent, "Weather in Oslo?", run_config=NO_TRACING)
        kinds = [event.type async for event in result.stream_events()]
        assert "raw_response_event" in kinds
    else:
        result = await Runner.run(agent, "Weather in Oslo?", run_config=NO_TRACING)
    assert result.final_output == "Oslo: 3C and cloudy."
    assert calls == ["Oslo"]  # the SDK ran its function tool once
    assert searches(searxng_server) == ["oslo weather"]  # the gateway ran the search once
    item_types = [item.type for item in result.new_items]
    assert item_types[:3] == ["tool_call_item", "tool_call_item", "tool_call_output_item"]
    assert result.new_items[0].raw_item.type == "web_search_call"
    # the SDK sent the search back with the function's result: the model got the result, not a re-run
    after_tool = upstream.requests[2]["messages"]
    assert after_tool[-1] == {"role": "tool", "tool_call_id": after_tool[-2]["tool_calls"][0]["id"],
                              "content": "Oslo: 3C and cloudy"}

    follow_up = [*result.to_input_list(), {"role": "user", "content": "And now?"}]
    again = await Runner.run(agent, follow_up, run_config=NO_TRACING)
    assert again.final_output == "Still 3C."
    assert calls == ["Oslo"] and searches(searxng_server) == ["oslo weather"]
    sent = upstream.requests[-1]["messages"]
    assert sent[-1] == {"role": "user", "content": "And now?"}
    assert any(m["role"] == "tool" and m["content"] == "Oslo: 3C and cloudy" for m in sent)


async def test_agents_sdk_continues_a_gateway_conversation_by_its_id(agent_and_calls, upstream,
                                                                     searxng_server):  # noqa: F811
    """`Runner.run(..., conversation_id=...)`: the SDK sends only the new input with the id; the
    gateway reads the conversation (the search's results included) and appends the turn."""
    agent, calls, oai = agent_and_calls
    conversation = await oai.conversations.create()
    upstream.queue(tool_call(("web_search", {"query": "oslo weather"})), text("Cold in Oslo."), text("Still cold."))
    first = await Runner.run(agent, "Weather in Oslo?", conversation_id=conversation.id, run_config=NO_TRACING)
    assert first.final_output == "Cold in Oslo."
    second = await Runner.run(agent, "And now?", conversation_id=conversation.id, run_config=NO_TRACING)
    assert second.final_output == "Still cold."
    sent = [m for m in upstream.requests[-1]["messages"] if m["role"] != "system"]  # ours, the agent's instructions
    assert [m["role"] for m in sent] == ["user", "assistant", "tool", "assistant", "user"]
    assert "example.org" in sent[2]["content"]  # the search's results, kept by the gateway
    assert searches(searxng_server) == ["oslo weather"] and calls == []
    items = [item async for item in oai.conversations.items.list(conversation.id, order="asc")]
    assert [item.type for item in items] == ["message", "web_search_call", "message", "message", "message"]


async def test_agents_sdk_session_on_the_gateway_conversations_api(agent_and_calls, upstream,
                                                                   searxng_server):  # noqa: F811
    """`OpenAIConversationsSession` keeps the history in the gateway's Conversations API: it lists
    the items before a run and adds the run's new items (function calls and searches too) after."""
    from agents.memory import OpenAIConversationsSession

    agent, calls, oai = agent_and_calls
    session = OpenAIConversationsSession(openai_client=oai)
    upstream.queue(tool_call(("get_weather", {"city": "Oslo"})), text("Oslo: 3C and cloudy."), text("Still 3C."))
    first = await Runner.run(agent, "Weather in Oslo?", session=session, run_config=NO_TRACING)
    assert first.final_output == "Oslo: 3C and cloudy." and calls == ["Oslo"]
    second = await Runner.run(agent, "And now?", session=session, run_config=NO_TRACING)
    assert second.final_output == "Still 3C." and calls == ["Oslo"]
    sent = [m for m in upstream.requests[-1]["messages"] if m["role"] != "system"]
    assert sent[0] == {"role": "user", "content": "Weather in Oslo?"} and sent[-1]["content"] == "And now?"
    assert any(m["role"] == "tool" and m["content"] == "Oslo: 3C and cloudy" for m in sent)
    stored = await session.get_items()
    assert [item.get("type", "message") for item in stored][:3] == ["message", "function_call", "function_call_output"]
    assert len(stored) == 6  # two turns: input, call, output, answer; input, answer
