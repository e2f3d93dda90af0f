"""CORS as a browser sees it: raw preflights and actual requests, allowed and refused origins."""

from __future__ import annotations

import pytest

from gateway.config.settings import SettingsError, load_settings
from tests.conftest import API_KEY
from tests.fakes.upstream import error
from tests.support.helpers import assert_error_envelope, chat_chunks

ALLOWED = "http://localhost:3000"
OTHER = "https://evil.example"
CHAT = {"messages": [{"role": "user", "content": "hi"}]}
AUTH = {"Authorization": f"Bearer {API_KEY}"}


def preflight_headers(origin: str, request_headers: str = "authorization, content-type") -> dict[str, str]:
    return {"Origin": origin, "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": request_headers}


def header_set(value: str) -> set[str]:
    return {part.strip().lower() for part in value.split(",")}


@pytest.fixture
async def cors_client(make_client):
    # a trailing slash in the configuration is what users write; browsers send none
    return await make_client(cors_origins=(ALLOWED + "/", "https://chat.example.com"), api_key=API_KEY)


async def test_preflight_from_allowed_origin_is_granted_without_a_key(cors_client):
    sdk_headers = ("authorization, content-type, idempotency-key, openai-organization, openai-project, "
                   "openai-beta, x-stainless-lang, x-stainless-package-version, x-stainless-os, x-stainless-arch, "
                   "x-stainless-runtime, x-stainless-runtime-version, x-stainless-retry-count, x-stainless-timeout, "
                   "x-stainless-read-timeout, x-stainless-async, x-request-id")
    resp = await cors_client.options("/v1/chat/completions", headers=preflight_headers(ALLOWED, sdk_headers))
    assert resp.status == 204
    assert resp.headers["Access-Control-Allow-Origin"] == ALLOWED
    assert "origin" in header_set(resp.headers["Vary"])
    assert header_set(resp.headers["Access-Control-Allow-Methods"]) == {"get", "post", "delete", "options"}
    assert header_set(sdk_headers) <= header_set(resp.headers["Access-Control-Allow-Headers"])
    assert resp.headers["Access-Control-Max-Age"] == "600"
    assert "Access-Control-Allow-Credentials" not in resp.headers


async def test_private_network_preflight_is_granted_only_when_asked(cors_client):
    plain = await cors_client.options("/v1/models", headers=preflight_headers(ALLOWED))
    assert "Access-Control-Allow-Private-Network" not in plain.headers
    asked = await cors_client.options("/v1/models", headers={
        **preflight_headers(ALLOWED), "Access-Control-Request-Private-Network": "true"})
    assert asked.headers["Access-Control-Allow-Private-Network"] == "true"


async def test_preflight_works_for_every_api_route(cors_client):
    for path in ("/v1/models", "/v1/responses", "/v1/responses/resp_123", "/health"):
        resp = await cors_client.options(path, headers=preflight_headers(ALLOWED))
        assert resp.status == 204, path
        assert resp.headers["Access-Control-Allow-Origin"] == ALLOWED


async def test_preflight_from_other_origin_is_403_without_grant(cors_client):
    resp = await cors_client.options("/v1/chat/completions", headers=preflight_headers(OTHER))
    assert resp.status == 403
    assert_error_envelope(await resp.json(), code="cors_origin_denied")
    assert "Access-Control-Allow-Origin" not in resp.headers
    assert "Access-Control-Allow-Methods" not in resp.headers
    assert "origin" in header_set(resp.headers["Vary"])


async def test_without_cors_config_preflight_is_refused_with_advice_and_no_cors_headers(make_client):
    client = await make_client(api_key=API_KEY)
    resp = await client.options("/v1/chat/completions", headers=preflight_headers(ALLOWED))
    assert resp.status == 403
    body = await resp.json()
    assert_error_envelope(body)
    assert "API_SERVER_CORS_ORIGINS" in body["error"]["message"]
    assert not [h for h in resp.headers if h.lower().startswith("access-control-")]


async def test_without_cors_config_actual_requests_carry_no_cors_headers(make_client):
    client = await make_client()
    resp = await client.post("/v1/chat/completions", json=CHAT, headers={"Origin": ALLOWED})
    assert resp.status == 200
    assert not [h for h in resp.headers if h.lower().startswith("access-control-")]
    assert "Vary" not in resp.headers


async def test_plain_options_without_origin_is_a_json_answer_not_a_500(make_client):
    client = await make_client(api_key=API_KEY)
    resp = await client.options("/v1/chat/completions")
    assert resp.status == 405
    assert_error_envelope(await resp.json())


async def test_json_reply_to_allowed_origin_carries_grant_and_exposed_headers(cors_client):
    resp = await cors_client.post("/v1/chat/completions", json=CHAT, headers={**AUTH, "Origin": ALLOWED})
    assert resp.status == 200
    assert resp.headers["Access-Control-Allow-Origin"] == ALLOWED
    assert "origin" in header_set(resp.headers["Vary"])
    exposed = header_set(resp.headers["Access-Control-Expose-Headers"])
    assert {"x-request-id", "retry-after", "idempotent-replayed", "x-should-retry"} <= exposed
    assert resp.headers["X-Request-Id"]


async def test_stream_to_allowed_origin_carries_grant(cors_client):
    resp = await cors_client.post("/v1/chat/completions", json={**CHAT, "stream": True},
                                  headers={**AUTH, "Origin": ALLOWED})
    assert resp.headers["Content-Type"].startswith("text/event-stream")
    assert resp.headers["Access-Control-Allow-Origin"] == ALLOWED
    assert "x-request-id" in header_set(resp.headers["Access-Control-Expose-Headers"])
    assert chat_chunks(await resp.text())


@pytest.mark.parametrize("case", ["no key", "unknown route", "too large", "upstream 502"])
async def test_error_replies_to_allowed_origin_carry_grant(make_client, upstream, case):
    client = await make_client(cors_origins=(ALLOWED,), api_key=API_KEY, max_body_bytes=2000)
    headers = {**AUTH, "Origin": ALLOWED}
    if case == "no key":
        resp = await client.post("/v1/chat/completions", json=CHAT, headers={"Origin": ALLOWED})
        expected = 401
    elif case == "unknown route":
        resp = await client.get("/v1/nothing", headers=headers)
        expected = 404
    elif case == "too large":
        resp = await client.post("/v1/chat/completions", data=b"x" * 5000,
                                 headers={**headers, "Content-Type": "application/json"})
        expected = 413
    else:
        upstream.queue(error(500))
        resp = await client.post("/v1/chat/completions", json=CHAT, headers=headers)
        expected = 502
    assert resp.status == expected
    assert_error_envelope(await resp.json())
    assert resp.headers["Access-Control-Allow-Origin"] == ALLOWED
    assert "x-should-retry" in header_set(resp.headers["Access-Control-Expose-Headers"])


async def test_reply_to_other_origin_has_no_grant_but_still_varies(cors_client):
    resp = await cors_client.get("/v1/models", headers={**AUTH, "Origin": OTHER})
    assert resp.status == 200  # CORS is enforced by the browser; the server just withholds the grant
    assert "Access-Control-Allow-Origin" not in resp.headers
    assert "Access-Control-Expose-Headers" not in resp.headers
    assert "origin" in header_set(resp.headers["Vary"])


async def test_wildcard_is_explicit_and_answers_star_without_credentials(make_client):
    client = await make_client(cors_origins=("*",))
    pre = await client.options("/v1/chat/completions", headers=preflight_headers(OTHER))
    assert pre.status == 204
    assert pre.headers["Access-Control-Allow-Origin"] == "*"
    resp = await client.post("/v1/chat/completions", json=CHAT, headers={"Origin": OTHER})
    assert resp.headers["Access-Control-Allow-Origin"] == "*"
    assert "Access-Control-Allow-Credentials" not in resp.headers


def test_an_origin_without_scheme_is_refused_naming_the_setting(tmp_path):
    with pytest.raises(SettingsError, match="API_SERVER_CORS_ORIGINS"):
        load_settings(tmp_path, environ={"API_SERVER_CORS_ORIGINS": "localhost:3000"})
    loaded = load_settings(tmp_path, environ={"API_SERVER_CORS_ORIGINS": "http://localhost:3000/, *"})
    assert loaded.cors_origins == ("http://localhost:3000/", "*")
