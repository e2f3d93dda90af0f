"""API keys across real processes (issue 27): the CLI on SQLite and on PostgreSQL, the key kept
nowhere as text, revocation seen by running gateways (two replicas on one database) within 5 s,
and two profiles on one PostgreSQL database that never see each other's objects."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import asyncpg
import pytest

from tests.fakes.upstream import FakeUpstream
from tests.keys.test_keys_isolation import bearer, make_key
from tests.support.gateway_process import ServerProcess, gateway_env, run_cli, start_gateway


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


async def _status(http: aiohttp.ClientSession, gateway: ServerProcess, key: str) -> int:
    async with http.get(gateway.base_url + "/v1/models", headers=bearer(key)) as reply:
        return reply.status


async def _refused_within_5_s(http: aiohttp.ClientSession, gateways: list[ServerProcess], key: str) -> None:
    deadline = time.monotonic() + 5.0
    pending = list(gateways)
    while pending and time.monotonic() < deadline:
        pending = [g for g in pending if await _status(http, g, key) != 401]
        await asyncio.sleep(0.1)
    assert not pending, "a revoked key was still accepted 5 s after `keys revoke`"


async def _cli_round(env: dict[str, str]) -> str:
    key = await make_key(Path("."), "carol", "--rpm", "60", "--expires-days", "30", env=env)
    code, _, err = await run_cli("keys", "create", "carol", env=env)
    assert code == 1 and "already exists" in err
    code, out, _ = await run_cli("keys", "list", env=env)
    assert code == 0 and "carol" in out and "active" in out and key not in out
    code, out, _ = await run_cli("keys", "usage", env=env)
    assert code == 0 and "carol" in out and key not in out
    return key


async def test_cli_on_sqlite_the_key_works_is_kept_only_as_a_hash_and_revocation_reaches_the_gateway(
        tmp_path: Path, upstream: FakeUpstream, http: aiohttp.ClientSession) -> None:
    env = gateway_env(tmp_path, {"LLM_BASE_URL": upstream.base_url, "LLM_MODEL": "fake-model"})
    key = await _cli_round(env)
    gateway = await start_gateway(env=env)
    try:
        assert await _status(http, gateway, key) == 200
        assert await _status(http, gateway, "agk_wrong") == 401
        async with http.post(gateway.base_url + "/v1/responses", json={"model": "m", "input": "hi"},
                             headers=bearer(key)) as reply:
            assert reply.status == 200
        code, out, _ = await run_cli("keys", "revoke", "carol", env=env)
        assert code == 0, out
        await _refused_within_5_s(http, [gateway], key)
        code, out, _ = await run_cli("keys", "list", env=env)
        assert "revoked" in out
        code, _, err = await run_cli("keys", "revoke", "carol", env=env)
        assert code == 1 and "no active key" in err
    finally:
        await gateway.stop()
    stored = b"".join(path.read_bytes() for path in tmp_path.rglob("responses.db*"))
    assert b"api_keys" in stored and key.encode() not in stored and key[4:].encode() not in stored


async def _all_rows(url: str) -> str:
    conn: Any = await asyncpg.connect(url)
    try:
        tables = await conn.fetch("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
        return "\n".join([str(await conn.fetch(f'SELECT * FROM "{t["tablename"]}"')) for t in tables])
    finally:
        await conn.close()


async def test_cli_on_postgres_two_replicas_refuse_a_revoked_key_within_5_s(
        tmp_path: Path, upstream: FakeUpstream, postgres_url: str, http: aiohttp.ClientSession) -> None:
    def env(name: str) -> dict[str, str]:
        return gateway_env(tmp_path / name, {"LLM_BASE_URL": upstream.base_url, "LLM_MODEL": "fake-model",
                                             "API_SERVER_DATABASE_URL": postgres_url})

    key = await _cli_round(env("cli"))
    replicas = list(await asyncio.gather(start_gateway(env=env("a")), start_gateway(env=env("b"))))
    try:
        assert [await _status(http, g, key) for g in replicas] == [200, 200]
        async with http.post(replicas[0].base_url + "/v1/responses", json={"model": "m", "input": "hi"},
                             headers=bearer(key)) as reply:
            assert reply.status == 200
            stored_id = (await reply.json())["id"]
        async with http.get(f"{replicas[1].base_url}/v1/responses/{stored_id}", headers=bearer(key)) as reply:
            assert reply.status == 200  # the same owner on every replica
        code, out, err = await run_cli("keys", "revoke", "carol", env=env("cli"))
        assert code == 0, err
        await _refused_within_5_s(http, replicas, key)
    finally:
        await asyncio.gather(*(g.stop() for g in replicas))
    code, out, _ = await run_cli("keys", "usage", "carol", env=env("cli"))
    assert code == 0 and out.splitlines()[1].split()[3] == "1", out  # one model call, written at stop
    rows = await _all_rows(postgres_url)
    assert "carol" in rows and key not in rows and key[4:] not in rows


async def test_two_profiles_on_one_postgres_database_never_see_each_other(
        tmp_path: Path, upstream: FakeUpstream, postgres_url: str, http: aiohttp.ClientSession) -> None:
    env = gateway_env(tmp_path, {"LLM_BASE_URL": upstream.base_url, "LLM_MODEL": "fake-model",
                                 "API_SERVER_DATABASE_URL": postgres_url})
    keys: dict[str, str] = {}
    for profile in ("alice", "bob"):
        code, _, err = await run_cli("profile", "create", profile, "--no-key", env=env)
        assert code == 0, err
        # the same key name in both profiles: two keys, two owners
        code, out, err = await run_cli("-p", profile, "keys", "create", "team", env=env)
        assert code == 0, err
        keys[profile] = out.strip()
    gateways = {p: await start_gateway("-p", p, env=env) for p in ("alice", "bob")}
    try:
        made: dict[str, str] = {}
        for profile, gateway in gateways.items():
            async with http.post(gateway.base_url + "/v1/responses", headers=bearer(keys[profile]),
                                 json={"model": "m", "input": f"{profile} secret", "conversation": "notes"}) as reply:
                assert reply.status == 200, await reply.text()
                made[profile] = (await reply.json())["id"]
        assert "alice secret" not in str(upstream.requests[-1]["messages"])  # bob's notes started fresh
        for me, other in (("alice", "bob"), ("bob", "alice")):
            gateway = gateways[me]
            assert await _status(http, gateway, keys[other]) == 401  # another profile's key is no key here
            for method, path in (("GET", "/v1/responses/{}"), ("GET", "/v1/responses/{}/input_items"),
                                 ("DELETE", "/v1/responses/{}")):
                async with http.request(method, gateway.base_url + path.format(made[other]),
                                        headers=bearer(keys[me])) as reply:
                    assert reply.status == 404, (me, method, path)
            async with http.get(gateway.base_url + f"/v1/responses/{made[me]}", headers=bearer(keys[me])) as reply:
                assert reply.status == 200
        code, out, _ = await run_cli("-p", "alice", "keys", "list", env=env)
        assert "team" in out and keys["alice"] not in out and keys["bob"] not in out
    finally:
        await asyncio.gather(*(g.stop() for g in gateways.values()))
