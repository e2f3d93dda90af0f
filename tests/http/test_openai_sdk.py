"""The official openai SDK as the client: chat, stream, models and auth errors."""

from __future__ import annotations

import openai
import pytest

from tests.conftest import API_KEY
from tests.fakes.upstream import text, tool_call


@pytest.fixture
async def sdk(make_client, lookup_tool):
    client = await make_client(tools=[lookup_tool], api_key=API_KEY)
    sdk = openai.AsyncOpenAI(base_url=str(client.make_url("/v1")), api_key=API_KEY, max_retries=0)
    yield sdk
    await sdk.close()


async def test_sdk_chat_completion(sdk, upstream):
    upstream.queue(text("Hi from the agent."))
    completion = await sdk.chat.completions.create(model="agent-gateway",
                                                   messages=[{"role": "user", "content": "hello"}])
    assert completion.choices[0].message.content == "Hi from the agent."
    assert completion.usage is not None and completion.usage.total_tokens == 15


async def test_sdk_stream_with_tool_round(sdk, upstream):
    upstream.queue(tool_call(("lookup", {"term": "sky"})), text("The sky is green."))
    stream = await sdk.chat.completions.create(
        model="agent-gateway", messages=[{"role": "user", "content": "sky?"}], stream=True,
        stream_options={"include_usage": True})
    content = []
    usage = None
    async for chunk in stream:
        if chunk.choices:
            content.append(chunk.choices[0].delta.content or "")
        if chunk.usage:
            usage = chunk.usage
    assert "".join(content) == "`🔍 sky`\n\nThe sky is green."
    assert usage is not None and usage.total_tokens == 30


async def test_sdk_models(sdk):
    models = await sdk.models.list()
    assert [m.id for m in models.data] == ["agent-gateway", "agent-gateway-deep-research"]
    assert (await sdk.models.retrieve("agent-gateway")).id == "agent-gateway"
    with pytest.raises(openai.NotFoundError):
        await sdk.models.retrieve("nope")


async def test_sdk_wrong_key_raises_authentication_error(sdk):
    bad = sdk.with_options(api_key="wrong")
    with pytest.raises(openai.AuthenticationError) as info:
        await bad.models.list()
    assert info.value.code == "invalid_api_key"


async def test_sdk_mid_stream_failure_raises_api_error(sdk, upstream):
    from tests.fakes.upstream import Reply
    upstream.queue(Reply(text="cut here please", chunk_size=3, drop_after=2))
    stream = await sdk.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}], stream=True)
    with pytest.raises(openai.APIError):
        async for _ in stream:
            pass


async def test_sdk_reads_the_reasoning_tokens_of_both_apis(sdk, upstream):
    extra = {"completion_tokens_details": {"reasoning_tokens": 4}, "prompt_tokens_details": {"cached_tokens": 2}}
    upstream.queue(tool_call(("lookup", {"term": "sky"}), reasoning="Look.", usage_extra=extra),
                   text("Green.", reasoning="Green.", usage_extra=extra))
    completion = await sdk.chat.completions.create(model="agent-gateway",
                                                   messages=[{"role": "user", "content": "sky?"}])
    assert completion.usage is not None and completion.usage.completion_tokens_details is not None
    assert completion.usage.completion_tokens_details.reasoning_tokens == 8
    assert completion.usage.prompt_tokens_details is not None
    assert completion.usage.prompt_tokens_details.cached_tokens == 4

    upstream.queue(tool_call(("lookup", {"term": "sky"}), reasoning="Look.", usage_extra=extra),
                   text("Green.", reasoning="Green.", usage_extra=extra))
    async with sdk.responses.stream(model="agent-gateway", input="sky?") as stream:
        response = await stream.get_final_response()
    assert response.usage is not None
    assert response.usage.output_tokens_details.reasoning_tokens == 8
    assert response.usage.input_tokens_details.cached_tokens == 4
