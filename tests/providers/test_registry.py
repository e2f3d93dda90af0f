"""Provider selection, duplicate handling and shutdown in the registry."""

from __future__ import annotations

from pathlib import Path

import pytest

from providers.plugin_settings import PluginSettings
from providers.registry import DuplicateProviderError, PluginContext, ProviderRegistry
from providers.web import WebSearchProvider


class Stub(WebSearchProvider):
    """A third-party-style provider with fixed answers."""

    def __init__(self, name: str, *, search: bool = True, extract: bool = False, crawl: bool = False,
                 missing: str | None = None) -> None:
        self.name = name
        self._caps = {"search": search, "extract": extract, "crawl": crawl}
        self._missing = missing
        self.closed = False

    def is_available(self) -> bool:
        return self._missing is None

    def unavailable_reason(self) -> str | None:
        return self._missing

    def supports_search(self) -> bool:
        return self._caps["search"]

    def supports_extract(self) -> bool:
        return self._caps["extract"]

    def supports_crawl(self) -> bool:
        return self._caps["crawl"]

    async def aclose(self) -> None:
        self.closed = True


def registry(*providers: WebSearchProvider, **backends: str) -> ProviderRegistry:
    reg = ProviderRegistry(**backends)
    for provider in providers:
        reg.add(provider, plugin=provider.name)
    return reg


def chosen(reg: ProviderRegistry, capability: str) -> str | None:
    selection = reg.select(capability)
    return selection.provider.name if selection.provider else None


def test_auto_order_follows_the_declared_ranks_and_puts_unranked_providers_last():
    reg = ProviderRegistry()
    ranks = {"custom": None, "ddgs": 100, "searxng": 80, "tavily": 10, "late": None, "fetch": 110}
    for name, rank in ranks.items():
        reg.add(Stub(name, extract=name == "tavily"), plugin=name, auto_order=rank)
    assert [p.name for p in reg.providers()] == ["tavily", "searxng", "ddgs", "fetch", "custom", "late"]
    assert chosen(reg, "search") == "tavily"


def test_index_only_extract_providers_come_after_every_general_fetcher():
    reg = ProviderRegistry()
    reg.add(Stub("keen", extract=True), plugin="keen", auto_order=1, index_only_extract=True)
    reg.add(Stub("reader", search=False, extract=True), plugin="reader")
    assert chosen(reg, "search") == "keen"
    assert chosen(reg, "extract") == "reader"


def test_a_user_plugin_replacing_a_bundled_provider_keeps_its_rank_unless_it_declares_one():
    reg = ProviderRegistry()
    reg.add(Stub("first"), plugin="first", auto_order=10)
    reg.add(Stub("keen", extract=True), plugin="keen", auto_order=20, index_only_extract=True)
    reg.add(Stub("reader", search=False, extract=True), plugin="reader", auto_order=30)
    reg.add(Stub("keen", extract=True), plugin="my-keen", origin="user")
    assert [p.name for p in reg.providers()] == ["first", "keen", "reader"]
    assert chosen(reg, "extract") == "reader"
    reg.add(Stub("first"), plugin="my-first", origin="user", auto_order=99)
    assert [p.name for p in reg.providers()] == ["keen", "reader", "first"]


def test_auto_selection_skips_unavailable_providers():
    reg = registry(Stub("tavily", missing="set TAVILY_API_KEY"), Stub("searxng"))
    assert chosen(reg, "search") == "searxng"


def test_search_only_provider_is_never_chosen_for_extract():
    reg = registry(Stub("searxng"), Stub("fetch", search=False, extract=True))
    assert chosen(reg, "extract") == "fetch"
    only_search = registry(Stub("searxng"))
    selection = only_search.select("extract")
    assert selection.provider is None
    assert selection.reason == "no web provider supports extract; configure one with web.extract_backend"


def test_configured_but_unavailable_provider_says_what_is_missing():
    reg = registry(Stub("tavily", missing="set TAVILY_API_KEY"), Stub("searxng"), search_backend="tavily")
    selection = reg.select("search")
    assert selection.provider is None
    assert selection.reason == "tavily: set TAVILY_API_KEY"


def test_unknown_configured_provider_lists_the_known_ones():
    reg = registry(Stub("searxng"), search_backend="bing")
    assert reg.select("search").reason == (
        "web.search_backend names 'bing', which is not a known web provider (known: searxng)"
    )


def test_web_backend_is_used_only_for_capabilities_it_supports():
    reg = registry(Stub("searxng"), Stub("brave-free"), Stub("fetch", search=False, extract=True),
                   backend="searxng")
    assert chosen(reg, "search") == "searxng"
    assert chosen(reg, "extract") == "fetch"


def test_specific_backend_overrides_web_backend():
    reg = registry(Stub("searxng"), Stub("brave-free"), backend="searxng", search_backend="brave-free")
    assert chosen(reg, "search") == "brave-free"


def test_crawl_follows_the_extract_backend():
    reg = registry(Stub("fetch", search=False, extract=True),
                   Stub("firecrawl", extract=True, crawl=True), extract_backend="fetch")
    assert chosen(reg, "extract") == "fetch"
    assert reg.select("crawl").reason == "fetch does not support crawl (chosen by web.extract_backend)"
    auto = registry(Stub("fetch", search=False, extract=True), Stub("firecrawl", extract=True, crawl=True))
    assert chosen(auto, "crawl") == "firecrawl"


def test_nothing_available_lists_every_hint():
    reg = registry(
        Stub("brave-free", missing="set BRAVE_SEARCH_API_KEY"), Stub("searxng", missing="set SEARXNG_URL")
    )
    assert reg.select("search").reason == (
        "no web provider for search is available "
        "(brave-free: set BRAVE_SEARCH_API_KEY; searxng: set SEARXNG_URL)"
    )


def test_user_plugin_overrides_bundled_provider_but_other_duplicates_fail():
    reg = ProviderRegistry()
    bundled, user = Stub("searxng"), Stub("searxng")
    reg.add(bundled, plugin="searxng", origin="bundled")
    reg.add(user, plugin="my-searxng", origin="user")
    assert reg.get("searxng") is user
    with pytest.raises(DuplicateProviderError, match="already registered by user plugin 'my-searxng'"):
        reg.add(Stub("searxng"), plugin="pip-thing", origin="entry point")


async def test_aclose_closes_every_provider_even_when_one_fails():
    class Broken(Stub):
        async def aclose(self) -> None:
            raise RuntimeError("boom")

    first, second = Stub("a"), Stub("c")
    reg = registry(first, Broken("b"), second)
    await reg.aclose()
    assert first.closed and second.closed


def test_plugin_context_hands_out_env_and_rejects_non_providers(tmp_path: Path):
    settings = PluginSettings(home=tmp_path, profile_dir=tmp_path, env={"SEARXNG_URL": "http://x"},
                              config={"mine": {"depth": 2}})
    ctx = PluginContext(settings, "p", "user")
    assert ctx.env["SEARXNG_URL"] == "http://x"
    assert ctx.config == {"mine": {"depth": 2}}
    assert ctx.settings is settings
    with pytest.raises(TypeError, match="expects a providers.web.WebSearchProvider"):
        ctx.register_web_search_provider(object())  # type: ignore[arg-type]
    ctx.register_web_search_provider(Stub("ok"))
    assert [p.name for p in ctx.pending] == ["ok"]
