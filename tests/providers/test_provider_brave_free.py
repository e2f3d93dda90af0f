"""The Brave Search provider against a fake Brave API."""

from __future__ import annotations

import pytest

from plugins.web.brave_free.provider import BraveProvider
from providers.web import ProviderError
from tests.fakes.brave import VALID_TOKEN, FakeBrave, brave_error, brave_server, rate_limited  # noqa: F401
from tests.fakes.scripted import Reply


def make(fake: FakeBrave, token: str = VALID_TOKEN) -> BraveProvider:
    return BraveProvider(
        {"BRAVE_SEARCH_API_KEY": token, "BRAVE_SEARCH_API_URL": fake.base_url, "BRAVE_SEARCH_TIMEOUT": "0.5"}
    )


@pytest.fixture
async def provider(brave_server: FakeBrave):  # noqa: F811
    p = make(brave_server)
    yield p
    await p.aclose()


async def test_search_sends_token_and_maps_results_as_plain_text(provider, brave_server):  # noqa: F811
    result = await provider.search("python", limit=2)

    assert result == {"success": True, "data": {"web": [
        {"title": "python result 1", "url": "https://brave.example/1",
         "description": "About python & more, number 1", "position": 1},
        {"title": "python result 2", "url": "https://brave.example/2",
         "description": "About python & more, number 2", "position": 2},
    ]}}
    [request] = brave_server.requests
    assert request.path == "/res/v1/web/search"
    assert request.headers["X-Subscription-Token"] == VALID_TOKEN
    assert request.headers["Accept"] == "application/json"
    assert request.query == {"q": "python", "count": "2"}


async def test_long_query_is_cut_to_400_characters(provider, brave_server):  # noqa: F811
    await provider.search("a" * 1000, limit=5)
    assert len(brave_server.requests[0].query["q"]) == 400


async def test_a_query_of_many_short_words_is_cut_to_50_words_not_refused(provider, brave_server):  # noqa: F811
    # 80 words in 239 characters: under Brave's character cap, over its word cap (a 422 before).
    result = await provider.search(" ".join(["otter"] * 80))

    assert result["success"] is True
    assert brave_server.requests[0].query["q"] == " ".join(["otter"] * 50)


@pytest.mark.parametrize(("country", "sent"), [("no", "NO"), ("HK", "HK"), ("IS", None), ("EG", None)])
async def test_only_countries_brave_lists_are_sent(provider, brave_server, country, sent):  # noqa: F811
    # Iceland and Egypt are not on Brave's country list: sending them was a 422 and no results.
    result = await provider.search("fish", country=country)

    assert result["success"] is True
    assert brave_server.requests[0].query.get("country") == sent


async def test_allowed_domains_become_site_operators_within_braves_limits(provider, brave_server):  # noqa: F811
    await provider.search("release notes", allowed_domains=["python.org", "docs.python.org"])
    assert brave_server.requests[0].query["q"] == "release notes (site:python.org OR site:docs.python.org)"

    many = [f"site{n}.example.com" for n in range(40)]
    result = await provider.search(" ".join(["word"] * 40), allowed_domains=many)

    q = brave_server.requests[1].query["q"]
    assert result["success"] is True  # the fake refuses q over 400 characters or 50 words with a 422
    assert len(q) <= 400 and len(q.split()) <= 50 and "site:site0.example.com" in q


def test_without_key_it_is_unavailable_with_a_hint():
    p = BraveProvider({})
    assert not p.is_available()
    assert p.unavailable_reason() == "set BRAVE_SEARCH_API_KEY"


async def test_wrong_token_reports_braves_error_code_and_detail(brave_server):  # noqa: F811
    p = make(brave_server, token="wrong")
    try:
        with pytest.raises(ProviderError) as info:
            await p.search("x")
    finally:
        await p.aclose()
    assert str(info.value) == (
        "Brave Search rejected the API key (401): SUBSCRIPTION_TOKEN_INVALID: "
        "The provided subscription token is invalid."
    )


async def test_rate_limit_says_when_to_retry(provider, brave_server):  # noqa: F811
    brave_server.script(rate_limited(reset_seconds=1))
    with pytest.raises(ProviderError) as info:
        await provider.search("x")
    assert "rate limit reached (429); retry after 1 s: RATE_LIMITED" in str(info.value)
    assert (info.value.kind, info.value.retry_after, info.value.retryable) == ("rate_limited", 1.0, True)


async def test_a_parameter_brave_refuses_is_a_422_in_one_sentence(provider, brave_server):  # noqa: F811
    brave_server.script(Reply(422, brave_error(422, "VALIDATION", "Unable to validate request parameter(s)")))
    with pytest.raises(ProviderError) as info:
        await provider.search("x")
    assert str(info.value) == "Brave Search answered HTTP 422: VALIDATION: Unable to validate request parameter(s)"
    assert info.value.kind == "rejected" and info.value.retryable is False


async def test_retry_after_header_wins_when_present(provider, brave_server):  # noqa: F811
    error = brave_error(429, "RATE_LIMITED", "slow down")
    brave_server.script(Reply(429, error, headers={"Retry-After": "7"}))
    with pytest.raises(ProviderError, match="retry after 7 s"):
        await provider.search("x")


async def test_server_error_non_json_and_slowness_are_one_sentence_each(provider, brave_server):  # noqa: F811
    brave_server.script(
        Reply(503, text="upstream unavailable"),
        Reply(200, text="<html>oops</html>", content_type="text/html"),
        Reply(200, {"web": {"results": []}}, delay=2),
    )
    with pytest.raises(ProviderError, match=r"server error \(503\)"):
        await provider.search("x")
    with pytest.raises(ProviderError, match="not JSON"):
        await provider.search("x")
    with pytest.raises(ProviderError, match="timed out"):
        await provider.search("x")


async def test_response_without_web_section_is_an_empty_result(provider, brave_server):  # noqa: F811
    brave_server.script(Reply(200, {"type": "search", "query": {"original": "x"}}))
    assert await provider.search("x") == {"success": True, "data": {"web": []}}
