"""Keenable (https://docs.keenable.ai): search and fetch-as-markdown, keyless or keyed.

Keyless: `POST /v1/search/public` and `GET /v1/fetch/public?url=`, identified by an
`X-Keenable-Title` header (about 10 req/s and 1,000 req/hour per IP). With KEENABLE_API_KEY:
`POST /v1/search` and `GET /v1/fetch` with `X-API-Key`. Search hits carry the page text in
`snippet` (`description` is often empty); fetch only serves pages in Keenable's own index.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import httpx

from providers.http import HTTPStatusError, LazyClient, call_json
from providers.payload import (
    as_envelope,
    base_url,
    bounded,
    clip,
    dated,
    env_value,
    iso_date,
    require_list,
    require_object,
    text,
)
from providers.web import (
    Envelope,
    ProviderError,
    WebSearchProvider,
    extract_result,
    failure,
    page,
    search_result,
)

SERVICE = "Keenable"
KEY_VAR = "KEENABLE_API_KEY"
URL_VAR = "KEENABLE_API_URL"
DEFAULT_URL = "https://api.keenable.ai"
APP_TITLE = "agent-gateway"  # keyless calls must say who is calling
FETCH_MAX_CHARS = 50_000
FETCH_CONCURRENCY = 4  # stays under the keyless 10 req/s even when the model asks for many pages


class KeenableProvider(WebSearchProvider):
    name = "keenable"

    def __init__(self, env: Mapping[str, str], *, timeout: float = 30.0) -> None:
        self._key = env_value(env, KEY_VAR)
        self._base = base_url(env, URL_VAR, DEFAULT_URL)
        self._http = LazyClient(httpx.Timeout(timeout, connect=min(10.0, timeout)))

    @property
    def display_name(self) -> str:
        return "Keenable" if self._key else "Keenable (keyless)"

    def is_available(self) -> bool:
        return True  # the public endpoints need no key

    def supports_extract(self) -> bool:
        return True

    async def aclose(self) -> None:
        await self._http.aclose()

    def _route(self, path: str) -> tuple[str, dict[str, str]]:
        if self._key:
            return f"{self._base}{path}", {"X-API-Key": self._key}
        return f"{self._base}{path}/public", {"X-Keenable-Title": APP_TITLE}

    async def _call(self, method: str, path: str, **kwargs: Any) -> Any:
        url, headers = self._route(path)
        try:
            return await call_json(self._http.get(), SERVICE, method, url, headers=headers, **kwargs)
        except HTTPStatusError as exc:
            if exc.status == 429 and not self._key:
                raise ProviderError(f"{exc}; set {KEY_VAR} to lift the keyless limit") from exc
            raise

    async def search(self, query: str, limit: int = 5) -> Envelope:
        return await as_envelope(self._search(query, limit))

    async def _search(self, query: str, limit: int) -> Envelope:
        body = await self._call("POST", "/v1/search", json={"query": query, "max_results": bounded(limit, 50)})
        obj = require_object(body, SERVICE)
        if "results" not in obj and obj.get("error"):
            raise ProviderError(f"{SERVICE} rejected the search: {text(obj.get('message')) or text(obj.get('error'))}")
        hits = []
        for item in require_list(obj, "results", SERVICE)[: bounded(limit, 50)]:
            url = text(item.get("url"))
            if url:
                snippet = clip(text(item.get("snippet")) or text(item.get("description")))
                hits.append(
                    {
                        "title": text(item.get("title")),
                        "url": url,
                        "description": dated(snippet, iso_date(item.get("published_at"))),
                    }
                )
        return search_result(hits)

    async def extract(self, urls: list[str], **kwargs: Any) -> Envelope:
        return await as_envelope(self._extract(list(urls)))

    async def _extract(self, urls: list[str]) -> Envelope:
        if not urls:
            return extract_result([])
        gate = asyncio.Semaphore(FETCH_CONCURRENCY)

        async def fetch(url: str) -> dict[str, Any] | ProviderError:
            async with gate:
                try:
                    body = await self._call("GET", "/v1/fetch", params={"url": url, "max_chars": FETCH_MAX_CHARS})
                except HTTPStatusError as exc:
                    if exc.status == 404:
                        # Fetch serves only Keenable's own index: a page problem, not a service one.
                        return page(url, error=f"{SERVICE} has not indexed this page (404); try another provider")
                    return exc
                except ProviderError as exc:
                    return exc
            if not isinstance(body, dict) or not isinstance(body.get("content"), str):
                return ProviderError(f"{SERVICE} returned an unexpected response (no page content)")
            metadata = {
                k: v
                for k, v in (
                    ("description", text(body.get("description"))),
                    ("author", text(body.get("author"))),
                    ("published_date", iso_date(body.get("published_at"))),
                )
                if v
            }
            return page(url, body["content"], title=text(body.get("title")) or None, metadata=metadata)

        outcomes = await asyncio.gather(*(fetch(u) for u in urls))
        if all(isinstance(o, ProviderError) for o in outcomes):
            # Every call failed at the service (key, rate limit, outage): say it once.
            return failure(str(outcomes[0]))
        entries = [
            page(u, error=str(o)) if isinstance(o, ProviderError) else o for u, o in zip(urls, outcomes, strict=True)
        ]
        return extract_result(entries)
