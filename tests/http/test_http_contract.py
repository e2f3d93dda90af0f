"""Routes, auth, headers and the error envelope on every path a client can hit."""

from __future__ import annotations

import pytest

from gateway.http.app import create_app
from tests.conftest import API_KEY
from tests.support.helpers import assert_error_envelope


async def test_create_app_builds_routes_without_touching_the_network(settings):
    app = create_app(settings)
    paths = {r.resource.canonical for r in app.router.routes() if r.resource is not None}
    assert {"/health", "/v1/health", "/v1/models", "/v1/chat/completions"} <= paths


@pytest.mark.parametrize("path", ["/health", "/v1/health"])
async def test_health_is_open_even_with_a_key(make_client, path):
    client = await make_client(api_key=API_KEY)
    resp = await client.get(path)
    assert resp.status == 200
    assert await resp.json() == {"status": "ok"}
    assert resp.headers["X-Content-Type-Options"] == "nosniff"
    assert resp.headers["Referrer-Policy"] == "no-referrer"


async def test_models_lists_the_advertised_model(make_client):
    client = await make_client(model_name="research")
    body = await (await client.get("/v1/models")).json()
    assert body["object"] == "list"
    [model, deep] = body["data"]
    assert deep["id"] == "research-deep-research"  # the research loop's id (AGENT_RESEARCH)
    assert model["id"] == "research" and model["object"] == "model" and isinstance(model["created"], int)
    assert model["owned_by"]
    single = await client.get("/v1/models/research")
    assert (await single.json())["id"] == "research"


async def test_unknown_model_is_404_model_not_found(client):
    resp = await client.get("/v1/models/gpt-9")
    assert resp.status == 404
    assert_error_envelope(await resp.json(), code="model_not_found", param="model")


async def test_missing_key_is_401_with_null_code(make_client):
    client = await make_client(api_key=API_KEY)
    resp = await client.get("/v1/models")
    assert resp.status == 401
    assert_error_envelope(await resp.json(), code=None)
    assert resp.headers["X-Content-Type-Options"] == "nosniff"


@pytest.mark.parametrize("header", ["Bearer wrong", "Bearer " + API_KEY + "x", "Basic " + API_KEY, "Bearer"])
async def test_wrong_key_is_401(make_client, header):
    client = await make_client(api_key=API_KEY)
    resp = await client.post("/v1/chat/completions", headers={"Authorization": header},
                             json={"messages": [{"role": "user", "content": "hi"}]})
    assert resp.status == 401
    body = await resp.json()
    assert_error_envelope(body)
    assert body["error"]["code"] in ("invalid_api_key", None)


async def test_right_key_is_accepted(make_client):
    client = await make_client(api_key=API_KEY)
    resp = await client.get("/v1/models", headers={"Authorization": f"Bearer {API_KEY}"})
    assert resp.status == 200


async def test_unknown_route_is_a_json_404(client):
    resp = await client.get("/v1/nothing-here")
    assert resp.status == 404
    assert resp.headers["Content-Type"].startswith("application/json")
    assert_error_envelope(await resp.json())
    assert resp.headers["Referrer-Policy"] == "no-referrer"


async def test_wrong_method_is_a_json_405(client):
    resp = await client.get("/v1/chat/completions")
    assert resp.status == 405
    assert_error_envelope(await resp.json())


async def test_declared_oversize_body_is_413(make_client):
    client = await make_client(max_body_bytes=1000)
    resp = await client.post("/v1/chat/completions", data=b"x" * 2000, headers={"Content-Type": "application/json"})
    assert resp.status == 413
    assert_error_envelope(await resp.json(), code="request_too_large")


async def test_chunked_oversize_body_is_413(make_client):
    client = await make_client(max_body_bytes=1000)

    async def body():
        for _ in range(10):
            yield b'{"messages": [' + b" " * 300

    resp = await client.post("/v1/chat/completions", data=body(), headers={"Content-Type": "application/json"})
    assert resp.status == 413
    assert_error_envelope(await resp.json())


BAD_REQUESTS = [
    (b"", None),
    (b"{not json", None),
    (b"[1, 2]", None),
    (b'"just a string"', None),
    (b"{}", "messages"),
    (b'{"messages": []}', "messages"),
    (b'{"messages": "hi"}', "messages"),
    (b'{"messages": [42]}', "messages[0]"),
    (b'{"messages": [{"content": "hi"}]}', "messages[0].role"),
    (b'{"messages": [{"role": "wizard", "content": "hi"}]}', "messages[0].role"),
    (b'{"messages": [{"role": "user"}]}', "messages[0].content"),
    (b'{"messages": [{"role": "user", "content": 5}]}', "messages[0].content"),
    (b'{"messages": [{"role": "user", "content": [{"type": "video"}]}]}', "messages[0].content[0]"),
    (b'{"messages": [{"role": "user", "content": [{"type": "text"}]}]}', "messages[0].content[0].text"),
    (b'{"messages": [{"role": "tool", "content": "x"}]}', "messages[0].tool_call_id"),
    (b'{"messages": [{"role": "assistant", "content": null, "tool_calls": "x"}]}', "messages[0].tool_calls"),
    (b'{"messages": [{"role": "user", "content": "hi"}], "n": 2}', "n"),
    (b'{"messages": [{"role": "user", "content": "hi"}], "stream": "yes"}', "stream"),
    (b'{"messages": [{"role": "user", "content": "hi"}], "temperature": "hot"}', "temperature"),
    (b'{"messages": [{"role": "user", "content": "hi"}], "temperature": 9}', "temperature"),
    (b'{"messages": [{"role": "user", "content": "hi"}], "temperature": NaN}', "temperature"),
    (b'{"messages": [{"role": "user", "content": "hi"}], "temperature": Infinity}', "temperature"),
    (b'{"messages": [{"role": "user", "content": "hi"}], "temperature": -Infinity}', "temperature"),
    (b'{"messages": [{"role": "user", "content": "hi"}], "top_p": NaN}', "top_p"),
    (b'{"messages": [{"role": "user", "content": "hi"}], "presence_penalty": NaN}', "presence_penalty"),
    (b'{"messages": [{"role": "user", "content": "hi"}], "frequency_penalty": Infinity}', "frequency_penalty"),
    (b'{"messages": [{"role": "user", "content": "hi"}], "max_tokens": 0}', "max_tokens"),
    (b'{"messages": [{"role": "user", "content": "hi"}], "max_tokens": true}', "max_tokens"),
    (b'{"messages": [{"role": "user", "content": "hi"}], "model": 5}', "model"),
    (b'{"messages": [{"role": "user", "content": "hi"}], "tools": {}}', "tools"),
    (b'{"messages": [{"role": "user", "content": "hi"}], "tools": [{"type": "function"}]}', "tools[0]"),
    (b'{"messages": [{"role": "user", "content": "hi"}], "stop": 5}', "stop"),
    (b'{"messages": [{"role": "user", "content": "hi"}], "stream_options": 1}', "stream_options"),
    (b'{"messages": [{"role": "user", "content": "hi"}], "response_format": "json"}', "response_format"),
]


@pytest.mark.parametrize(("raw", "param"), BAD_REQUESTS)
async def test_malformed_chat_request_is_400_envelope(client, upstream, raw, param):
    resp = await client.post("/v1/chat/completions", data=raw, headers={"Content-Type": "application/json"})
    assert resp.status == 400, await resp.text()
    body = await resp.json()
    assert_error_envelope(body, param=param)
    assert body["error"]["type"] == "invalid_request_error"
    assert upstream.requests == []


@pytest.mark.parametrize(
    ("raw", "param"),
    [
        (b'{"input": "hi", "temperature": NaN}', "temperature"),
        (b'{"input": "hi", "tool_choice": {"type": "function", "name": ["x"]}}', "tool_choice"),
        (b'{"input": "hi", "tools": [{"type": "function", "name": "x"}], '
         b'"tool_choice": {"type": "function", "name": {"x": 1}}}', "tool_choice"),
    ],
)
async def test_malformed_responses_request_is_400_envelope(client, upstream, raw, param):
    resp = await client.post("/v1/responses", data=raw, headers={"Content-Type": "application/json"})
    assert resp.status == 400, await resp.text()
    body = await resp.json()
    assert_error_envelope(body, param=param)
    assert upstream.requests == []
