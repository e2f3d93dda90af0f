"""SearXNG provider: `GET {SEARXNG_URL}/search?q=...&format=json`, no auth.

Environment: SEARXNG_URL (required, e.g. http://127.0.0.1:8888), SEARXNG_LANGUAGE (optional, e.g.
"en"), SEARXNG_TIMEOUT (seconds, default 15). JSON output must be enabled on the instance
(`search.formats: [html, json]` in settings.yml); otherwise SearXNG answers 403.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from providers.locales import country_locale
from providers.service import ServiceProvider
from providers.web import Envelope, ProviderError, failure, search_result

if TYPE_CHECKING:
    from providers.http import ServiceResponse

SERVICE = "SearXNG"


class SearxngProvider(ServiceProvider):
    name = "searxng"
    service = SERVICE
    url_var = "SEARXNG_URL"  # no default: every instance is someone's own

    def __init__(self, env: Mapping[str, str]) -> None:
        super().__init__(env, timeout=float(env.get("SEARXNG_TIMEOUT") or 15))
        self._language = (env.get("SEARXNG_LANGUAGE") or "").strip() or None

    def auth_headers(self) -> dict[str, str]:
        return {"Accept": "application/json"}

    def describe_error(self, response: ServiceResponse) -> str:
        status = response.status_code
        if status == 403:
            return (
                f"{SERVICE} refused the JSON API (403): enable it on the instance with "
                "`search.formats: [html, json]` in settings.yml (and `server.limiter: false` for private use)"
            )
        if status == 429:
            wait = response.headers.get("Retry-After")
            after = f"; retry after {wait} s" if wait else ""
            return (
                f"{SERVICE} rate limit reached (429){after}: the instance's bot limiter blocks API clients; "
                "set `server.limiter: false` in settings.yml for private use"
            )
        return super().describe_error(response)

    # Service faults are raised, not returned: the gateway turns them into the failure envelope.
    async def search(self, query: str, limit: int = 5, *, country: str | None = None) -> Envelope:
        if not self._base:
            return failure(f"searxng: {self.unavailable_reason()}")
        params: dict[str, Any] = {"q": query, "format": "json", "pageno": 1}
        # SEARXNG_LANGUAGE is the operator's choice and wins; else a request's country picks that
        # country's main locale ("NO" -> nb-NO), which SearXNG's engines take as language and region.
        language = self._language or country_locale(country)
        if language:
            params["language"] = language
        body = await self.get_json("/search", params)
        if not isinstance(body, dict) or not isinstance(body.get("results"), list):
            raise ProviderError(f"{SERVICE} answered without a results list")
        hits = [
            {"title": r.get("title"), "url": r["url"], "description": r.get("content")}
            for r in body["results"]
            if isinstance(r, dict) and isinstance(r.get("url"), str)
        ][:limit]
        if not hits and body.get("unresponsive_engines"):
            engines = ", ".join(_engine_problem(e) for e in body["unresponsive_engines"])
            return failure(f"{SERVICE} found nothing because its engines did not answer: {engines}")
        return search_result(hits)


def _engine_problem(entry: Any) -> str:
    # SearXNG lists unresponsive engines as [name, reason] pairs.
    if isinstance(entry, list | tuple) and entry:
        return " ".join(str(part) for part in entry[:2])
    return str(entry)
