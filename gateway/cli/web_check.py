"""`agent-gateway tools --check [NAME...]`: one small real call through each configured web provider.

Every provider the loopback-fake tests exercise could still be wrong against the real service (a
retired model, a renamed field): this asks the real one. Per provider it runs one search (and, for
an extract provider, one extract of a stable public page) exactly as the agent would: the same
registry, the same call path and deadline (`gateway/agent/web/calls.attempt` under
`agent.tool_timeout`), and prints ok or failed, the latency, how many results, and what went wrong
in words (providers/failures.py: bad key, out of credit, rate-limited with the reset time,
unreachable, model retired, blocked by the URL guard ...). It never prints a key: provider
sentences name variables, not values, and every line is scrubbed of the profile's secrets anyway.

Without NAMEs it checks every available provider (keyless ones too: the agent would use them);
a NAME that is not available is reported as not configured and fails the check. Exit status 1 when
any checked provider failed, 2 for an unknown NAME.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable
from dataclasses import dataclass

from gateway.agent.web.calls import Attempt, attempt
from gateway.config.settings import Settings
from providers.failures import NOT_CONFIGURED, describe_kind, failure_kind, kind_of_text
from providers.loader import load_registry
from providers.registry import ProviderRegistry, availability, supports
from providers.web import WebSearchProvider

#: A small query whose answer every index has.
CHECK_QUERY = "wikipedia"
CHECK_RESULTS = 3
#: A stable public page: IANA keeps it up, small and unchanged for decades.
CHECK_PAGE = "https://example.com/"


@dataclass
class Outcome:
    provider: str
    call: str  # "search" / "extract"
    ok: bool
    seconds: float
    count: int = 0
    kind: str = ""
    retry_after: float | None = None
    error: str = ""

    def line(self) -> str:
        head = f"  {self.provider:<12} {self.call:<8}"
        if self.ok:
            noun = "result" if self.call == "search" else "page"
            return f"{head} ok      {self.seconds:6.2f} s  {self.count} {noun}{'s' if self.count != 1 else ''}"
        what = describe_kind(self.kind, self.retry_after)
        return f"{head} FAILED  {self.seconds:6.2f} s  {what}: {self.error}"


def _outcome(provider: str, call: str, result: Attempt, seconds: float) -> Outcome:
    envelope = result.envelope
    if call == "extract" and result.ok:
        pages = envelope.get("data") or []
        errors = [str(p.get("error")) for p in pages if isinstance(p, dict) and p.get("error")]
        if pages and len(errors) == len(pages):  # every page failed: the check failed
            return Outcome(provider, call, False, seconds, kind=kind_of_text(errors[0]), error=errors[0])
        return Outcome(provider, call, True, seconds, count=len(pages) - len(errors))
    if result.ok:
        return Outcome(provider, call, True, seconds, count=len((envelope.get("data") or {}).get("web") or []))
    kind = result.kind or failure_kind(envelope)
    return Outcome(provider, call, False, seconds, kind=kind, retry_after=result.retry_after,
                   error=str(envelope.get("error") or "failed without a reason"))


async def _timed(provider: WebSearchProvider, call: str, settings: Settings, page: str) -> Outcome:
    started = time.monotonic()
    if call == "search":
        result = await attempt(provider.search, CHECK_QUERY, limit=CHECK_RESULTS, kind="search",
                               provider=provider.name, timeout=settings.tool_timeout)
    else:
        result = await attempt(provider.extract, [page], kind="extract", provider=provider.name,
                               timeout=settings.tool_timeout)
    return _outcome(provider.name, call, result, time.monotonic() - started)


async def check_providers(registry: ProviderRegistry, settings: Settings, names: Iterable[str],
                          page: str = CHECK_PAGE) -> list[Outcome]:
    wanted = list(names)
    chosen = [p for p in (registry.get(n) for n in wanted) if p is not None] if wanted else registry.providers()
    outcomes: list[Outcome] = []
    for provider in chosen:
        name = provider.name
        available, missing = availability(provider)
        if not available:
            if wanted:  # asked for by name: saying why it cannot run is the answer
                outcomes.append(Outcome(name, "-", False, 0.0, kind=NOT_CONFIGURED, error=str(missing)))
            continue
        calls = [c for c in ("search", "extract") if supports(provider, c)]
        # One provider at a time: a rate-limited keyless service is not hit in parallel.
        for call in calls:
            outcomes.append(await _timed(provider, call, settings, page))
    return outcomes


def _scrub(text: str, secrets: Iterable[str]) -> str:
    for secret in secrets:
        if len(secret) >= 6:
            text = text.replace(secret, "***")
    return text


def run_check(settings: Settings, names: list[str], page: str = CHECK_PAGE) -> tuple[int, str]:
    registry = load_registry(settings.plugin_settings())
    unknown = [n for n in names if registry.get(n) is None]
    if unknown:
        asyncio.run(registry.aclose())
        known = ", ".join(p.name for p in registry.providers())
        return 2, f"unknown web provider(s): {', '.join(unknown)} (known: {known})\n"

    async def run() -> list[Outcome]:
        try:
            return await check_providers(registry, settings, names, page)
        finally:
            await registry.aclose()

    outcomes = asyncio.run(run())
    lines = [f"Live check: one search for {CHECK_QUERY!r} per provider, one extract of {page} per "
             f"extract provider, {settings.tool_timeout:g} s each (agent.tool_timeout):"]
    lines.extend(o.line() for o in outcomes)
    if not outcomes:
        lines.append("  no web provider is configured (see `agent-gateway tools`)")
    failed = sorted({o.provider for o in outcomes if not o.ok})
    lines.append("")
    lines.append(f"failed: {', '.join(failed)}" if failed else "all checked providers answered")
    secrets = [v for k, v in settings.env.items() if v and any(w in k for w in ("KEY", "TOKEN", "SECRET", "PASSWORD"))]
    return (1 if failed else 0), _scrub("\n".join(lines) + "\n", secrets)
