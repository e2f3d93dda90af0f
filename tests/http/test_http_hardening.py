"""What an attacker on the port can send (issue 15): raw bytes over a real socket to the gateway on
`serve`'s HTTP server; replies are the OpenAI envelope, and the log holds one quiet line at most,
never a traceback or a key."""

from __future__ import annotations

import asyncio
import gzip
import json
import logging
import time
from typing import Any

import pytest

from gateway.config.settings import OPTIONS_BY_ENV
from gateway.http.checks import OPEN_PATHS
from gateway.observe.log_limits import RateLimitedLog, printable
from tests.conftest import API_KEY
from tests.fakes.upstream import text
from tests.support.gateway_process import REPO
from tests.support.helpers import assert_error_envelope
from tests.support.rawhttp import exchange, request, serving

KEY_HEADER = f"Authorization: Bearer {API_KEY}"

MALFORMED = {
    "nul_in_header_value": f"GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\n{KEY_HEADER}\x00\r\n\r\n".encode(),
    "del_in_header_value": f"GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\n{KEY_HEADER}\x7f\r\n\r\n".encode(),
    "bare_lf_line_endings": f"GET /v1/models HTTP/1.1\nHost: 127.0.0.1\n{KEY_HEADER}\n\n".encode(),
    "header_over_8190_bytes": (f"GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\n{KEY_HEADER}{'a' * 9000}"
                               "\r\n\r\n").encode(),
    "content_length_and_chunked": (f"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n{KEY_HEADER}\r\n"
                                   "Content-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n").encode(),
    "duplicate_content_length": (f"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n{KEY_HEADER}\r\n"
                                 "Content-Length: 2\r\nContent-Length: 2\r\n\r\n{}").encode(),
    "obs_fold": f"GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Folded: a\r\n {API_KEY}\r\n\r\n".encode(),
    "malformed_request_line": f"GET /v1/models HTTP/1.1 {API_KEY}\r\nHost: 127.0.0.1\r\n\r\n".encode(),
    "bad_method": f"G{API_KEY}(T /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode(),
}


def records_text(caplog: pytest.LogCaptureFixture) -> str:
    return "\n".join(r.getMessage() for r in caplog.records)


def assert_quiet_log(caplog: pytest.LogCaptureFixture) -> None:
    for record in caplog.records:
        assert record.exc_info is None, f"a traceback was logged: {record.getMessage()}"
        assert record.levelno <= logging.WARNING, record.getMessage()
        assert API_KEY not in record.getMessage()


@pytest.mark.parametrize("raw", MALFORMED.values(), ids=MALFORMED.keys())
async def test_a_request_the_parser_rejects_is_a_400_envelope_and_one_quiet_line_without_the_key(
        make_settings: Any, caplog: pytest.LogCaptureFixture, raw: bytes) -> None:
    caplog.set_level(logging.DEBUG)
    async with serving(make_settings(api_key=API_KEY)) as port:
        reply = await exchange(port, raw)
    assert reply.status == 400
    assert reply.headers["content-type"].startswith("application/json")
    assert_error_envelope(reply.json(), code="malformed_request")
    assert API_KEY.encode() not in reply.body
    assert reply.closed
    assert_quiet_log(caplog)
    rejections = [r for r in caplog.records if "malformed request" in r.getMessage()]
    assert len(rejections) == 1, records_text(caplog)
    assert [r for r in caplog.records if r.levelno >= logging.ERROR] == []


async def test_a_flood_of_malformed_requests_is_logged_at_most_ten_lines(make_settings: Any,
                                                                         caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    async with serving(make_settings(api_key=API_KEY)) as port:
        replies = await asyncio.gather(*(exchange(port, MALFORMED["nul_in_header_value"], quiet=2)
                                         for _ in range(30)))
    assert {r.status for r in replies} == {400}
    assert len([r for r in caplog.records if "malformed request" in r.getMessage()]) == 10
    assert_quiet_log(caplog)


def test_the_rate_limited_log_reports_what_it_suppressed_when_the_next_interval_starts(
        caplog: pytest.LogCaptureFixture) -> None:
    now = [0.0]
    limited = RateLimitedLog(logging.getLogger("agent_gateway.test"), per_interval=2, interval=60, clock=lambda: now[0])
    with caplog.at_level(logging.INFO, logger="agent_gateway.test"):
        for _ in range(5):
            limited.log(logging.INFO, "bad request")
        now[0] = 61.0
        limited.log(logging.INFO, "bad request")
    assert [r.getMessage() for r in caplog.records] == [
        "bad request", "bad request", "3 more line(s) like the above suppressed in 61 s", "bad request"]


async def test_an_unknown_expect_is_a_417_envelope_that_does_not_repeat_it(make_settings: Any,
                                                                          caplog: pytest.LogCaptureFixture) -> None:
    async with serving(make_settings(api_key=API_KEY)) as port:
        reply = await exchange(port, request("POST", "/v1/chat/completions", {
            "Authorization": f"Bearer {API_KEY}", "Content-Type": "application/json",
            "Expect": "secret-expectation"}, b"{}"))
    assert reply.status == 417
    assert_error_envelope(reply.json(), code="expectation_failed")
    assert b"secret-expectation" not in reply.body
    assert_quiet_log(caplog)


@pytest.mark.parametrize("content_type", [None, "text/plain", "application/x-www-form-urlencoded",
                                          "multipart/form-data; boundary=x"])
async def test_a_keyless_gateway_refuses_a_body_that_is_not_json_with_415(
        make_settings: Any, upstream: Any, content_type: str | None) -> None:
    headers = {} if content_type is None else {"Content-Type": content_type}
    body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]}).encode()
    async with serving(make_settings()) as port:
        for path in ("/v1/chat/completions", "/v1/responses"):
            reply = await exchange(port, request("POST", path, headers, body))
            assert reply.status == 415, reply
            assert_error_envelope(reply.json(), code="unsupported_media_type")
        # the same with an Idempotency-Key, which reads the body on a path of its own
        with_key = {**headers, "Idempotency-Key": "k1"}
        reply = await exchange(port, request("POST", "/v1/chat/completions", with_key, body))
        assert reply.status == 415
    assert upstream.requests == []


@pytest.mark.parametrize("host", ["evil.example", "evil.example:8642", "127.0.0.1.nip.io", ""])
async def test_a_keyless_gateway_refuses_a_host_that_is_not_its_own_with_403(make_settings: Any, upstream: Any,
                                                                             host: str) -> None:
    raw = request("GET", "/v1/models").replace(b"Host: 127.0.0.1", f"Host: {host}".encode())
    async with serving(make_settings()) as port:
        reply = await exchange(port, raw)
    assert reply.status == 403
    assert_error_envelope(reply.json(), code="host_not_allowed")


@pytest.mark.parametrize("host", ["localhost", "LOCALHOST.:8642", "127.0.0.1:1", "[::1]:8642", "proxy.example"])
async def test_a_keyless_gateway_answers_to_loopback_names_and_allowed_hosts(make_settings: Any, host: str) -> None:
    raw = request("GET", "/v1/models").replace(b"Host: 127.0.0.1", f"Host: {host}".encode())
    async with serving(make_settings(allowed_hosts=("Proxy.Example",))) as port:
        reply = await exchange(port, raw)
    assert reply.status == 200, reply


async def test_a_gateway_with_a_key_accepts_any_host(make_settings: Any) -> None:
    raw = request("GET", "/v1/models", {"Authorization": f"Bearer {API_KEY}"}).replace(
        b"Host: 127.0.0.1", b"Host: gateway.example.com")
    async with serving(make_settings(api_key=API_KEY)) as port:
        reply = await exchange(port, raw)
    assert reply.status == 200


async def test_a_body_trickled_with_an_idempotency_key_still_gets_the_408(make_settings: Any) -> None:
    body = b'{"model": "m", "messages": [{"role": "user", "content": "hi"}]}'
    head = request("POST", "/v1/chat/completions", {"Content-Type": "application/json", "Idempotency-Key": "slow-1",
                                                    "Content-Length": str(len(body))})
    async with serving(make_settings(body_timeout=0.5)) as port:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(head + body[:1])
        started = time.monotonic()

        async def trickle() -> None:
            for byte in body[1:]:
                await asyncio.sleep(0.2)
                writer.write(bytes([byte]))

        sender = asyncio.ensure_future(trickle())
        try:
            first = await asyncio.wait_for(reader.readuntil(b"\r\n"), 5)
        finally:
            sender.cancel()
            writer.close()
    assert b" 408 " in first
    assert time.monotonic() - started < 2


async def test_a_non_utf8_authorization_is_a_401_not_a_500(make_settings: Any,
                                                           caplog: pytest.LogCaptureFixture) -> None:
    raw = b"GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer \xe9\xe9\r\n\r\n"
    async with serving(make_settings(api_key=API_KEY)) as port:
        reply = await exchange(port, raw)
    assert reply.status == 401
    assert_error_envelope(reply.json(), code="invalid_api_key")
    assert_quiet_log(caplog)


async def test_a_non_utf8_authorization_with_an_idempotency_key_and_no_key_set_is_served(
        make_settings: Any, upstream: Any, caplog: pytest.LogCaptureFixture) -> None:
    upstream.queue(text("fine"))
    body = b'{"model": "m", "messages": [{"role": "user", "content": "hi"}]}'
    raw = (b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer \xe9\xe9\r\n"
           b"Idempotency-Key: k-1\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
    async with serving(make_settings()) as port:
        reply = await exchange(port, raw)
    assert reply.status == 200, reply
    assert reply.json()["choices"][0]["message"]["content"] == "fine"
    assert_quiet_log(caplog)


@pytest.mark.parametrize("depth", [5_000, 100_000])
async def test_json_nested_thousands_of_levels_deep_is_a_400(make_settings: Any, caplog: pytest.LogCaptureFixture,
                                                             depth: int) -> None:
    body = b'{"model": "m", "messages": ' + b"[" * depth + b"]" * depth + b"}"
    async with serving(make_settings(api_key=API_KEY)) as port:
        reply = await exchange(port, request("POST", "/v1/chat/completions", {
            "Authorization": f"Bearer {API_KEY}", "Content-Type": "application/json"}, body))
    assert reply.status == 400
    assert_error_envelope(reply.json())
    assert_quiet_log(caplog)


@pytest.mark.parametrize("with_key", [True, False], ids=["key", "no_key_sent"])
async def test_a_body_that_is_not_the_gzip_it_claims_is_a_400_and_a_closed_connection(
        make_settings: Any, caplog: pytest.LogCaptureFixture, with_key: bool) -> None:
    caplog.set_level(logging.DEBUG)
    headers = {"Content-Type": "application/json", "Content-Encoding": "gzip"}
    if with_key:
        headers["Authorization"] = f"Bearer {API_KEY}"
    async with serving(make_settings(api_key=API_KEY)) as port:
        reply = await exchange(port, request("POST", "/v1/chat/completions", headers, b"this is not gzip at all"))
        good = await exchange(port, request("POST", "/v1/chat/completions", headers, gzip.compress(b"[1]")))
        await asyncio.sleep(0.2)  # anything aiohttp logs after the reply, while draining the body
    assert reply.status == (400 if with_key else 401)
    assert_error_envelope(reply.json())
    assert reply.closed
    assert good.status == (400 if with_key else 401)  # read fine: "must be a JSON object"
    assert_quiet_log(caplog)


def test_printable_escapes_control_characters_and_keeps_the_rest() -> None:
    assert printable("/v1/chat/completions") == "/v1/chat/completions"
    assert printable("/v1/é✓") == "/v1/é✓"
    assert printable("/x\n2026-12-01 ERROR FORGED\r\x1b[31m") == "/x\\n2026-12-01 ERROR FORGED\\r\\x1b[31m"


def test_the_routes_open_without_a_key_are_the_ones_the_readme_and_the_key_help_name() -> None:
    # /openapi.json stays open like the health routes: it describes the API, the same for
    # everyone, and holds no data
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    notes = readme[readme.index("## Security notes"):]
    notes = notes[: notes.index("\n## ", 3)]
    key_help = OPTIONS_BY_ENV["API_SERVER_KEY"].help
    for path in OPEN_PATHS:
        assert f"`{path}`" in notes, path
        assert path in key_help, path


async def test_the_header_timeout_does_not_cut_a_reply_that_takes_longer(make_settings: Any, upstream: Any) -> None:
    upstream.queue(text("slow but fine", delay=1.0), text("again"))
    body = b'{"model": "m", "messages": [{"role": "user", "content": "hi"}]}'
    one = request("POST", "/v1/chat/completions", {"Content-Type": "application/json"}, body)
    async with serving(make_settings(header_timeout=0.3)) as port:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(one)
        first = await asyncio.wait_for(reader.readuntil(b"}]"), 5)
        writer.write(one)  # the same connection, at once: kept alive for the next request
        second = await asyncio.wait_for(reader.readuntil(b"}]"), 5)
        writer.close()
    assert b" 200 " in first and b"slow but fine" in first
    assert b" 200 " in second and b"again" in second
