"""The web tools' result cache: reused answers, and one provider call for identical calls at once.

Keys are (capability, provider, normalized query or URLs, options). A value is an `Attempt` that
succeeded; faults and failures are never kept, nor an extract whose every page failed (those
reasons are often passing). Entries live `web.cache_ttl` seconds and the whole cache is bounded
both in entries and in bytes (cachetools' TTLCache evicts least recently used first).

Concurrent identical calls share one provider call: the first starts it as a task of its own, the
others wait on that task (shielded, each with its own deadline), so a caller that gives up or is
cancelled does not fail the others; when the last caller waiting is cancelled (its client gone), the
call is cancelled too, closing its connection. With `web.cache_ttl` 0 nothing is kept but identical calls in
flight are still shared.

Private and loopback URLs are never cached or shared: their pages may be visible only from the
gateway's network, and a later caller must fetch them (or be refused) for itself. An IP literal
or a local name (localhost, *.local, a single-label intranet name) is private on sight; when
`web.allow_private_urls` lets the gateway fetch private addresses, a host name is resolved too.

The cache is per process: with several replicas each keeps its own (the providers' answers are
not worth a shared store's round trip and the consistency it would have to promise).
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import logging
import socket
from collections.abc import Awaitable, Callable, Hashable, Iterable
from urllib.parse import urlsplit

from cachetools import TTLCache

from gateway.agent.web.calls import Attempt
from providers.urlsafety import address_problem
from providers.web import failure

log = logging.getLogger("agent_gateway.web")

MAX_ENTRIES = 1024
MAX_BYTES = 32 * 1024 * 1024
#: A host name that does not resolve within this is taken as private (not cached), not waited for.
RESOLVE_SECONDS = 2.0
LOCAL_SUFFIXES = (".localhost", ".local", ".internal", ".lan", ".home.arpa", ".intranet", ".corp")

CacheKey = Hashable


def search_key(provider: str, query: str, limit: int, options: Hashable = ()) -> CacheKey:
    """`options`: the request's search options that change the provider's answer (domains, location)."""
    return ("search", provider, " ".join(query.casefold().split()), limit, options)


def extract_key(provider: str, urls: Iterable[str]) -> CacheKey:
    return ("extract", provider, tuple(normalize_url(u) for u in urls))


def normalize_url(url: str) -> str:
    """Scheme and host are case-insensitive and a fragment never reaches the server."""
    try:
        parts = urlsplit(url.strip())
    except ValueError:
        return url.strip()
    return parts._replace(scheme=parts.scheme.lower(), netloc=parts.netloc.lower(), fragment="").geturl()


def private_on_sight(url: str) -> bool:
    """A URL whose host is an IP literal that is not public, or a local name. Unparsable: private."""
    try:
        host = urlsplit(url.strip()).hostname
    except ValueError:
        return True
    if not host:
        return True
    host = host.rstrip(".").lower()
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return host == "localhost" or host.endswith(LOCAL_SUFFIXES) or "." not in host
    return address_problem(address) is not None


async def resolves_private(url: str) -> bool:
    """Whether the URL's host resolves to any non-public address (or does not resolve at all)."""
    host = urlsplit(url.strip()).hostname or ""
    try:
        async with asyncio.timeout(RESOLVE_SECONDS):
            infos = await asyncio.get_running_loop().getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except (OSError, TimeoutError):
        return True
    for info in infos:
        try:
            address = ipaddress.ip_address(str(info[4][0]).split("%", 1)[0])
        except ValueError:
            return True
        if address_problem(address) is not None:
            return True
    return False


async def urls_cacheable(urls: Iterable[str], *, resolve: bool) -> bool:
    """True when no URL is private; `resolve` also looks host names up (private URLs allowed)."""
    listed = list(urls)
    if any(private_on_sight(u) for u in listed):
        return False
    if resolve:
        answers = await asyncio.gather(*(resolves_private(u) for u in listed))
        return not any(answers)
    return True


def worth_keeping(outcome: Attempt) -> bool:
    if not outcome.ok or outcome.fault:
        return False
    data = outcome.envelope.get("data")
    if isinstance(data, list):  # extract: at least one page read
        return any(isinstance(p, dict) and not p.get("error") for p in data)
    return True


def _size(outcome: Attempt) -> int:
    return len(json.dumps(outcome.envelope, ensure_ascii=False, default=str))


class ResultCache:
    """Cached provider answers and the provider calls in flight, by key. One per app."""

    def __init__(
        self,
        ttl: float,
        *,
        max_entries: int = MAX_ENTRIES,
        max_bytes: int = MAX_BYTES,
        clock: Callable[[], float] | None = None,
    ) -> None:
        self.ttl = ttl
        # Every entry is charged at least max_bytes / max_entries, so the byte bound caps entries too.
        floor = max(1, max_bytes // max_entries)
        self._store: TTLCache[CacheKey, Attempt] | None = None
        if ttl > 0:
            extra: dict[str, Callable[[], float]] = {"timer": clock} if clock is not None else {}
            self._store = TTLCache(
                maxsize=max_bytes, ttl=ttl, getsizeof=lambda outcome: max(floor, _size(outcome)), **extra
            )
        self._in_flight: dict[CacheKey, asyncio.Task[Attempt]] = {}
        #: callers waiting on each shared call: the last one cancelled cancels the call
        self._waiting: dict[asyncio.Task[Attempt], int] = {}
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._store) if self._store is not None else 0

    @property
    def bytes(self) -> int:
        return int(self._store.currsize) if self._store is not None else 0

    async def get_or_call(
        self, key: CacheKey | None, produce: Callable[[], Awaitable[Attempt]], timeout: float, *, late: str
    ) -> Attempt:
        """The cached answer for `key`, else the shared call's; `key` None calls alone, keeps nothing.

        `late` is the error when this caller's `timeout` passes before the shared call answers.
        """
        if key is None:
            return await produce()
        if self._store is not None:
            cached = self._store.get(key)
            if cached is not None:
                self.hits += 1
                return cached
        self.misses += 1
        task = self._in_flight.get(key)
        if task is None:
            task = asyncio.create_task(self._run(key, produce))
            self._in_flight[key] = task
        self._waiting[task] = self._waiting.get(task, 0) + 1
        try:
            async with asyncio.timeout(timeout):  # not wait_for: one future and callback fewer per call
                return await asyncio.shield(task)
        except TimeoutError:
            return Attempt(failure(late), fault=True)
        except asyncio.CancelledError:
            # the last caller cancelled (its client gone, its run cancelled): nobody waits for the
            # provider's answer, so its connection is closed now rather than left to finish
            if self._waiting.get(task) == 1 and not task.done():
                task.cancel()
            raise
        finally:
            left = self._waiting.pop(task, 1) - 1
            if left:
                self._waiting[task] = left

    async def _run(self, key: CacheKey, produce: Callable[[], Awaitable[Attempt]]) -> Attempt:
        try:
            outcome = await produce()
            if self._store is not None and worth_keeping(outcome):
                try:
                    self._store[key] = outcome
                except ValueError:  # larger than the whole cache: hand it over, keep nothing
                    log.debug("web result too large to cache")
            return outcome
        finally:
            self._in_flight.pop(key, None)

    async def aclose(self) -> None:
        """Cancel the calls still in flight (at shutdown nobody waits for them)."""
        tasks = list(self._in_flight.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._in_flight.clear()
        if self._store is not None:
            self._store.clear()
