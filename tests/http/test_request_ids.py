"""Request ids on every reply and in the logs; an access line per request that never holds a key."""

from __future__ import annotations

import logging
import re

import pytest

from gateway.observe.access_log import LOG_FORMAT, LogFormatter, RequestIdFilter, log_access
from tests.conftest import API_KEY
from tests.fakes.upstream import Reply, error
from tests.support.helpers import access_lines, chat_chunks

CHAT = {"messages": [{"role": "user", "content": "hi"}]}
GENERATED = re.compile(r"req_[0-9a-f]{32}")


@pytest.fixture
def logs(caplog):
    caplog.set_level(logging.DEBUG)
    request_ids = RequestIdFilter()
    caplog.handler.addFilter(request_ids)  # pytest reuses this handler across tests: take it off after
    yield caplog
    caplog.handler.removeFilter(request_ids)


async def test_sane_client_request_id_is_echoed(client):
    resp = await client.post("/v1/chat/completions", json=CHAT, headers={"X-Request-Id": "trace-42.a_b"})
    assert resp.headers["X-Request-Id"] == "trace-42.a_b"


@pytest.mark.parametrize("presented", ["x" * 129, "has space", "semi;colon", "ünïcode", ""])
async def test_unsafe_client_request_id_is_replaced(client, presented):
    resp = await client.get("/v1/models", headers={"X-Request-Id": presented})
    assert GENERATED.fullmatch(resp.headers["X-Request-Id"])


async def test_every_reply_gets_a_fresh_id(client):
    ids = {(await client.get("/v1/models")).headers["X-Request-Id"] for _ in range(3)}
    assert len(ids) == 3 and all(GENERATED.fullmatch(i) for i in ids)


async def test_errors_and_streams_carry_the_id(make_client):
    client = await make_client(api_key=API_KEY)
    unauthorized = await client.get("/v1/models")
    assert unauthorized.status == 401 and GENERATED.fullmatch(unauthorized.headers["X-Request-Id"])
    missing = await client.get("/v1/nope", headers={"X-Request-Id": "r404", "Authorization": f"Bearer {API_KEY}"})
    assert missing.status == 404 and missing.headers["X-Request-Id"] == "r404"
    stream = await client.post("/v1/chat/completions", json={**CHAT, "stream": True},
                               headers={"Authorization": f"Bearer {API_KEY}", "X-Request-Id": "r-stream"})
    assert stream.headers["X-Request-Id"] == "r-stream"
    assert chat_chunks(await stream.text())


async def test_access_line_has_method_path_status_duration_and_id(client, logs):
    await client.post("/v1/chat/completions?debug=1", json=CHAT, headers={"X-Request-Id": "rid-1"})
    lines = await access_lines(logs, 1)
    assert len(lines) == 1
    message = lines[0].getMessage()
    assert re.fullmatch(r"POST /v1/chat/completions 200 \d+ms id=rid-1 key=default", message), message
    assert lines[0].request_id == "rid-1"


async def test_log_records_written_during_a_request_carry_its_id(client, upstream, logs):
    upstream.queue(Reply(text="partial answer that breaks", drop_after=2))
    resp = await client.post("/v1/chat/completions", json={**CHAT, "stream": True},
                             headers={"X-Request-Id": "rid-fail"})
    await resp.text()
    await access_lines(logs, 1)
    mine = [r for r in logs.records if r.name.startswith("agent_gateway")]
    assert any(r.name == "agent_gateway.chat" for r in mine)  # the mid-stream failure warning
    assert {r.request_id for r in mine} == {"rid-fail"}


async def test_keys_never_reach_the_logs(make_client, upstream, logs):
    upstream_key = "sk-upstream-secret-987"
    client = await make_client(api_key=API_KEY, llm_api_key=upstream_key)
    auth = {"Authorization": f"Bearer {API_KEY}"}
    await client.post("/v1/chat/completions", json=CHAT, headers=auth)
    await (await client.post("/v1/chat/completions", json={**CHAT, "stream": True}, headers=auth)).text()
    await client.get("/v1/models", headers={"Authorization": "Bearer sk-wrong-key-555"})
    upstream.queue(error(500, "upstream exploded"))
    await client.post("/v1/chat/completions", json=CHAT, headers=auth)
    assert len(await access_lines(logs, 4)) == 4
    text = logs.text + "\n".join(f"{r.getMessage()} {r.args!r} {r.__dict__!r}" for r in logs.records)
    for secret in (API_KEY, upstream_key, "sk-wrong-key-555", "Bearer"):
        assert secret not in text


@pytest.mark.parametrize("created", [0.0, 1700000000.0, 1700000000.9995, 1700000001.0004, 1e9 + 0.5])
def test_serve_log_lines_read_as_the_stdlib_formatter_writes_them(created):
    record = logging.LogRecord("agent_gateway.access", logging.INFO, __file__, 1, "POST %s %s", ("/v1/x", 200), None)
    record.created, record.msecs, record.request_id = created, (created - int(created)) * 1000, "rid-1"
    ours = LogFormatter(LOG_FORMAT)
    for _ in range(2):  # the second record in the same second takes the cached date and time
        assert ours.format(record) == logging.Formatter(LOG_FORMAT).format(record)


@pytest.mark.parametrize("threads", [False, True])
def test_access_records_under_serve_hold_what_logging_would_put_on_them(monkeypatch, threads):
    """`serve` turns off the caller lookup (access_log.configure_logging): access lines are then made
    from a template, and must carry every field a record made by logging carries, with the same values."""
    monkeypatch.setattr(logging, "_srcfile", None)
    monkeypatch.setattr(logging, "logThreads", threads)
    seen: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append(record)

    access = logging.getLogger("agent_gateway.access")
    keep = Keep()
    access.addHandler(keep)
    monkeypatch.setattr(access, "level", logging.INFO)
    try:
        log_access("POST", "/v1/chat/completions", "rid-7", 200, 1.0, 1.25)
        access.info("%s %s %s %.0fms id=%s key=%s", "POST", "/v1/chat/completions", 200, 250.0, "rid-7", "-")
    finally:
        access.removeHandler(keep)
    ours, stock = (record.__dict__ for record in seen)
    timing = {"created", "msecs", "relativeCreated"}
    assert {k: v for k, v in ours.items() if k not in timing} == {k: v for k, v in stock.items() if k not in timing}
    assert abs(ours["created"] - stock["created"]) < 5 and 0 <= ours["msecs"] < 1000
    assert ours["relativeCreated"] == pytest.approx((ours["created"] - logging._startTime) * 1000)  # type: ignore[attr-defined]
    assert seen[0].getMessage() == "POST /v1/chat/completions 200 250ms id=rid-7 key=-"


@pytest.mark.parametrize("model", [None, "route-a"])
async def test_serve_writes_the_access_line_the_record_path_would_write(monkeypatch, model):
    """Under `serve`'s own handler alone, the access line is written without a record; it must read
    exactly as the record path formats it (time aside), model route and escaped path included."""
    import io
    import types

    from gateway.observe import access_log
    from gateway.observe.batched_log import BatchingStreamHandler

    stream = io.StringIO()
    handler = BatchingStreamHandler(stream, delay=60)
    handler.setFormatter(LogFormatter(LOG_FORMAT))
    handler.addFilter(RequestIdFilter())
    access = logging.getLogger("agent_gateway.access")
    monkeypatch.setattr(access, "handlers", [handler])
    monkeypatch.setattr(access, "propagate", False)
    monkeypatch.setattr(access, "level", logging.INFO)
    monkeypatch.setattr(logging, "_srcfile", None)
    if model is not None:
        access_log.MODEL_ROUTE.set(types.SimpleNamespace(served=types.SimpleNamespace(id=model)))  # type: ignore[arg-type]
    path = "/v1/chat/completions\n\x1b[31mforged"

    assert access_log._serve_handler() is handler  # the line path
    log_access("POST", path, "rid-9", 200, 1.0, 1.25)
    access.addFilter(logging.Filter())  # any filter on the access logger: the record path
    try:
        assert access_log._serve_handler() is None
        log_access("POST", path, "rid-9", 200, 1.0, 1.25)
    finally:
        access.filters.clear()
    handler.close()

    line, record_line = (text.split(" ", 2)[2] for text in stream.getvalue().splitlines())  # past the time
    assert line == record_line
    suffix = "" if model is None else f" model={model}"
    assert line == (r"INFO agent_gateway.access [-] POST /v1/chat/completions\n\x1b[31mforged 200 250ms "
                    f"id=rid-9 key=-{suffix}")
