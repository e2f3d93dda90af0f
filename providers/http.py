"""Shared HTTP plumbing for web providers: one pooled aiohttp session each, errors as one sentence.

Providers call `await call_json(...)`; any transport fault, HTTP error or non-JSON body becomes a
`ProviderError` whose message names the service and says what happened (bad key, out of credits,
rate limited with the wait, timeout ...). The client itself is providers/http_session.py.
"""

from __future__ import annotations

import warnings
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any

import aiohttp

from providers.failures import TIMEOUT, UNREACHABLE, kind_for_status
from providers.http_session import (
    DEFAULT_SECONDS,
    MAX_BODY_BYTES,
    BodyTooLarge,
    ServiceClient,
    ServiceResponse,
    connect_reason,
    http_timeout,
    tls_context,
)
from providers.web import ProviderError

__all__ = ["DEFAULT_SECONDS", "HTTPStatusError", "LazyClient", "ServiceClient", "ServiceResponse", "call_json",
           "decoded_body", "describe_http_error", "http_timeout", "json_body", "new_client", "parse_retry_after",
           "send", "tls_context"]


class HTTPStatusError(ProviderError):
    """The service answered an HTTP error; `status` lets a provider add service-specific advice.

    408, 429 and 5xx are retryable (another provider, or this one later, may answer); a 429's
    `Retry-After` (in seconds, or an HTTP date) becomes `retry_after`; `kind` follows the status
    (providers/failures.py) unless the provider knows better (a 404 naming a retired model).
    """

    def __init__(self, message: str, status: int, retry_after: str | None = None, *,
                 retryable: bool | None = None, kind: str | None = None) -> None:
        if retryable is None:
            retryable = status in (408, 429) or status >= 500
        super().__init__(message, retryable=retryable, retry_after=parse_retry_after(retry_after),
                         kind=kind or kind_for_status(status))
        self.status = status


def parse_retry_after(value: str | None) -> float | None:
    """Seconds from a Retry-After header (delta-seconds or an HTTP date); None when absent or unreadable."""
    if not value:
        return None
    text = value.strip()
    try:
        return max(0.0, float(text))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        return None
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


def new_client(timeout: aiohttp.ClientTimeout | float = DEFAULT_SECONDS) -> ServiceClient:
    """Deprecated (kept for round 3, removed after): `ServiceClient(timeout)` is the same client."""
    warnings.warn("providers.http.new_client is deprecated: use providers.http.ServiceClient(timeout)",
                  DeprecationWarning, stacklevel=2)
    return ServiceClient(timeout)


def _service_detail(body: Any) -> str | None:
    """Pull the human message out of the error bodies the services use."""
    if isinstance(body, str):
        return body.strip()[:300] or None
    if not isinstance(body, dict):
        return None
    for key in ("error", "detail", "message"):
        value = body.get(key)
        if isinstance(value, str) and value:
            return value[:300]
        if isinstance(value, dict):
            nested = _service_detail(value)
            if nested:
                return nested
    return None


def describe_http_error(service: str, status: int, body: Any, retry_after: str | None) -> str:
    detail = _service_detail(body)
    suffix = f": {detail}" if detail else ""
    if status == 401:
        return f"{service} rejected the API key (401){suffix}"
    if status == 402:
        return f"{service} says the account is out of credits (402){suffix}"
    if status == 403:
        return f"{service} refused the request (403: plan, permission or limit){suffix}"
    if status == 429:
        wait = f"; retry after {retry_after} s" if retry_after else ""
        return f"{service} rate limit reached (429){wait}{suffix}"
    if status == 408:
        return f"{service} timed out on its side (408){suffix}"
    if status in (432, 433):
        return f"{service} plan or usage limit reached ({status}){suffix}"
    if status >= 500:
        return f"{service} had a server error ({status}){suffix}"
    return f"{service} answered HTTP {status}{suffix}"


def _decode(response: ServiceResponse) -> Any:
    try:
        return response.json()
    except ValueError:
        return response.text


async def send(
    client: ServiceClient,
    service: str,
    method: str,
    url: str,
    **kwargs: Any,
) -> ServiceResponse:
    """Send one request; transport faults become ProviderError, HTTP statuses are left to the caller
    (for providers whose services give a status a meaning worth its own sentence). `kwargs` are
    `ServiceClient.request`'s: headers, json, params, timeout."""
    try:
        return await client.request(method, url, **kwargs)
    except TimeoutError as exc:  # aiohttp's connect and read timeouts are TimeoutErrors too
        raise ProviderError(f"{service} timed out ({type(exc).__name__})", retryable=True, kind=TIMEOUT) from exc
    except BodyTooLarge as exc:
        raise ProviderError(f"{service} sent an answer larger than {MAX_BODY_BYTES // (1024 * 1024)} MiB, "
                            "the most a provider reads", retryable=False) from exc
    except aiohttp.ClientConnectorError as exc:
        raise ProviderError(f"{service} could not be reached: {connect_reason(exc)}", retryable=True,
                            kind=UNREACHABLE) from exc
    except aiohttp.ClientHttpProxyError as exc:  # the proxy refused the tunnel (CONNECT) or the request
        raise ProviderError(f"{service} could not be reached: the proxy answered {exc.status} {exc.message}",
                            retryable=True, kind=UNREACHABLE) from exc
    except (aiohttp.ClientError, OSError) as exc:
        raise ProviderError(f"{service} could not be reached: {exc or type(exc).__name__}", retryable=True,
                            kind=UNREACHABLE) from exc


def json_body(service: str, response: ServiceResponse) -> Any:
    """The decoded JSON body of a successful response, or ProviderError with one sentence."""
    try:
        return response.json()
    except ValueError as exc:
        raise ProviderError(
            f"{service} returned a body that is not JSON (HTTP {response.status_code})", retryable=True
        ) from exc


def decoded_body(response: ServiceResponse) -> Any:
    """JSON when the body is JSON, else the text: for reading error bodies."""
    return _decode(response)


async def call_json(
    client: ServiceClient,
    service: str,
    method: str,
    url: str,
    **kwargs: Any,
) -> Any:
    """Send one request and return the decoded JSON body, or raise ProviderError with one sentence."""
    response = await send(client, service, method, url, **kwargs)
    if response.status_code >= 400:
        retry_after = response.headers.get("Retry-After")
        body = _decode(response)
        raise HTTPStatusError(
            describe_http_error(service, response.status_code, body, retry_after), response.status_code, retry_after
        )
    return json_body(service, response)


class LazyClient(ServiceClient):
    """Deprecated (kept for round 3, removed after): a `ServiceClient` opens its session on first
    use itself, so this is one; `get()` answers the client itself, as it answered the one it held."""

    def __init__(self, timeout: aiohttp.ClientTimeout | float = DEFAULT_SECONDS) -> None:
        warnings.warn("providers.http.LazyClient is deprecated: a ServiceClient(timeout) is lazy itself, "
                      "use it directly (no get())", DeprecationWarning, stacklevel=2)
        super().__init__(timeout)

    def get(self) -> ServiceClient:
        return self
