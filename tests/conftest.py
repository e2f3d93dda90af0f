"""Shared fixtures: a fake upstream model and the real app built against it."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient

from gateway.config.settings import Settings
from gateway.http.app import create_app
from tests.fakes.tools import LookupTool
from tests.fakes.upstream import FakeUpstream

API_KEY = "sk-test-key-123"


@pytest.fixture
async def upstream(aiohttp_server: Any) -> FakeUpstream:
    fake = FakeUpstream()
    server = await aiohttp_server(fake.app())
    fake.base_url = str(server.make_url("/v1"))
    return fake


@pytest.fixture
def make_settings(tmp_path: Path, upstream: FakeUpstream) -> Callable[..., Settings]:
    def make(**overrides: Any) -> Settings:
        base = Settings(home=tmp_path, profile=None, llm_base_url=upstream.base_url, llm_model="fake-model",
                        keepalive_interval=10.0)
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
