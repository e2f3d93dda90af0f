"""Exa (https://docs.exa.ai): POST /search and /contents with an `x-api-key` header.

Fields are camelCase. /contents answers 200 even when some URLs fail: each URL's outcome is in
`statuses[{id, status, error{tag, httpStatusCode}}]`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from providers.payload import bounded, join_texts, optional_list, require_list, search_hits, text
from providers.service import PageSet, ServiceProvider
from providers.web import Envelope, extract_result, page

SERVICE = "Exa"
SNIPPET_CHARS = 1000
PAGE_CHARS = 50_000  # enough for a long article, bounded so one page cannot flood the context


def _snippet(item: Mapping[str, Any]) -> str:
    # Highlights are the passages Exa judged relevant; fall back to the page's opening text.
    return text(item.get("summary")) or join_texts(item.get("highlights")) or text(item.get("text"))


def _metadata(item: Mapping[str, Any]) -> dict[str, Any]:
    meta: dict[str, Any] = {}
    for source, target in (("publishedDate", "published_date"), ("author", "author"), ("id", "id")):
        value = text(item.get(source))
        if value:
            meta[target] = value
    return meta


def _status_reason(status: Mapping[str, Any]) -> str:
    error = status.get("error")
    if isinstance(error, Mapping):
        tag = text(error.get("tag")) or "error"
        code = error.get("httpStatusCode")
        return f"{SERVICE} could not read this page ({tag}{f', HTTP {code}' if code else ''})"
    return f"{SERVICE} could not read this page ({text(status.get('status')) or 'error'})"


class ExaProvider(ServiceProvider):
    name = "exa"
    service = SERVICE
    key_var = "EXA_API_KEY"
    url_var = "EXA_API_URL"
    default_url = "https://api.exa.ai"

    def supports_extract(self) -> bool:
        return True

    def auth_headers(self) -> dict[str, str]:
        return {"x-api-key": self._key}

    async def do_search(self, query: str, limit: int, *, allowed_domains: list[str] | None = None,
                        country: str | None = None) -> Envelope:
        payload: dict[str, Any] = {
            "query": query,
            "numResults": bounded(limit, 100),
            "type": "auto",
            "contents": {"text": {"maxCharacters": SNIPPET_CHARS}, "highlights": True},
        }
        if allowed_domains:
            payload["includeDomains"] = allowed_domains
        if country:
            payload["userLocation"] = country.upper()  # two-letter ISO code, as Exa takes it
        body = await self.post_json("/search", payload)
        return search_hits(require_list(body, "results", SERVICE), _snippet, lambda item: item.get("publishedDate"))

    async def do_extract(self, urls: list[str], options: dict[str, Any]) -> Envelope:
        if not urls:
            return extract_result([])
        body = await self.post_json("/contents", {"urls": urls, "text": {"maxCharacters": PAGE_CHARS}})
        pages = PageSet(urls, missing=f"{SERVICE} returned no content for this URL")
        for item in require_list(body, "results", SERVICE):
            url = text(item.get("url")) or text(item.get("id"))
            if url:
                title = text(item.get("title")) or None
                pages.found(url, page(url, text(item.get("text")), title=title, metadata=_metadata(item)))
        for status in optional_list(body, "statuses"):
            url = text(status.get("id"))
            if url and status.get("status") != "success":
                pages.failed(url, _status_reason(status))
        return pages.result()
