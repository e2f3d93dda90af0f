"""MCP calls observed: `agent_gateway_mcp_calls_total{server,outcome}` and the
`agent_gateway_mcp_call_seconds{server}` histogram (a request-named server counted as `request`,
whatever its label), a span per call naming server and tool, and the access line's `mcp=N`.
Against the `mcp` SDK's real Streamable HTTP server."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pytest

from gateway.config.mcp_servers import McpServerSpec
from gateway.http.app import create_app
from tests.conftest import API_KEY
from tests.fakes.upstream import text, tool_call
from tests.observe.test_metrics import scrape, value
from tests.support.helpers import access_lines
from tests.support.mcp_servers import sdk_server

AUTH = {"Authorization": f"Bearer {API_KEY}"}


@pytest.fixture(scope="module")
def sdk_url() -> Iterator[str]:
    with sdk_server() as url:
        yield url


def named(url: str, label: str) -> dict[str, Any]:
    return {"type": "mcp", "server_label": label, "server_url": url, "require_approval": "never"}


async def test_mcp_calls_are_counted_by_server_and_outcome_with_request_servers_as_request(
        make_client, lookup_tool, upstream, sdk_url, caplog):
    caplog.set_level(logging.INFO, logger="agent_gateway.access")
    client = await make_client(tools=[lookup_tool], api_key=API_KEY, mcp_allowed_hosts=("127.0.0.1",),
                               mcp_servers=(McpServerSpec("team", url=sdk_url, offer="all"),))
    upstream.queue(tool_call(("team__echo", {"text": "a"}), ("team__fail", {"reason": "b"})), text("Done."))
    resp = await client.post("/v1/chat/completions", headers=AUTH,
                             json={"messages": [{"role": "user", "content": "go"}]})
    assert resp.status == 200
    upstream.queue(tool_call(("client-label-1__echo", {"text": "c"})), text("Done."))
    resp = await client.post("/v1/responses", headers=AUTH,
                             json={"input": "go", "tools": [named(sdk_url, "client-label-1")]})
    assert resp.status == 200
    samples, body = await scrape(client)
    calls = "agent_gateway_mcp_calls_total"
    assert value(samples, calls, server="team", outcome="ok") == 1
    assert value(samples, calls, server="team", outcome="tool_error") == 1
    assert value(samples, calls, server="request", outcome="ok") == 1
    assert "client-label-1" not in body  # a client's label is no metric label
    assert value(samples, "agent_gateway_mcp_call_seconds_count", server="team") == 2
    lines = [record.getMessage() for record in await access_lines(caplog, 3)]
    assert any(line.startswith("POST /v1/chat/completions 200") and line.endswith(" mcp=2") for line in lines)
    assert any(line.startswith("POST /v1/responses 200") and line.endswith(" mcp=1") for line in lines)
    assert not any("mcp=" in line for line in lines if line.startswith("GET /metrics"))


async def test_each_mcp_call_is_a_span_naming_the_server_and_the_tool(aiohttp_client, make_settings, upstream,
                                                                      sdk_url):
    pytest.importorskip("opentelemetry.sdk", reason="the otel extra is not installed")
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    app = create_app(make_settings(mcp_allowed_hosts=("127.0.0.1",)), tools=[], tracer_provider=provider)
    client = await aiohttp_client(app)
    upstream.queue(tool_call(("sdk__echo", {"text": "traced"})), text("Done."))
    resp = await client.post("/v1/responses", json={"input": "go", "tools": [named(sdk_url, "sdk")]})
    assert resp.status == 200
    (span,) = [span for span in exporter.get_finished_spans() if span.name.startswith("mcp ")]
    assert span.name == "mcp sdk.echo"
    assert span.attributes["gateway.mcp.server"] == "sdk" and span.attributes["gateway.mcp.tool"] == "echo"
    assert span.attributes["gateway.outcome"] == "ok"
    provider.shutdown()
