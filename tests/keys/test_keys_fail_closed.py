"""Keys fail closed (issue 42, item 2): a gateway whose keys live only in the store answers 503
to every route that needs a key while the store has never been read, never open, and lets the
keys in once the store answers; a store lost later keeps the last key set read in force."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from tests.keys.test_keys_isolation import bearer, make_key
from tests.support.gateway_process import gateway_env
from tests.support.tcp_gate import TcpGate


@pytest.fixture
async def gate(postgres_url: str) -> AsyncIterator[tuple[TcpGate, str]]:
    """The test's database behind a gate: (the gate, the URL through it)."""
    port = int(postgres_url.rsplit(":", 1)[1].split("/")[0])
    gate = TcpGate(port)
    await gate.start()
    try:
        yield gate, postgres_url.replace(f":{port}/", f":{gate.port}/")
    finally:
        await gate.stop()


async def _status(client: Any, path: str, headers: dict[str, str]) -> tuple[int, dict[str, Any]]:
    async with client.get(path, headers=headers) as reply:
        return reply.status, await reply.json(content_type=None)


async def _until(check: Callable[[], Any], seconds: float = 15.0) -> None:
    deadline = time.monotonic() + seconds
    while not await check():
        assert time.monotonic() < deadline, "not within the time allowed"
        await asyncio.sleep(0.2)


async def test_a_store_unreadable_at_start_is_503_for_every_keyed_route_until_it_answers(
        tmp_path: Path, postgres_url: str, gate: tuple[TcpGate, str], make_client: Callable[..., Any]) -> None:
    tcp_gate, gated_url = gate
    key = await make_key(tmp_path, "alice", env=gateway_env(tmp_path, {"API_SERVER_DATABASE_URL": postgres_url}))
    tcp_gate.close()
    client = await make_client(database_url=gated_url, metrics_enabled=True)
    for path in ("/v1/models", "/metrics"):
        for headers in ({}, bearer(key), bearer("agk_not-a-key")):
            status, body = await _status(client, path, headers)
            assert status == 503, (path, headers.keys(), status, body)
            assert body["error"]["code"] == "service_unavailable" and key not in str(body)
    async with client.post("/v1/chat/completions", json={"model": "m", "messages": [
            {"role": "user", "content": "hi"}]}) as reply:
        assert reply.status == 503 and int(reply.headers["Retry-After"]) >= 1
    async with client.get("/health") as reply:
        assert reply.status == 200  # an open route stays open
    tcp_gate.open()

    async def keys_read() -> bool:
        return (await _status(client, "/v1/models", bearer(key)))[0] == 200

    await _until(keys_read)
    assert (await _status(client, "/v1/models", {}))[0] == 401
    assert (await _status(client, "/v1/models", bearer("agk_not-a-key")))[0] == 401


async def test_a_store_lost_after_start_keeps_the_last_keys_read_in_force(
        tmp_path: Path, postgres_url: str, gate: tuple[TcpGate, str], make_client: Callable[..., Any]) -> None:
    tcp_gate, gated_url = gate
    key = await make_key(tmp_path, "alice", env=gateway_env(tmp_path, {"API_SERVER_DATABASE_URL": postgres_url}))
    client = await make_client(database_url=gated_url)
    assert (await _status(client, "/v1/models", bearer(key)))[0] == 200
    tcp_gate.close()
    await asyncio.sleep(5)  # two refreshes fail
    assert (await _status(client, "/v1/models", bearer(key)))[0] == 200
    assert (await _status(client, "/v1/models", {}))[0] == 401
    assert (await _status(client, "/v1/models", bearer("agk_not-a-key")))[0] == 401



async def test_an_unreadable_sqlite_file_at_start_is_503_not_open_until_it_can_be_read(
        tmp_path: Path, make_client: Callable[..., Any]) -> None:
    key = await make_key(tmp_path, "alice")
    database = next(tmp_path.rglob("responses.db"))
    kept = database.with_name("kept.db")
    database.rename(kept)
    database.mkdir()  # in its place, something SQLite cannot open
    client = await make_client()
    for headers in ({}, bearer(key)):
        status, body = await _status(client, "/v1/models", headers)
        assert status == 503, body
    database.rmdir()
    kept.rename(database)

    async def keys_read() -> bool:
        return (await _status(client, "/v1/models", bearer(key)))[0] == 200

    await _until(keys_read)
    assert (await _status(client, "/v1/models", {}))[0] == 401
