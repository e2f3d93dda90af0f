"""Keenable provider against a fake Keenable API on 127.0.0.1 (keyless and keyed)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import aclosing

import pytest

from plugins.web.keenable import KeenableProvider
from tests.fakes.keenable import API_KEY, KeenableFake, keenable_fake  # noqa: F401 - fixture
from tests.fakes.scripted import Reply
from tests.support import provider_cases as shared


@pytest.fixture
async def keyless(keenable_fake: KeenableFake) -> AsyncIterator[KeenableProvider]:  # noqa: F811
    async with aclosing(TestKeenableSharedBehaviour().make(keenable_fake)) as provider:
        yield provider


@pytest.fixture
async def keyed(keenable_fake: KeenableFake) -> AsyncIterator[KeenableProvider]:  # noqa: F811
    async with aclosing(TestKeenableSharedBehaviour().make(keenable_fake, key=API_KEY)) as provider:
        yield provider


async def test_without_a_key_search_uses_the_public_endpoint_and_names_the_caller(
    keyless: KeenableProvider,
    keenable_fake: KeenableFake,  # noqa: F811
) -> None:
    result = await keyless.search("rust tokio", limit=2)

    assert result["data"]["web"] == [
        {
            "title": "Result one",
            "url": "https://example.com/one",
            "description": "[2026-05-05] Page text of the first result.",
            "position": 1,
        },
        {"title": "Result two", "url": "https://example.com/two", "description": "A summary.", "position": 2},
    ]
    [sent] = keenable_fake.requests
    assert sent.path == "/v1/search/public"
    assert sent.headers["X-Keenable-Title"] == "agent-gateway"
    assert "X-API-Key" not in sent.headers
    assert sent.body == {"query": "rust tokio", "max_results": 2}


async def test_with_a_key_search_switches_to_the_keyed_endpoint(
    keyed: KeenableProvider,
    keenable_fake: KeenableFake,  # noqa: F811
) -> None:
    result = await keyed.search("q")

    assert result["success"] is True
    [sent] = keenable_fake.requests
    assert sent.path == "/v1/search"
    assert sent.headers["X-API-Key"] == API_KEY


async def test_extract_fetches_each_page_as_markdown_in_order(
    keyless: KeenableProvider,
    keenable_fake: KeenableFake,  # noqa: F811
) -> None:
    keenable_fake.unindexed.add("https://unknown.example/")
    urls = ["https://a.example/1", "https://unknown.example/", "https://a.example/2"]

    result = await keyless.extract(urls)

    entries = result["data"]
    assert [e["url"] for e in entries] == urls
    assert entries[0]["content"] == "# Title\n\nMarkdown of https://a.example/1"
    assert entries[0]["title"] == "Title of https://a.example/1"
    assert entries[0]["metadata"] == {
        "description": "Short summary.",
        "author": "Jane Doe",
        "published_date": "2026-01-15",
    }
    assert entries[1]["error"] == "Keenable has not indexed this page (404); try another provider"
    fetches = keenable_fake.requests_to("/v1/fetch/public")
    assert {r.query["url"] for r in fetches} == set(urls)
    assert all(r.query["max_chars"] == "50000" for r in fetches)


async def test_with_a_key_extract_uses_the_keyed_fetch_endpoint(
    keyed: KeenableProvider,
    keenable_fake: KeenableFake,  # noqa: F811
) -> None:
    result = await keyed.extract(["https://a.example/1"])

    assert result["data"][0]["content"].startswith("# Title")
    assert [r.path for r in keenable_fake.requests] == ["/v1/fetch"]


async def test_one_allowed_domain_uses_keenables_site_filter(
    keyless: KeenableProvider,
    keenable_fake: KeenableFake,  # noqa: F811
) -> None:
    keenable_fake.search_results.append(
        {"title": "Docs", "url": "https://docs.python.org/3/", "description": "", "snippet": "Docs text."})

    result = await keyless.search("asyncio", allowed_domains=["python.org"])

    assert [h["url"] for h in result["data"]["web"]] == ["https://docs.python.org/3/"]
    [sent] = keenable_fake.requests
    assert (sent.body["site"], sent.body["query"]) == ("python.org", "asyncio")


async def test_a_search_keeps_at_most_the_results_asked_for(
    keyless: KeenableProvider,
    keenable_fake: KeenableFake,  # noqa: F811
) -> None:
    # max_results is documented only in the SDK README: the provider cuts the list itself.
    keenable_fake.search_results = keenable_fake.search_results * 5
    keenable_fake.script(Reply(200, {"results": keenable_fake.search_results}), route="search")

    result = await keyless.search("q", limit=2)

    assert len(result["data"]["web"]) == 2
    assert keenable_fake.requests[0].body["max_results"] == 2


async def test_keyless_rate_limit_says_a_key_lifts_it(
    keyless: KeenableProvider,
    keenable_fake: KeenableFake,  # noqa: F811
) -> None:
    keenable_fake.script(Reply(429, {"error": "Too Many Requests"}, headers={"Retry-After": "60"}), route="search")

    result = await keyless.search("q")

    assert result == {
        "success": False,
        "error": "Keenable rate limit reached (429); retry after 60 s: Too Many Requests; "
        "set KEENABLE_API_KEY to lift the keyless limit",
        "retryable": True,  # the fallback chain moves on, and Keenable is skipped for Retry-After
        "retry_after": 60.0,
        "kind": "rate_limited",
    }


async def test_extract_where_every_fetch_is_refused_is_one_clear_failure(
    keyed: KeenableProvider,
    keenable_fake: KeenableFake,  # noqa: F811
) -> None:
    for _ in range(2):
        keenable_fake.script(Reply(403, {"error": "Key disabled"}), route="fetch")

    result = await keyed.extract(["https://a.example/1", "https://a.example/2"])

    assert result == {
        "success": False,
        "error": "Keenable refused the request (403: plan, permission or limit): Key disabled",
        "kind": "rejected",
    }


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        (401, "Keenable rejected the API key (401): Unauthorized"),
        (403, "Keenable refused the request (403"),
        (429, "Keenable rate limit reached (429)"),
        (500, "Keenable had a server error (500)"),
    ],
)
async def test_service_errors_become_one_clear_sentence(
    keyed: KeenableProvider,
    keenable_fake: KeenableFake,  # noqa: F811
    status: int,
    expected: str,
) -> None:
    keenable_fake.script(Reply(status, {"error": "Unauthorized"}), route="search")

    result = await keyed.search("q")

    assert result["success"] is False
    assert result["error"].startswith(expected)
    assert "KEENABLE_API_KEY" not in result["error"]  # the keyed path has no keyless advice


async def test_a_200_carrying_an_error_is_a_failure(
    keyless: KeenableProvider,
    keenable_fake: KeenableFake,  # noqa: F811
) -> None:
    keenable_fake.script(Reply(200, {"error": "Invalid parameter", "message": "mode is not supported"}), route="search")

    result = await keyless.search("q")

    assert result == {"success": False, "error": "Keenable rejected the search: mode is not supported"}


def test_without_a_key_it_is_still_available() -> None:
    provider = KeenableProvider({})

    assert provider.is_available() is True
    assert provider.unavailable_reason() is None
    assert provider.display_name == "Keenable (keyless)"


class TestKeenableSharedBehaviour(
    shared.TimesOut, shared.RejectsAWrongKey, shared.RejectsAWrongShape, shared.Registers
):
    name, label, provider_class = "keenable", "Keenable", KeenableProvider
    api_key = None  # keyless unless a test gives a key: that is how most users start
    wrong_key_detail = "Unauthorized"
    wrong_shape_json = {"query": "q"}
    wrong_shape_error = "Keenable returned an unexpected response (no 'results' list)"
    register_with_key = False
    capabilities = (True, True, False)
