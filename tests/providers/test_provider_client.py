"""The providers' HTTP kit (providers/http.py on aiohttp) as a service sees it: list parameters as
repeated keys, one kept-alive connection for sequential calls, the environment's proxy, a bounded
body, and a session that is closed with the provider."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web

from plugins.web.searxng.provider import SearxngProvider
from providers.http import LazyClient, call_json
from providers.http_session import MAX_BODY_BYTES
from providers.web import ProviderError
from tests.fakes.forward_proxy import ForwardProxy

PROXY_VARIABLES = ("http_proxy", "https_proxy", "all_proxy", "no_proxy")


class Service:
    """A JSON service recording each request's query pairs, User-Agent and client port."""

    def __init__(self) -> None:
        self.queries: list[list[tuple[str, str]]] = []
        self.ports: list[int] = []
        self.agents: list[str] = []
        self.huge = False

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/search", self.search)
        return app

    async def search(self, request: web.Request) -> web.StreamResponse:
        self.queries.append(list(request.query.items()))
        peer = request.transport.get_extra_info("peername") if request.transport else None
        self.ports.append(peer[1] if peer else -1)
        self.agents.append(request.headers.get("User-Agent", ""))
        if self.huge:
            response = web.StreamResponse()  # chunked: no Content-Length to refuse it up front
            await response.prepare(request)
            piece = b" " * (1024 * 1024)
            for _ in range(MAX_BODY_BYTES // len(piece) + 2):
                await response.write(piece)
            await response.write_eof()
            return response
        return web.json_response({"results": [], "query": request.query.get("q", "")})


@pytest.fixture
async def service(aiohttp_server: Any) -> AsyncIterator[tuple[Service, str]]:
    fake = Service()
    server = await aiohttp_server(fake.app())
    yield fake, str(server.make_url("")).rstrip("/")


@pytest.fixture
def no_proxy_env(monkeypatch: Any) -> None:
    import os

    for name in list(os.environ):
        if name.lower() in PROXY_VARIABLES:
            monkeypatch.delenv(name)


async def test_list_parameters_reach_the_service_as_repeated_keys(service: Any, no_proxy_env: None) -> None:
    fake, url = service
    client = LazyClient(5)
    try:
        await call_json(client.get(), "Fake", "GET", f"{url}/search",
                        params={"q": "otters", "engines": ["a", "b"], "safe": True, "page": None})
    finally:
        await client.aclose()
    assert fake.queries == [[("q", "otters"), ("engines", "a"), ("engines", "b"), ("safe", "true")]]
    assert fake.agents == ["agent-gateway"]


async def test_sequential_calls_share_one_kept_alive_connection(service: Any, no_proxy_env: None) -> None:
    fake, url = service
    provider = SearxngProvider({"SEARXNG_URL": url})
    try:
        for n in range(5):
            await provider.search(f"otters {n}")
    finally:
        await provider.aclose()
    assert len(fake.ports) == 5
    assert len(set(fake.ports)) == 1


async def test_the_session_is_closed_with_the_provider_and_reopens_on_next_use(service: Any,
                                                                               no_proxy_env: None) -> None:
    fake, url = service
    client = LazyClient(5)
    await call_json(client.get(), "Fake", "GET", f"{url}/search")
    assert not client.get().is_closed
    await client.aclose()
    assert client.get().is_closed
    await call_json(client.get(), "Fake", "GET", f"{url}/search")  # a later use opens a new session
    await client.aclose()
    assert len(set(fake.ports)) == 2


async def test_an_answer_over_the_body_cap_is_a_clear_provider_error(service: Any, no_proxy_env: None) -> None:
    fake, url = service
    fake.huge = True
    client = LazyClient(10)
    try:
        with pytest.raises(ProviderError) as refused:
            await call_json(client.get(), "Fake", "GET", f"{url}/search")
    finally:
        await client.aclose()
    assert str(refused.value) == "Fake sent an answer larger than 16 MiB, the most a provider reads"


async def test_the_service_is_called_through_the_proxy_the_environment_names(
        service: Any, aiohttp_raw_server: Any, monkeypatch: Any, no_proxy_env: None) -> None:
    fake, url = service
    proxy = ForwardProxy()
    server = await aiohttp_raw_server(proxy.handle)
    monkeypatch.setenv("HTTP_PROXY", str(server.make_url("/")))
    client = LazyClient(5)
    try:
        body = await call_json(client.get(), "Fake", "GET", f"{url}/search", params={"q": "otters"})
        await call_json(client.get(), "Fake", "GET", f"{url}/search", params={"q": "again"})
    finally:
        await client.aclose()
        await proxy.close()
    assert body == {"results": [], "query": "otters"}
    assert proxy.targets == [f"{url}/search?q=otters", f"{url}/search?q=again"]


async def test_no_proxy_sends_the_service_direct(service: Any, aiohttp_raw_server: Any, monkeypatch: Any,
                                                 no_proxy_env: None) -> None:
    fake, url = service
    proxy = ForwardProxy()
    server = await aiohttp_raw_server(proxy.handle)
    monkeypatch.setenv("HTTP_PROXY", str(server.make_url("/")))
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    client = LazyClient(5)
    try:
        await call_json(client.get(), "Fake", "GET", f"{url}/search")
    finally:
        await client.aclose()
        await proxy.close()
    assert proxy.targets == []
    assert len(fake.queries) == 1
