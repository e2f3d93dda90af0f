"""The providers' HTTP kit (providers/http.py on aiohttp) as a service sees it: list parameters as
repeated keys, one kept-alive connection for sequential calls, the environment's proxy (HTTP_PROXY's
forwarding, HTTPS_PROXY's CONNECT tunnel), a bounded body, and a session that is closed with the
provider."""

from __future__ import annotations

import base64
import warnings
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from aiohttp import web

from plugins.web.searxng.provider import SearxngProvider
from providers import http
from providers.http import ServiceClient, call_json
from providers.http_session import MAX_BODY_BYTES
from providers.web import ProviderError
from tests.fakes.forward_proxy import ForwardProxy, TunnellingProxy
from tests.support.services import served, trusting

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
async def service() -> AsyncIterator[tuple[Service, str]]:
    fake = Service()
    async with served(fake.app()) as url:
        yield fake, url


@pytest.fixture
def no_proxy_env(monkeypatch: Any) -> None:
    import os

    for name in list(os.environ):
        if name.lower() in PROXY_VARIABLES:
            monkeypatch.delenv(name)


async def test_list_parameters_reach_the_service_as_repeated_keys(service: Any, no_proxy_env: None) -> None:
    fake, url = service
    client = ServiceClient(5)
    try:
        await call_json(client, "Fake", "GET", f"{url}/search",
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
    client = ServiceClient(5)
    await call_json(client, "Fake", "GET", f"{url}/search")
    assert not client.is_closed
    await client.aclose()
    assert client.is_closed
    await call_json(client, "Fake", "GET", f"{url}/search")  # a later use opens a new session
    await client.aclose()
    assert len(set(fake.ports)) == 2


async def test_an_answer_over_the_body_cap_is_a_clear_provider_error(service: Any, no_proxy_env: None) -> None:
    fake, url = service
    fake.huge = True
    client = ServiceClient(10)
    try:
        with pytest.raises(ProviderError) as refused:
            await call_json(client, "Fake", "GET", f"{url}/search")
    finally:
        await client.aclose()
    assert str(refused.value) == "Fake sent an answer larger than 16 MiB, the most a provider reads"


async def test_the_service_is_called_through_the_proxy_the_environment_names(
        service: Any, aiohttp_raw_server: Any, monkeypatch: Any, no_proxy_env: None) -> None:
    fake, url = service
    proxy = ForwardProxy()
    server = await aiohttp_raw_server(proxy.handle)
    monkeypatch.setenv("HTTP_PROXY", str(server.make_url("/")))
    client = ServiceClient(5)
    try:
        body = await call_json(client, "Fake", "GET", f"{url}/search", params={"q": "otters"})
        await call_json(client, "Fake", "GET", f"{url}/search", params={"q": "again"})
    finally:
        await client.aclose()
        await proxy.close()
    assert body == {"results": [], "query": "otters"}
    assert proxy.targets == [f"{url}/search?q=otters", f"{url}/search?q=again"]


async def test_the_proxy_credentials_the_environment_names_reach_the_proxy(
        service: Any, aiohttp_raw_server: Any, monkeypatch: Any, no_proxy_env: None) -> None:
    fake, url = service
    proxy = ForwardProxy()
    server = await aiohttp_raw_server(proxy.handle)
    monkeypatch.setenv("HTTP_PROXY", f"http://agent:s3cret-proxy-pass@{server.host}:{server.port}/")
    client = ServiceClient(5)
    try:
        await call_json(client, "Fake", "GET", f"{url}/search", params={"q": "otters"})
    finally:
        await client.aclose()
        await proxy.close()
    assert proxy.targets == [f"{url}/search?q=otters"]
    assert proxy.authorizations == ["Basic " + base64.b64encode(b"agent:s3cret-proxy-pass").decode()]


async def test_no_proxy_sends_the_service_direct(service: Any, aiohttp_raw_server: Any, monkeypatch: Any,
                                                 no_proxy_env: None) -> None:
    fake, url = service
    proxy = ForwardProxy()
    server = await aiohttp_raw_server(proxy.handle)
    monkeypatch.setenv("HTTP_PROXY", str(server.make_url("/")))
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    client = ServiceClient(5)
    try:
        await call_json(client, "Fake", "GET", f"{url}/search")
    finally:
        await client.aclose()
        await proxy.close()
    assert proxy.targets == []
    assert len(fake.queries) == 1


@pytest.fixture
def trusted_ca(tmp_path: Any, monkeypatch: Any) -> Iterator[Any]:
    trustme = pytest.importorskip("trustme")
    with trusting(trustme.CA(), tmp_path, monkeypatch) as ca:
        yield ca


@pytest.fixture
async def tls_service(trusted_ca: Any) -> AsyncIterator[tuple[Service, str]]:
    fake = Service()
    async with served(fake.app(), tls=trusted_ca) as url:
        yield fake, url


@pytest.fixture
async def tunnel(monkeypatch: Any, no_proxy_env: None) -> AsyncIterator[TunnellingProxy]:
    proxy = TunnellingProxy()
    monkeypatch.setenv("HTTPS_PROXY", await proxy.start())
    yield proxy
    await proxy.close()


async def test_an_https_service_is_called_through_the_tunnel_https_proxy_names(
        tls_service: tuple[Service, str], tunnel: TunnellingProxy) -> None:
    fake, url = tls_service
    provider = SearxngProvider({"SEARXNG_URL": url})
    try:
        first = await provider.search("otters")
        second = await provider.search("beavers")
    finally:
        await provider.aclose()
    assert first == {"success": True, "data": {"web": []}}
    assert second["success"] is True
    # TLS ran end to end through one tunnel: the proxy saw only the target, the service both searches
    assert tunnel.tunnels == [url.removeprefix("https://")]
    assert [dict(q)["q"] for q in fake.queries] == ["otters", "beavers"]
    assert len(set(fake.ports)) == 1  # the tunnelled connection was kept alive for the second call


async def test_a_tunnel_the_proxy_refuses_is_a_clear_provider_error_without_the_proxy_password(
        tls_service: tuple[Service, str], monkeypatch: Any, no_proxy_env: None) -> None:
    fake, url = tls_service
    proxy = TunnellingProxy("403 Forbidden")
    proxy.refuse.add(url.removeprefix("https://"))
    address = (await proxy.start()).removeprefix("http://")
    monkeypatch.setenv("HTTPS_PROXY", f"http://agent:s3cret-proxy-pass@{address}")
    provider = SearxngProvider({"SEARXNG_URL": url})
    try:
        with pytest.raises(ProviderError) as refused:
            await provider.search("otters")
    finally:
        await provider.aclose()
        await proxy.close()
    assert str(refused.value) == "SearXNG could not be reached: the proxy answered 403 Forbidden"
    assert refused.value.retryable
    assert proxy.authorizations == ["Basic " + base64.b64encode(b"agent:s3cret-proxy-pass").decode()]
    assert fake.queries == [] and proxy.tunnels == []


def test_the_old_client_names_still_work_and_say_they_are_deprecated() -> None:
    with pytest.warns(DeprecationWarning, match="ServiceClient"):
        lazy = http.LazyClient(5)
    assert isinstance(lazy, ServiceClient) and lazy.get() is lazy
    with pytest.warns(DeprecationWarning, match="ServiceClient"):
        client = http.new_client(5)
    assert isinstance(client, ServiceClient)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ServiceClient(5)  # the name to use warns of nothing
