"""Keenable (https://docs.keenable.ai): search and fetch-as-markdown, keyless or keyed.

Keyless: `POST /v1/search/public` and `GET /v1/fetch/public?url=`, identified by an
`X-Keenable-Title` header (about 10 req/s and 1,000 req/hour per IP). With KEENABLE_API_KEY:
`POST /v1/search` and `GET /v1/fetch` with `X-API-Key`. Search hits carry the page text in
`snippet` (`description` is often empty); fetch only serves pages in Keenable's own index (its
reference documents no live-fetch option, so a page outside the index stays a per-page error).
One allowed domain goes to the native `site` filter; several become `site:` operators in the query.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from providers.http import HTTPStatusError
from providers.payload import bounded, iso_date, query_with_sites, require_list, require_object, search_hits, text
from providers.service import ServiceProvider, fetch_each
from providers.web import Envelope, ProviderError, page

if TYPE_CHECKING:
    from providers.http import ServiceResponse

SERVICE = "Keenable"
KEY_VAR = "KEENABLE_API_KEY"
APP_TITLE = "agent-gateway"  # keyless calls must say who is calling
FETCH_MAX_CHARS = 50_000
MAX_QUERY_CHARS = 400  # no documented cap; keeps a query with many site: operators reasonable
FETCH_CONCURRENCY = 4  # stays under the keyless 10 req/s even when the model asks for many pages


def _snippet(item: Any) -> str:
    return text(item.get("snippet")) or text(item.get("description"))


class KeenableProvider(ServiceProvider):
    name = "keenable"
    service = SERVICE
    key_var = KEY_VAR
    url_var = "KEENABLE_API_URL"
    default_url = "https://api.keenable.ai"

    @property
    def display_name(self) -> str:
        return "Keenable" if self._key else "Keenable (keyless)"

    def unavailable_reason(self) -> str | None:
        return None  # the public endpoints need no key

    def supports_extract(self) -> bool:
        return True

    # Without a key every endpoint has a public twin under `/public` that wants the caller's name.
    def url_for(self, path: str) -> str:
        return f"{self._base}{path}" if self._key else f"{self._base}{path}/public"

    def auth_headers(self) -> dict[str, str]:
        return {"X-API-Key": self._key} if self._key else {"X-Keenable-Title": APP_TITLE}

    def describe_error(self, response: ServiceResponse) -> str:
        message = super().describe_error(response)
        if response.status_code == 429 and not self._key:
            return f"{message}; set {KEY_VAR} to lift the keyless limit"
        return message

    async def do_search(self, query: str, limit: int, *, allowed_domains: list[str] | None = None) -> Envelope:
        payload: dict[str, Any] = {"query": query, "max_results": bounded(limit, 50)}
        if allowed_domains and len(allowed_domains) == 1:
            payload["site"] = allowed_domains[0]  # Keenable's filter takes exactly one domain
        elif allowed_domains:
            payload["query"] = query_with_sites(query, allowed_domains, max_chars=MAX_QUERY_CHARS)
        body = await self.post_json("/v1/search", payload)
        obj = require_object(body, SERVICE)
        if "results" not in obj and obj.get("error"):
            raise ProviderError(f"{SERVICE} rejected the search: {text(obj.get('message')) or text(obj.get('error'))}")
        items = require_list(obj, "results", SERVICE)[: bounded(limit, 50)]
        return search_hits(items, _snippet, lambda item: item.get("published_at"))

    async def do_extract(self, urls: list[str], options: dict[str, Any]) -> Envelope:
        return await fetch_each(urls, self._fetch, FETCH_CONCURRENCY)

    async def _fetch(self, url: str) -> dict[str, Any]:
        try:
            body = await self.get_json("/v1/fetch", {"url": url, "max_chars": FETCH_MAX_CHARS})
        except HTTPStatusError as exc:
            if exc.status == 404:
                # Fetch serves only Keenable's own index: a page problem, not a service one.
                return page(url, error=f"{SERVICE} has not indexed this page (404); try another provider")
            raise
        if not isinstance(body, dict) or not isinstance(body.get("content"), str):
            raise ProviderError(f"{SERVICE} returned an unexpected response (no page content)")
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
