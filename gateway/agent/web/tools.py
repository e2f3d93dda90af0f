"""The agent's web tools: `web_search` and `web_extract`, dispatched to the registry's providers.

Every provider call goes through `call_provider` (gateway/agent/web/calls.py): coroutine methods are
awaited, plain ones run in a worker thread, and the whole call is bounded by `settings.tool_timeout`.
Whatever goes wrong comes back to the model as `{"success": false, "error": "..."}`, never as an
exception.

Crawl: `web_extract(crawl=true)` calls `crawl(url)` on the provider selected for "crawl", once per URL.
When no provider can crawl, the tool falls back to a plain extract of the given URLs and says so in a
top-level `note`, because the pages asked for are still useful to the model.

Search and extract go through the capability's fallback chain (gateway/agent/web/fallback.py) and
the result cache (gateway/agent/web/cache.py); the result says which provider answered
(`provider`, plus `fallback_from` when it was not the selected one). An extract whose every page
failed is `success: false` with the per-page reasons in `data`; a mixed one stays `success: true`.

The request's web search options (gateway/agent/web/options.py) come with each call's
`ToolContext`: a provider gets the `SEARCH_OPTIONS` it takes (providers/web.py), the allowed
domains as `site:` operators when it cannot filter, and off-domain hits are dropped here for all.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from gateway.agent.observer import report_provider
from gateway.agent.toolbox import AgentTool, ToolContext
from gateway.agent.web.cache import extract_key, search_key, urls_cacheable
from gateway.agent.web.calls import Attempt, attempt, call_provider, describe_exception
from gateway.agent.web.fallback import Chain, WebState, fallback_setting, plan_chain
from gateway.agent.web.options import WebSearchOptions
from gateway.common import json_out
from gateway.config.settings import Settings
from providers.registry import ProviderRegistry
from providers.web import (
    Envelope,
    WebSearchProvider,
    extract_result,
    failure,
    page,
    search_options_of,
    validate_envelope,
)

#: How many results a search returns when the model does not say (never above web.max_results).
DEFAULT_SEARCH_RESULTS = 5
MAX_EXTRACT_URLS = 5


def cut_middle(text: str, limit: int) -> str:
    """Keep the head and tail of a long text, saying how much was left out."""
    if len(text) <= limit:
        return text
    omitted = len(text) - limit
    note = f"\n\n[... {omitted} characters omitted ...]\n\n"
    head = (limit * 2) // 3
    tail = limit - head
    return text[:head] + note + text[len(text) - tail:]


def provider_outcome(exc: BaseException) -> str:
    """The outcome label a failed provider call is counted under (gateway/agent/observer.py)."""
    return "timeout" if isinstance(exc, TimeoutError) else "error"


def report_tool_call(chain: Chain, result: Envelope) -> None:
    """Tell the metrics which provider answered this call (or was tried first, when none did)."""
    served = result.get("provider")
    if isinstance(served, str) and result.get("success") is True:
        report_provider(served, "ok")
    elif chain.providers:
        report_provider(served if isinstance(served, str) else chain.providers[0].name, "error")
    else:
        report_provider("none", "unavailable")


def to_json(envelope: Envelope) -> str:
    """The envelope as the model reads it: compact JSON, non-ASCII text as it is (orjson's way,
    gateway/common/json_out.py: a fraction of the stdlib encoder's cost)."""
    # ensure_ascii for the stdlib fallback (a value orjson refuses, e.g. a lone surrogate a
    # provider's JSON carried): escaped, it stays encodable, and the agent's parse of this text
    # (sources.py, gateway/common/json_in.py) turns it into U+FFFD.
    return json_out.dumps(envelope, ensure_ascii=True).decode()


def _bad_arguments(message: str) -> str:
    return to_json(failure(message))


def _function_schema(name: str, description: str, parameters: dict[str, Any]) -> dict[str, Any]:
    function = {"name": name, "description": description, "parameters": parameters}
    return {"type": "function", "function": function}


class _ChainedTool:
    """What both tools share: the registry, the settings and the app's web state."""

    def __init__(self, registry: ProviderRegistry, settings: Settings, state: WebState | None = None) -> None:
        self._registry = registry
        self._settings = settings
        self._state = state if state is not None else WebState.from_settings(settings)
        self._runner = self._state.runner()

    def chain(self, capability: str) -> Chain:
        return plan_chain(self._registry, capability, fallback_setting(self._settings, capability))


class WebSearchTool(_ChainedTool):
    name = "web_search"

    def schema(self) -> dict[str, Any]:
        return _function_schema(
            self.name,
            "Search the web. Returns a JSON list of results (title, url, description). Use it for "
            "anything recent, niche or that must be checked; then read the most promising pages with "
            "web_extract when the snippets are not enough. Write the query as you would type it into a "
            "search engine: a few specific keywords, one topic per call.",
            {
                "type": "object",
                "properties": {
                    "query": {"type": "string", "description": "The search query."},
                    "limit": {
                        "type": "integer",
                        "minimum": 1,
                        "maximum": self._settings.web_max_results,
                        "default": min(DEFAULT_SEARCH_RESULTS, self._settings.web_max_results),
                        "description": f"How many results to return (1-{self._settings.web_max_results}).",
                    },
                },
                "required": ["query"],
                "additionalProperties": False,
            },
        )

    def marker(self, arguments: Mapping[str, Any]) -> str | None:
        query = arguments.get("query")
        return f"🔍 {query}" if isinstance(query, str) and query.strip() else "🔍 web search"

    async def run(self, arguments: Mapping[str, Any], context: ToolContext | None = None) -> str:
        query = arguments.get("query")
        if not isinstance(query, str) or not query.strip():
            return _bad_arguments("web_search needs a non-empty 'query' string")
        options = context.web if context is not None else WebSearchOptions()
        cap = self._settings.web_max_results
        asked = _int_in_range(arguments.get("limit"), default=min(DEFAULT_SEARCH_RESULTS, cap), low=1, high=cap)
        limit = options.result_count(asked, cap)
        query = query.strip()
        wanted = options.provider_options()

        async def call(provider: WebSearchProvider, timeout: float) -> Attempt:
            taken = search_options_of(provider)
            kwargs = {k: v for k, v in wanted.items() if k in taken}
            sent = query if "allowed_domains" in taken else options.site_query(query)
            outcome = await attempt(provider.search, sent, limit=limit, kind="search", provider=provider.name,
                                    timeout=timeout, **kwargs)
            if outcome.ok:
                hits = [h for h in outcome.envelope["data"]["web"] if options.allows(h["url"])][:limit]
                outcome = Attempt({**outcome.envelope, "data": {**outcome.envelope["data"], "web": hits}})
            return outcome

        chain = self.chain("search")
        result = await self._runner.run(
            chain, call, lambda p: search_key(p.name, query, limit, options.cache_part()),
            self._settings.tool_timeout,
        )
        report_tool_call(chain, result)
        return to_json(result)


class WebExtractTool(_ChainedTool):
    name = "web_extract"

    def schema(self) -> dict[str, Any]:
        return _function_schema(
            self.name,
            "Read web pages. Returns a JSON list with each page's url, title and readable text (markdown), "
            "in the order given; a page that could not be read carries an 'error'. Use it on URLs from "
            "web_search results or given by the user. Very long pages are shortened in the middle. "
            "Set crawl=true to also follow links from a site's page (slower; only when one page is "
            "not enough).",
            {
                "type": "object",
                "properties": {
                    "urls": {
                        "type": "array",
                        "items": {"type": "string", "description": "An http(s) URL."},
                        "minItems": 1,
                        "maxItems": MAX_EXTRACT_URLS,
                        "description": "1 to 5 URLs to read.",
                    },
                    "crawl": {
                        "type": "boolean",
                        "default": False,
                        "description": "Follow links from each URL and return the pages found.",
                    },
                },
                "required": ["urls"],
                "additionalProperties": False,
            },
        )

    def marker(self, arguments: Mapping[str, Any]) -> str | None:
        urls = _url_list(arguments.get("urls"))
        icon = "🕸️" if arguments.get("crawl") is True else "📄"
        if not urls:
            return f"{icon} web page"
        more = f" +{len(urls) - 1} more" if len(urls) > 1 else ""
        return f"{icon} {urls[0]}{more}"

    async def run(self, arguments: Mapping[str, Any], context: ToolContext | None = None) -> str:
        options = context.web if context is not None else WebSearchOptions()
        limit = options.page_chars(self._settings.max_extract_chars)
        urls = _url_list(arguments.get("urls"))
        if not urls:
            return _bad_arguments("web_extract needs 'urls': a list of 1 to 5 URL strings")
        if len(urls) > MAX_EXTRACT_URLS:
            return _bad_arguments(
                f"web_extract takes at most {MAX_EXTRACT_URLS} URLs per call, got {len(urls)}"
            )
        crawl = arguments.get("crawl") is True
        note: str | None = None
        if crawl:
            selection = self._registry.select("crawl")
            if selection.provider is not None:
                return to_json(self._shorten(await self._crawl(selection.provider, urls), limit))
            note = f"crawl unavailable ({selection.reason}); returned the given pages only"
        result = await self._extract(urls)
        if note and result["success"]:
            result["note"] = note
        return to_json(self._shorten(result, limit))

    async def _extract(self, urls: list[str]) -> Envelope:
        async def call(provider: WebSearchProvider, timeout: float) -> Attempt:
            outcome = await attempt(provider.extract, list(urls), kind="extract", provider=provider.name,
                                    timeout=timeout)
            if outcome.ok:
                outcome = Attempt(extract_result(in_input_order(urls, outcome.envelope["data"])))
            return outcome

        cacheable = await urls_cacheable(urls, resolve=self._settings.allow_private_urls)
        chain = self.chain("extract")
        result = await self._runner.run(
            chain, call, lambda p: extract_key(p.name, urls) if cacheable else None, self._settings.tool_timeout,
        )
        report_tool_call(chain, result)
        return all_failed_says_so(result)

    async def _crawl(self, provider: Any, urls: list[str]) -> Envelope:
        timeout = self._settings.tool_timeout

        async def one(url: str) -> list[dict[str, Any]]:
            try:
                raw = await call_provider(provider.crawl, url, timeout=timeout)
            except Exception as exc:  # noqa: BLE001 - reported per URL
                report_provider(provider.name, provider_outcome(exc))
                return [page(url, error=describe_exception(exc, provider.name, timeout))]
            result = validate_envelope(raw, "extract", provider.name)
            report_provider(provider.name, "ok" if result["success"] else "failed")
            if not result["success"]:
                return [page(url, error=result["error"])]
            return result["data"] or [page(url, error="the crawl found no pages")]

        batches = await asyncio.gather(*(one(url) for url in urls))
        return {**all_failed_says_so(extract_result(p for batch in batches for p in batch)), "provider": provider.name}

    @staticmethod
    def _shorten(result: Envelope, limit: int) -> Envelope:
        """Cut each page to `limit` characters so one page cannot flood the model's context."""
        if not isinstance(result.get("data"), list):
            return result
        pages = []
        for entry in result["data"]:
            entry = dict(entry)
            content = entry.get("content")
            raw = entry.get("raw_content")
            if isinstance(content, str):
                entry["content"] = cut_middle(content, limit)
            # raw_content usually repeats content; sending both would double what the model reads.
            if isinstance(raw, str) and raw == content:
                entry.pop("raw_content")
            elif isinstance(raw, str):
                entry["raw_content"] = cut_middle(raw, limit)
            pages.append(entry)
        return {**result, "data": pages}


def all_failed_says_so(result: Envelope) -> Envelope:
    """An extract whose every page failed is a failure, with each page's reason kept in `data`."""
    pages = result.get("data")
    if not result.get("success") or not isinstance(pages, list) or not pages:
        return result
    if not all(isinstance(p, dict) and p.get("error") for p in pages):
        return result
    reasons = "; ".join(f"{p.get('url')}: {p['error']}" for p in pages)
    noun = "the page" if len(pages) == 1 else f"any of the {len(pages)} pages"
    return {**result, "success": False, "error": f"could not read {noun} ({reasons})"}


def in_input_order(urls: list[str], pages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One entry per requested URL, in request order, whatever order the provider answered in.

    Entries whose URL matches no request (a provider reporting the URL after redirects) fill the
    unmatched requests in order; a request with no entry at all gets an error entry.
    """
    remaining = list(pages)
    ordered: list[dict[str, Any] | None] = []
    for url in urls:
        match = next((p for p in remaining if p.get("url") == url), None)
        if match is None:
            match = next((p for p in remaining if _same_url(p.get("url"), url)), None)
        if match is not None:
            remaining.remove(match)
        ordered.append(match)
    unmatched = iter(remaining)
    out: list[dict[str, Any]] = []
    for url, entry in zip(urls, ordered, strict=True):
        if entry is None:
            entry = next(unmatched, None) or page(url, error="the provider returned nothing for this URL")
        out.append(entry)
    out.extend(unmatched)
    return out


def _same_url(a: Any, b: str) -> bool:
    return isinstance(a, str) and a.rstrip("/").lower() == b.rstrip("/").lower()


def _url_list(value: Any) -> list[str]:
    if isinstance(value, str):
        value = [value]  # models sometimes send one URL as a bare string
    if not isinstance(value, list):
        return []
    return [u.strip() for u in value if isinstance(u, str) and u.strip()]


def _int_in_range(value: Any, *, default: int, low: int, high: int) -> int:
    if isinstance(value, bool):
        return default
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value)
    if not isinstance(value, int | float):
        return default
    return max(low, min(high, int(value)))


def build_web_tools(
    registry: ProviderRegistry, settings: Settings, state: WebState | None = None
) -> list[AgentTool]:
    """The agent's web tools; `state` (cool-downs, cache) is the app's, or a fresh one for these tools."""
    state = state if state is not None else WebState.from_settings(settings)
    return [WebSearchTool(registry, settings, state), WebExtractTool(registry, settings, state)]
