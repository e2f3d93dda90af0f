"""The agent's events: a whole reply gives what a stream of the same reply gives (its texts in one piece)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from gateway.agent.events import ReasoningDelta, TextDelta, TextDeltas
from gateway.agent.loop import Agent, AgentRequest
from gateway.agent.observer import AgentObserver, UpstreamCall
from gateway.agent.toolbox import Toolbox
from gateway.errors import UpstreamError
from gateway.upstream.client import UpstreamClient
from tests.fakes.tools import LookupTool
from tests.fakes.upstream import FakeUpstream, Reply, text, tool_call

USER = [{"role": "user", "content": "What colour is the sky?"}]


class Calls(AgentObserver):
    """Records each model call's outcome."""

    def __init__(self) -> None:
        self.outcomes: list[str] = []

    def upstream_call(self, stream: bool) -> UpstreamCall:
        outcomes = self.outcomes

        class Call(UpstreamCall):
            def finish(self, outcome: str) -> None:
                outcomes.append(outcome)

        return Call()


@pytest.fixture
async def upstream_client(upstream: FakeUpstream) -> AsyncIterator[UpstreamClient]:
    client = UpstreamClient(upstream.base_url, api_key=None, model="fake-model", connect_timeout=5, read_timeout=5)
    await client.start()
    yield client
    await client.close()


def joined(events: list[Any]) -> list[Any]:
    """Adjacent text (and reasoning) deltas as one: a stream splits what a whole reply sends at once."""
    out: list[Any] = []
    for event in events:
        if isinstance(event, TextDeltas):
            event = TextDelta("".join(event.texts))
        if out and type(event) in (TextDelta, ReasoningDelta) and type(out[-1]) is type(event):
            event = type(event)(out.pop().text + event.text)
        out.append(event)
    return out


async def run(agent: Agent, stream: bool) -> list[Any]:
    return [event async for event in agent.run(AgentRequest(USER, stream=stream)).events]


async def test_a_whole_reply_gives_the_events_a_stream_of_it_gives(upstream, upstream_client):
    agent = Agent(upstream_client, Toolbox([LookupTool()]), max_rounds=3, tool_timeout=5, system_prompt="Be brief.")
    replies = [tool_call(("lookup", {"term": "sky"}), text="Let me look.", reasoning="Look it up."),
               text("Green, says lookup.", reasoning="It answered.", usage=(7, 3))]
    upstream.queue(*replies)
    whole = await run(agent, stream=False)
    upstream.queue(*replies)
    streamed = await run(agent, stream=True)
    assert joined(whole) == joined(streamed)
    assert [type(e).__name__ for e in whole] == [
        "ReasoningDelta", "TextDelta", "ToolCallStarted", "ToolCallFinished", "ReasoningDelta", "TextDelta",
        "Usage", "Finished"]
    assert whole[-1].messages[-1] == {"role": "assistant", "content": "Green, says lookup."}


@pytest.mark.parametrize(("reply", "outcome"), [(text("Hi."), "ok"), (Reply(status=500), "error")])
async def test_a_whole_model_call_is_observed_with_its_outcome(upstream, upstream_client, reply, outcome):
    calls = Calls()
    agent = Agent(upstream_client, Toolbox(), max_rounds=3, tool_timeout=5, observer=calls)
    upstream.queue(reply)
    if outcome == "ok":
        assert [type(e).__name__ for e in await run(agent, stream=False)] == ["TextDelta", "Usage", "Finished"]
    else:
        with pytest.raises(UpstreamError):
            await run(agent, stream=False)
    assert calls.outcomes == [outcome]
