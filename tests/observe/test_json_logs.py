"""API_SERVER_LOG_FORMAT=json: every line a real `agent-gateway serve` writes is one JSON object."""

from __future__ import annotations

import json
import logging

import aiohttp

from gateway.observe.json_log import JsonFormatter
from tests.support.gateway_process import gateway_env, start_gateway


async def test_every_line_serve_writes_is_a_json_object(tmp_path, upstream):
    env = gateway_env(tmp_path, {"LLM_BASE_URL": upstream.base_url, "LLM_MODEL": "fake-model",
                                 "API_SERVER_LOG_FORMAT": "json"})
    gateway = await start_gateway(env=env)
    try:
        async with aiohttp.ClientSession() as session:
            async with session.post(gateway.base_url + "/v1/chat/completions",
                                    json={"messages": [{"role": "user", "content": "hi"}]}) as resp:
                assert resp.status == 200
                request_id = resp.headers["X-Request-Id"]
            async with session.get(gateway.base_url + "/no/such/path?q=secret") as resp:
                assert resp.status == 404
    finally:
        assert await gateway.stop() == 0
    assert gateway.proc.stderr is not None and gateway.proc.stdout is not None
    err = (await gateway.proc.stderr.read()).decode()
    out = (await gateway.proc.stdout.read()).decode()
    lines = [json.loads(line) for line in err.splitlines()]  # every stderr line parses
    assert lines and all({"time", "level", "logger", "request_id", "message"} <= set(line) for line in lines)
    assert any(line["level"] == "WARNING" and "API_SERVER_KEY" in line["message"] for line in lines)
    [access] = [line for line in lines if line.get("path") == "/v1/chat/completions"]
    assert access["request_id"] == request_id and access["logger"] == "agent_gateway.access"
    assert access["method"] == "POST" and access["status"] == 200 and isinstance(access["duration_ms"], float)
    assert access["key"] == "default"  # the key's name, never the key
    [missing] = [line for line in lines if line.get("status") == 404]
    assert missing["path"] == "/no/such/path" and "secret" not in err
    assert any(line["message"].startswith("shutting down") for line in lines)
    # the banner (on stdout, where scripts look for the URL) is JSON too
    assert not out.strip()  # nothing else there
    banner = json.loads(gateway.banner)
    assert banner["message"].startswith("agent-gateway listening on http://127.0.0.1:")


def test_a_traceback_stays_inside_one_json_line():
    try:
        raise ValueError("bad\nthing")
    except ValueError:
        record = logging.LogRecord("agent_gateway", logging.ERROR, __file__, 1, "failed %s", ("x",),
                                   exc_info=__import__("sys").exc_info())
    line = JsonFormatter().format(record)
    assert "\n" not in line
    parsed = json.loads(line)
    assert parsed["message"] == "failed x" and parsed["level"] == "ERROR" and parsed["request_id"] is None
    assert "ValueError: bad\nthing" in parsed["exception"]


def test_an_access_line_with_a_model_route_has_a_model_field():
    record = logging.LogRecord("agent_gateway.access", logging.INFO, __file__, 1,
                               "%s %s %s %.0fms id=%s key=%s model=%s",
                               ("POST", "/v1/chat/completions", 200, 12.34, "req_1", "alice", "qwen3"), None)
    parsed = json.loads(JsonFormatter().format(record))
    assert parsed["model"] == "qwen3" and parsed["status"] == 200 and parsed["path"] == "/v1/chat/completions"
    assert parsed["key"] == "alice" and parsed["message"].endswith("id=req_1 key=alice model=qwen3")
