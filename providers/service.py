"""An optional base class for providers that call one HTTP API: what every such provider repeats.

`ServiceProvider` reads the key and the base URL from the profile environment, answers
`is_available` / `unavailable_reason` ("set TAVILY_API_KEY"), owns one lazily opened, pooled
aiohttp session (closed in `aclose`), and sends requests whose faults become one sentence naming
the service (see providers/http.py). Its `search` / `extract` / `crawl` run the `do_*` hooks and
turn a raised `ProviderError` into the failure envelope. A subclass keeps only what is specific
to its service: auth headers, building requests and mapping responses.

`PageSet` and `fetch_each` assemble extract results, one entry per requested URL, in order.

Plugin authors may use any of this or none of it: the contract is `providers.web` alone.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import aiohttp

from providers.http import (
    HTTPStatusError,
    ServiceClient,
    ServiceResponse,
    decoded_body,
    describe_http_error,
    json_body,
    send,
)
from providers.payload import as_envelope, base_url, env_value, pages_in_order
from providers.web import (
    Envelope,
    ProviderError,
    WebSearchProvider,
    extract_result,
    failure,
    named_options,
    page,
)


class ServiceProvider(WebSearchProvider):
    """A web provider backed by one HTTP API. Set the class attributes, override the hooks."""

    #: The service's name as it opens every error sentence ("Tavily rejected the API key ...").
    service: str = ""
    #: The variable holding the API key; "" for a service without one.
    key_var: str = ""
    #: The variable that overrides the base URL (tests point it at a fake server).
    url_var: str = ""
    #: The base URL when `url_var` is unset; "" means the user must set `url_var` (self-hosted).
    default_url: str = ""

    def __init__(self, env: Mapping[str, str], *, timeout: float = 30.0) -> None:
        self._key = env_value(env, self.key_var) if self.key_var else ""
        self._base = base_url(env, self.url_var, self.default_url)
        self._http = ServiceClient(timeout)  # its session opens on the first request

    @property
    def display_name(self) -> str:
        return self.service or self.name

    def is_available(self) -> bool:
        return self.unavailable_reason() is None

    def unavailable_reason(self) -> str | None:
        if self.key_var and not self._key:
            return f"set {self.key_var}"
        if not self._base:
            return f"set {self.url_var}"
        return None

    async def aclose(self) -> None:
        await self._http.aclose()

    # -- the public methods run the hooks; a ProviderError becomes the failure envelope ---------
    @property
    def search_options(self) -> frozenset[str]:
        """The search options `do_search` (or an overriding `search`) names as parameters (providers/web.py)."""
        return named_options(self.do_search) | named_options(self.search)

    async def search(self, query: str, limit: int = 5, **options: Any) -> Envelope:
        taken = named_options(self.do_search)
        return await as_envelope(self.do_search(query, limit, **{k: v for k, v in options.items() if k in taken}))

    async def extract(self, urls: list[str], **kwargs: Any) -> Envelope:
        return await as_envelope(self.do_extract(list(urls), kwargs))

    async def crawl(self, url: str, **kwargs: Any) -> Envelope:
        return await as_envelope(self.do_crawl(url, kwargs))

    async def do_search(self, query: str, limit: int) -> Envelope:
        """Search; raise ProviderError with one sentence when the service cannot answer.

        To honour search options, name them as keyword parameters, e.g. `*, allowed_domains:
        list[str] | None = None, country: str | None = None`; only those are passed."""
        raise ProviderError(f"{self.name} does not support search")

    async def do_extract(self, urls: list[str], options: dict[str, Any]) -> Envelope:
        """Read `urls` (already a list); `options` are the extract call's keyword arguments."""
        raise ProviderError(f"{self.name} does not support extract")

    async def do_crawl(self, url: str, options: dict[str, Any]) -> Envelope:
        """Crawl from `url`; `options` are the crawl call's keyword arguments."""
        raise ProviderError(f"{self.name} does not support crawl")

    # -- HTTP ----------------------------------------------------------------------------------
    def auth_headers(self) -> dict[str, str]:
        """Headers sent with every request (the key, and whatever else the service wants)."""
        return {}

    def url_for(self, path: str) -> str:
        """Where `path` lives; an absolute URL (a `next` link the service gave) is used as is."""
        return path if "://" in path else self._base + path

    def describe_error(self, response: ServiceResponse) -> str:
        """The one sentence for an HTTP error answer; override to add service-specific advice."""
        retry_after = response.headers.get("Retry-After")
        return describe_http_error(self.service, response.status_code, decoded_body(response), retry_after)

    def http_error(self, response: ServiceResponse) -> HTTPStatusError:
        """The error raised for an HTTP error answer: `describe_error`'s sentence, retryable and
        kind from the status. Override to give a status a different kind (xAI's retired model)."""
        return HTTPStatusError(self.describe_error(response), response.status_code, response.headers.get("Retry-After"))

    async def call_json(
        self,
        method: str,
        path: str,
        *,
        payload: Any = None,
        params: Mapping[str, Any] | None = None,
        timeout: aiohttp.ClientTimeout | float | None = None,
    ) -> Any:
        """Send one request and return the decoded JSON body.

        Raises ProviderError with one sentence: not configured, unreachable, timed out, not JSON,
        or `HTTPStatusError` (carrying `status`) when the service answered an HTTP error.
        """
        reason = self.unavailable_reason()
        if reason:
            raise ProviderError(f"{self.service} is not configured: {reason}")
        kwargs: dict[str, Any] = {"headers": self.auth_headers()}
        if payload is not None:
            kwargs["json"] = payload
        if params is not None:
            kwargs["params"] = params
        if timeout is not None:
            kwargs["timeout"] = timeout
        response = await send(self._http, self.service, method, self.url_for(path), **kwargs)
        if response.status_code >= 400:
            raise self.http_error(response)
        return json_body(self.service, response)

    async def post_json(self, path: str, payload: Any, *, timeout: aiohttp.ClientTimeout | float | None = None) -> Any:
        return await self.call_json("POST", path, payload=payload, timeout=timeout)

    async def get_json(
        self, path: str, params: Mapping[str, Any] | None = None, *,
        timeout: aiohttp.ClientTimeout | float | None = None,
    ) -> Any:
        return await self.call_json("GET", path, params=params, timeout=timeout)


def batches(urls: list[str], size: int) -> list[list[str]]:
    """`urls` cut into runs of at most `size`, for services that cap URLs per request."""
    return [urls[i : i + size] for i in range(0, len(urls), size)]


class PageSet:
    """Extract entries gathered from a service's answers, handed back one per URL asked, in order.

    Services answer in their own order, echo URLs normalised and report failures apart from the
    pages; `found` and `failed` collect both, `result` lines them up with the request.
    """

    def __init__(self, urls: list[str], missing: str) -> None:
        self._urls = urls
        self._missing = missing  # the error of a URL the service said nothing about
        self._found: dict[str, dict[str, Any]] = {}
        self._errors: dict[str, str] = {}

    def found(self, url: str, entry: dict[str, Any]) -> None:
        self._found[url] = entry

    def failed(self, url: str, reason: str) -> None:
        # A reported failure outweighs an (empty) result the service sent for the same URL.
        self._found.pop(url, None)
        self._errors[url] = reason

    def result(self) -> Envelope:
        return extract_result(pages_in_order(self._urls, self._found, self._errors, lambda _u: self._missing))


async def fetch_each(
    urls: list[str], fetch: Callable[[str], Awaitable[dict[str, Any]]], concurrency: int
) -> Envelope:
    """Extract with one call per URL, at most `concurrency` at a time, results in order.

    A URL whose call raises ProviderError gets that sentence as its error; when every call
    fails the cause is usually one (key, credits, rate limit), so it is said once as a failure.
    """
    if not urls:
        return extract_result([])
    gate = asyncio.Semaphore(concurrency)

    async def one(url: str) -> dict[str, Any] | ProviderError:
        async with gate:
            try:
                return await fetch(url)
            except ProviderError as exc:
                return exc

    outcomes = await asyncio.gather(*(one(u) for u in urls))
    if all(isinstance(o, ProviderError) for o in outcomes):
        first = outcomes[0]
        assert isinstance(first, ProviderError)
        return failure(str(first), retryable=first.retryable, retry_after=first.retry_after, kind=first.kind)
    return extract_result(
        page(u, error=str(o)) if isinstance(o, ProviderError) else o for u, o in zip(urls, outcomes, strict=True)
    )
