"""Log lines a client can cause: escaped so they cannot forge lines, counted so they cannot fill a disk.

- `printable` escapes control characters (CR, LF, ESC, ...) in text that came from a request, so a
  path like `/x%0a2026-12-01 ... ERROR ...` stays on its own line. The serve formatter
  (request_ids.LogFormatter) applies it to every message, whatever logger wrote it.
- `RateLimitedLog` writes at most `per_interval` lines per `interval` seconds and then one
  "suppressed K" line: for what any client can trigger at will (malformed requests, accept errors).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable


def printable(text: str) -> str:
    """`text` unchanged when every character is printable (the usual case, one C scan), else with
    control and unprintable characters as backslash escapes."""
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() else ch.encode("unicode_escape", "backslashreplace").decode("ascii")
                   for ch in text)


class RateLimitedLog:
    """At most `per_interval` records per `interval` seconds on `logger`; the rest are counted and
    reported in one line when the next interval starts."""

    def __init__(self, logger: logging.Logger, *, per_interval: int = 10, interval: float = 60.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._logger = logger
        self._per_interval = per_interval
        self._interval = interval
        self._clock = clock
        self._window_start = -interval
        self._written = 0
        self._suppressed = 0

    def log(self, level: int, msg: str, *args: object) -> None:
        now = self._clock()
        if now - self._window_start >= self._interval:
            if self._suppressed:
                self._logger.warning("%d more line(s) like the above suppressed in %.0f s", self._suppressed,
                                     now - self._window_start)
            self._window_start = now
            self._written = 0
            self._suppressed = 0
        if self._written < self._per_interval:
            self._written += 1
            self._logger.log(level, msg, *args)
        else:
            self._suppressed += 1
