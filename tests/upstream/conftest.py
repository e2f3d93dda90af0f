"""The upstream client's and faults' tests run twice: with the default transport (a fake on
127.0.0.1 is a plain http:// upstream, so the lean asyncio+httptools one) and with
`LLM_HTTP_CLIENT=aiohttp` (aiohttp's client, the documented fallback), so both stay tested."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import pytest

from gateway.config.settings import Settings

#: the modules run once per transport
BOTH_TRANSPORTS = {"test_upstream_client", "test_upstream_faults"}


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "llm_http_client" in metafunc.fixturenames and \
            metafunc.module.__name__.rpartition(".")[2] in BOTH_TRANSPORTS:
        metafunc.parametrize("llm_http_client", ["auto", "aiohttp"])


@pytest.fixture
def llm_http_client() -> str:
    return "auto"


@pytest.fixture
def make_settings(make_settings: Callable[..., Settings], llm_http_client: str) -> Callable[..., Settings]:
    def make(**overrides: Any) -> Settings:
        return dataclasses.replace(make_settings(**overrides), **{"llm_http_client": llm_http_client,
                                                                  **overrides})

    return make
