"""A background run's frames on this replica, shared by every follower here: one list of the SSE
frames by sequence number, held once, whichever the number of streams following it.

Two things hold one: the run itself on the replica running it (runs/background.py), and on any
other replica one reader of the store per run (runs/store_feed.py). A follower keeps only its
place in the list (a sequence number) and takes at most FOLLOW_BATCH frames at a time, by
reference: a follower that does not read holds no bytes of its own here (what its connection
buffers is the SSE writer's to bound: http/sse.py).

A follower always gets the response's end: its last event is `response.completed`, `.failed` or
`.incomplete`, or, when the run was lost (its lease ran out and another replica failed it, so
its holder wrote nothing more), an `error` event numbered after the last frame stored, saying so.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

from gateway.errors import GatewayError

#: the most frames a follower takes at once (references into the shared list, not copies)
FOLLOW_BATCH = 64
#: what a response whose replica lost it (or died) says, in its record and its stream's `error` event
LOST_MESSAGE = ("The gateway running this background response stopped before it finished (its lease "
                "expired); it was not run again.")
#: the frames a response's stream ends with (one event per frame: runs/background.py)
_ENDINGS = tuple(f"event: {name}\n".encode() for name in
                 ("response.completed", "response.failed", "response.incomplete", "error"))


def lost_frame(seq: int) -> bytes:
    """The `error` event (OpenAI's ResponseErrorEvent) ending the stream of a run that was lost."""
    data = json.dumps({"type": "error", "code": "server_error", "message": LOST_MESSAGE, "param": None,
                       "sequence_number": seq})
    return f"event: error\ndata: {data}\n\n".encode()


class FrameLog:
    """Frames numbered `first_seq`, `first_seq + 1`, ... as they come; `done` once no more will."""

    def __init__(self) -> None:
        self.frames: list[bytes] = []
        #: the sequence number of frames[0]
        self.first_seq = 0
        #: no frame will be added any more (the run ended, or the reader stopped)
        self.done = False
        #: why the frames stopped short (a store fault): each follower raises it once it has the rest
        self.error: GatewayError | None = None
        #: the run was lost (failed by lease expiry): its frames stop short of the response's end
        self.lost = False
        self._changed = asyncio.Event()

    @property
    def last_seq(self) -> int:
        """The sequence number of the last frame held (first_seq - 1: none yet)."""
        return self.first_seq + len(self.frames) - 1

    def _wake(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    def ending(self) -> list[bytes]:
        """After the last frame of a lost run, the `error` event saying so (none if it has its end)."""
        if self.lost and not (self.frames and self.frames[-1].startswith(_ENDINGS)):
            return [lost_frame(self.last_seq + 1)]
        return []

    async def changed(self, timeout: float) -> None:
        """Return at the next frame (or the end), or after `timeout` seconds."""
        changed = self._changed
        if not self.done:
            try:
                async with asyncio.timeout(timeout):
                    await changed.wait()
            except TimeoutError:
                pass

    async def follow(self, after: int, *, idle: float) -> AsyncIterator[list[bytes]]:
        """The frames after sequence number `after` (at most FOLLOW_BATCH at a time), then each
        new one until the end; `[]` after `idle` seconds without one (the caller's keepalive cue)."""
        seq = after + 1
        while True:
            changed = self._changed  # taken before looking: a frame pushed after the look wakes the wait
            index = seq - self.first_seq
            if index < len(self.frames):
                batch = self.frames[index:index + FOLLOW_BATCH]
                seq += len(batch)
                yield batch
            elif self.done:
                if self.error is not None:
                    raise self.error
                if ending := self.ending():
                    yield ending
                return
            else:
                try:
                    async with asyncio.timeout(idle):
                        await changed.wait()
                except TimeoutError:
                    yield []
