"""The admin API (/v1/admin, issue 46 item 5) on one in-process gateway over a real SQLite file, its
first admin key made by the real CLI: 404 on a keyless gateway, 403 for a plain key, a created key
shown once and kept only as its hash, changes and revocations in force at once, usage by day."""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.upstream import FakeUpstream
from tests.keys.test_keys_isolation import bearer, make_key


@pytest.fixture
async def admin(tmp_path: Path, make_client: Callable[..., Any]) -> tuple[Any, str, str]:
    # a stored-bytes quota: the ring reads stored bytes at every refresh (the usage row's figure)
    root = await make_key(tmp_path, "root", "--admin")
    plain = await make_key(tmp_path, "plain", "--max-stored-mb", "50")
    return await make_client(tools=[]), root, plain


def _assert_envelope(body: dict[str, Any], kind: str) -> None:
    assert set(body["error"]) == {"message", "type", "param", "code"}
    assert body["error"]["type"] == kind


async def test_a_keyless_gateway_has_no_admin_api(make_client: Callable[..., Any]) -> None:
    client = await make_client(tools=[])
    for method, path in (("GET", "/v1/admin/keys"), ("POST", "/v1/admin/keys"), ("GET", "/v1/admin/usage")):
        async with client.request(method, path, json={"name": "x"}) as reply:
            assert reply.status == 404, (method, path)
            _assert_envelope(await reply.json(), "invalid_request_error")


async def test_a_plain_key_gets_403_on_every_admin_route(admin: tuple[Any, str, str]) -> None:
    client, _, plain = admin
    for method, path in (("GET", "/v1/admin/keys"), ("POST", "/v1/admin/keys"), ("GET", "/v1/admin/keys/plain"),
                         ("PATCH", "/v1/admin/keys/plain"), ("DELETE", "/v1/admin/keys/plain"),
                         ("GET", "/v1/admin/usage")):
        async with client.request(method, path, json={"admin": True}, headers=bearer(plain)) as reply:
            assert reply.status == 403, (method, path)
            body = await reply.json()
            _assert_envelope(body, "invalid_request_error")
            assert "admin" in body["error"]["message"]
    async with client.get("/v1/admin/keys", headers=bearer("agk_not-a-key")) as reply:
        assert reply.status == 401


async def test_a_created_key_is_shown_once_hashed_at_rest_and_works_at_once(
        admin: tuple[Any, str, str], tmp_path: Path) -> None:
    client, root, _ = admin
    body = {"name": "svc", "expires_days": 30, "limits": {"rpm": 100, "max_stored_bytes": 5_000_000, "tpm": 9000,
                                                          "token_budget": 50_000},
            "access": {"models": ["agent-gateway"], "web": False}}
    async with client.post("/v1/admin/keys", json=body, headers=bearer(root)) as reply:
        assert reply.status == 201, await reply.text()
        assert reply.headers["Cache-Control"] == "no-store"
        made = await reply.json()
    key = made.pop("key")
    assert key.startswith("agk_") and len(key) > 40
    assert made["object"] == "admin.key" and made["name"] == "svc" and made["admin"] is False
    assert made["limits"] == {"rpm": 100, "max_concurrent": None, "max_stored_bytes": 5_000_000, "tpm": 9000,
                              "token_budget": 50_000, "budget_period": "total"}
    assert made["access"] == {"models": ["agent-gateway"], "mcp": None, "web": False}
    assert made["expires_at"] - time.time() == pytest.approx(30 * 86400, abs=60)
    assert made["usage"] == {"input_tokens": 0, "output_tokens": 0, "requests": 0, "last_used_at": None}
    async with client.get("/v1/models", headers=bearer(key)) as reply:  # this replica knows it at once
        assert reply.status == 200
    for path in ("/v1/admin/keys", "/v1/admin/keys/svc"):
        async with client.get(path, headers=bearer(root)) as reply:
            text = await reply.text()
            assert reply.status == 200 and "svc" in text and key not in text and '"key"' not in text
    async with client.post("/v1/admin/keys", json={"name": "svc"}, headers=bearer(root)) as reply:
        assert reply.status == 409  # a name is never reused
        _assert_envelope(await reply.json(), "invalid_request_error")
    stored = b"".join(path.read_bytes() for path in tmp_path.rglob("responses.db*"))
    assert key.encode() not in stored and key[4:].encode() not in stored
    assert hashlib.sha256(key.encode()).hexdigest().encode() in stored


async def test_patch_changes_access_and_limits_in_place_and_delete_revokes(
        admin: tuple[Any, str, str], upstream: FakeUpstream) -> None:
    client, root, plain = admin
    async with client.post("/v1/chat/completions", json={"model": "m", "messages": [{"role": "user", "content": "hi"}]},
                           headers=bearer(plain)) as reply:
        assert reply.status == 200
    async with client.patch("/v1/admin/keys/plain", json={"access": {"models": ["elsewhere"]}, "limits": {"rpm": 5},
                                                          "admin": True}, headers=bearer(root)) as reply:
        assert reply.status == 200, await reply.text()
        changed = await reply.json()
    assert changed["access"]["models"] == ["elsewhere"] and changed["limits"]["rpm"] == 5 and changed["admin"]
    assert changed["limits"]["max_stored_bytes"] == 50_000_000  # untouched by the patch
    async with client.post("/v1/chat/completions", json={"model": "m", "messages": [{"role": "user", "content": "hi"}]},
                           headers=bearer(plain)) as reply:
        assert reply.status == 404
        assert (await reply.json())["error"]["code"] == "model_not_found"
        assert reply.headers["x-ratelimit-limit-requests"] == "5"
    async with client.patch("/v1/admin/keys/plain", json={"access": {"models": None}, "limits": {"rpm": None}},
                            headers=bearer(root)) as reply:
        changed = await reply.json()
    assert changed["access"]["models"] is None and changed["limits"]["rpm"] is None and changed["admin"]
    async with client.delete("/v1/admin/keys/plain", headers=bearer(root)) as reply:
        assert reply.status == 200
        assert await reply.json() == {"object": "admin.key.deleted", "name": "plain", "deleted": True}
    async with client.get("/v1/models", headers=bearer(plain)) as reply:
        assert reply.status == 401  # refused at once on this replica
    async with client.get("/v1/admin/keys/plain", headers=bearer(root)) as reply:
        assert (await reply.json())["revoked_at"] is not None
    for method in ("DELETE", "PATCH"):
        async with client.request(method, "/v1/admin/keys/plain", json={}, headers=bearer(root)) as reply:
            assert reply.status == 404, method
    async with client.get("/v1/admin/keys/nobody", headers=bearer(root)) as reply:
        assert reply.status == 404


@pytest.mark.parametrize("body, param", [
    ({"name": "bad name"}, "name"),
    ({"name": "default"}, "name"),
    ({"name": "ok", "colour": "red"}, "colour"),
    ({"name": "ok", "limits": {"rpm": 0}}, "limits.rpm"),
    ({"name": "ok", "limits": {"rpm": "5"}}, "limits.rpm"),
    ({"name": "ok", "limits": {"rpn": 5}}, "limits.rpn"),
    ({"name": "ok", "limits": {"tpm": 0}}, "limits.tpm"),
    ({"name": "ok", "limits": {"token_budget": 10, "budget_period": "2d"}}, "limits.budget_period"),
    ({"name": "ok", "access": {"models": "all"}}, "access.models"),
    ({"name": "ok", "access": {"web": "no"}}, "access.web"),
    ({"name": "ok", "expires_days": -1}, "expires_days"),
    ({"name": "ok", "admin": 1}, "admin"),
])
async def test_a_malformed_create_is_a_400_naming_the_field(admin: tuple[Any, str, str], body: dict[str, Any],
                                                            param: str) -> None:
    client, root, _ = admin
    async with client.post("/v1/admin/keys", json=body, headers=bearer(root)) as reply:
        assert reply.status == 400
        error = (await reply.json())["error"]
    assert error["type"] == "invalid_request_error" and error["param"] == param


async def test_usage_by_day_counts_the_keys_requests_and_tokens(admin: tuple[Any, str, str],
                                                                upstream: FakeUpstream) -> None:
    client, root, plain = admin
    for _ in range(3):
        async with client.post("/v1/responses", json={"model": "m", "input": "hi"}, headers=bearer(plain)) as reply:
            assert reply.status == 200
    today = time.strftime("%Y-%m-%d", time.gmtime())
    rows: list[dict[str, Any]] = []
    deadline = time.monotonic() + 8  # the ring writes its usage every 2 s
    while time.monotonic() < deadline:
        async with client.get("/v1/admin/usage?key=plain&days=7", headers=bearer(root)) as reply:
            assert reply.status == 200
            rows = (await reply.json())["data"]
        if rows and rows[0]["requests"] >= 3 and rows[0]["stored_bytes"]:
            break
        await asyncio.sleep(0.3)
    assert len(rows) == 1, rows
    row = rows[0]
    assert row["key"] == "plain" and row["day"] == today
    assert row["requests"] == 3 and row["model_calls"] == 3 and row["input_tokens"] > 0 and row["output_tokens"] > 0
    assert row["stored_bytes"] > 0  # the three stored responses
    assert set(row) == {"key", "day", "requests", "input_tokens", "output_tokens", "model_calls", "web_searches",
                        "web_extracts", "mcp_calls", "stored_bytes"}
    async with client.get("/v1/admin/keys/plain", headers=bearer(root)) as reply:
        usage = (await reply.json())["usage"]
    assert usage["requests"] == 3 and usage["last_used_at"] is not None
    for query in ("days=0", "days=x", "days=%C2%B2", "key=no%20such"):
        async with client.get(f"/v1/admin/usage?{query}", headers=bearer(root)) as reply:
            assert reply.status == 400, query
