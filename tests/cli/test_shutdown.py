"""Graceful shutdown of a real `serve` process: a stream in flight finishes, new requests get 503."""

from __future__ import annotations

import asyncio

import aiohttp

from tests.fakes.upstream import Reply
from tests.support.gateway_process import gateway_env, start_gateway
from tests.support.helpers import chat_chunks, streamed_text

ANSWER = "This answer streams slowly, chunk by chunk, across the shutdown."


async def test_sigterm_lets_a_stream_finish_while_new_requests_get_503(tmp_path, upstream):
    env = gateway_env(tmp_path, {"LLM_BASE_URL": upstream.base_url, "LLM_MODEL": "fake-model",
                                 "API_SERVER_SHUTDOWN_GRACE": "10"})
    gateway = await start_gateway(env=env)
    upstream.queue(Reply(text=ANSWER, chunk_size=8, chunk_delay=0.15))  # about 1.2 s of streaming
    try:
        async with aiohttp.ClientSession() as session:
            stream = await session.post(
                gateway.base_url + "/v1/chat/completions",
                json={"messages": [{"role": "user", "content": "hi"}], "stream": True},
                headers={"X-Request-Id": "stream-across-shutdown"})
            assert stream.status == 200
            first = await stream.content.readline()  # the stream is really under way
            assert first.startswith(b"data: ")

            gateway.proc.terminate()
            await asyncio.sleep(0.3)
            async with session.post(gateway.base_url + "/v1/chat/completions",
                                    json={"messages": [{"role": "user", "content": "new"}]}) as refused:
                assert refused.status == 503
                assert refused.headers["Retry-After"] == "1"
                assert refused.headers["X-Request-Id"]
                assert (await refused.json())["error"]["code"] == "service_unavailable"

            rest = (first + await stream.read()).decode()
            chunks = chat_chunks(rest)  # asserts the stream ended with data: [DONE]
            assert streamed_text(chunks) == ANSWER
            assert chunks[-1]["choices"][0]["finish_reason"] == "stop"
        assert await asyncio.wait_for(gateway.proc.wait(), 15) == 0
    finally:
        await gateway.kill()
    assert len(upstream.requests) == 1  # the refused request never reached the model
    assert gateway.proc.stderr is not None
    log = (await gateway.proc.stderr.read()).decode()
    # the access line of the stream, written when it ended, carries its id in the log format too
    assert "[stream-across-shutdown] POST /v1/chat/completions 200" in log
