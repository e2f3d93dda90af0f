"""Token details the upstream reports (`completion_tokens_details.reasoning_tokens`,
`prompt_tokens_details.cached_tokens`), summed over the turn's rounds: Chat Completions relays them
as the upstream sent them (absent when no round reported them), the Responses API always has its
`output_tokens_details` / `input_tokens_details` (zeros when unknown)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.fakes.upstream import text, tool_call
from tests.support.helpers import chat_chunks, sse_frames

USER = [{"role": "user", "content": "sky?"}]


def details(reasoning: int, cached: int) -> dict[str, Any]:
    """A usage object's details as OpenAI, vLLM and OpenRouter send them."""
    return {"usage_extra": {"prompt_tokens_details": {"cached_tokens": cached, "audio_tokens": 0},
                            "completion_tokens_details": {"reasoning_tokens": reasoning, "audio_tokens": 0}}}


def two_rounds(upstream: Any, first: dict[str, Any], second: dict[str, Any]) -> None:
    upstream.queue(tool_call(("lookup", {"term": "sky"}), reasoning="Look it up.", **first),
                   text("Green.", reasoning="It says green.", **second))


async def chat_usage(client: Any, stream: bool) -> dict[str, Any]:
    body: dict[str, Any] = {"messages": USER, "stream": stream}
    if stream:
        body["stream_options"] = {"include_usage": True}
    resp = await client.post("/v1/chat/completions", json=body)
    assert resp.status == 200
    if not stream:
        return (await resp.json())["usage"]
    chunks = chat_chunks(await resp.text())
    assert chunks[-1]["choices"] == []  # the usage chunk comes last, after the finish chunk
    return chunks[-1]["usage"]


async def responses_usage(client: Any, stream: bool) -> dict[str, Any]:
    resp = await client.post("/v1/responses", json={"input": "sky?", "stream": stream})
    assert resp.status == 200
    if not stream:
        body = await resp.json()
        stored = await (await client.get(f"/v1/responses/{body['id']}")).json()
        assert stored["usage"] == body["usage"]
        return body["usage"]
    events = [json.loads(data) for _, data in sse_frames(await resp.text())]
    assert events[-1]["type"] == "response.completed"
    return events[-1]["response"]["usage"]


@pytest.mark.parametrize("stream", [False, True])
async def test_chat_usage_sums_reasoning_and_cached_tokens_over_the_rounds(client, upstream, stream):
    two_rounds(upstream, details(reasoning=7, cached=3), details(reasoning=5, cached=4))
    assert await chat_usage(client, stream) == {
        "prompt_tokens": 20, "completion_tokens": 10, "total_tokens": 30,
        "prompt_tokens_details": {"cached_tokens": 7}, "completion_tokens_details": {"reasoning_tokens": 12}}


@pytest.mark.parametrize("stream", [False, True])
async def test_chat_usage_has_no_details_when_the_upstream_reports_none(client, upstream, stream):
    two_rounds(upstream, {}, {})
    assert await chat_usage(client, stream) == {"prompt_tokens": 20, "completion_tokens": 10, "total_tokens": 30}


@pytest.mark.parametrize("stream", [False, True])
async def test_chat_usage_sums_the_rounds_that_reported_a_detail(client, upstream, stream):
    only_reasoning = {"usage_extra": {"completion_tokens_details": {"reasoning_tokens": 9}}}
    two_rounds(upstream, only_reasoning, {})
    usage = await chat_usage(client, stream)
    assert usage["completion_tokens_details"] == {"reasoning_tokens": 9}
    assert "prompt_tokens_details" not in usage


@pytest.mark.parametrize("bad", [None, "7", [7], {"reasoning_tokens": "7"}, {"reasoning_tokens": True},
                                 {"reasoning_tokens": -1}, {"reasoning_tokens": None}])
async def test_a_malformed_token_detail_is_skipped(client, upstream, bad):
    upstream.queue(text("Green.", usage_extra={"completion_tokens_details": bad}),
                   text("Green.", usage_extra={"completion_tokens_details": bad}))
    assert await chat_usage(client, True) == {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
    usage = await responses_usage(client, False)
    assert usage["output_tokens_details"] == {"reasoning_tokens": 0}


@pytest.mark.parametrize("stream", [False, True])
async def test_responses_usage_carries_the_summed_reasoning_and_cached_tokens(client, upstream, stream):
    two_rounds(upstream, details(reasoning=7, cached=3), details(reasoning=5, cached=4))
    assert await responses_usage(client, stream) == {
        "input_tokens": 20, "input_tokens_details": {"cached_tokens": 7, "cache_write_tokens": 0},
        "output_tokens": 10, "output_tokens_details": {"reasoning_tokens": 12}, "total_tokens": 30}


@pytest.mark.parametrize("stream", [False, True])
async def test_responses_usage_details_are_zeros_when_the_upstream_reports_none(client, upstream, stream):
    two_rounds(upstream, {}, {})
    usage = await responses_usage(client, stream)
    assert (usage["input_tokens_details"], usage["output_tokens_details"]) == (
        {"cached_tokens": 0, "cache_write_tokens": 0}, {"reasoning_tokens": 0})
