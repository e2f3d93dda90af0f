"""One call to one web provider, as the fallback chain sees it: an `Attempt`.

`call_provider` awaits coroutine methods and runs plain ones in a worker thread, bounded by a
deadline. `attempt` turns whatever happened into an `Attempt`: the envelope for the model plus
whether it was the provider's *fault* (try the next provider, count towards its cool-down):

- fault: our deadline passed, a connection error, HTTP 429/5xx, a malformed envelope, an exception
  that is not a `ProviderError` (a broken plugin), or a failure envelope marked `retryable`;
- not a fault: a result (an empty one too: "no results" is an answer), or a failure envelope
  without the mark (the provider's considered answer, e.g. a rejected key or query).

A failed attempt also carries its `kind` (providers/failures.py: bad key, rate-limited, model
retired ...), for the fallback log and `agent-gateway tools --check`; the model gets the sentence.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from providers.failures import FAILED, SERVICE_ERROR, TIMEOUT, failure_kind, kind_of_text
from providers.web import Envelope, ProviderError, failure, validate_envelope


@dataclass(frozen=True)
class Attempt:
    """What one provider call gave: the envelope for the model, and whether it was a fault."""

    envelope: Envelope
    fault: bool = False
    #: Seconds the service asked us to wait (a 429's Retry-After), when it said.
    retry_after: float | None = None
    #: What kind of failure it was (providers/failures.py); None for a success.
    kind: str | None = None

    @property
    def ok(self) -> bool:
        return self.envelope.get("success") is True


async def call_provider(method: Callable[..., Any], *args: Any, timeout: float, **kwargs: Any) -> Any:
    """Run one provider method with a deadline, whether it is sync or async."""

    # asyncio.timeout, not wait_for: on Python 3.11 wait_for runs the call in a task of its own
    async with asyncio.timeout(timeout):
        if inspect.iscoroutinefunction(method):
            result = await method(*args, **kwargs)
        else:
            # A sync plugin must not block the event loop. On timeout its thread runs on, but the
            # turn does not wait for it.
            result = await asyncio.to_thread(method, *args, **kwargs)
        if inspect.isawaitable(result):
            result = await result
        return result


def seconds(value: float) -> str:
    """A deadline as people write it: 0.1, 14.2, 30 (not 0.0949966)."""
    if value >= 0.05:
        return f"{round(value, 1):g}"
    return f"{value:.2g}"


def describe_exception(exc: BaseException, provider: str, timeout: float) -> str:
    if isinstance(exc, TimeoutError):
        return f"{provider} did not answer within {seconds(timeout)} s"
    if isinstance(exc, ProviderError):
        return str(exc) or f"{provider} failed"
    detail = f": {exc}" if str(exc) else ""
    return f"{provider} failed: {type(exc).__name__}{detail}"


async def attempt(
    method: Callable[..., Any], *args: Any, kind: str, provider: str, timeout: float, **kwargs: Any
) -> Attempt:
    """Call `method` and classify the outcome; never raises for a provider's misbehaviour."""
    try:
        raw = await call_provider(method, *args, timeout=timeout, **kwargs)
    except ProviderError as exc:
        message = describe_exception(exc, provider, timeout)
        return Attempt(failure(message), exc.retryable, exc.retry_after, exc.kind or kind_of_text(message))
    except Exception as exc:  # noqa: BLE001 - a timeout or a broken plugin: the next provider may answer
        named = TIMEOUT if isinstance(exc, TimeoutError) else FAILED
        return Attempt(failure(describe_exception(exc, provider, timeout)), fault=True, kind=named)
    return classify(raw, kind, provider)


def classify(raw: Any, kind: str, provider: str) -> Attempt:
    """An envelope a provider returned, checked: a malformed one is a fault, a marked failure too."""
    if isinstance(raw, dict) and raw.get("success") is False:
        error = raw.get("error")
        retry_after = raw.get("retry_after")
        wait = float(retry_after) if isinstance(retry_after, int | float) and retry_after >= 0 else None
        message = str(error) if error else f"{provider}: {kind} failed without a reason"
        return Attempt(failure(message), fault=raw.get("retryable") is True, retry_after=wait,
                       kind=failure_kind(raw))
    result = validate_envelope(raw, kind, provider)
    return Attempt(result, fault=not result["success"], kind=None if result["success"] else SERVICE_ERROR)
