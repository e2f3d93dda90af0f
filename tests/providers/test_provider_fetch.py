"""The built-in fetch provider: safe downloads turned into readable text."""

from __future__ import annotations

import pytest

from plugins.web.fetch.provider import FetchProvider
from tests.fakes.pages import ARTICLE_PARAGRAPH, PageServer, page_server  # noqa: F401


@pytest.fixture
async def fetcher():
    # The page server lives on 127.0.0.1, so these tests must allow private addresses.
    # 3 s: a page of the local server takes milliseconds, but a loaded CI machine once took over 0.5 s
    provider = FetchProvider(allow_private=True, max_bytes=10_000, timeout=3.0)
    yield provider
    await provider.aclose()


def test_fetch_is_an_extract_only_provider():
    provider = FetchProvider()
    assert provider.supports_extract() and not provider.supports_search() and not provider.supports_crawl()
    assert provider.is_available()


async def test_html_page_becomes_readable_markdown_with_its_title(fetcher, page_server: PageServer):  # noqa: F811
    result = await fetcher.extract([page_server.url + "/article"])

    [entry] = result["data"]
    assert result["success"] is True
    assert entry["url"] == page_server.url + "/article"
    assert entry["title"] == "River otters"  # trafilatura drops the site-name suffix
    assert ARTICLE_PARAGRAPH in entry["content"]
    assert "Weight: 5 to 14 kg" in entry["content"]
    assert "Newsletter" not in entry["content"]  # boilerplate removed
    assert "error" not in entry


async def test_text_and_json_pass_through_and_binaries_are_refused(fetcher, page_server):  # noqa: F811
    urls = [page_server.url + path for path in ("/notes.txt", "/data.json", "/photo.png", "/missing")]
    result = await fetcher.extract(urls)

    text, data, photo, missing = result["data"]
    assert [e["url"] for e in result["data"]] == urls
    assert text["content"] == "plain notes\nline two"
    assert data["content"] == '{"otters": 3}'
    assert photo["error"] == "refused: image/png is not a web page or text document"
    assert missing["error"] == "the server answered HTTP 404"


async def test_downloads_are_cut_at_the_size_cap(fetcher, page_server):  # noqa: F811
    [entry] = (await fetcher.extract([page_server.url + "/big.txt"]))["data"]
    assert len(entry["content"]) == 10_000
    assert entry["metadata"]["truncated"] == "download cut at 10000 bytes"


async def test_slow_pages_time_out(page_server):  # noqa: F811
    impatient = FetchProvider(allow_private=True, timeout=0.5)  # the page answers after 5 s
    try:
        [entry] = (await impatient.extract([page_server.url + "/slow"]))["data"]
    finally:
        await impatient.aclose()
    assert entry["error"] == f"fetching {page_server.url}/slow took longer than 0.5 s"


async def test_redirects_are_followed_and_reported(fetcher, page_server):  # noqa: F811
    url = f"{page_server.url}/redirect?to=/notes.txt"
    [entry] = (await fetcher.extract([url]))["data"]
    assert entry["url"] == url
    assert entry["content"] == "plain notes\nline two"
    assert entry["metadata"]["final_url"] == page_server.url + "/notes.txt"


async def test_by_default_loopback_private_and_metadata_urls_fetch_nothing(page_server):  # noqa: F811
    provider = FetchProvider(timeout=2.0)
    port = page_server.url.rsplit(":", 1)[1]
    urls = [
        page_server.url + "/article",
        f"http://localhost:{port}/article",
        f"http://[::ffff:127.0.0.1]:{port}/article",
        "http://169.254.169.254/latest/meta-data/",
        "http://10.0.0.1/",
        "file:///etc/passwd",
    ]
    try:
        result = await provider.extract(urls)
    finally:
        await provider.aclose()
    errors = [entry["error"] for entry in result["data"]]
    assert errors == [
        "blocked: 127.0.0.1 is a loopback address",
        "blocked: localhost resolves to 127.0.0.1, a loopback address",
        "blocked: ::ffff:7f00:1 is a loopback address in IPv6 form",
        "blocked: 169.254.169.254 is a cloud metadata address",
        "blocked: 10.0.0.1 is a private address",
        "blocked: only http and https URLs can be fetched, not file",
    ]
    assert page_server.requests == []


async def test_a_page_with_an_unknown_charset_fails_alone_and_the_rest_of_the_batch_is_read(
    fetcher, page_server  # noqa: F811
):
    result = await fetcher.extract([page_server.url + "/bogus-charset", page_server.url + "/article"])

    bogus, article = result["data"]
    assert result["success"] is True
    assert bogus["error"] == "the page declares an unknown character set 'x-bogus-charset'"
    assert ARTICLE_PARAGRAPH in article["content"] and "error" not in article
