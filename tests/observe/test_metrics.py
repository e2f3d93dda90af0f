"""GET /metrics: exact counts after known traffic, moving buckets, bounded labels, key and switch."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from gateway.config.settings import Settings
from gateway.http.app import create_app
from tests.conftest import API_KEY
from tests.fakes.scripted import Reply as ServiceReply
from tests.fakes.searxng import FakeSearxng, searxng_server  # noqa: F401
from tests.fakes.upstream import FakeUpstream, Reply, text, tool_call
from tests.support.helpers import assert_error_envelope, chat_chunks

USER = [{"role": "user", "content": "What colour is the sky?"}]
AUTH = {"Authorization": f"Bearer {API_KEY}"}
Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


async def scrape(client: Any, headers: dict[str, str] | None = None) -> tuple[Samples, str]:
    resp = await client.get("/metrics", headers=AUTH if headers is None else headers)
    assert resp.status == 200, await resp.text()
    assert resp.headers["Content-Type"].startswith("text/plain")
    body = await resp.text()
    samples: Samples = {}
    for family in text_string_to_metric_families(body):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples, body


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


async def test_a_scrape_after_known_traffic_shows_the_exact_counts(make_client, upstream: FakeUpstream,
                                                                    lookup_tool):
    client = await make_client(tools=[lookup_tool], api_key=API_KEY)
    # a non-streamed turn with one tool round (two model calls), then a streamed plain turn
    upstream.queue(tool_call(("lookup", {"term": "sky"})), text("Green."), text("Hi there."))
    resp = await client.post("/v1/chat/completions", json={"messages": USER}, headers=AUTH)
    assert resp.status == 200
    resp = await client.post("/v1/chat/completions", json={"messages": USER, "stream": True}, headers=AUTH)
    chat_chunks(await resp.text())
    assert (await client.get("/v1/models")).status == 401  # no key
    assert (await client.get("/no/such/path", headers=AUTH)).status == 404
    assert (await client.get("/v1/responses/resp_x/nope", headers=AUTH)).status == 404

    samples, body = await scrape(client)
    requests = "agent_gateway_requests_total"
    assert value(samples, requests, route="/v1/chat/completions", method="POST", status="200") == 2
    assert value(samples, requests, route="/v1/models", method="GET", status="401") == 1
    # unknown paths collapse into one label, whatever they were
    assert value(samples, requests, route="unmatched", method="GET", status="404") == 2
    assert "/no/such/path" not in body and "resp_x" not in body and API_KEY not in body
    assert value(samples, "agent_gateway_rejections_total", reason="unauthorized") == 1
    assert value(samples, "agent_gateway_request_duration_seconds_count", route="/v1/chat/completions") == 1
    assert value(samples, "agent_gateway_stream_first_byte_seconds_count", route="/v1/chat/completions") == 1
    assert value(samples, "agent_gateway_stream_duration_seconds_count", route="/v1/chat/completions") == 1
    assert value(samples, "agent_gateway_upstream_calls_total", outcome="ok") == 3
    assert value(samples, "agent_gateway_upstream_call_duration_seconds_count") == 3
    assert value(samples, "agent_gateway_upstream_first_token_seconds_count") == 1  # the streamed call
    assert value(samples, "agent_gateway_tokens_total", direction="in") == 30  # 10 per model call (fake)
    assert value(samples, "agent_gateway_tokens_total", direction="out") == 15
    assert value(samples, "agent_gateway_tool_calls_total", tool="lookup", provider="none", outcome="ok") == 1
    assert value(samples, "agent_gateway_tool_call_duration_seconds_count", tool="lookup", provider="none") == 1
    assert value(samples, "agent_gateway_agent_tool_rounds_count") == 2
    assert value(samples, "agent_gateway_agent_tool_rounds_sum") == 1
    assert value(samples, "agent_gateway_agent_tool_rounds_bucket", le="0.0") == 1
    assert value(samples, "agent_gateway_agent_tool_rounds_bucket", le="1.0") == 2
    assert value(samples, "agent_gateway_open_streams") == 0
    assert value(samples, "agent_gateway_agent_runs") == 0
    assert value(samples, "agent_gateway_requests_in_flight") == 1  # the scrape itself

    # the scrape is counted once it is answered
    again, _ = await scrape(client)
    assert value(again, requests, route="/metrics", method="GET", status="200") == 1


async def test_a_whole_reply_after_a_stream_on_the_same_connection_counts_as_a_whole_reply(client,
                                                                                        upstream: FakeUpstream):
    upstream.queue(text("Streamed."), text("Whole."))
    resp = await client.post("/v1/chat/completions", json={"messages": USER, "stream": True})
    chat_chunks(await resp.text())
    assert (await client.post("/v1/chat/completions", json={"messages": USER})).status == 200
    samples, _ = await scrape(client)
    route = "/v1/chat/completions"
    assert value(samples, "agent_gateway_stream_duration_seconds_count", route=route) == 1
    assert value(samples, "agent_gateway_request_duration_seconds_count", route=route) == 1
    assert value(samples, "agent_gateway_open_streams") == 0


async def test_the_duration_buckets_move_with_the_time_a_reply_takes(client, upstream: FakeUpstream):
    before, _ = await scrape(client)
    upstream.queue(text("Slow.", delay=0.3))
    assert (await client.post("/v1/chat/completions", json={"messages": USER})).status == 200
    after, _ = await scrape(client)
    name = "agent_gateway_request_duration_seconds_bucket"
    route = "/v1/chat/completions"
    for le in ("0.1", "0.25"):
        assert value(after, name, route=route, le=le) == value(before, name, route=route, le=le) == 0
    assert value(after, name, route=route, le="10.0") == 1
    assert value(after, name, route=route, le="+Inf") == 1
    assert value(after, "agent_gateway_request_duration_seconds_sum", route=route) >= 0.3
    assert value(after, "agent_gateway_upstream_call_duration_seconds_bucket", le="0.25") == 0
    assert value(after, "agent_gateway_upstream_call_duration_seconds_bucket", le="10.0") == 1


async def test_oversize_bodies_and_runs_beyond_the_cap_are_counted_as_rejections(make_client,
                                                                                upstream: FakeUpstream):
    client = await make_client(max_body_bytes=2000, max_concurrent_runs=1)
    assert (await client.post("/v1/chat/completions", data=b"{" + b" " * 3000 + b"}",
                              headers={"Content-Type": "application/json"})).status == 413
    upstream.queue(text("Slow.", delay=0.5))
    first = asyncio.ensure_future(client.post("/v1/chat/completions", json={"messages": USER}))
    while upstream.active == 0:
        await asyncio.sleep(0.01)
    assert (await client.post("/v1/chat/completions", json={"messages": USER})).status == 429
    assert (await first).status == 200
    samples, _ = await scrape(client)
    assert value(samples, "agent_gateway_rejections_total", reason="payload_too_large") == 1
    assert value(samples, "agent_gateway_rejections_total", reason="rate_limited") == 1


async def test_upstream_failures_are_counted_by_outcome(client, upstream: FakeUpstream):
    upstream.queue(Reply(status=500, error_body={"error": {"message": "boom"}}),
                   Reply(status=429, error_body={"error": {"message": "slow down"}}))
    assert (await client.post("/v1/chat/completions", json={"messages": USER})).status == 502
    assert (await client.post("/v1/chat/completions", json={"messages": USER})).status == 429
    samples, _ = await scrape(client)
    assert value(samples, "agent_gateway_upstream_calls_total", outcome="error") == 1
    assert value(samples, "agent_gateway_upstream_calls_total", outcome="rate_limited") == 1
    assert value(samples, "agent_gateway_upstream_calls_total", outcome="ok") == 0


async def test_idempotent_replays_and_store_operations_are_counted(client, upstream: FakeUpstream):
    headers = {"Idempotency-Key": "k-1"}
    for _ in range(2):
        resp = await client.post("/v1/chat/completions", json={"messages": USER}, headers=headers)
        assert resp.status == 200
    assert resp.headers["Idempotent-Replayed"] == "true"
    created = await (await client.post("/v1/responses", json={"input": "hi"})).json()
    assert (await client.get(f"/v1/responses/{created['id']}")).status == 200
    assert (await client.get("/v1/responses/resp_missing")).status == 404
    samples, _ = await scrape(client)
    assert value(samples, "agent_gateway_idempotent_replays_total") == 1
    assert value(samples, "agent_gateway_store_operations_total", operation="put", outcome="ok") == 1
    assert value(samples, "agent_gateway_store_operations_total", operation="get", outcome="ok") == 2
    assert value(samples, "agent_gateway_store_operation_duration_seconds_count", operation="put") == 1


@pytest.fixture
async def web_client(aiohttp_client: Any, make_settings: Callable[..., Settings],
                     searxng_server: FakeSearxng) -> Any:  # noqa: F811
    """The app as `serve` builds it: the web tools on the provider registry (SearXNG configured)."""
    settings = make_settings(env={"SEARXNG_URL": searxng_server.base_url}, web_search_backend="searxng")
    return await aiohttp_client(create_app(settings))


async def test_web_tool_calls_are_counted_by_provider_and_outcome(web_client, upstream: FakeUpstream,
                                                                  searxng_server: FakeSearxng):  # noqa: F811
    searxng_server.script(ServiceReply(status=500, text="down"))
    upstream.queue(tool_call(("web_search", {"query": "otters"})), text("Failed."),
                   tool_call(("web_search", {"query": "otters"})), text("Fish."),
                   tool_call(("no_such_tool", {})), text("Hm."))
    for _ in range(3):
        assert (await web_client.post("/v1/chat/completions", json={"messages": USER})).status == 200
    samples, body = await scrape(web_client)
    calls = "agent_gateway_tool_calls_total"
    assert value(samples, calls, tool="web_search", provider="searxng", outcome="error") == 1
    assert value(samples, calls, tool="web_search", provider="searxng", outcome="ok") == 1
    assert value(samples, calls, tool="unknown", provider="none", outcome="unknown_tool") == 1
    assert "otters" not in body and "no_such_tool" not in body


async def test_metrics_need_the_key_when_one_is_set(make_client):
    client = await make_client(api_key=API_KEY)
    resp = await client.get("/metrics")
    assert resp.status == 401
    assert_error_envelope(await resp.json())
    resp = await client.get("/metrics", headers={"Authorization": "Bearer wrong"})
    assert resp.status == 401
    await scrape(client)  # 200 with the key


async def test_metrics_switched_off_is_404_and_the_api_still_works(make_client, upstream: FakeUpstream):
    client = await make_client(metrics_enabled=False)
    resp = await client.get("/metrics")
    assert resp.status == 404
    assert_error_envelope(await resp.json())
    assert (await client.post("/v1/chat/completions", json={"messages": USER})).status == 200
    resp = await client.post("/v1/chat/completions", json={"messages": USER, "stream": True})
    chat_chunks(await resp.text())


async def test_each_app_counts_only_its_own_traffic(make_client):
    first = await make_client()
    second = await make_client()
    assert (await first.get("/health")).status == 200
    samples, _ = await scrape(second)
    assert value(samples, "agent_gateway_requests_total", route="/health", method="GET", status="200") == 0


SCRAPED_ONCE = """
import asyncio, json, sys
from pathlib import Path
from aiohttp.test_utils import TestClient, TestServer
from gateway.config.settings import load_settings
from gateway.http.app import create_app

async def main():
    settings = load_settings(Path(sys.argv[1]), environ={"LLM_BASE_URL": "http://127.0.0.1:9/v1", "LLM_MODEL": "m"})
    async with TestClient(TestServer(create_app(settings))) as client:
        before = "prometheus_client" in sys.modules
        resp = await client.get("/metrics")
        body = await resp.text()
        print(json.dumps([before, "prometheus_client" in sys.modules, resp.status,
                          "agent_gateway_requests_total" in body]))

asyncio.run(main())
"""


def test_prometheus_client_is_loaded_at_the_first_scrape_not_at_start(tmp_path):
    """1.4 MiB of an idle gateway: a started app (metrics on, the default) has not imported it."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    out = subprocess.run([sys.executable, "-c", SCRAPED_ONCE, str(tmp_path)], cwd=Path(__file__).resolve().parents[2],
                         capture_output=True, text=True, timeout=120, check=True)
    assert json.loads(out.stdout.splitlines()[-1]) == [False, True, 200, True]
