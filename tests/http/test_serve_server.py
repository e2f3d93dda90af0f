"""`serve`'s HTTP server calls the front door directly (http/middleware.py `direct_handler`), not
through aiohttp's Application handler as the tests' servers do: what a client sees must be the same."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from tests.conftest import API_KEY
from tests.fakes.upstream import text
from tests.support.rawhttp import exchange, request, serving

ORIGIN = "https://app.example"
CHAT = json.dumps({"messages": [{"role": "user", "content": "hi"}]}).encode()
#: what differs between two replies by nature, not by the server that made them
VARYING = {"date", "server", "x-request-id", "content-length"}


def chat_request(**headers: str) -> bytes:
    return request("POST", "/v1/chat/completions", {"Content-Type": "application/json",
                                                    "Authorization": f"Bearer {API_KEY}", **headers}, CHAT)


async def test_serve_replies_carry_the_security_headers_request_id_and_cors_on_success_and_errors(
        make_settings: Any, upstream: Any) -> None:
    upstream.queue(text("hello"))
    async with serving(make_settings(api_key=API_KEY, cors_origins=(ORIGIN,))) as port:
        ok = await exchange(port, chat_request(**{"X-Request-Id": "my-id-1", "Origin": ORIGIN}))
        missing = await exchange(port, request("GET", "/v1/nothing-here", {"Authorization": f"Bearer {API_KEY}"}))
        refused = await exchange(port, request("GET", "/v1/models", {"Origin": ORIGIN}))
        preflight = await exchange(port, request("OPTIONS", "/v1/chat/completions", {
            "Origin": ORIGIN, "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "authorization, content-type"}))
    assert ok.status == 200 and ok.json()["choices"][0]["message"]["content"] == "hello"
    assert ok.headers["x-request-id"] == "my-id-1"
    assert missing.status == 404 and missing.json()["error"]["message"].startswith("Invalid URL (GET /v1/nothing-here)")
    assert refused.status == 401 and refused.json()["error"]["type"] == "invalid_request_error"
    assert preflight.status in (200, 204)
    for reply in (ok, missing, refused, preflight):
        assert reply.headers["x-content-type-options"] == "nosniff"
        assert reply.headers["referrer-policy"] == "no-referrer"
        assert reply.headers["x-request-id"]
    for reply in (ok, refused, preflight):
        assert reply.headers["access-control-allow-origin"] == ORIGIN


async def test_serve_answers_with_the_same_headers_as_aiohttps_own_application_handler(
        make_settings: Any, make_client: Any, upstream: Any) -> None:
    settings = make_settings(api_key=API_KEY, cors_origins=(ORIGIN,))
    client = await make_client(api_key=API_KEY, cors_origins=(ORIGIN,))
    asked = [("POST", "/v1/chat/completions", {"Content-Type": "application/json", "Origin": ORIGIN}, CHAT),
             ("GET", "/v1/nothing-here", {}, b""), ("GET", "/health", {}, b"")]
    for method, path, headers, body in asked:
        upstream.queue(text("same"))
        upstream.queue(text("same"))
        async with serving(settings) as port:
            served = await exchange(port, request(method, path, {"Authorization": f"Bearer {API_KEY}", **headers},
                                                  body))
        tested = await client.request(method, path, data=body or None,
                                      headers={"Authorization": f"Bearer {API_KEY}", **headers})
        assert served.status == tested.status, path
        assert set(served.headers) - VARYING == {name.lower() for name in tested.headers} - VARYING, path
        assert served.headers["content-type"] == tested.headers["Content-Type"], path


async def test_serve_asks_an_expect_100_continue_client_for_its_body_then_answers(make_settings: Any,
                                                                                 upstream: Any) -> None:
    upstream.queue(text("fine"))
    async with serving(make_settings(api_key=API_KEY)) as port:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(chat_request(Expect="100-continue").removesuffix(CHAT))
        try:
            async with asyncio.timeout(20):
                assert (await reader.readline()).startswith(b"HTTP/1.1 100 Continue")
                assert await reader.readline() == b"\r\n"
                writer.write(CHAT)
                assert (await reader.readline()).startswith(b"HTTP/1.1 200")
        finally:
            writer.close()
