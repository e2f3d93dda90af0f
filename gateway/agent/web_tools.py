"""The agent's web tools: `web_search` and `web_extract`, dispatched to the registry's providers.

Every provider call goes through `call_provider`: coroutine methods are awaited, plain ones run in a
worker thread, and the whole call is bounded by `settings.tool_timeout`. Whatever goes wrong comes
back to the model as `{"success": false, "error": "..."}`, never as an exception.

Crawl: `web_extract(crawl=true)` calls `crawl(url)` on the provider selected for "crawl", once per URL.
When no provider can crawl, the tool falls back to a plain extract of the given URLs and says so in a
top-level `note`, because the pages asked for are still useful to the model.
"""

from __future__ import annotations

import asyncio
import inspect
import json
from collections.abc import Callable, Mapping
from typing import Any

from gateway.agent.toolbox import AgentTool
from gateway.config.settings import Settings
from providers.registry import ProviderRegistry
from providers.web import Envelope, ProviderError, extract_result, failure, page, validate_envelope

MAX_SEARCH_RESULTS = 10
MAX_EXTRACT_URLS = 5


async def call_provider(method: Callable[..., Any], *args: Any, timeout: float, **kwargs: Any) -> Any:
    """Run one provider method with a deadline, whether it is sync or async."""

    async def invoke() -> Any:
        if inspect.iscoroutinefunction(method):
            result = await method(*args, **kwargs)
        else:
            # A sync plugin must not block the event loop. On timeout its thread runs on, but the
            # turn does not wait for it.
            result = await asyncio.to_thread(method, *args, **kwargs)
        if inspect.isawaitable(result):
            result = await result
        return result

    return await asyncio.wait_for(invoke(), timeout)


def describe_exception(exc: BaseException, provider: str, timeout: float) -> str:
    if isinstance(exc, TimeoutError):
        return f"{provider} did not answer within {timeout:g} s"
    if isinstance(exc, ProviderError):
        return str(exc) or f"{provider} failed"
    detail = f": {exc}" if str(exc) else ""
    return f"{provider} failed: {type(exc).__name__}{detail}"


def cut_middle(text: str, limit: int) -> str:
    """Keep the head and tail of a long text, saying how much was left out."""
    if len(text) <= limit:
        return text
    omitted = len(text) - limit
    note = f"\n\n[... {omitted} characters omitted ...]\n\n"
    head = (limit * 2) // 3
    tail = limit - head
    return text[:head] + note + text[len(text) - tail:]


def to_json(envelope: Envelope) -> str:
    return json.dumps(envelope, ensure_ascii=False, separators=(",", ":"))


def _bad_arguments(message: str) -> str:
    return to_json(failure(message))


def _function_schema(name: str, description: str, parameters: dict[str, Any]) -> dict[str, Any]:
    function = {"name": name, "description": description, "parameters": parameters}
    return {"type": "function", "function": function}


class WebSearchTool:
    name = "web_search"

    def __init__(self, registry: ProviderRegistry, settings: Settings) -> None:
        self._registry = registry
        self._settings = settings

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
                        "maximum": MAX_SEARCH_RESULTS,
                        "default": 5,
                        "description": "How many results to return (1-10).",
                    },
                },
                "required": ["query"],
                "additionalProperties": False,
            },
        )

    def marker(self, arguments: Mapping[str, Any]) -> str | None:
        query = arguments.get("query")
        return f"🔍 {query}" if isinstance(query, str) and query.strip() else "🔍 web search"

    async def run(self, arguments: Mapping[str, Any]) -> str:
        query = arguments.get("query")
        if not isinstance(query, str) or not query.strip():
            return _bad_arguments("web_search needs a non-empty 'query' string")
        limit = _int_in_range(arguments.get("limit"), default=5, low=1, high=MAX_SEARCH_RESULTS)
        selection = self._registry.select("search")
        if selection.provider is None:
            return to_json(failure(selection.reason or "no web search provider is available"))
        provider = selection.provider
        timeout = self._settings.tool_timeout
        try:
            raw = await call_provider(provider.search, query.strip(), limit=limit, timeout=timeout)
        except Exception as exc:  # noqa: BLE001 - every failure goes back to the model as text
            return to_json(failure(describe_exception(exc, provider.name, timeout)))
        result = validate_envelope(raw, "search", provider.name)
        if result["success"]:
            hits = result["data"]["web"][:limit]
            result = {**result, "data": {**result["data"], "web": hits}}
        return to_json(result)


class WebExtractTool:
    name = "web_extract"

    def __init__(self, registry: ProviderRegistry, settings: Settings) -> None:
        self._registry = registry
        self._settings = settings

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

    async def run(self, arguments: Mapping[str, Any]) -> str:
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
                return to_json(self._shorten(await self._crawl(selection.provider, urls)))
            note = f"crawl unavailable ({selection.reason}); returned the given pages only"
        result = await self._extract(urls)
        if note and result["success"]:
            result["note"] = note
        return to_json(self._shorten(result))

    async def _extract(self, urls: list[str]) -> Envelope:
        selection = self._registry.select("extract")
        if selection.provider is None:
            return failure(selection.reason or "no web extract provider is available")
        provider = selection.provider
        timeout = self._settings.tool_timeout
        try:
            raw = await call_provider(provider.extract, list(urls), timeout=timeout)
        except Exception as exc:  # noqa: BLE001 - every failure goes back to the model as text
            return failure(describe_exception(exc, provider.name, timeout))
        result = validate_envelope(raw, "extract", provider.name)
        if not result["success"]:
            return result
        return extract_result(in_input_order(urls, result["data"]))

    async def _crawl(self, provider: Any, urls: list[str]) -> Envelope:
        timeout = self._settings.tool_timeout

        async def one(url: str) -> list[dict[str, Any]]:
            try:
                raw = await call_provider(provider.crawl, url, timeout=timeout)
            except Exception as exc:  # noqa: BLE001 - reported per URL
                return [page(url, error=describe_exception(exc, provider.name, timeout))]
            result = validate_envelope(raw, "extract", provider.name)
            if not result["success"]:
                return [page(url, error=result["error"])]
            return result["data"] or [page(url, error="the crawl found no pages")]

        batches = await asyncio.gather(*(one(url) for url in urls))
        return extract_result(p for batch in batches for p in batch)

    def _shorten(self, result: Envelope) -> Envelope:
        """Cut each page to the configured size so one page cannot flood the model's context."""
        if not result.get("success"):
            return result
        limit = self._settings.max_extract_chars
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


def build_web_tools(registry: ProviderRegistry, settings: Settings) -> list[AgentTool]:
    return [WebSearchTool(registry, settings), WebExtractTool(registry, settings)]
