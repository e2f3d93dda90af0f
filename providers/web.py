"""The web provider contract: what a plugin implements so the agent can search and read the web.

A plugin's `register(ctx)` builds provider instances and calls
`ctx.register_web_search_provider(provider)`. `ctx.env` is the profile's environment (process
environment over the profile's `.env`): read keys and base URLs from it, not from `os.environ`.
`ctx.config` is the profile's config.yaml and `ctx.settings` a `providers.plugin_settings.PluginSettings`
(tool timeout, private-URL policy, home). The plugin's plugin.yaml declares the variables it reads
(providers/manifest.py).

Every method may be a plain function or an `async def`; the gateway awaits coroutines and runs
plain functions in a worker thread with a timeout. Results use fixed envelopes, built with the
helpers below:

    search  -> {"success": True, "data": {"web": [{"title", "url", "description", "position"}]}}
    extract -> {"success": True, "data": [{"url", "title", "content", "raw_content",
                                            "metadata"?, "error"?}]}
    failure -> {"success": False, "error": "one human-readable sentence",
                "retryable"?: True, "retry_after"?: seconds, "kind"?: "bad_key" | ...}

Search options: a request may restrict or localise a search (OpenAI's hosted web_search options).
The gateway passes each of `SEARCH_OPTIONS` only to a provider that takes it: one that names it as
a keyword parameter of `search` (`def search(self, query, limit=5, *, allowed_domains=None,
country=None)`), or lists it in `search_options`. Every option is optional to honour:

    allowed_domains  list of hosts ("arxiv.org"); results only from them and their subdomains
    country          ISO 3166-1 alpha-2, upper case ("NO")
    region, city     free text ("Oslo")
    timezone         IANA name ("Europe/Oslo")

A provider that does not take `allowed_domains` gets the domains as `site:` operators in its
query, and the gateway drops off-domain hits from every provider's results whatever it did.

Raising `ProviderError` (or anything else) is also fine: the gateway turns it into a failure envelope.
A failure marked `retryable` (the service timed out, could not be reached, answered 429 or 5xx) sends
the call to the next provider of the fallback chain and counts towards the provider's cool-down;
`retry_after` (seconds, from a 429's Retry-After) keeps the provider skipped that long. A failure
without the mark is the provider's considered answer and is handed to the model as it is.
`kind` (optional, one of `providers.failures.KINDS`: "bad_key", "rate_limited", "model_retired" ...)
names what went wrong for the fallback log and `agent-gateway tools --check`; without it the
gateway reads the kind from the sentence.
"""

from __future__ import annotations

import inspect
import weakref
from abc import ABC
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

from providers.errors import AgentGatewayError

Envelope = dict[str, Any]
#: What a provider method returns: the envelope, or (for `async def` methods) an awaitable of it.
Result = Envelope | Awaitable[Envelope]
#: The keyword arguments a search may be given (see the module docstring).
SEARCH_OPTIONS = frozenset({"allowed_domains", "country", "region", "city", "timezone"})


class ProviderError(AgentGatewayError):
    """A provider failure worth one clear sentence to the model and the log.

    `retryable=True` says another try (elsewhere, or later) may well succeed: a timeout, a
    connection error, a 429 or a 5xx. `retry_after` is how many seconds the service asked to wait.
    `kind` names the failure (providers/failures.py), when the raiser knows it.
    """

    def __init__(self, *args: Any, retryable: bool = False, retry_after: float | None = None,
                 kind: str | None = None) -> None:
        super().__init__(*args)
        self.retryable = retryable
        self.retry_after = retry_after
        self.kind = kind


class WebSearchProvider(ABC):  # noqa: B024 - every method has a sensible default; subclasses pick
    """Base class for web search / extract / crawl providers."""

    #: Unique, stable id used in config (`web.search_backend: <name>`).
    name: str = ""

    @property
    def display_name(self) -> str:
        """Human-friendly name for `agent-gateway tools`; defaults to `name`."""
        return self.name

    def is_available(self) -> bool:
        """Whether the provider can be used now. Cheap: env vars and imports only, never network."""
        return True

    def unavailable_reason(self) -> str | None:
        """When unavailable, what the user must do, e.g. "set TAVILY_API_KEY"."""
        return None

    def supports_search(self) -> bool:
        return True

    def supports_extract(self) -> bool:
        return False

    def supports_crawl(self) -> bool:
        return False

    @property
    def search_options(self) -> frozenset[str]:
        """The `SEARCH_OPTIONS` this provider applies itself; by default those `search` names."""
        return named_options(self.search)

    def search(self, query: str, limit: int = 5, **options: Any) -> Result:
        """Search the web; return `search_result(...)`. `options`: the `search_options` it takes."""
        raise ProviderError(f"{self.name} does not support search")

    def extract(self, urls: list[str], **kwargs: Any) -> Result:
        """Fetch pages as readable text; return `extract_result(...)`, one entry per URL, in order."""
        raise ProviderError(f"{self.name} does not support extract")

    def crawl(self, url: str, **kwargs: Any) -> Result:
        """Crawl from `url`; return the crawled pages as `extract_result(...)`."""
        raise ProviderError(f"{self.name} does not support crawl")

    async def aclose(self) -> None:  # noqa: B027 - optional hook, default does nothing
        """Release pooled connections; called once when the gateway shuts down."""


#: named_options' answers by function: `inspect.signature` was ~10% of a web_search round's CPU
#: (two calls per search, bench/README.md "Round 3 session 4"), and a function's parameters do not
#: change. Weak keys: a plugin's functions are not kept alive by the cache.
_NAMED_OPTIONS: weakref.WeakKeyDictionary[Any, frozenset[str]] = weakref.WeakKeyDictionary()


def named_options(method: Callable[..., Any]) -> frozenset[str]:
    """The `SEARCH_OPTIONS` a callable names as parameters (a bare `**kwargs` names none)."""
    # A bound method's answer is its function's: `self` is never one of SEARCH_OPTIONS.
    function = getattr(method, "__func__", method)
    try:
        return _NAMED_OPTIONS[function]
    except (KeyError, TypeError):  # TypeError: not weak-referenceable, asked afresh every time
        pass
    try:
        parameters = inspect.signature(method).parameters
    except (TypeError, ValueError):
        return frozenset()
    named = frozenset(
        name for name, p in parameters.items()
        if name in SEARCH_OPTIONS and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
    )
    try:
        _NAMED_OPTIONS[function] = named
    except TypeError:
        pass
    return named


def search_options_of(provider: Any) -> frozenset[str]:
    """What a registered provider honours, also for one that does not derive from WebSearchProvider."""
    declared = getattr(provider, "search_options", None)
    if declared is None:
        return named_options(provider.search)
    try:
        return frozenset(declared) & SEARCH_OPTIONS
    except TypeError:  # a plugin's odd declaration costs it its options, not the search
        return frozenset()


def search_hit(title: str | None, url: str, description: str | None, position: int) -> dict[str, Any]:
    return {"title": title or "", "url": url, "description": description or "", "position": position}


def search_result(hits: Iterable[Mapping[str, Any]]) -> Envelope:
    """Wrap hits (dicts with title/url/description) into the search envelope, numbering positions."""
    web = [
        search_hit(hit.get("title"), str(hit["url"]), hit.get("description"), position)
        for position, hit in enumerate(hits, start=1)
    ]
    return {"success": True, "data": {"web": web}}


def page(
    url: str,
    content: str = "",
    *,
    title: str | None = None,
    raw_content: str | None = None,
    metadata: Mapping[str, Any] | None = None,
    error: str | None = None,
) -> dict[str, Any]:
    """One extract entry; pass `error` for a URL that could not be read."""
    entry: dict[str, Any] = {
        "url": url,
        "title": title or "",
        "content": content,
        "raw_content": raw_content if raw_content is not None else content,
    }
    if metadata:
        entry["metadata"] = dict(metadata)
    if error:
        entry["error"] = error
    return entry


def extract_result(pages: Iterable[Mapping[str, Any]]) -> Envelope:
    return {"success": True, "data": [dict(p) for p in pages]}


def failure(message: str, *, retryable: bool = False, retry_after: float | None = None,
            kind: str | None = None) -> Envelope:
    envelope: Envelope = {"success": False, "error": message}
    if retryable:
        envelope["retryable"] = True
    if retry_after is not None:
        envelope["retry_after"] = retry_after
    if kind:
        envelope["kind"] = kind
    return envelope


def validate_envelope(result: Any, kind: str, provider: str = "provider") -> Envelope:
    """Check a provider's result against the envelope for `kind` ("search" or "extract").

    Returns the result unchanged when valid, or a failure envelope naming the provider and what is
    wrong, so a misbehaving plugin yields a clear tool error instead of crashing the turn.
    """
    if not isinstance(result, dict) or not isinstance(result.get("success"), bool):
        return failure(f"{provider} returned a malformed result for {kind} (not an envelope)")
    if result["success"] is False:
        error = result.get("error")
        named = result.get("kind")
        return failure(str(error) if error else f"{kind} failed without a reason",
                       kind=named if isinstance(named, str) else None)
    data = result.get("data")
    if kind == "search":
        web = data.get("web") if isinstance(data, dict) else None
        if not isinstance(web, list) or not all(isinstance(h, dict) and isinstance(h.get("url"), str) for h in web):
            return failure(f"{provider} returned a malformed search result (data.web must be a list of hits)")
        return result
    if not isinstance(data, list) or not all(isinstance(p, dict) and isinstance(p.get("url"), str) for p in data):
        return failure(f"{provider} returned a malformed {kind} result (data must be a list of pages)")
    return result
