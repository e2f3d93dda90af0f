"""The official openai SDK parses reasoning and citations: typed chat annotations, a Responses
stream that runs to its end with annotations and reasoning items on the final response."""

from __future__ import annotations

from typing import Any

import openai
import pytest

from tests.conftest import API_KEY
from tests.fakes.searxng import FakeSearxng, searxng_server  # noqa: F401
from tests.fakes.upstream import text, tool_call

ANSWER = "Otters eat fish [Result 1](https://example.org/1) and crabs (https://example.org/2)."


@pytest.fixture
async def sdk(make_client, searxng_server: FakeSearxng) -> Any:  # noqa: F811
    client = await make_client(api_key=API_KEY, env={"SEARXNG_URL": searxng_server.base_url})
    sdk = openai.AsyncOpenAI(base_url=str(client.make_url("/v1")), api_key=API_KEY, max_retries=0)
    yield sdk
    await sdk.close()


def search_then_answer(upstream: Any) -> None:
    upstream.queue(tool_call(("web_search", {"query": "otter diet"}), reasoning="Search first."),
                   text(ANSWER, reasoning="Cite both."))


async def test_sdk_chat_completion_has_typed_annotations(sdk, upstream):
    search_then_answer(upstream)
    completion = await sdk.chat.completions.create(model="m", messages=[{"role": "user", "content": "otters?"}])
    message = completion.choices[0].message
    assert message.annotations is not None
    first, second = message.annotations
    assert first.type == "url_citation" and first.url_citation.url == "https://example.org/1"
    assert first.url_citation.title == "Result 1 for otter diet"
    content = message.content or ""
    assert content[first.url_citation.start_index:first.url_citation.end_index] == \
        "[Result 1](https://example.org/1)"
    assert content[second.url_citation.start_index:second.url_citation.end_index] == "https://example.org/2"
    assert getattr(message, "reasoning_content", None) == "Search first.\n\nCite both."


async def test_sdk_chat_stream_parses_reasoning_and_the_finish_chunks_annotations(sdk, upstream):
    search_then_answer(upstream)
    stream = await sdk.chat.completions.create(model="m", messages=[{"role": "user", "content": "otters?"}],
                                               stream=True)
    reasoning, annotations = [], []
    async for chunk in stream:
        delta = chunk.choices[0].delta
        reasoning.append(getattr(delta, "reasoning_content", None) or "")
        if chunk.choices[0].finish_reason:
            annotations = getattr(delta, "annotations", None) or []  # an extra field on ChoiceDelta
    assert "".join(reasoning) == "Search first.\n\nCite both."
    assert [a["url_citation"]["url"] for a in annotations] == ["https://example.org/1", "https://example.org/2"]


async def test_sdk_responses_stream_runs_to_the_end_with_annotations_and_reasoning_items(sdk, upstream):
    search_then_answer(upstream)
    kinds = []
    async with sdk.responses.stream(model="m", input="otters?") as stream:
        async for event in stream:
            kinds.append(event.type)
        final = await stream.get_final_response()
    assert "response.output_text.annotation.added" in kinds and "response.reasoning_text.delta" in kinds
    assert [item.type for item in final.output] == [
        "reasoning", "web_search_call", "reasoning", "message"]
    first_reasoning = final.output[0]
    assert first_reasoning.type == "reasoning" and first_reasoning.content is not None
    assert first_reasoning.content[0].text == "Search first."
    message = final.output[-1]
    assert message.type == "message"
    part = message.content[0]
    assert part.type == "output_text"
    assert [(a.type, a.url) for a in part.annotations] == [
        ("url_citation", "https://example.org/1"), ("url_citation", "https://example.org/2")]
    annotation = part.annotations[0]
    assert annotation.type == "url_citation"
    assert part.text[annotation.start_index:annotation.end_index] == "[Result 1](https://example.org/1)"
    assert final.output_text == ANSWER


async def test_sdk_responses_create_and_retrieve_parse_reasoning_items(sdk, upstream):
    upstream.queue(text("42.", reasoning="Six sevens."))
    created = await sdk.responses.create(model="m", input="6*7?")
    again = await sdk.responses.retrieve(created.id)
    for response in (created, again):
        reasoning = response.output[0]
        assert reasoning.type == "reasoning" and reasoning.id.startswith("rs_")
        assert reasoning.content is not None and reasoning.content[0].text == "Six sevens."
        assert response.output_text == "42."
