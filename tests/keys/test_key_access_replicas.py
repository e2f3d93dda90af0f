"""Per-key access and usage by day across two real `serve` replicas on one PostgreSQL database
(issue 46 items 3-4): `keys update` reaches both within 5 s, and the day's usage both wrote adds up
to what was sent through each."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest

from tests.fakes.upstream import FakeUpstream
from tests.keys.test_keys_isolation import bearer, make_key
from tests.support.gateway_process import ServerProcess, gateway_env, run_cli, start_gateway


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


class Sent:
    """What the test sent with the key: every request, and the turns that reached the model."""

    def __init__(self) -> None:
        self.requests = 0
        self.turns = 0


async def _chat(http: aiohttp.ClientSession, gateway: ServerProcess, key: str, sent: Sent) -> int:
    sent.requests += 1
    async with http.post(gateway.base_url + "/v1/chat/completions", headers=bearer(key),
                         json={"model": "agent-gateway", "messages": [{"role": "user", "content": "hi"}]}) as reply:
        if reply.status == 200:
            sent.turns += 1
        return reply.status


async def _all_answer(http: aiohttp.ClientSession, replicas: list[ServerProcess], key: str, status: int,
                      sent: Sent) -> float:
    """Seconds until every replica answers the key's turn with `status` (asserted within 5 s)."""
    started = time.monotonic()
    pending = list(replicas)
    while pending and time.monotonic() - started < 5.0:
        pending = [g for g in pending if await _chat(http, g, key, sent) != status]
        if pending:
            await asyncio.sleep(0.1)
    assert not pending, f"a replica did not answer {status} within 5 s of `keys update`"
    return time.monotonic() - started


async def test_keys_update_reaches_both_replicas_within_5_s_and_their_usage_by_day_adds_up(
        tmp_path: Path, upstream: FakeUpstream, postgres_url: str, http: aiohttp.ClientSession) -> None:
    def env(name: str) -> dict[str, str]:
        return gateway_env(tmp_path / name, {"LLM_BASE_URL": upstream.base_url, "LLM_MODEL": "fake-model",
                                             "API_SERVER_DATABASE_URL": postgres_url})

    key = await make_key(Path("."), "team", env=env("cli"))
    sent = Sent()
    replicas = list(await asyncio.gather(start_gateway(env=env("a")), start_gateway(env=env("b"))))
    try:
        for gateway in (*replicas, replicas[0]):
            assert await _chat(http, gateway, key, sent) == 200
        code, out, err = await run_cli("keys", "update", "team", "--models", "elsewhere", "--rpm", "1000",
                                       env=env("cli"))
        assert code == 0, err
        await _all_answer(http, replicas, key, 404, sent)
        code, out, err = await run_cli("keys", "show", "team", env=env("cli"))
        assert code == 0 and "elsewhere" in out and "1000" in out and key not in out, out
        code, _, err = await run_cli("keys", "update", "team", "--models", "all", env=env("cli"))
        assert code == 0, err
        await _all_answer(http, replicas, key, 200, sent)
        assert await _chat(http, replicas[1], key, sent) == 200
    finally:
        await asyncio.gather(*(g.stop() for g in replicas))  # each writes what it counted since its last write
    code, out, err = await run_cli("keys", "usage", "team", "--days", "1", env=env("cli"))
    assert code == 0, err
    header, row = out.splitlines()
    assert header.split()[:4] == ["DAY", "NAME", "REQUESTS", "INPUT"], header
    cells = row.split()
    assert cells[0] == time.strftime("%Y-%m-%d", time.gmtime()) and cells[1] == "team", out
    assert int(cells[2]) == sent.requests, (out, sent.requests)  # REQUESTS: both replicas' add up
    assert int(cells[5]) == sent.turns == len(upstream.requests), out  # MODEL CALLS
    assert int(cells[3]) > 0 and int(cells[4]) > 0, out  # tokens in and out
    code, _, err = await run_cli("keys", "update", "nobody", "--no-web", env=env("cli"))
    assert code == 1 and "no active key" in err
