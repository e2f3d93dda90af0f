"""A key's limits behind two real `serve` replicas on one PostgreSQL database (issue 46): requests
per minute, concurrent runs, tokens per minute and a token budget hold across both, and the
headers' figures are the database's."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import aiohttp
import asyncpg
import pytest

from tests.fakes.upstream import FakeUpstream, Reply
from tests.keys.test_keys_isolation import bearer, make_key
from tests.support.gateway_process import ServerProcess, gateway_env, start_gateway

CHAT = {"model": "fake-model", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 10}


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:
        yield session


@pytest.fixture
def env_of(tmp_path: Path, upstream: FakeUpstream, postgres_url: str) -> Callable[[str], dict[str, str]]:
    def env(name: str) -> dict[str, str]:
        return gateway_env(tmp_path / name, {"LLM_BASE_URL": upstream.base_url, "LLM_MODEL": "fake-model",
                                             "API_SERVER_DATABASE_URL": postgres_url})
    return env


@pytest.fixture
async def replicas(env_of: Callable[[str], dict[str, str]]) -> AsyncIterator[list[ServerProcess]]:
    started = list(await asyncio.gather(start_gateway(env=env_of("a")), start_gateway(env=env_of("b"))))
    try:
        yield started
    finally:
        await asyncio.gather(*(g.stop() for g in started))


async def _key(env_of: Callable[[str], dict[str, str]], name: str, *options: str) -> str:
    key = await make_key(Path("."), name, *options, env=env_of("cli"))
    await asyncio.sleep(2.5)  # every replica reads new keys within its refresh (2 s)
    return key


async def _chat(http: aiohttp.ClientSession, gateway: ServerProcess, key: str) -> tuple[int, Any, Any]:
    async with http.post(gateway.base_url + "/v1/chat/completions", json=CHAT, headers=bearer(key)) as reply:
        return reply.status, reply.headers, await reply.json()


@pytest.mark.slow
@pytest.mark.timeout(240)
async def test_rpm_30_hammered_through_two_replicas_for_70_s_admits_at_most_32_in_any_minute(
        env_of: Callable[[str], dict[str, str]], replicas: list[ServerProcess], http: aiohttp.ClientSession) -> None:
    key = await _key(env_of, "hammer", "--rpm", "30")
    admitted: list[float] = []
    refused = 0
    end = time.monotonic() + 70

    async def hammer(gateway: ServerProcess) -> None:
        nonlocal refused
        while time.monotonic() < end:
            status, headers, body = await _chat(http, gateway, key)
            if status == 200:
                admitted.append(time.monotonic())
            else:
                assert status == 429 and body["error"]["code"] == "rate_limit_exceeded", body
                assert 1 <= int(headers["Retry-After"]) <= 60
                refused += 1
            await asyncio.sleep(0.05)

    await asyncio.gather(*(hammer(g) for g in replicas for _ in range(2)))
    admitted.sort()
    most = max(sum(1 for t in admitted if start <= t < start + 60) for start in admitted)
    assert most <= 32, f"{most} admitted within one minute"
    assert len(admitted) > 32 and refused > 100  # the minute slid on: more were admitted once it had


async def test_concurrency_1_holds_across_replicas_and_a_finished_run_frees_it_at_once(
        env_of: Callable[[str], dict[str, str]], replicas: list[ServerProcess], upstream: FakeUpstream,
        http: aiohttp.ClientSession) -> None:
    key = await _key(env_of, "single", "--max-concurrent", "1")
    upstream.queue(Reply(delay=1.5))
    slow = asyncio.ensure_future(_chat(http, replicas[0], key))
    await asyncio.sleep(0.5)
    status, headers, body = await _chat(http, replicas[1], key)
    assert status == 429 and "runs in progress" in body["error"]["message"] and headers["Retry-After"] == "1"
    assert (await slow)[0] == 200
    for gateway in (replicas[1], replicas[0], replicas[1]):  # one after another, on either: never refused
        assert (await _chat(http, gateway, key))[0] == 200


async def _minute_tokens(url: str, name: str) -> tuple[int, int]:
    conn: Any = await asyncpg.connect(url)
    try:
        row = await conn.fetchrow("SELECT coalesce(sum(tokens), 0), count(*) FROM key_admissions WHERE name = $1", name)
        return int(row[0]), int(row[1])
    finally:
        await conn.close()


async def _budget_tokens(url: str, name: str) -> int:
    conn: Any = await asyncpg.connect(url)
    try:
        return int(await conn.fetchval("SELECT coalesce(sum(tokens), 0) FROM key_budgets WHERE name = $1", name))
    finally:
        await conn.close()


async def test_tpm_across_replicas_refuses_after_the_crossing_request_and_headers_agree_with_the_store(
        env_of: Callable[[str], dict[str, str]], replicas: list[ServerProcess], upstream: FakeUpstream,
        http: aiohttp.ClientSession, postgres_url: str) -> None:
    key = await _key(env_of, "tokens", "--tpm", "1500")
    # a streamed run whose upstream is slow: its headers are read while its reservation stands
    upstream.queue(Reply(delay=1.0))
    async with http.post(replicas[0].base_url + "/v1/chat/completions", json={**CHAT, "stream": True},
                         headers=bearer(key)) as reply:
        assert reply.status == 200
        used, rows = await _minute_tokens(postgres_url, "tokens")
        assert rows == 1 and reply.headers["x-ratelimit-limit-tokens"] == "1500"
        assert int(reply.headers["x-ratelimit-remaining-tokens"]) == 1500 - used
        assert reply.headers["x-ratelimit-reset-tokens"].endswith("s")
        await reply.read()
    estimate = used  # the input's estimate + max_tokens + the agent's reserve: over 1000, under 1500
    assert 1000 < estimate < 1500
    status, headers, _ = await _chat(http, replicas[1], key)  # under the limit when it came: it crosses it
    assert status == 200
    status, headers, body = await _chat(http, replicas[0], key)
    assert status == 429 and body["error"]["type"] == "tokens" and body["error"]["code"] == "rate_limit_exceeded"
    assert 1 <= int(headers["Retry-After"]) <= 60 and headers["x-ratelimit-remaining-tokens"] == "0"
    await asyncio.sleep(3)  # each replica corrects its runs' reservations to what the upstream reported
    used, rows = await _minute_tokens(postgres_url, "tokens")
    assert (used, rows) == (2 * 15, 2)  # 10 + 5 per run, as the fake upstream reports
    status, headers, _ = await _chat(http, replicas[1], key)
    assert status == 200 and int(headers["x-ratelimit-remaining-tokens"]) == 1500 - 30 - estimate


async def test_a_small_token_budget_across_replicas_refuses_the_run_after_the_one_that_spent_it(
        env_of: Callable[[str], dict[str, str]], replicas: list[ServerProcess], http: aiohttp.ClientSession,
        postgres_url: str) -> None:
    key = await _key(env_of, "budget", "--token-budget", "40", "--budget-period", "1d")
    statuses = []
    for turn in range(4):
        status, headers, body = await _chat(http, replicas[turn % 2], key)
        statuses.append(status)
        if status == 429:
            assert body["error"]["type"] == "insufficient_quota" and body["error"]["code"] == "insufficient_quota"
            assert "resets at" in body["error"]["message"] and headers["x-ratelimit-remaining-tokens"] == "0"
        await asyncio.sleep(2.5)  # its reservation corrected to the 15 tokens it used
    assert statuses == [200, 200, 200, 429]  # 0, 15, 30 used when they came; 45 of 40 when the last did
    assert await _budget_tokens(postgres_url, "budget") == 45


async def test_stored_bytes_quota_holds_when_two_replicas_store_at_once(
        tmp_path: Path, upstream: FakeUpstream, postgres_url: str, http: aiohttp.ClientSession) -> None:
    def env(name: str) -> dict[str, str]:
        return gateway_env(tmp_path / name, {"LLM_BASE_URL": upstream.base_url, "LLM_MODEL": "fake-model",
                                             "API_SERVER_DATABASE_URL": postgres_url,
                                             "LLM_CONTEXT_WINDOW": "10000000"})

    key = await make_key(Path("."), "small", "--max-stored-mb", "1", env=env("cli"))
    gateways = list(await asyncio.gather(start_gateway(env=env("a")), start_gateway(env=env("b"))))
    try:
        upstream.queue(Reply(delay=1.0), Reply(delay=1.0))  # both runs in flight, neither stored yet
        big = "x" * 300_000  # kept twice (input items and the turn's messages): ~600 kB a record

        async def store(gateway: ServerProcess) -> tuple[int, Any]:
            async with http.post(gateway.base_url + "/v1/responses", json={"model": "m", "input": big},
                                 headers=bearer(key)) as reply:
                return reply.status, await reply.json()

        answers = await asyncio.gather(*(store(g) for g in gateways))
        assert sorted(status for status, _ in answers) == [200, 429], answers
        refused = next(body for status, body in answers if status == 429)
        assert refused["error"]["code"] == "insufficient_quota"
    finally:
        await asyncio.gather(*(g.stop() for g in gateways))
