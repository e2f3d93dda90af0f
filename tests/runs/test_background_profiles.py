"""Two profiles on one PostgreSQL database, each a real `serve` process (issue 42, High 1): a
background response queued by one profile is never claimed by the other's replica, whose slots
are free; it waits for its own profile, runs there and stays its owner's."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.conftest import API_KEY
from tests.fakes.upstream import FakeUpstream, Reply
from tests.support.gateway_process import ServerProcess, gateway_env, run_cli, start_gateway

AUTH = {"Authorization": f"Bearer {API_KEY}"}
ENDED = {"completed", "failed", "incomplete", "cancelled"}


@pytest.fixture
async def profiles(tmp_path: Path, upstream: FakeUpstream, postgres_url: str) -> AsyncIterator[list[ServerProcess]]:
    env = gateway_env(tmp_path, {"LLM_BASE_URL": upstream.base_url, "LLM_MODEL": "fake-model",
                                 "API_SERVER_KEY": API_KEY, "API_SERVER_DATABASE_URL": postgres_url,
                                 "API_SERVER_MAX_CONCURRENT_RUNS": "1"})
    for name in ("alpha", "beta"):
        code, _, err = await run_cli("profile", "create", name, env=env)
        assert code == 0, err
    started = list(await asyncio.gather(*(start_gateway("-p", name, env=env) for name in ("alpha", "beta"))))
    for gateway in started:
        gateway.keep_draining()
    yield started
    await asyncio.gather(*(gateway.stop() for gateway in started))


async def _create(http: aiohttp.ClientSession, gateway: ServerProcess, text: str) -> dict[str, Any]:
    async with http.post(gateway.base_url + "/v1/responses", headers=AUTH,
                         json={"model": "m", "input": text, "background": True}) as reply:
        assert reply.status == 200, await reply.text()
        return dict(await reply.json())


async def _get(http: aiohttp.ClientSession, gateway: ServerProcess, response_id: str) -> tuple[int, dict[str, Any]]:
    async with http.get(f"{gateway.base_url}/v1/responses/{response_id}", headers=AUTH) as reply:
        return reply.status, dict(await reply.json())


async def test_a_run_queued_by_one_profile_is_never_claimed_by_another_profiles_replica(
        profiles: list[ServerProcess], upstream: FakeUpstream) -> None:
    alpha, beta = profiles
    upstream.queue(Reply(text="alpha is busy", endless=True, chunk_delay=0.05),
                   Reply(text="alpha's queued answer", chunk_size=4, chunk_delay=0.02))
    async with aiohttp.ClientSession() as http:
        busy = await _create(http, alpha, "keep the slot")
        async with asyncio.timeout(20):
            while not upstream.requests:
                await asyncio.sleep(0.02)
        queued = await _create(http, alpha, "alpha's private question")
        assert queued["status"] == "queued"
        # beta's slot is free and it hears the queue's notification at once: give it time to claim
        await asyncio.sleep(3)
        assert len(upstream.requests) == 1  # nobody ran the queued one
        assert (await _get(http, beta, queued["id"]))[0] == 404
        status, still = await _get(http, alpha, queued["id"])
        assert (status, still["status"]) == (200, "queued")
        async with http.post(f"{alpha.base_url}/v1/responses/{busy['id']}/cancel", headers=AUTH) as reply:
            assert reply.status == 200
        async with asyncio.timeout(30):
            while (done := await _get(http, alpha, queued["id"]))[1].get("status") not in ENDED:
                await asyncio.sleep(0.1)
        assert done == (200, done[1]) and done[1]["status"] == "completed", done
        assert done[1]["output"][0]["content"][0]["text"] == "alpha's queued answer"
        assert (await _get(http, beta, queued["id"]))[0] == 404
