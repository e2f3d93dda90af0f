"""Brave Search provider: `GET {BRAVE_SEARCH_API_URL}/web/search`, key in `X-Subscription-Token`.

Environment: BRAVE_SEARCH_API_KEY (required), BRAVE_SEARCH_API_URL (default
https://api.search.brave.com/res/v1, overridable for tests), BRAVE_SEARCH_TIMEOUT (seconds, default 15).
Errors come as `{"type": "ErrorResponse", "error": {"code", "detail", "meta"}}`.

Brave checks its parameters strictly (a 422 otherwise): `q` at most 400 characters and 50 words,
`country` one of the codes on its "Country Codes" reference page (`BRAVE_COUNTRIES`; any other
request country is left out, the search runs unlocalised). Brave has no domain filter parameter, so
allowed domains become `site:` operators in `q`, as many as fit those limits; the gateway drops
off-domain hits whatever Brave returns.
"""

from __future__ import annotations

import html
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from providers.http import HTTPStatusError, decoded_body, describe_http_error
from providers.payload import query_with_sites
from providers.service import ServiceProvider
from providers.web import Envelope, ProviderError, search_result

if TYPE_CHECKING:
    from providers.http import ServiceResponse

SERVICE = "Brave Search"
MAX_QUERY_CHARS = 400
MAX_QUERY_WORDS = 50
MAX_COUNT = 20
#: The `country` values Brave accepts (its "Country Codes" reference; ALL means every region).
BRAVE_COUNTRIES = frozenset({
    "ALL", "AR", "AU", "AT", "BE", "BR", "CA", "CL", "DK", "FI", "FR", "DE", "GR", "HK", "IN", "ID",
    "IT", "JP", "KR", "MY", "MX", "NL", "NZ", "NO", "CN", "PL", "PT", "PH", "RU", "SA", "ZA", "ES",
    "SE", "CH", "TW", "TR", "GB", "US",
})
_TAG = re.compile(r"<[^>]+>")


class BraveProvider(ServiceProvider):
    name = "brave-free"
    service = SERVICE
    key_var = "BRAVE_SEARCH_API_KEY"
    url_var = "BRAVE_SEARCH_API_URL"
    default_url = "https://api.search.brave.com/res/v1"

    def __init__(self, env: Mapping[str, str]) -> None:
        super().__init__(env, timeout=float(env.get("BRAVE_SEARCH_TIMEOUT") or 15))

    def auth_headers(self) -> dict[str, str]:
        return {"X-Subscription-Token": self._key, "Accept": "application/json"}

    @staticmethod
    def _retry_after(response: ServiceResponse) -> str | None:
        retry_after = response.headers.get("Retry-After")
        if retry_after is None and response.status_code == 429:
            # Brave reports seconds until each rate window resets, e.g. "1, 1419704".
            reset = response.headers.get("X-RateLimit-Reset", "")
            retry_after = reset.split(",")[0].strip() or None
        return retry_after

    def http_error(self, response: ServiceResponse) -> HTTPStatusError:
        # The reset time also keeps the provider skipped that long (not only said in the sentence).
        return HTTPStatusError(self.describe_error(response), response.status_code, self._retry_after(response))

    def describe_error(self, response: ServiceResponse) -> str:
        body = decoded_body(response)
        retry_after = self._retry_after(response)
        error = body.get("error") if isinstance(body, dict) else None
        if isinstance(error, dict):
            detail = ": ".join(str(part) for part in (error.get("code"), error.get("detail")) if part)
            body = {"detail": detail} if detail else body
        return describe_http_error(SERVICE, response.status_code, body, retry_after)

    # Service faults are raised, not returned: the gateway turns them into the failure envelope.
    async def search(self, query: str, limit: int = 5, *, country: str | None = None,
                     allowed_domains: list[str] | None = None) -> Envelope:
        if not self._key:
            raise ProviderError(f"brave-free: {self.unavailable_reason()}")
        params: dict[str, Any] = {"q": query_with_sites(query, allowed_domains or [], max_chars=MAX_QUERY_CHARS,
                                                        max_words=MAX_QUERY_WORDS),
                                  "count": max(1, min(MAX_COUNT, limit))}
        code = (country or "").strip().upper()
        if code in BRAVE_COUNTRIES:
            params["country"] = code
        body = await self.get_json("/web/search", params)
        if not isinstance(body, dict):
            raise ProviderError(f"{SERVICE} answered with an unexpected body")
        web = body.get("web") if isinstance(body.get("web"), dict) else {}
        results = web.get("results") if isinstance(web.get("results"), list) else []
        hits = [
            {"title": _plain(r.get("title")), "url": r["url"], "description": _plain(r.get("description"))}
            for r in results
            if isinstance(r, dict) and isinstance(r.get("url"), str)
        ]
        return search_result(hits[:limit])


def _plain(text: Any) -> str:
    """Brave marks matches with <strong>; the model needs plain text."""
    if not isinstance(text, str):
        return ""
    return html.unescape(_TAG.sub("", text))
