"""Images a client sends to a model route that reads none (issue 47 item 3): the upstream gets a short
note in each image's place rather than an image it would refuse with a 400, and the client is told in
the `X-Agent-Gateway-Warning` header; a vision route gets the image as sent."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from openai import AsyncOpenAI

from gateway.config.settings import OPTIONS_BY_KEY, Settings, parse_option
from gateway.http.app import create_app
from gateway.http.client_notes import HEADER
from gateway.wire.images import IMAGE_NOTE
from tests.fakes.upstream import FakeUpstream, text
from tests.support.documents import data_url, png

PICTURE = data_url(png(4, 4), "image/png")


@pytest.fixture
def routed(aiohttp_client: Any, make_settings: Callable[..., Settings], upstream: FakeUpstream) -> Any:
    async def make() -> Any:
        models = parse_option(OPTIONS_BY_KEY["models"], {
            "blind": {"model": "fake-model", "base_url": upstream.base_url, "vision": False},
            "eyes": {"model": "fake-model", "base_url": upstream.base_url, "vision": True}}, "config.yaml")
        return await aiohttp_client(create_app(make_settings(llm_models=models), tools=[]))
    return make


def _responses_input() -> list[dict[str, Any]]:
    return [{"role": "user", "content": [{"type": "input_text", "text": "What is this?"},
                                         {"type": "input_image", "image_url": PICTURE, "detail": "low"}]}]


def _chat_messages() -> list[dict[str, Any]]:
    return [{"role": "user", "content": [{"type": "text", "text": "What is this?"},
                                         {"type": "image_url", "image_url": {"url": PICTURE}}]}]


@pytest.mark.parametrize("api", ["responses", "chat"])
async def test_an_image_to_a_text_route_is_a_note_and_the_client_is_warned(routed: Any, upstream: FakeUpstream,
                                                                           api: str) -> None:
    client = await routed()
    upstream.queue(text("I cannot see it."))
    async with AsyncOpenAI(base_url=str(client.make_url("/v1")), api_key="unused", max_retries=0) as sdk:
        if api == "responses":
            raw = await sdk.responses.with_raw_response.create(model="blind", input=_responses_input())  # type: ignore[arg-type]
        else:
            raw = await sdk.chat.completions.with_raw_response.create(model="blind", messages=_chat_messages())  # type: ignore[arg-type]
    assert raw.status_code == 200
    warning = raw.headers[HEADER]
    assert "1 image was replaced by a note" in warning and "'blind'" in warning and "vision: true" in warning
    sent = upstream.requests[-1]
    assert PICTURE not in json.dumps(sent)
    user = [m for m in sent["messages"] if m["role"] == "user"][-1]
    assert user["content"] == f"What is this?\n\n{IMAGE_NOTE}"


async def test_a_streamed_turn_carries_the_warning_too(routed: Any, upstream: FakeUpstream) -> None:
    client = await routed()
    upstream.queue(text("No."))
    reply = await client.post("/v1/responses", json={"model": "blind", "input": _responses_input(), "stream": True})
    assert reply.status == 200 and HEADER in reply.headers
    await reply.read()


@pytest.mark.parametrize("api", ["responses", "chat"])
async def test_an_image_to_a_vision_route_arrives_as_image_url_with_no_warning(routed: Any, upstream: FakeUpstream,
                                                                               api: str) -> None:
    client = await routed()
    upstream.queue(text("A square."))
    if api == "responses":
        reply = await client.post("/v1/responses", json={"model": "eyes", "input": _responses_input()})
    else:
        reply = await client.post("/v1/chat/completions", json={"model": "eyes", "messages": _chat_messages()})
    assert reply.status == 200, await reply.text()
    assert HEADER not in reply.headers
    user = [m for m in upstream.requests[-1]["messages"] if m["role"] == "user"][-1]
    assert {"type": "image_url", "image_url": {"url": PICTURE, **({"detail": "low"} if api == "responses" else {})}} \
        in user["content"]


async def test_an_earlier_turns_image_is_a_note_when_the_next_turn_goes_to_a_text_route(
        routed: Any, upstream: FakeUpstream) -> None:
    client = await routed()
    upstream.queue(text("A square."), text("Still a square."))
    first = await (await client.post("/v1/responses", json={"model": "eyes", "input": _responses_input()})).json()
    reply = await client.post("/v1/responses", json={"model": "blind", "input": "And now?",
                                                     "previous_response_id": first["id"]})
    assert reply.status == 200 and HEADER in reply.headers
    assert PICTURE not in json.dumps(upstream.requests[-1])
