"""A fake Brave Search API: `GET /res/v1/web/search` with `X-Subscription-Token`.

Answers with Brave's `{"type": "search", "web": {"results": [...]}}` shape, and with its
`{"type": "ErrorResponse", "error": {...}}` body for a wrong token. Point BRAVE_SEARCH_API_URL at
`fake.base_url` (which ends in /res/v1). Import the fixture explicitly in the test module.

Follows Brave's Web Search API reference (api-dashboard.search.brave.com, "Web Search" query
parameters, "Country Codes", "Error codes"): `q` is at most 400 characters and 50 words,
`country` one of the listed codes, `count` 1-20; a parameter outside those is a 422 `VALIDATION`
ErrorResponse with the failing field in `meta.errors`. `rate_limited()` is Brave's 429
`RATE_LIMITED` answer with its `X-RateLimit-*` headers (per-second and per-month windows).
"""

from __future__ import annotations

from typing import Any

import pytest
from aiohttp import web

from tests.fakes.scripted import FakeService, Recorded, Reply, serve

VALID_TOKEN = "BSA-test-token"
COUNTRY_CODES = frozenset({
    "ALL", "AR", "AU", "AT", "BE", "BR", "CA", "CL", "DK", "FI", "FR", "DE", "GR", "HK", "IN", "ID",
    "IT", "JP", "KR", "MY", "MX", "NL", "NZ", "NO", "CN", "PL", "PT", "PH", "RU", "SA", "ZA", "ES",
    "SE", "CH", "TW", "TR", "GB", "US",
})


def brave_error(status: int, code: str, detail: str, **meta: Any) -> dict[str, Any]:
    return {
        "type": "ErrorResponse",
        "error": {"id": "00000000-0000-0000-0000-000000000000", "status": status, "code": code,
                  "detail": detail, "meta": meta},
        "time": 1700000000,
    }


def rate_limited(reset_seconds: int = 1) -> Reply:
    """Brave's answer once the plan's per-second window is used up."""
    body = brave_error(429, "RATE_LIMITED", "Request rate limit exceeded for plan.", plan="Free",
                       rate_limit=1, rate_current=1, quota_limit=2000, quota_current=17)
    headers = {"X-RateLimit-Limit": "1, 2000", "X-RateLimit-Remaining": "0, 1983",
               "X-RateLimit-Reset": f"{reset_seconds}, 1419704"}
    return Reply(429, body, headers=headers)


def _validate(recorded: Recorded) -> str | None:
    query = recorded.query.get("q", "")
    if not query or len(query) > 400 or len(query.split()) > 50:
        return "q: at least 1 and at most 400 characters and 50 words"
    country = recorded.query.get("country")
    if country is not None and country not in COUNTRY_CODES:
        return f"country: Input should be one of the supported country codes, got {country!r}"
    count = recorded.query.get("count", "20")
    if not count.isdigit() or not 1 <= int(count) <= 20:
        return "count: Input should be between 1 and 20"
    return None


class FakeBrave(FakeService):
    key_header = "X-Subscription-Token"
    key_value = VALID_TOKEN

    def __init__(self) -> None:
        super().__init__()
        self.result_count = 10

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/res/v1/web/search", self.endpoint("search", self._search, validate=_validate))
        return app

    def error(self, status: int, message: str) -> web.StreamResponse:
        if status == 401:
            detail = "The provided subscription token is invalid."
            return web.json_response(brave_error(401, "SUBSCRIPTION_TOKEN_INVALID", detail), status=401)
        # Brave answers a parameter it cannot accept with 422, not 400.
        status = 422 if status == 400 else status
        body = brave_error(status, "VALIDATION", "Unable to validate request parameter(s)",
                           errors=[{"type": "value_error", "msg": message}])
        return web.json_response(body, status=status)

    def _search(self, recorded: Recorded) -> dict[str, Any]:
        query = recorded.query.get("q", "")
        count = int(recorded.query.get("count", "20"))
        results = [
            {
                "type": "search_result",
                "title": f"<strong>{query}</strong> result {n}",
                "url": f"https://brave.example/{n}",
                "description": f"About <strong>{query}</strong> &amp; more, number {n}",
                "age": "2 days ago",
                "language": "en",
            }
            for n in range(1, min(count, self.result_count) + 1)
        ]
        web_part = {"type": "search", "results": results}
        return {"type": "search", "query": {"original": query}, "web": web_part}


@pytest.fixture
async def brave_server(aiohttp_server: Any) -> FakeBrave:
    return await serve(FakeBrave(), aiohttp_server, "/res/v1")
