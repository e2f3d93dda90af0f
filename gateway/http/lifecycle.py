"""Run limits and shutdown state: how many agent runs at once, and whether we are draining."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from gateway.errors import RateLimitError


class RunLimiter:
    """Caps concurrent agent runs; beyond the cap a request is refused at once (429), not queued,
    so a client's own retry policy decides when to come back."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.active = 0

    def slot(self) -> RunLimiter:
        """`with limiter.slot():` holds one run's place, or refuses it (429). The limiter is its own
        context manager: a generator-based one costs a generator, its frames and a StopIteration
        per run."""
        if self.active >= self.limit:
            raise RateLimitError(
                f"too many agent runs in progress ({self.limit}); retry shortly", retry_after=1
            )
        self.active += 1
        return self

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc_info: object) -> None:
        self.active -= 1


class Lifecycle:
    """Tracks requests in flight so a shutdown can let them finish while refusing new ones.

    `on_idle`, when set, is called each time the count falls to zero, with the most requests that
    were in flight at once since the previous time (the memory releaser's cue)."""

    def __init__(self) -> None:
        self.draining = False
        self.in_flight = 0
        self.on_idle: Callable[[int], None] | None = None
        self._peak = 0
        self._idle = asyncio.Event()
        self._idle.set()

    def enter(self) -> None:
        self.in_flight += 1
        if self.in_flight > self._peak:
            self._peak = self.in_flight
        self._idle.clear()

    def leave(self) -> None:
        self.in_flight -= 1
        if self.in_flight == 0:
            self._idle.set()
            peak, self._peak = self._peak, 0
            if self.on_idle is not None:
                self.on_idle(peak)

    async def drain(self, grace: float) -> bool:
        """Refuse new requests and wait up to `grace` seconds for in-flight ones; True if all ended."""
        self.draining = True
        try:
            await asyncio.wait_for(self._idle.wait(), timeout=grace)
        except TimeoutError:
            return False
        return True
