"""Run limits and shutdown state: how many agent runs at once, and whether we are draining."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from aiohttp import web

from gateway.errors import RateLimitError

#: The POSTs that run the agent: each holds a run slot from before its body is read to its end.
RUN_PATHS = frozenset({"/v1/chat/completions", "/v1/responses"})
#: set on a request admitted past the run slots (RunLimiter.take_for's "over")
OVER_SLOTS = web.RequestKey("over_slots", bool)


#: Over the run slots, a /v1/responses whose declared body is this small may still be read, to
#: learn whether it is a background request, which can wait queued (API_SERVER_MAX_QUEUED_RUNS);
#: any other gets the 429 it would have had. At most OVER_SLOT_READERS such bodies at once: the
#: memory bound stays OVER_SLOT_READERS * QUEUE_BODY_BYTES, never a full body per waiting client.
QUEUE_BODY_BYTES = 1_000_000
OVER_SLOT_READERS = 4
#: ... and each such body must arrive within this many seconds (not API_SERVER_BODY_TIMEOUT), or
#: get the 429 it would have had: OVER_SLOT_READERS slow bodies would otherwise hold every place,
#: closing the queue to everyone else, for the whole body timeout.
OVER_SLOT_BODY_SECONDS = 2.0


def too_many_runs(limit: int) -> RateLimitError:
    return RateLimitError(f"too many agent runs in progress ({limit}); retry shortly", retry_after=1)


class RunLimiter:
    """Caps concurrent agent runs; beyond the cap a request is refused at once (429), not queued,
    so a client's own retry policy decides when to come back (a background response is the
    exception: it may wait queued, see QUEUE_BODY_BYTES).

    The front door takes the slot before the request's body is read (`take_for`): a request that
    cannot run gets its 429 without the gateway waiting for, buffering or parsing a body of up to
    API_SERVER_MAX_BODY_BYTES (64 such bodies at once while the slots were busy took 2 GiB)."""

    def __init__(self, limit: int, *, queue: bool = False) -> None:
        self.limit = limit
        self.active = 0
        #: background responses may queue (API_SERVER_MAX_QUEUED_RUNS > 0)
        self.queue = queue
        self.over_slot_readers = 0
        #: called when a slot frees (the queue's cue to claim a waiting background response)
        self.on_release: Callable[[], None] | None = None

    def may_read_over_slots(self, method: str, path: str, content_length: int | None) -> bool:
        return (self.queue and method == "POST" and path == "/v1/responses" and content_length is not None
                and content_length <= QUEUE_BODY_BYTES and self.over_slot_readers < OVER_SLOT_READERS)

    def take_for(self, method: str, path: str, request: web.BaseRequest | None = None) -> str | None:
        """Hold one run's place for a request that runs the agent ("slot"; `release_for` when it
        ends), or, with every slot busy, one of the few places of a small Responses body that may
        be a background one to queue ("over"), or refuse it (429); None for any other request."""
        if method != "POST" or path not in RUN_PATHS:
            return None
        if self.active >= self.limit:
            # the declared length is read only here, past the slots, not on every request
            if request is not None and self.may_read_over_slots(method, path, request.content_length):
                self.over_slot_readers += 1
                return "over"
            raise too_many_runs(self.limit)
        self.active += 1
        return "slot"

    def release_for(self, taken: str | None) -> None:
        if taken == "slot":
            self.release()
        elif taken == "over":
            self.over_slot_readers -= 1

    def hold_for_background(self) -> None:
        """One more slot, for a background run, taken by the request that starts it while that
        request holds its own (so never refused), or by a replica claiming a queued run with a
        slot free; the run `release`s it when it ends."""
        self.active += 1

    def release(self) -> None:
        self.active -= 1
        if self.on_release is not None:
            self.on_release()


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
