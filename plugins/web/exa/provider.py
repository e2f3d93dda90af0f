"""Exa (https://docs.exa.ai): POST /search and /contents with an `x-api-key` header.

Fields are camelCase. /contents answers 200 even when some URLs fail: each URL's outcome is in
`statuses[{id, status, error{tag, httpStatusCode}}]`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import httpx

from providers.http import LazyClient, call_json
from providers.payload import (
    as_envelope,
    base_url,
    bounded,
    clip,
    dated,
    env_value,
    iso_date,
    join_texts,
    optional_list,
    pages_in_order,
    require_list,
    text,
)
from providers.web import Envelope, ProviderError, WebSearchProvider, extract_result, page, search_result

SERVICE = "Exa"
KEY_VAR = "EXA_API_KEY"
URL_VAR = "EXA_API_URL"
DEFAULT_URL = "https://api.exa.ai"
SNIPPET_CHARS = 1000
PAGE_CHARS = 50_000  # enough for a long article, bounded so one page cannot flood the context


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


class ExaProvider(WebSearchProvider):
    name = "exa"

    def __init__(self, env: Mapping[str, str], *, timeout: float = 30.0) -> None:
        self._key = env_value(env, KEY_VAR)
        self._base = base_url(env, URL_VAR, DEFAULT_URL)
        self._http = LazyClient(httpx.Timeout(timeout, connect=min(10.0, timeout)))

    @property
    def display_name(self) -> str:
        return "Exa"

    def is_available(self) -> bool:
        return bool(self._key)

    def unavailable_reason(self) -> str | None:
        return None if self._key else f"set {KEY_VAR}"

    def supports_extract(self) -> bool:
        return True

    async def aclose(self) -> None:
        await self._http.aclose()

    async def _post(self, path: str, payload: dict[str, Any]) -> Any:
        if not self._key:
            raise ProviderError(f"{SERVICE} is not configured: set {KEY_VAR}")
        headers = {"x-api-key": self._key}
        return await call_json(self._http.get(), SERVICE, "POST", self._base + path, json=payload, headers=headers)

    async def search(self, query: str, limit: int = 5) -> Envelope:
        return await as_envelope(self._search(query, limit))

    async def _search(self, query: str, limit: int) -> Envelope:
        body = await self._post(
            "/search",
            {
                "query": query,
                "numResults": bounded(limit, 100),
                "type": "auto",
                "contents": {"text": {"maxCharacters": SNIPPET_CHARS}, "highlights": True},
            },
        )
        hits = []
        for item in require_list(body, "results", SERVICE):
            url = text(item.get("url"))
            if not url:
                continue
            # Highlights are the passages Exa judged relevant; fall back to the page's opening text.
            snippet = text(item.get("summary")) or join_texts(item.get("highlights")) or text(item.get("text"))
            description = dated(clip(snippet), iso_date(item.get("publishedDate")))
            hits.append({"title": text(item.get("title")), "url": url, "description": description})
        return search_result(hits)

    async def extract(self, urls: list[str], **kwargs: Any) -> Envelope:
        return await as_envelope(self._extract(list(urls)))

    async def _extract(self, urls: list[str]) -> Envelope:
        if not urls:
            return extract_result([])
        body = await self._post("/contents", {"urls": urls, "text": {"maxCharacters": PAGE_CHARS}})
        found: dict[str, dict[str, Any]] = {}
        for item in require_list(body, "results", SERVICE):
            url = text(item.get("url")) or text(item.get("id"))
            if url:
                found[url] = page(
                    url,
                    text(item.get("text")),
                    title=text(item.get("title")) or None,
                    metadata=_metadata(item),
                )
        errors: dict[str, str] = {}
        for status in optional_list(body, "statuses"):
            url = text(status.get("id"))
            if url and status.get("status") != "success":
                errors[url] = _status_reason(status)
                found.pop(url, None)
        entries = pages_in_order(urls, found, errors, lambda _u: f"{SERVICE} returned no content for this URL")
        return extract_result(entries)
