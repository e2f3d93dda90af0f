"""The official openai SDK reads every item and event of a research run: streamed (with the
`responses.stream()` helper's checks), in the background (create, resume the stream, retrieve), and
on Chat Completions."""

from __future__ import annotations

from typing import Any

import openai
import pytest
from openai.types.responses import (
    ResponseFunctionWebSearch,
    ResponseOutputMessage,
    ResponseReasoningItem,
)
from openai.types.responses.response_output_text import AnnotationURLCitation

from tests.agent.research.site import QUESTION, MiniWeb, StageModel

RESEARCH_ID = "agent-gateway-deep-research"


@pytest.fixture
async def sdk(research_client: Any) -> Any:
    client = await research_client()
    sdk = openai.AsyncOpenAI(base_url=str(client.make_url("/v1")), api_key="unused", max_retries=0)
    yield sdk
    await sdk.close()


def check_output(output: list[Any], web: MiniWeb) -> None:
    kinds = [next(k for k in (ResponseReasoningItem, ResponseFunctionWebSearch, ResponseOutputMessage)
                  if isinstance(item, k)) for item in output]  # the stream helper's Parsed* are subclasses
    assert set(kinds) == {ResponseReasoningItem, ResponseFunctionWebSearch, ResponseOutputMessage}
    actions = [item.action.type for item in output if isinstance(item, ResponseFunctionWebSearch)]
    assert "search" in actions and "open_page" in actions
    searches = [item.action for item in output if isinstance(item, ResponseFunctionWebSearch)
                and item.action.type == "search"]
    assert all(action.query for action in searches)
    [message] = [item for item in output if isinstance(item, ResponseOutputMessage)]
    annotations = message.content[0].annotations  # type: ignore[union-attr]
    assert annotations and all(isinstance(a, AnnotationURLCitation) for a in annotations)
    assert {a.url for a in annotations} <= {f"{web.base_url}/page/{slug}" for slug in web.page_reads}


async def test_the_sdk_stream_helper_reads_every_event_of_a_research_run(sdk: Any, web: MiniWeb, model: StageModel):
    seen: list[str] = []
    async with sdk.responses.stream(model=RESEARCH_ID, input=QUESTION) as stream:
        async for event in stream:
            seen.append(event.type)
        final = await stream.get_final_response()
    assert seen[0] == "response.created" and seen[-1] == "response.completed"
    for kind in ("response.reasoning_text.delta", "response.web_search_call.searching",
                 "response.web_search_call.completed", "response.output_text.annotation.added",
                 "response.output_text.delta"):
        assert kind in seen, kind
    check_output(final.output, web)
    assert final.model == RESEARCH_ID and "Tomas Varga" in final.output_text
    assert final.usage is not None and final.usage.total_tokens > 0


async def test_a_background_research_run_is_created_resumed_and_retrieved_with_the_sdk(sdk: Any, web: MiniWeb,
                                                                                     model: StageModel):
    created = await sdk.responses.create(model=RESEARCH_ID, input=QUESTION, background=True)
    assert created.background is True and created.status in ("queued", "in_progress")
    resumed = await sdk.responses.retrieve(created.id, stream=True, starting_after=1)
    numbers = []
    async for event in resumed:
        numbers.append(event.sequence_number)
    assert numbers[0] == 2 and numbers == sorted(numbers)
    done = await sdk.responses.retrieve(created.id)
    assert done.status == "completed" and "Tomas Varga" in done.output_text
    check_output(done.output, web)


async def test_the_sdk_reads_a_research_chat_completion_with_its_annotations(sdk: Any, web: MiniWeb,
                                                                             model: StageModel):
    completion = await sdk.chat.completions.create(model=RESEARCH_ID, messages=[{"role": "user", "content": QUESTION}])
    message = completion.choices[0].message
    assert completion.model == RESEARCH_ID and "Tomas Varga" in (message.content or "")
    assert message.annotations and all(a.type == "url_citation" for a in message.annotations)
    assert getattr(message, "reasoning_content", "").startswith("Research brief:")
