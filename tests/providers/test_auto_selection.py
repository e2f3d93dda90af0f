"""Which bundled provider serves each capability when no `web.*` key is set.

Drives the real loader over the real bundled plugins with different environments, the way a
user sees it in `agent-gateway tools`. Nothing here touches the network: selection reads env only.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.cli.web import tools_report
from gateway.config.settings import load_settings
from providers.loader import load_registry


def _chosen(tmp_path: Path, environ: dict[str, str]) -> dict[str, str | None]:
    registry = load_registry(load_settings(tmp_path, environ=environ).plugin_settings())
    picks = {}
    for capability in ("search", "extract", "crawl"):
        selection = registry.select(capability)
        picks[capability] = selection.provider.name if selection.provider else None
    return picks


@pytest.mark.parametrize(
    ("environ", "search", "extract"),
    [
        ({"TAVILY_API_KEY": "k", "SEARXNG_URL": "http://127.0.0.1:8888"}, "tavily", "tavily"),
        ({"EXA_API_KEY": "k"}, "exa", "exa"),
        ({"FIRECRAWL_API_URL": "http://127.0.0.1:3002"}, "firecrawl", "firecrawl"),
        ({"PARALLEL_API_KEY": "k"}, "parallel", "parallel"),
        ({"PERPLEXITY_API_KEY": "k"}, "perplexity", "fetch"),
        ({"XAI_API_KEY": "k", "SEARXNG_URL": "http://127.0.0.1:8888"}, "xai", "fetch"),
    ],
)
def test_a_configured_keyed_service_wins_over_the_keyless_ones(
    tmp_path: Path, environ: dict[str, str], search: str, extract: str
) -> None:
    picks = _chosen(tmp_path, environ)

    assert (picks["search"], picks["extract"]) == (search, extract)


def test_with_nothing_configured_keyless_keenable_searches_and_fetch_extracts(tmp_path: Path) -> None:
    picks = _chosen(tmp_path, {})

    assert picks["search"] == "keenable"
    assert picks["extract"] == "fetch"


def test_a_configured_searxng_wins_over_keyless_keenable(tmp_path: Path) -> None:
    assert _chosen(tmp_path, {"SEARXNG_URL": "http://127.0.0.1:8888"})["search"] == "searxng"


def test_keenable_extract_is_used_only_when_chosen(tmp_path: Path) -> None:
    picks = _chosen(tmp_path, {"KEENABLE_API_KEY": "keen_k", "WEB_EXTRACT_BACKEND": "keenable"})

    assert picks["extract"] == "keenable"


def test_crawl_goes_to_a_crawling_service(tmp_path: Path) -> None:
    assert _chosen(tmp_path, {"FIRECRAWL_API_KEY": "fc"})["crawl"] == "firecrawl"
    assert _chosen(tmp_path, {"TAVILY_API_KEY": "k", "FIRECRAWL_API_KEY": "fc"})["crawl"] == "tavily"


def test_tools_report_lists_every_bundled_provider_with_its_capabilities(tmp_path: Path) -> None:
    report = tools_report(load_settings(tmp_path, environ={}))
    rows = {line.split()[0]: line.split()[1:4] for line in report.splitlines() if line.startswith("  ")}

    assert rows["tavily"] == ["yes", "yes", "yes"]
    assert rows["exa"] == ["yes", "yes", "-"]
    assert rows["firecrawl"] == ["yes", "yes", "yes"]
    assert rows["parallel"] == ["yes", "yes", "-"]
    assert rows["perplexity"] == ["yes", "-", "-"]
    assert rows["keenable"] == ["yes", "yes", "-"]
    assert rows["xai"] == ["yes", "-", "-"]


def test_tools_report_says_which_variable_a_missing_key_needs(tmp_path: Path) -> None:
    report = tools_report(load_settings(tmp_path, environ={}))
    line = {row.split()[0]: row for row in report.splitlines() if row.startswith("  ")}

    for name, variable in [
        ("tavily", "TAVILY_API_KEY"),
        ("exa", "EXA_API_KEY"),
        ("firecrawl", "FIRECRAWL_API_KEY"),
        ("parallel", "PARALLEL_API_KEY"),
        ("perplexity", "PERPLEXITY_API_KEY"),
        ("xai", "XAI_API_KEY"),
    ]:
        assert f"unavailable: set {variable}" in line[name]
    assert "available" in line["keenable"] and "unavailable" not in line["keenable"]
