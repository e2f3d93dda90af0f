"""The provider contract's search options: passed only to providers that take them, `site:` for
the others, off-domain hits dropped for all, and part of the result cache's key."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from gateway.agent.toolbox import ToolContext
from gateway.agent.web.options import WebSearchOptions
from gateway.agent.web.tools import build_web_tools
from gateway.config.settings import Settings
from providers.registry import ProviderRegistry
from providers.web import WebSearchProvider, search_options_of, search_result

MIXED = [
    {"title": "a", "url": "https://docs.python.org/3/", "description": ""},
    {"title": "b", "url": "https://evil-python.org/", "description": ""},
    {"title": "c", "url": "https://example.com/", "description": ""},
    {"title": "d", "url": "https://python.org/news", "description": ""},
]


class OldStyle(WebSearchProvider):
    """A plugin written before search options existed: search(query, limit) and nothing else."""

    name = "oldstyle"

    def __init__(self) -> None:
        self.calls: list[tuple[str, int]] = []

    def search(self, query, limit=5):  # type: ignore[override]  # the old contract, on purpose
        self.calls.append((query, limit))
        return search_result(MIXED)


class Keyworded(WebSearchProvider):
    """A plugin that names the options it honours."""

    name = "keyworded"

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    async def search(self, query: str, limit: int = 5, *, allowed_domains: list[str] | None = None,
                     country: str | None = None) -> dict[str, Any]:
        self.calls.append({"query": query, "allowed_domains": allowed_domains, "country": country})
        return search_result(MIXED)


class Declared(WebSearchProvider):
    """A plugin that takes **options and lists what it honours."""

    name = "declared"
    search_options = frozenset({"city", "nonsense"})  # type: ignore[assignment]

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    def search(self, query: str, limit: int = 5, **options: Any) -> dict[str, Any]:
        self.calls.append({"query": query, **options})
        return search_result(MIXED)


def search_tool(tmp_path: Path, provider: WebSearchProvider, **overrides: Any) -> Any:
    registry = ProviderRegistry(search_backend=provider.name)
    registry.add(provider, plugin=provider.name)
    settings = Settings(home=tmp_path, profile=None, tool_timeout=2.0, **overrides)
    return build_web_tools(registry, settings)[0]


async def search(tool: Any, options: WebSearchOptions, query: str = "python news") -> dict[str, Any]:
    return json.loads(await tool.run({"query": query}, ToolContext(options)))


FILTERED = WebSearchOptions(allowed_domains=("python.org",), country="NO", city="Oslo")


async def test_an_old_style_plugin_gets_site_operators_and_no_keywords_and_still_works(tmp_path: Path):
    provider = OldStyle()
    result = await search(search_tool(tmp_path, provider), FILTERED)

    assert result["success"] is True
    assert provider.calls == [("python news site:python.org", 5)]
    assert [h["url"] for h in result["data"]["web"]] == ["https://docs.python.org/3/", "https://python.org/news"]


async def test_a_plugin_naming_its_options_gets_them_and_no_site_operators(tmp_path: Path):
    provider = Keyworded()
    result = await search(search_tool(tmp_path, provider), FILTERED)

    assert provider.calls == [{"query": "python news", "allowed_domains": ["python.org"], "country": "NO"}]
    # evil-python.org is not a subdomain of python.org: dropped whatever the provider sent
    assert [h["url"] for h in result["data"]["web"]] == ["https://docs.python.org/3/", "https://python.org/news"]


async def test_a_plugin_declaring_search_options_gets_only_the_known_ones_it_declared(tmp_path: Path):
    provider = Declared()
    assert search_options_of(provider) == {"city"}
    await search(search_tool(tmp_path, provider), FILTERED)
    assert provider.calls == [{"query": "python news site:python.org", "city": "Oslo"}]


async def test_without_options_every_hit_comes_back_and_the_query_is_unchanged(tmp_path: Path):
    provider = Keyworded()
    result = await search(search_tool(tmp_path, provider), WebSearchOptions())
    assert provider.calls == [{"query": "python news", "allowed_domains": None, "country": None}]
    assert len(result["data"]["web"]) == 4


async def test_requests_with_different_filters_do_not_share_a_cached_result(tmp_path: Path):
    provider = OldStyle()
    tool = search_tool(tmp_path, provider, web_cache_ttl=300.0)
    await search(tool, FILTERED)
    await search(tool, WebSearchOptions())
    await search(tool, WebSearchOptions(country="SE"))
    await search(tool, FILTERED)  # the same options again: served from the cache

    assert [q for q, _ in provider.calls] == ["python news site:python.org", "python news", "python news"]


async def test_low_context_size_shortens_extracted_pages(tmp_path: Path):
    class Pages(WebSearchProvider):
        name = "pages"

        def supports_search(self) -> bool:
            return False

        def supports_extract(self) -> bool:
            return True

        def extract(self, urls: list[str], **kwargs: Any) -> dict[str, Any]:
            return {"success": True, "data": [{"url": u, "title": "", "content": "x" * 4000,
                                               "raw_content": "x" * 4000} for u in urls]}

    registry = ProviderRegistry(extract_backend="pages")
    registry.add(Pages(), plugin="pages")
    settings = Settings(home=tmp_path, profile=None, tool_timeout=2.0, max_extract_chars=2000, web_cache_ttl=0)
    extract = build_web_tools(registry, settings)[1]

    async def page_length(size: str) -> int:
        text = await extract.run({"urls": ["https://a.test/"]}, ToolContext(WebSearchOptions(context_size=size)))
        return len(json.loads(text)["data"][0]["content"])

    assert 2000 <= await page_length("medium") < 2100  # the whole of web.max_extract_chars
    assert 500 <= await page_length("low") < 600  # a quarter of it
