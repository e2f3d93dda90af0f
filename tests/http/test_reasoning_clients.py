"""The model's reasoning as the client libraries built on OpenAI's service show it to their users:
the Vercel AI SDK (`reasoningText`, `reasoning-delta` stream parts), langchain-openai with the
Responses API (the reasoning content block) and pydantic-ai (`ThinkingPart`). Each reads the
reasoning item's `summary` and the `response.reasoning_summary_*` events, not `content`; a stream
of them is asked for with `reasoning.summary`, as from OpenAI's service (the gateway streams the
reasoning once: as the summary when asked, else as `reasoning_text`)."""

from __future__ import annotations

from typing import Any

import httpx
import openai
import pytest

from tests.conftest import API_KEY
from tests.fakes.upstream import text
from tests.support.node_clients import node_clients, run_node

THOUGHT = "Six sevens make forty-two."


@pytest.fixture
async def gateway(make_client: Any) -> Any:
    return await make_client(api_key=API_KEY)


async def test_vercel_ai_sdk_shows_reasoning_text_and_streams_reasoning(gateway, upstream):
    folder = node_clients()
    upstream.queue(text("42.", reasoning=THOUGHT, chunk_size=5), text("42.", reasoning=THOUGHT, chunk_size=5))
    seen = await run_node(folder, "vercel_ai.mjs", str(gateway.make_url("/v1")), API_KEY)
    assert seen["text"] == "42." and seen["reasoningText"] == THOUGHT
    assert len(seen["streamedReasoning"]) > 1 and "".join(seen["streamedReasoning"]) == THOUGHT
    assert seen["streamedReasoningText"] == THOUGHT and seen["streamedText"] == "42."
    assert seen["kinds"].index("reasoning-start") < seen["kinds"].index("text-start")


async def test_langchain_openai_with_the_responses_api_shows_the_reasoning(gateway, upstream):
    from langchain_openai import ChatOpenAI

    upstream.queue(text("42.", reasoning=THOUGHT), text("42.", reasoning=THOUGHT, chunk_size=5))
    http = httpx.AsyncClient()  # ours, so that it is closed with the test (no socket left to the GC)
    # a stream of the reasoning is asked for as from OpenAI's service: as a summary
    llm = ChatOpenAI(model="agent-gateway", base_url=str(gateway.make_url("/v1")), api_key=API_KEY,
                     use_responses_api=True, max_retries=0, http_async_client=http, reasoning={"summary": "auto"})
    try:
        await _langchain_shows_the_reasoning(llm)
    finally:
        await http.aclose()


async def _langchain_shows_the_reasoning(llm: Any) -> None:
    reply = await llm.ainvoke("What is 6*7?")
    blocks = [b for b in reply.content if isinstance(b, dict)]
    reasoning = [b for b in blocks if b.get("type") == "reasoning"]
    assert [s["text"] for s in reasoning[0]["summary"]] == [THOUGHT]
    assert "".join(b.get("text", "") for b in blocks if b.get("type") == "text") == "42."
    streamed = ""
    async for chunk in llm.astream("What is 6*7?"):
        for block in chunk.content if isinstance(chunk.content, list) else []:
            if isinstance(block, dict) and block.get("type") == "reasoning":
                streamed += "".join(s.get("text", "") for s in block.get("summary", []))
    assert streamed == THOUGHT


async def test_pydantic_ai_shows_a_thinking_part(gateway, upstream):
    from pydantic_ai import Agent
    from pydantic_ai.messages import ThinkingPart
    from pydantic_ai.models.openai import OpenAIResponsesModel
    from pydantic_ai.providers.openai import OpenAIProvider

    upstream.queue(text("42.", reasoning=THOUGHT))
    async with openai.AsyncOpenAI(base_url=str(gateway.make_url("/v1")), api_key=API_KEY, max_retries=0) as client:
        agent = Agent(OpenAIResponsesModel("agent-gateway", provider=OpenAIProvider(openai_client=client)))
        result = await agent.run("What is 6*7?")
    assert result.output == "42."
    thinking = [p for m in result.all_messages() for p in getattr(m, "parts", []) if isinstance(p, ThinkingPart)]
    assert [p.content for p in thinking] == [THOUGHT]


@pytest.mark.parametrize("summary", [None, "auto"])
async def test_openai_sdk_stream_helper_gets_the_reasoning_once_and_the_final_item_has_both(gateway, upstream,
                                                                                           summary):
    upstream.queue(text("42.", reasoning=THOUGHT, chunk_size=5))
    asked = {"reasoning": {"summary": summary}} if summary else {}
    async with openai.AsyncOpenAI(base_url=str(gateway.make_url("/v1")), api_key=API_KEY, max_retries=0) as client:
        async with client.responses.stream(model="agent-gateway", input="What is 6*7?", **asked) as stream:
            deltas = [(e.type, e.delta) async for e in stream if e.type.startswith("response.reasoning")
                      and e.type.endswith(".delta")]
            final = await stream.get_final_response()
    kind = "response.reasoning_summary_text.delta" if summary else "response.reasoning_text.delta"
    assert {k for k, _ in deltas} == {kind}  # one kind of delta: a client printing both prints it once
    assert "".join(d for _, d in deltas) == THOUGHT
    [reasoning] = [item for item in final.output if item.type == "reasoning"]
    assert [s.text for s in reasoning.summary] == [THOUGHT]
    assert [c.text for c in reasoning.content or []] == [THOUGHT]
    assert final.output_text == "42."
