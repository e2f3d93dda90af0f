"""The SearXNG provider against a fake SearXNG speaking its JSON API."""

from __future__ import annotations

import pytest

from plugins.web.searxng.provider import SearxngProvider
from providers.web import ProviderError, validate_envelope
from tests.fakes.scripted import Reply
from tests.fakes.searxng import FakeSearxng, searxng_server  # noqa: F401


@pytest.fixture
async def provider(searxng_server: FakeSearxng):  # noqa: F811
    p = SearxngProvider({"SEARXNG_URL": searxng_server.base_url + "/", "SEARXNG_TIMEOUT": "0.5"})
    yield p
    await p.aclose()


async def test_search_sends_json_query_and_maps_results(provider, searxng_server):  # noqa: F811
    result = await provider.search("rust async", limit=3)

    assert validate_envelope(result, "search") is result
    assert result["data"]["web"] == [
        {"title": f"Result {n} for rust async", "url": f"https://example.org/{n}",
         "description": f"Snippet {n}", "position": n}
        for n in (1, 2, 3)
    ]
    [request] = searxng_server.requests
    assert request.path == "/search"
    assert request.query == {"q": "rust async", "format": "json", "pageno": "1"}


async def test_configured_language_is_sent(searxng_server):  # noqa: F811
    p = SearxngProvider({"SEARXNG_URL": searxng_server.base_url, "SEARXNG_LANGUAGE": "de"})
    try:
        await p.search("wetter")
    finally:
        await p.aclose()
    assert searxng_server.requests[0].query["language"] == "de"


def test_without_searxng_url_it_is_unavailable_with_a_hint():
    p = SearxngProvider({})
    assert not p.is_available()
    assert p.unavailable_reason() == "set SEARXNG_URL"


async def test_json_format_disabled_403_explains_the_settings_fix(provider, searxng_server):  # noqa: F811
    searxng_server.json_enabled = False
    with pytest.raises(ProviderError, match=r"403.*search.formats: \[html, json\]"):
        await provider.search("x")


async def test_rate_limit_429_mentions_retry_after_and_the_limiter(provider, searxng_server):  # noqa: F811
    searxng_server.script(Reply(429, text="Too Many Requests", headers={"Retry-After": "30"}))
    with pytest.raises(ProviderError) as info:
        await provider.search("x")
    assert "retry after 30 s" in str(info.value)
    assert "limiter" in str(info.value)


async def test_server_error_is_one_sentence(provider, searxng_server):  # noqa: F811
    searxng_server.script(Reply(500, text="Internal Server Error"))
    with pytest.raises(ProviderError, match=r"SearXNG had a server error \(500\)"):
        await provider.search("x")


async def test_non_json_body_is_reported(provider, searxng_server):  # noqa: F811
    searxng_server.script(Reply(200, text="<html>not json</html>", content_type="text/html"))
    with pytest.raises(ProviderError, match="not JSON"):
        await provider.search("x")


async def test_slow_instance_times_out(provider, searxng_server):  # noqa: F811
    searxng_server.script(Reply(200, {"results": []}, delay=2))
    with pytest.raises(ProviderError, match="SearXNG timed out"):
        await provider.search("x")


async def test_no_results_with_unresponsive_engines_says_which(provider, searxng_server):  # noqa: F811
    searxng_server.result_count = 0
    searxng_server.unresponsive_engines = [["google", "timeout"], ["bing", "CAPTCHA"]]
    result = await provider.search("x")
    assert result == {
        "success": False,
        "error": "SearXNG found nothing because its engines did not answer: google timeout, bing CAPTCHA",
    }


async def test_a_search_country_becomes_its_locale_unless_a_language_is_configured(searxng_server):  # noqa: F811
    plain = SearxngProvider({"SEARXNG_URL": searxng_server.base_url})
    configured = SearxngProvider({"SEARXNG_URL": searxng_server.base_url, "SEARXNG_LANGUAGE": "de"})
    try:
        await plain.search("news", country="NO")
        await plain.search("news", country="ZZ")
        await configured.search("news", country="NO")
    finally:
        await plain.aclose()
        await configured.aclose()
    assert [r.query.get("language") for r in searxng_server.requests] == ["nb-NO", None, "de"]
    assert plain.search_options == {"country"}
