"""What the gateway repeats of the upstream is safe to repeat: no URL credentials, no key an upstream
echoes back, no page of upstream text; and an upstream reply nested thousands deep is a clear 502."""

from __future__ import annotations

import base64
import json
import logging
from typing import Any

import aiohttp
import pytest

from tests.fakes.raw_upstream import RawUpstream, ok
from tests.fakes.upstream import Reply, error
from tests.support.faults import MODE_IDS, MODES, ask, free_port
from tests.support.gateway_process import gateway_env, run_cli, start_gateway

CHAT = "/v1/chat/completions"
HI = {"messages": [{"role": "user", "content": "hi"}]}
UPSTREAM_KEY = "sk-upstream-secret-4f9a2c7e1b"
PASSWORD = "PASSWORD-hunter2-7731"
DEEP = b"[" * 5000 + b"]" * 5000


async def test_url_credentials_are_not_in_a_502_body_nor_the_log(make_client, caplog):
    caplog.set_level(logging.DEBUG)
    client = await make_client(llm_base_url=f"http://user:{PASSWORD}@127.0.0.1:{free_port()}/v1")
    resp = await client.post(CHAT, json=HI)
    assert resp.status == 502
    body = await resp.text()
    assert "unreachable" in body and "127.0.0.1" not in body  # the address is for the log only
    assert PASSWORD not in body and "user:" not in body
    assert PASSWORD not in caplog.text and "127.0.0.1" in caplog.text


async def test_url_credentials_are_not_in_a_504_body(make_client):
    raw = await RawUpstream.start(lambda conn, n, req: b"")
    try:
        client = await make_client(llm_base_url=f"http://user:{PASSWORD}@127.0.0.1:{raw.port}/v1", llm_timeout=0.2)
        resp = await client.post(CHAT, json=HI)
        assert resp.status == 504
        assert PASSWORD not in await resp.text()
        # with no LLM_API_KEY, the URL's credentials are what the upstream gets: HTTP basic auth
        expected = base64.b64encode(f"user:{PASSWORD}".encode())
        assert b"\r\nAuthorization: Basic " + expected + b"\r\n" in raw.requests[0]
        assert PASSWORD.encode() not in raw.requests[0].split(b"\r\n")[0]  # not in the request line
    finally:
        await raw.close()


async def test_url_credentials_are_not_in_the_start_up_line_nor_config_check(tmp_path, upstream):
    url = upstream.base_url.replace("http://", f"http://user:{PASSWORD}@")
    env = gateway_env(tmp_path, {"LLM_BASE_URL": url, "LLM_MODEL": "fake-model"})
    gateway = await start_gateway(env=env)
    async with aiohttp.ClientSession() as session:
        async with session.post(gateway.base_url + "/v1/chat/completions", json=HI) as resp:
            assert resp.status == 200
    assert await gateway.stop() == 0
    assert gateway.proc.stdout is not None and gateway.proc.stderr is not None
    printed = (await gateway.proc.stdout.read() + await gateway.proc.stderr.read()).decode()
    assert PASSWORD not in printed
    for command in (("config", "check"), ("config", "list")):
        _, out, err = await run_cli(*command, env=env)
        assert PASSWORD not in out + err, command
        assert "127.0.0.1" in out, (command, out)


@pytest.mark.parametrize("stream", [False, True])
async def test_an_upstream_echoing_its_authorization_header_does_not_hand_out_the_key(make_client, upstream,
                                                                                    stream, caplog):
    caplog.set_level(logging.DEBUG)
    client = await make_client(llm_api_key=UPSTREAM_KEY)
    upstream.queue(Reply(status=400, echo_headers=True))
    resp = await client.post(CHAT, json={**HI, "stream": stream})
    assert resp.status == 400
    message = (await resp.json())["error"]["message"]
    assert upstream.headers[-1]["Authorization"] == f"Bearer {UPSTREAM_KEY}"  # it did echo it
    assert "you sent" in message and "[redacted]" in message
    assert UPSTREAM_KEY not in message and "upstream-secret" not in message
    assert UPSTREAM_KEY not in caplog.text


async def test_an_error_frame_mid_stream_echoing_the_key_is_scrubbed(make_client, upstream):
    client = await make_client(llm_api_key=UPSTREAM_KEY)
    frame = json.dumps({"error": {"message": f"auth failed for Authorization: Bearer {UPSTREAM_KEY}"}})
    upstream.queue(Reply(raw=b'data: {"choices": [{"delta": {"content": "ok"}}]}\n\ndata: ' + frame.encode() + b"\n\n",
                         raw_content_type="text/event-stream"))
    resp = await client.post(CHAT, json={**HI, "stream": True})
    body = await resp.text()
    assert "auth failed" in body
    assert UPSTREAM_KEY not in body and "upstream-secret" not in body


async def test_upstream_error_text_is_cut_to_a_few_hundred_characters(client, upstream):
    upstream.queue(error(500, "the model says: " + "blah " * 2000))
    resp = await client.post(CHAT, json=HI)
    assert resp.status == 502
    message = (await resp.json())["error"]["message"]
    assert "the model says" in message and len(message) < 400


def deep_stream(api: str, stream: bool) -> Reply:
    if not stream:
        return Reply(raw=b'{"choices": ' + DEEP + b"}")
    # text first, so the fault comes after the stream started
    return Reply(raw=b'data: {"choices": [{"delta": {"content": "ok"}}]}\n\ndata: {"choices": ' + DEEP + b"}\n\n",
                 raw_content_type="text/event-stream")


@pytest.mark.parametrize(("api", "stream"), MODES, ids=MODE_IDS)
async def test_an_upstream_reply_nested_5000_deep_is_a_clear_502(make_client, upstream, api, stream, caplog):
    client = await make_client()
    upstream.queue(deep_stream(api, stream))
    outcome = await ask(client, api, stream)
    assert outcome.error is not None, outcome
    assert outcome.status == (200 if stream else 502), outcome
    assert "upstream model" in outcome.error["message"]
    assert "RecursionError" not in caplog.text and "Traceback" not in caplog.text
    upstream.queue(Reply(text="still here"))
    assert (await ask(client, api, stream)).text == "still here"


async def test_an_upstream_error_body_nested_5000_deep_is_a_clear_502(make_client):
    reply = ok(DEEP).replace(b"200 OK", b"500 Internal Server Error")
    raw = await RawUpstream.start(lambda conn, n, req: reply)
    try:
        client = await make_client(llm_base_url=raw.base_url)
        resp = await client.post(CHAT, json=HI)
        assert resp.status == 502
        data: Any = await resp.json()
        assert "HTTP 500" in data["error"]["message"] and len(data["error"]["message"]) < 400
    finally:
        await raw.close()
