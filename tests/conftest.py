"""Shared fixtures: a fake upstream model and the real app built against it."""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import os
import socket
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient

from gateway.config.settings import Settings
from gateway.http.app import create_app
from tests.fakes.tools import LookupTool
from tests.fakes.upstream import FakeUpstream
from tests.support import postgres
from tests.support.gateway_process import LOG_DIR_VARIABLE

API_KEY = "sk-test-key-123"
#: Keys the tests give gateways and upstreams: none may appear in any log line of the run.
LOG_SECRETS = (API_KEY, "sk-upstream-secret-987", "sk-readme-test-key-0123456789", postgres.PASSWORD)


class SecretWatch(logging.Handler):
    """Formats every record logged in this process (message and traceback) and keeps those that
    hold a secret."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.setFormatter(logging.Formatter("%(name)s %(levelname)s %(message)s"))
        self.found: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        text = self.format(record)
        if any(secret in text for secret in LOG_SECRETS):
            self.found.append(text[:500])


@pytest.fixture(scope="session", autouse=True)
def no_key_reaches_a_log(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Every log line of the run's gateways, in-process records and subprocess stderr alike
    (tests/support/gateway_process.py copies it), is checked for the test keys once the session ends."""
    directory = tmp_path_factory.mktemp("gateway-logs")
    os.environ[LOG_DIR_VARIABLE] = str(directory)
    watch = SecretWatch()
    logging.getLogger().addHandler(watch)
    try:
        yield
    finally:
        logging.getLogger().removeHandler(watch)
        del os.environ[LOG_DIR_VARIABLE]
    leaks = list(watch.found)
    for path in sorted(directory.iterdir()):
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            if any(secret in line for secret in LOG_SECRETS):
                leaks.append(f"{path.name}: {line[:500]}")
    assert not leaks, "a test key reached a log:\n" + "\n".join(leaks[:20])


@pytest.fixture(scope="session")
def postgres_cluster() -> Iterator[postgres.Cluster]:
    """One throwaway PostgreSQL cluster for the session (Debian's server binaries). Skipped when
    they are missing, except in CI, where .ci/run installs them and a missing one is a failure."""
    if postgres.server_binaries() is None and not os.environ.get("CI"):
        pytest.skip("PostgreSQL server binaries not installed (apt-get install postgresql)")
    cluster = postgres.start_cluster()
    try:
        yield cluster
    finally:
        cluster.destroy()


@pytest.fixture
def postgres_url(postgres_cluster: postgres.Cluster, request: pytest.FixtureRequest) -> str:
    """A fresh, empty database on the session's cluster, for one test."""
    name = "t_" + hashlib.sha256(request.node.nodeid.encode()).hexdigest()[:20]
    postgres_cluster.psql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    return postgres_cluster.create_database(name)


@pytest.fixture
async def upstream(aiohttp_server: Any) -> FakeUpstream:
    fake = FakeUpstream()
    server = await aiohttp_server(fake.app())
    fake.base_url = str(server.make_url("/v1"))
    return fake


@pytest.fixture
def make_settings(tmp_path: Path, upstream: FakeUpstream) -> Callable[..., Settings]:
    def make(**overrides: Any) -> Settings:
        # No fallback chains unless a test sets one: a failing provider must not send a test to
        # the keyless providers on the internet.
        base = Settings(home=tmp_path, profile=None, llm_base_url=upstream.base_url, llm_model="fake-model",
                        keepalive_interval=10.0, web_search_fallback=(), web_extract_fallback=())
        return dataclasses.replace(base, **overrides)

    return make


@pytest.fixture
def settings(make_settings: Callable[..., Settings]) -> Settings:
    return make_settings()


@pytest.fixture
def lookup_tool() -> LookupTool:
    return LookupTool()


@pytest.fixture
def make_client(aiohttp_client: Any, make_settings: Callable[..., Settings]) -> Callable[..., Any]:
    async def make(tools: list[Any] | None = None, **overrides: Any) -> TestClient:
        return await aiohttp_client(create_app(make_settings(**overrides), tools=tools))

    return make


@pytest.fixture
async def client(make_client: Callable[..., Any], lookup_tool: LookupTool) -> TestClient:
    return await make_client(tools=[lookup_tool])


@pytest.fixture
def refused_url() -> Iterator[str]:
    """An upstream URL whose connections are refused for the whole test: its port stays bound (never
    listening), so no server started later in the test (the gateway's own test server among them) can
    take it, as it could a port merely found free and let go."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield f"http://127.0.0.1:{sock.getsockname()[1]}/v1"
