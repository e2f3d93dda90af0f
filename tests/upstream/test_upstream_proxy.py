"""`agent-gateway serve` reaches the upstream model through the proxy `HTTP_PROXY` names, and
directly for the hosts `NO_PROXY` lists, as corporate networks need."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.fakes.forward_proxy import ForwardProxy
from tests.fakes.upstream import FakeUpstream
from tests.support.gateway_process import gateway_env, start_gateway
from tests.support.helpers import chat_chunks, streamed_text

HI = {"messages": [{"role": "user", "content": "hi"}]}
PROXY_VARIABLES = ("http_proxy", "https_proxy", "all_proxy", "no_proxy")


@pytest.fixture
async def proxy(aiohttp_raw_server: Any) -> AsyncIterator[ForwardProxy]:
    fake = ForwardProxy()
    server = await aiohttp_raw_server(fake.handle)
    fake.url = str(server.make_url("/"))
    yield fake
    await fake.close()


def env_with(tmp_path: Path, upstream: FakeUpstream, **proxy_settings: str) -> dict[str, str]:
    env = gateway_env(tmp_path, {"LLM_BASE_URL": upstream.base_url, "LLM_MODEL": "fake-model"})
    for name in list(env):
        if name.lower() in PROXY_VARIABLES:  # only what the test sets
            del env[name]
    env.update(proxy_settings)
    return env


async def chat_twice(base_url: str) -> None:
    """One whole reply and one stream: both must arrive."""
    async with aiohttp.ClientSession() as session:
        async with session.post(base_url + "/v1/chat/completions", json=HI) as resp:
            assert resp.status == 200, await resp.text()
            assert (await resp.json())["choices"][0]["message"]["content"] == "Hello from the fake model."
        async with session.post(base_url + "/v1/chat/completions", json={**HI, "stream": True}) as resp:
            assert resp.status == 200
            assert streamed_text(chat_chunks(await resp.text())) == "Hello from the fake model."


async def test_the_upstream_is_called_through_the_http_proxy(tmp_path, upstream, proxy):
    gateway = await start_gateway(env=env_with(tmp_path, upstream, HTTP_PROXY=proxy.url))
    try:
        await chat_twice(gateway.base_url)
    finally:
        await gateway.stop()
    assert proxy.targets == [upstream.base_url + "/chat/completions"] * 2
    assert not proxy.refused
    assert len(upstream.requests) == 2


async def test_no_proxy_covering_the_upstream_goes_direct(tmp_path, upstream, proxy):
    env = env_with(tmp_path, upstream, HTTP_PROXY=proxy.url, NO_PROXY="localhost,127.0.0.1")
    gateway = await start_gateway(env=env)
    try:
        await chat_twice(gateway.base_url)
    finally:
        await gateway.stop()
    assert proxy.targets == [] and proxy.refused == []
    assert len(upstream.requests) == 2


async def test_a_proxys_credentials_reach_the_proxy_and_never_the_upstream(tmp_path, upstream, proxy):
    with_credentials = proxy.url.replace("http://", "http://ops:s3cret@", 1)
    # aiohttp's `proxy_auth` is deprecated (gone in aiohttp 4): the gateway must not lean on it
    gateway = await start_gateway(env=env_with(tmp_path, upstream, HTTP_PROXY=with_credentials,
                                               PYTHONWARNINGS="error::DeprecationWarning"))
    try:
        await chat_twice(gateway.base_url)
    finally:
        await gateway.stop()
    log = (await gateway.proc.stderr.read()).decode() if gateway.proc.stderr is not None else ""
    assert proxy.authorizations == ["Basic b3BzOnMzY3JldA=="] * 2  # ops:s3cret, once per request
    assert len(upstream.requests) == 2
    assert not any("proxy-authorization" in {name.lower() for name in seen} for seen in upstream.headers)
    assert "s3cret" not in log and "Traceback" not in log
