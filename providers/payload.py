"""Reading service response bodies defensively, for web providers.

Services change shapes, proxies answer with HTML, and a 200 can carry an error object. These
helpers turn "JSON, but not the shape we expected" into one `ProviderError` sentence naming the
service, instead of a KeyError deep inside a provider, and hold the small text chores (clipping,
dates, matching results back to the URLs asked for) that every provider repeats.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from providers.web import Envelope, ProviderError, failure, page, search_result

#: Longest search-hit description handed to the model; some services return whole pages here.
DESCRIPTION_LIMIT = 1000


def require_object(body: Any, service: str) -> dict[str, Any]:
    """The body must be a JSON object; a 200 carrying an error object becomes a ProviderError."""
    if not isinstance(body, dict):
        raise ProviderError(f"{service} returned an unexpected response (expected a JSON object)", retryable=True)
    return body


def require_list(body: Any, key: str, service: str) -> list[dict[str, Any]]:
    """`body[key]` must be a list; entries that are not objects are dropped rather than fatal."""
    obj = require_object(body, service)
    value = obj.get(key)
    if not isinstance(value, list):
        raise ProviderError(f"{service} returned an unexpected response (no '{key}' list)", retryable=True)
    return [item for item in value if isinstance(item, dict)]


def optional_list(body: Mapping[str, Any], key: str) -> list[dict[str, Any]]:
    """`body[key]` when it is a list of objects; absent or malformed means empty."""
    value = body.get(key)
    if not isinstance(value, list):
        return []
    return [item for item in value if isinstance(item, dict)]


def text(value: Any) -> str:
    """A string field, or "" for None and non-strings (services send null for missing fields)."""
    return value.strip() if isinstance(value, str) else ""


def clip(value: str, limit: int = DESCRIPTION_LIMIT) -> str:
    """Cut to `limit` characters, at a word boundary when one is near, marking the cut."""
    value = " ".join(value.split())
    if len(value) <= limit:
        return value
    cut = value[: limit - 1]
    space = cut.rfind(" ")
    if space > limit * 0.8:
        cut = cut[:space]
    return cut.rstrip() + "…"


def join_texts(values: Any, separator: str = " … ") -> str:
    """Join a list of excerpt strings, skipping blanks and non-strings."""
    if not isinstance(values, list):
        return text(values)
    return separator.join(t for t in (text(v) for v in values) if t)


def iso_date(value: Any) -> str:
    """A publication date as text: ISO strings pass through, unix seconds become a UTC date."""
    if isinstance(value, bool):
        return ""
    if isinstance(value, int | float) and value > 0:
        return datetime.fromtimestamp(value, tz=UTC).date().isoformat()
    return text(value)


def dated(description: str, date: str) -> str:
    """Prefix the publication date so the model can judge freshness from the hit alone."""
    if not date:
        return description
    day = date[:10]
    return f"[{day}] {description}" if description else f"[{day}]"


def search_hits(
    items: Iterable[Mapping[str, Any]],
    snippet: Callable[[Mapping[str, Any]], str],
    date: Callable[[Mapping[str, Any]], Any] = lambda _item: "",
) -> Envelope:
    """The search envelope from a service's result items (`title` and `url` fields).

    Items without a URL are skipped; `snippet(item)` is clipped and prefixed with the
    publication date `date(item)` (ISO text or unix seconds) when there is one.
    """
    hits = []
    for item in items:
        url = text(item.get("url"))
        if url:
            description = dated(clip(snippet(item)), iso_date(date(item)))
            hits.append({"title": text(item.get("title")), "url": url, "description": description})
    return search_result(hits)


def _cut_query(query: str, max_chars: int, max_words: int | None) -> str:
    words = query.split()
    cut = " ".join(words[:max_words] if max_words else words)
    if len(cut) > max_chars:
        cut = cut[:max_chars]
        space = cut.rfind(" ")
        cut = cut[:space] if space > max_chars // 2 else cut
    return cut


def _with_sites(query: str, domains: list[str]) -> str:
    sites = " OR ".join(f"site:{d}" for d in domains)
    if not domains:
        return query
    return f"{query} {sites}" if len(domains) == 1 else f"{query} ({sites})"


def query_with_sites(query: str, domains: Iterable[str], *, max_chars: int, max_words: int | None = None) -> str:
    """A query for a service without a domain filter, within its limits: `site:` operators for as
    many domains as fit in half of them, and the query cut to the rest, so a long query never cuts
    the filter off (the gateway drops off-domain hits from the results either way)."""
    chosen: list[str] = []
    for domain in domains:
        suffix = _with_sites("", [*chosen, domain])
        if len(suffix) > max_chars // 2 or (max_words and len(suffix.split()) > max_words // 2):
            break
        chosen.append(domain)
    suffix = _with_sites("", chosen)
    room_words = max_words - len(suffix.split()) if max_words else None
    return _with_sites(_cut_query(query, max_chars - len(suffix), room_words), chosen)


def _url_key(url: str) -> str:
    # Services echo URLs back normalised (trailing slash, scheme case); compare loosely.
    return url.strip().rstrip("/").lower()


def pages_in_order(
    urls: Iterable[str],
    found: Mapping[str, dict[str, Any]],
    errors: Mapping[str, str],
    missing: Callable[[str], str],
) -> list[dict[str, Any]]:
    """One extract entry per requested URL, in order.

    `found` maps a returned URL to a ready `page(...)` entry; `errors` maps a URL to the
    service's reason; a URL in neither gets `missing(url)` as its error.
    """
    by_key = {_url_key(u): entry for u, entry in found.items()}
    err_by_key = {_url_key(u): reason for u, reason in errors.items()}
    entries: list[dict[str, Any]] = []
    for url in urls:
        key = _url_key(url)
        entry = by_key.get(key)
        if entry is not None:
            entries.append({**entry, "url": url})
        else:
            entries.append(page(url, error=err_by_key.get(key) or missing(url)))
    return entries


def env_value(env: Mapping[str, str], name: str) -> str:
    """A stripped environment value, "" when unset (a blank line in .env means unset)."""
    return (env.get(name) or "").strip()


def base_url(env: Mapping[str, str], name: str, default: str) -> str:
    """The service base URL from `name`, without a trailing slash, falling back to `default`."""
    return (env_value(env, name) or default).rstrip("/")


async def as_envelope(work: Awaitable[Envelope]) -> Envelope:
    """Await a provider call; a ProviderError becomes the failure envelope with its sentence."""
    try:
        return await work
    except ProviderError as exc:
        return failure(str(exc), retryable=exc.retryable, retry_after=exc.retry_after, kind=exc.kind)


def bounded(value: Any, high: int, default: int = 5, low: int = 1) -> int:
    """A count from the model or config, clamped to what the service accepts (bad input -> default)."""
    try:
        number = int(value) if value is not None and not isinstance(value, bool) else default
    except (TypeError, ValueError):
        number = default
    return max(low, min(number, high))


def tool_budget(ctx: Any, default: float = 30.0, margin: float = 5.0) -> float:
    """Seconds a long call (a crawl) may take: the gateway's tool timeout minus a margin.

    The gateway cuts every tool call at `agent.tool_timeout`; a crawl that stops itself a little
    earlier can still return the pages it has and cancel its job, instead of being killed.
    """
    settings = getattr(ctx, "settings", None)
    timeout = getattr(settings, "tool_timeout", None)
    total = float(timeout) if isinstance(timeout, int | float) and timeout > 0 else default
    return max(1.0, total - margin)
