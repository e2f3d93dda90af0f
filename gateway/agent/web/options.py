"""What a request asks of the web tools: OpenAI's hosted web search options, wire-agnostic.

The wire modules build a `WebSearchOptions` from a Responses `web_search` tool or a Chat
Completions `web_search_options` object; the agent carries it on its `AgentRequest` to every tool
call (`ToolContext`), and the web tools apply it:

- `allowed_domains`: passed to providers that filter natively, written as `site:` operators into
  the query for the others, and always checked on the results (an off-domain hit is dropped);
- `context_size`: how many results a search hands the model and how much of each page an extract
  keeps (`CONTEXT_SIZES`); `medium` is what the tools do without options;
- the approximate location (`country`, `region`, `city`, `timezone`): passed to providers that
  take it, ignored by the others;
- `force_search`: the model's first round must call web_search (the request's tool_choice).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

#: Per `search_context_size`: (results a search returns, share of web.max_extract_chars a page
#: keeps). `None` results: what the model asks for (default 5), as without options. Both are
#: bounded by the operator's settings (web.max_results, web.max_extract_chars).
CONTEXT_SIZES: dict[str, tuple[int | None, float]] = {
    "low": (3, 0.25),
    "medium": (None, 1.0),
    "high": (10, 1.0),
}
LOCATION_FIELDS = ("country", "region", "city", "timezone")


@dataclass(frozen=True)
class WebSearchOptions:
    """The request's web search options; the default value changes nothing."""

    #: Hosts results must come from (lowercase, no scheme); their subdomains count too.
    allowed_domains: tuple[str, ...] = ()
    context_size: str = "medium"
    #: ISO 3166-1 alpha-2, upper case.
    country: str | None = None
    region: str | None = None
    city: str | None = None
    #: IANA name, e.g. Europe/Oslo.
    timezone: str | None = None
    force_search: bool = False

    def provider_options(self) -> dict[str, Any]:
        """The keyword arguments a provider's `search` may take (providers/web.py SEARCH_OPTIONS)."""
        options: dict[str, Any] = {}
        if self.allowed_domains:
            options["allowed_domains"] = list(self.allowed_domains)
        for name in LOCATION_FIELDS:
            value = getattr(self, name)
            if value:
                options[name] = value
        return options

    def result_count(self, asked: int, cap: int) -> int:
        """How many results a search returns when the model asked for `asked` (at most `cap`)."""
        fixed = CONTEXT_SIZES[self.context_size][0]
        return max(1, min(cap, asked if fixed is None else fixed))

    def page_chars(self, limit: int) -> int:
        """How much of one page's text the model gets, of the operator's `limit`."""
        return max(200, int(limit * CONTEXT_SIZES[self.context_size][1]))

    def cache_part(self) -> tuple[Any, ...]:
        """What distinguishes two searches' provider calls (the cache key's options part)."""
        return (self.allowed_domains, *(getattr(self, name) for name in LOCATION_FIELDS))

    def allows(self, url: str) -> bool:
        """Whether a result URL is on one of the allowed domains (always, without a filter)."""
        if not self.allowed_domains:
            return True
        host = host_of(url)
        return bool(host) and any(host == d or host.endswith("." + d) for d in self.allowed_domains)

    def site_query(self, query: str) -> str:
        """`query` with `site:` operators, for a provider that cannot filter by domain itself."""
        if not self.allowed_domains:
            return query
        sites = " OR ".join(f"site:{d}" for d in self.allowed_domains)
        return f"{query} {sites}" if len(self.allowed_domains) == 1 else f"{query} ({sites})"


def host_of(url: str) -> str:
    try:
        host = urlsplit(url.strip()).hostname or ""
    except ValueError:
        return ""
    return host.rstrip(".").lower()
