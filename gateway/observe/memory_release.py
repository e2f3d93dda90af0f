"""Hand freed heap memory back to the OS once a burst of concurrent requests is over.

After a burst of concurrent slow streams (bench/, `--only memory`) the gateway's RSS stays well
above idle although Python's live objects are back to their idle size. Part of it is freed malloc
chunks that glibc keeps for reuse: `malloc_trim(0)` returns them, in a few ms. The rest is pymalloc
arenas kept alive by a few objects each (uvloop's and aiohttp's Cython free lists, pooled upstream
connections), which no call returns. `gc.collect()` frees nothing more once the upstream client
breaks its own reference cycles at close, and takes far longer, so it is not run here. The figures
are in bench/README.md (memory).

The trim runs off the request path: when the requests in flight fall to zero after peaking at
`min_peak` or more, `delay` seconds later if the gateway is still idle, at most once per
`min_interval` seconds. Where glibc's `malloc_trim` is absent (musl, macOS, Windows) it does nothing.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable

#: A peak of concurrent requests below this is ordinary traffic, whose memory is reused as is.
MIN_PEAK = 64
#: Seconds of idleness before trimming: a client's next request often follows at once.
DELAY = 1.0
#: Seconds between two trims at most: a trim walks the whole heap.
MIN_INTERVAL = 10.0


def malloc_trim() -> bool:
    """glibc's `malloc_trim(0)`: give free heap pages back to the OS. False where there is none."""
    import ctypes  # imported on the first trim: the gateway idles without it

    try:
        trim = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError, TypeError):  # not glibc, or no C library handle at all
        return False
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    trim(0)
    return True


class MemoryReleaser:
    """Schedules `trim` once the gateway is idle after a burst; `after_idle` is the hook."""

    def __init__(
        self,
        is_idle: Callable[[], bool],
        trim: Callable[[], bool] = malloc_trim,
        *,
        min_peak: int = MIN_PEAK,
        delay: float = DELAY,
        min_interval: float = MIN_INTERVAL,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._is_idle = is_idle
        self._trim = trim
        self._min_peak = min_peak
        self._delay = delay
        self._min_interval = min_interval
        self._clock = clock
        self._last = -math.inf
        self._pending: asyncio.TimerHandle | None = None
        self._available = True  # False once a trim found no malloc_trim: never try again
        self._owed = False  # a burst happened since the last trim
        self.trims = 0

    def after_idle(self, peak: int) -> None:
        """Called when the requests in flight fall to zero, with their peak since the last time."""
        if peak >= self._min_peak:
            self._owed = True
        if not self._owed or self._pending is not None or not self._available:
            return
        wait = max(self._delay, self._last + self._min_interval - self._clock())
        self._pending = asyncio.get_running_loop().call_later(wait, self._run)

    def _run(self) -> None:
        self._pending = None
        if not self._is_idle():
            return  # busy again: the memory is being reused; the next idle moment re-arms
        self._owed = False
        self._last = self._clock()
        self._available = self._trim()
        if self._available:
            self.trims += 1

    def cancel(self) -> None:
        if self._pending is not None:
            self._pending.cancel()
            self._pending = None
