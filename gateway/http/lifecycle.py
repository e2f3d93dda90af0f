"""Run limits and shutdown state: how many agent runs at once, and whether we are draining."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from gateway.errors import RateLimitError

#: The POSTs that run the agent: each holds a run slot from before its body is read to its end.
RUN_PATHS = frozenset({"/v1/chat/completions", "/v1/responses"})


class RunLimiter:
    """Caps concurrent agent runs; beyond the cap a request is refused at once (429), not queued,
    so a client's own retry policy decides when to come back.

    The front door takes the slot before the request's body is read (`take_for`): a request that
    cannot run gets its 429 without the gateway waiting for, buffering or parsing a body of up to
    API_SERVER_MAX_BODY_BYTES (64 such bodies at once while the slots were busy took 2 GiB)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.active = 0

    def take_for(self, method: str, path: str) -> bool:
        """Hold one run's place for a request that runs the agent (True; `release` when it ends),
        refuse it (429), or False for any other request."""
        if method != "POST" or path not in RUN_PATHS:
            return False
        if self.active >= self.limit:
            raise RateLimitError(
                f"too many agent runs in progress ({self.limit}); retry shortly", retry_after=1
            )
        self.active += 1
        return True

    def hold_for_background(self) -> None:
        """One more slot, for a background run, taken by the request that starts it while that
        request holds its own (so never refused); the run `release`s it when it ends."""
        self.active += 1

    def release(self) -> None:
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
