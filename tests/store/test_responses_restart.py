"""Stored responses and conversations survive a restart of the gateway process on the same home."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from openai import AsyncOpenAI

from tests.fakes.upstream import text
from tests.support.gateway_process import gateway_env, start_gateway


async def test_a_restarted_gateway_still_knows_responses_and_conversations(tmp_path: Path, upstream: Any) -> None:
    upstream.queue(text("A1"), text("A2"))
    env = gateway_env(tmp_path, {"LLM_BASE_URL": upstream.base_url, "LLM_MODEL": "fake-model"})
    gateway = await start_gateway(env=env)
    try:
        async with AsyncOpenAI(base_url=gateway.base_url + "/v1", api_key="unused", max_retries=0) as sdk:
            first = await sdk.responses.create(model="m", input="Q1", conversation="chat")
    finally:
        assert await gateway.stop() == 0

    gateway = await start_gateway(env=env)
    try:
        async with AsyncOpenAI(base_url=gateway.base_url + "/v1", api_key="unused", max_retries=0) as sdk:
            again = await sdk.responses.retrieve(first.id)
            assert again.output_text == "A1"
            await sdk.responses.create(model="m", input="Q2", conversation="chat")
    finally:
        assert await gateway.stop() == 0
    sent = upstream.requests[-1]["messages"][1:]
    assert [(m["role"], m["content"]) for m in sent] == [("user", "Q1"), ("assistant", "A1"), ("user", "Q2")]
