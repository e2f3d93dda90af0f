"""GET /health/ready: readiness (the store answers), open without a key like /health."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import API_KEY


async def test_ready_is_200_without_a_key_when_the_sqlite_store_answers(make_client: Callable[..., Any]) -> None:
    client = await make_client(api_key=API_KEY)
    reply = await client.get("/health/ready")
    assert reply.status == 200 and await reply.json() == {"status": "ok"}
    assert (await client.get("/v1/models")).status == 401  # the key still guards the rest


async def test_ready_is_503_with_retry_after_while_postgres_is_unreachable(make_client: Callable[..., Any]) -> None:
    client = await make_client(database_url="postgresql://gateway:pw-not-shown@127.0.0.1:1/db")
    live = await client.get("/health")
    ready = await client.get("/health/ready")
    assert live.status == 200
    assert ready.status == 503 and "Retry-After" in ready.headers
    body = await ready.json()
    assert body["error"]["code"] == "service_unavailable" and "pw-not-shown" not in body["error"]["message"]
    stored = await client.post("/v1/responses", json={"model": "m", "input": "hi"})
    assert stored.status == 503 and "Retry-After" in stored.headers


async def test_ready_names_no_file_path_when_the_sqlite_store_cannot_open(
        make_client: Callable[..., Any], tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("a file where the store's directory should be")
    client = await make_client(home=blocker)  # the store would live in <home>/responses.db
    ready = await client.get("/health/ready")
    assert ready.status == 503 and "Retry-After" in ready.headers
    body = await ready.json()
    assert body["error"]["message"] == "The response store is unavailable; retry shortly."
    assert str(tmp_path) not in await ready.text()
    # whoever runs the gateway still learns where and why
    assert any(str(blocker) in r.getMessage() for r in caplog.records)


async def test_ready_names_no_user_host_or_database_when_postgres_is_unreachable(
        make_client: Callable[..., Any]) -> None:
    client = await make_client(database_url="postgresql://agw_user@127.0.0.1:1/agw_db?password=pw-not-shown")
    text = await (await client.get("/health/ready")).text()
    for named in ("pw-not-shown", "agw_user", "127.0.0.1", "agw_db", "postgresql"):
        assert named not in text
