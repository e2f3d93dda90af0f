"""OpenTelemetry: one server span per request, child spans for model and tool calls, traceparent in
and out. Spans go to an in-memory exporter through the app factory's `tracer_provider`."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk", reason="the otel extra is not installed")

from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402
from opentelemetry.trace import SpanKind, StatusCode  # noqa: E402

from gateway.http.app import create_app  # noqa: E402
from tests.fakes.tools import LookupTool  # noqa: E402
from tests.fakes.upstream import FakeUpstream, text, tool_call  # noqa: E402

USER = [{"role": "user", "content": "What colour is the sky?"}]
TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
CLIENT_SPAN = "00f067aa0ba902b7"


@pytest.fixture
def exporter() -> InMemorySpanExporter:
    return InMemorySpanExporter()


@pytest.fixture
async def traced_client(aiohttp_client: Any, make_settings: Any, exporter: InMemorySpanExporter) -> Any:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    app = create_app(make_settings(), tools=[LookupTool()], tracer_provider=provider)
    yield await aiohttp_client(app)
    provider.shutdown()


async def test_a_request_with_one_tool_call_makes_a_span_tree_under_the_clients_trace(
        traced_client, upstream: FakeUpstream, exporter: InMemorySpanExporter):
    upstream.queue(tool_call(("lookup", {"term": "sky"})), text("Green."))
    resp = await traced_client.post("/v1/chat/completions", json={"messages": USER},
                                    headers={"traceparent": f"00-{TRACE_ID}-{CLIENT_SPAN}-01"})
    assert resp.status == 200
    spans = exporter.get_finished_spans()
    [server] = [s for s in spans if s.kind == SpanKind.SERVER]
    assert server.name == "POST /v1/chat/completions"
    assert format(server.context.trace_id, "032x") == TRACE_ID
    assert server.parent is not None and format(server.parent.span_id, "016x") == CLIENT_SPAN
    assert server.attributes["http.response.status_code"] == 200
    assert server.attributes["gateway.request_id"] == resp.headers["X-Request-Id"]

    children = sorted((s for s in spans if s is not server), key=lambda s: s.start_time)
    assert [s.name for s in children] == ["upstream chat.completions", "tool lookup", "upstream chat.completions"]
    for child in children:
        assert child.parent is not None and child.parent.span_id == server.context.span_id
        assert child.context.trace_id == server.context.trace_id
        assert child.attributes["gateway.outcome"] == "ok"
    tool = children[1]
    assert tool.attributes["gateway.tool"] == "lookup" and tool.attributes["gateway.provider"] == "none"
    # each model call told the upstream its own span as the parent
    sent = [h.get("traceparent") or h.get("Traceparent") for h in upstream.headers]
    assert sent == [f"00-{TRACE_ID}-{format(s.context.span_id, '016x')}-01" for s in (children[0], children[2])]


async def test_a_failed_model_call_is_an_error_span_and_a_stream_is_one_server_span(
        traced_client, upstream: FakeUpstream, exporter: InMemorySpanExporter):
    upstream.queue(tool_call(("lookup", {"term": "sky"})), text("Green."))
    resp = await traced_client.post("/v1/chat/completions", json={"messages": USER, "stream": True})
    await resp.read()
    [server] = [s for s in exporter.get_finished_spans() if s.kind == SpanKind.SERVER]
    assert len(exporter.get_finished_spans()) == 4  # no traceparent: a new trace, same tree
    assert server.parent is None
    exporter.clear()

    from tests.fakes.upstream import error

    upstream.queue(error(500))
    assert (await traced_client.post("/v1/chat/completions", json={"messages": USER})).status == 502
    spans = exporter.get_finished_spans()
    [upstream_span] = [s for s in spans if s.kind == SpanKind.CLIENT]
    assert upstream_span.attributes["gateway.outcome"] == "error"
    assert upstream_span.status.status_code == StatusCode.ERROR
    [server] = [s for s in spans if s.kind == SpanKind.SERVER]
    assert server.status.status_code == StatusCode.ERROR
    assert server.attributes["http.response.status_code"] == 502


async def test_without_a_tracer_provider_nothing_is_sent_upstream(client, upstream: FakeUpstream):
    assert (await client.post("/v1/chat/completions", json={"messages": USER})).status == 200
    assert "traceparent" not in {k.lower() for k in upstream.headers[0]}


async def test_serve_exports_spans_where_otel_traces_exporter_says(tmp_path, upstream: FakeUpstream):
    import aiohttp

    from tests.support.gateway_process import gateway_env, start_gateway

    env = gateway_env(tmp_path, {"LLM_BASE_URL": upstream.base_url, "LLM_MODEL": "fake-model",
                                 "OTEL_TRACES_EXPORTER": "console", "OTEL_SERVICE_NAME": "gw-under-test"})
    gateway = await start_gateway(env=env)
    try:
        async with aiohttp.ClientSession() as session:
            async with session.post(gateway.base_url + "/v1/chat/completions",
                                    json={"messages": USER},
                                    headers={"traceparent": f"00-{TRACE_ID}-{CLIENT_SPAN}-01"}) as resp:
                assert resp.status == 200
    finally:
        assert await gateway.stop() == 0
    assert gateway.proc.stdout is not None
    out = (await gateway.proc.stdout.read()).decode()  # the console exporter's spans, sent at shutdown
    assert '"name": "POST /v1/chat/completions"' in out and '"name": "upstream chat.completions"' in out
    assert f'"trace_id": "0x{TRACE_ID}"' in out and '"service.name": "gw-under-test"' in out
    # and the upstream got a traceparent in the client's trace
    assert upstream.headers[0].get("traceparent", "").startswith(f"00-{TRACE_ID}-")
