"""Fixtures for the research loop's tests: the small web of site.py and a gateway searching it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.agent.research.site import MiniWeb, StageModel
from tests.fakes.scripted import serve
from tests.fakes.upstream import FakeUpstream


@pytest.fixture
async def web(aiohttp_server: Any) -> MiniWeb:
    return await serve(MiniWeb(), aiohttp_server)


@pytest.fixture
def model(upstream: FakeUpstream) -> StageModel:
    upstream.responder = responder = StageModel()
    return responder


@pytest.fixture
def research_client(make_client: Callable[..., Any], web: MiniWeb, model: StageModel) -> Callable[..., Any]:
    """`await research_client(**settings)`: a gateway whose web tools search and read `web`."""
    async def make(**overrides: Any) -> Any:
        settings: dict[str, Any] = {"env": {"SEARXNG_URL": web.base_url}, "allow_private_urls": True,
                                    "web_search_backend": "searxng", "web_extract_backend": "fetch", **overrides}
        return await make_client(**settings)

    return make
