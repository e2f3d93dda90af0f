"""Fallback chains and cool-downs: which providers a web tool call may go to, in which order.

A `Chain` per capability ("search", "extract") starts with the registry's selection and goes on
with `web.search_fallback` / `web.extract_fallback`:

- `auto` (the default): the other available providers supporting the capability, in automatic
  order, but only when the selection itself was automatic: a provider the user named
  (`web.search_backend`, `web.backend`) is never silently swapped for another;
- a list of names: exactly those, in that order (also after a named provider, or in place of a
  named provider that is unavailable); unknown, unsupporting or unavailable names are skipped and
  shown by `config check`;
- `none` / `[]`: no fallback.

`ProviderHealth` is the cool-down book: a provider that answered 429 with Retry-After is skipped
that long; one that failed `FAILURES_BEFORE_COOLDOWN` times in a row is skipped for `web.cooldown`
seconds, then tried again (one more fault sends it back). A success clears its record.

`FallbackRunner.run` walks a chain: cooling providers are passed over; an attempt that has
providers after it gets half the time left, so a hanging provider leaves time for the next; the
first answer that is not a fault goes to the model, with `provider` (who answered) and
`fallback_from` (the selected provider, when another one answered).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from gateway.agent.web.cache import CacheKey, ResultCache
from gateway.agent.web.calls import Attempt, seconds
from gateway.config.settings import AUTO_FALLBACK, Settings
from providers.failures import describe_kind
from providers.registry import ProviderRegistry, availability, supports
from providers.web import Envelope, WebSearchProvider, failure

log = logging.getLogger("agent_gateway.web")

FAILURES_BEFORE_COOLDOWN = 3
#: A Retry-After longer than this is taken as this: a provider is not lost for a day by one header.
MAX_RETRY_AFTER = 3600.0
#: Our own deadline ends a little before the agent's per-tool one, so the chain can report.
BUDGET_SHARE = 0.95


@dataclass
class Chain:
    capability: str
    #: The providers to try, in order; the first is the selection when it is usable.
    providers: list[WebSearchProvider]
    #: The selected (or configured) provider's name; None when nothing could be selected.
    primary: str | None
    #: Why nothing usable was selected, worded for the model.
    reason: str | None = None
    explicit: bool = False
    #: Fallback names passed over, with why ("foo: not a known web provider").
    skipped: list[str] = field(default_factory=list)

    def names(self) -> list[str]:
        return [p.name for p in self.providers]

    def describe(self) -> str:
        """"tavily -> exa -> brave-free", or "none (why)"."""
        if not self.providers:
            return f"none ({self.reason})" if self.reason else "none"
        text = " -> ".join(self.names())
        if self.primary and self.primary not in self.names():
            text = f"{self.primary} (unavailable) -> {text}"
        return text


def _is_explicit(registry: ProviderRegistry, capability: str) -> bool:
    if registry.configured_backend(capability):
        return True
    if not registry.backend:
        return False
    provider = registry.get(registry.backend)
    return provider is None or supports(provider, capability)


def plan_chain(registry: ProviderRegistry, capability: str, fallback: tuple[str, ...]) -> Chain:
    selection = registry.select(capability)
    explicit = _is_explicit(registry, capability)
    chosen = selection.provider
    primary = chosen.name if chosen else (
        (registry.configured_backend(capability) or registry.backend) if explicit else None
    )
    chain = Chain(capability, [chosen] if chosen else [], primary, selection.reason, explicit)
    if fallback == AUTO_FALLBACK:
        if explicit:
            return chain
        candidates = [p for p in registry.automatic_order(capability) if availability(p)[0]]
    else:
        candidates = []
        for name in fallback:
            provider = registry.get(name)
            if provider is None:
                chain.skipped.append(f"{name}: not a known web provider")
            elif not supports(provider, capability):
                chain.skipped.append(f"{name}: does not support {capability}")
            elif not (status := availability(provider))[0]:
                chain.skipped.append(f"{name}: {status[1]}")
            else:
                candidates.append(provider)
    for provider in candidates:
        if provider.name not in chain.names():
            chain.providers.append(provider)
    return chain


def fallback_setting(settings: Settings, capability: str) -> tuple[str, ...]:
    return settings.web_search_fallback if capability == "search" else settings.web_extract_fallback


@dataclass
class ProviderState:
    failures: int = 0
    until: float = 0.0
    reason: str = ""


class ProviderHealth:
    """Consecutive faults and cool-downs per provider name (for every capability it serves)."""

    def __init__(self, cooldown: float, *, threshold: int = FAILURES_BEFORE_COOLDOWN,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.cooldown = cooldown
        self.threshold = threshold
        self._clock = clock
        self._states: dict[str, ProviderState] = {}

    def cooling(self, name: str) -> float:
        """Seconds left of the provider's cool-down (0: it may be called)."""
        state = self._states.get(name)
        return max(0.0, state.until - self._clock()) if state else 0.0

    def last_reason(self, name: str) -> str:
        state = self._states.get(name)
        return state.reason if state else ""

    def record(self, name: str, outcome: Attempt) -> None:
        if not outcome.fault:
            self._states.pop(name, None)
            return
        state = self._states.setdefault(name, ProviderState())
        state.failures += 1
        state.reason = str(outcome.envelope.get("error", ""))
        wait = 0.0
        if outcome.retry_after is not None:
            wait = min(outcome.retry_after, MAX_RETRY_AFTER)
        if state.failures >= self.threshold:
            wait = max(wait, self.cooldown)
        if wait > 0:
            state.until = self._clock() + wait
            log.warning("web provider %s is skipped for %.0f s: %s", name, wait, state.reason)

    def snapshot(self) -> list[dict[str, Any]]:
        """Providers with a fault on record: name, faults in a row, seconds of cool-down left, why."""
        return [
            {"provider": name, "failures": state.failures, "cooling_for": round(self.cooling(name), 1),
             "reason": state.reason}
            for name, state in sorted(self._states.items())
        ]


#: Calls one provider within a number of seconds.
Call = Callable[[WebSearchProvider, float], Awaitable[Attempt]]
#: The cache key of a call to one provider; None: neither cached nor shared.
KeyFor = Callable[[WebSearchProvider], CacheKey | None]


class FallbackRunner:
    def __init__(self, health: ProviderHealth, cache: ResultCache) -> None:
        self.health = health
        self.cache = cache

    async def run(self, chain: Chain, call: Call, key_for: KeyFor, budget: float) -> Envelope:
        if not chain.providers:
            return failure(chain.reason or f"no web provider for {chain.capability} is available")
        loop = asyncio.get_running_loop()
        deadline = loop.time() + budget * BUDGET_SHARE
        # A named provider that is unavailable, replaced by the fallbacks the user listed.
        replaced = chain.primary is not None and chain.primary not in chain.names()
        reasons: list[str] = [chain.reason] if replaced and chain.reason else []
        ready = []
        for provider in chain.providers:
            left = self.health.cooling(provider.name)
            if left > 0:
                reasons.append(f"{provider.name} is skipped for {left:.0f} s more after: "
                               f"{self.health.last_reason(provider.name)}")
            else:
                ready.append(provider)
        for index, provider in enumerate(ready):
            remaining = deadline - loop.time()
            if remaining <= 0:
                reasons.append(f"no time left for {provider.name}")
                break
            timeout = remaining / 2 if index < len(ready) - 1 else remaining
            outcome = await self._one(provider, call, key_for(provider), timeout)
            if not outcome.fault:
                return self._served(chain, provider, outcome.envelope)
            error = str(outcome.envelope.get("error", f"{provider.name} failed"))
            reasons.append(error)
            following = ready[index + 1].name if index + 1 < len(ready) else None
            if following:
                log.warning("web %s: %s failed [%s] (%s); falling back to %s", chain.capability, provider.name,
                            describe_kind(outcome.kind or "failed", outcome.retry_after), error, following)
        if len(chain.providers) > 1:
            log.warning("web %s: no provider of %s answered", chain.capability, " -> ".join(chain.names()))
        return failure("; ".join(reasons) or f"no web provider for {chain.capability} answered")

    async def _one(self, provider: WebSearchProvider, call: Call, key: CacheKey | None,
                   timeout: float) -> Attempt:
        async def produce() -> Attempt:
            outcome = await call(provider, timeout)
            self.health.record(provider.name, outcome)
            return outcome

        return await self.cache.get_or_call(
            key, produce, timeout, late=f"{provider.name} did not answer within {seconds(timeout)} s")

    @staticmethod
    def _served(chain: Chain, provider: WebSearchProvider, envelope: Envelope) -> Envelope:
        result = {**envelope, "provider": provider.name}
        if chain.primary and provider.name != chain.primary:
            result["fallback_from"] = chain.primary
        return result


@dataclass
class WebState:
    """What the web tools keep between calls: the cool-down book and the result cache. One per app."""

    health: ProviderHealth
    cache: ResultCache

    @classmethod
    def from_settings(cls, settings: Settings) -> WebState:
        return cls(ProviderHealth(settings.web_cooldown), ResultCache(settings.web_cache_ttl))

    def runner(self) -> FallbackRunner:
        return FallbackRunner(self.health, self.cache)

    def status(self) -> dict[str, Any]:
        """For `agent-gateway tools` and the metrics: cool-downs and the cache's fill."""
        return {
            "providers": self.health.snapshot(),
            "cache": {"entries": len(self.cache), "bytes": self.cache.bytes, "hits": self.cache.hits,
                      "misses": self.cache.misses, "ttl": self.cache.ttl},
        }

    async def aclose(self) -> None:
        await self.cache.aclose()


def chain_report(registry: ProviderRegistry, settings: Settings) -> tuple[list[str], list[str]]:
    """Lines for `config check`, `agent-gateway tools` and the start-up log: each chain, and warnings
    for fallback names that were passed over."""
    lines: list[str] = []
    warnings: list[str] = []
    for capability in ("search", "extract"):
        setting = f"web.{capability}_fallback"
        configured = fallback_setting(settings, capability)
        chain = plan_chain(registry, capability, configured)
        following = [n for n in chain.names() if n != chain.primary]
        if not configured:
            text = f"off ({setting} is none)"
        elif configured == AUTO_FALLBACK and chain.explicit:
            text = f"off (a provider you named is not swapped; list fallbacks in {setting})"
        elif not following:
            text = "none available"
        else:
            text = " -> ".join(following)
        lines.append(f"web {capability} fallback: {text}")
        warnings.extend(f"{setting}: {skipped} (skipped)" for skipped in chain.skipped)
    ttl = settings.web_cache_ttl
    lines.append(f"web cache: {'off' if ttl <= 0 else f'{ttl:g} s, per process'}; "
                 f"cool-down {settings.web_cooldown:g} s after {FAILURES_BEFORE_COOLDOWN} failures in a row")
    return lines, warnings
