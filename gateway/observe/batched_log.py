"""A stderr log handler that writes the event loop's records in batches.

With one access line per request, formatting each line and writing it with its own `write(2)`
cost the serving thread a measurable share of each request (bench/README.md), and at concurrency
1 that work sat between one
reply and the next request's upstream call. Here a record emitted on the event loop's thread is
only kept; a timer (`delay` seconds) formats and writes everything kept in one write, while the
loop would otherwise wait on the network. Records at WARNING and above, records from other threads
and records outside a running loop are written at once (after whatever is kept, so order holds),
and `close()` (run by `logging.shutdown` at exit) writes what is left: a SIGKILL can lose at most
`delay` seconds of INFO lines.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TextIO

#: Seconds a kept record may wait; short enough that a tail -f looks live.
DELAY = 0.05
#: Records kept at most before they are written regardless of the timer.
MAX_KEPT = 512


class BatchingStreamHandler(logging.StreamHandler[TextIO]):
    def __init__(self, stream: TextIO | None = None, *, delay: float = DELAY, max_kept: int = MAX_KEPT) -> None:
        super().__init__(stream)
        self.delay = delay
        self.max_kept = max_kept
        # records, or access lines already formatted (keep_line): kept in order, written together
        self._kept: list[logging.LogRecord | str] = []
        self._timer: asyncio.TimerHandle | None = None

    def emit(self, record: logging.LogRecord) -> None:  # called with self.lock held (Handler.handle)
        if record.levelno >= logging.WARNING:
            self._write_kept()
            super().emit(record)
            return
        self._keep(record)

    def keep_line(self, line: str) -> None:
        """An INFO line already formatted as this handler's formatter would (the access line,
        gateway/observe/access_log.py): kept, or written, exactly as `emit` treats an INFO record."""
        with self.lock:  # type: ignore[union-attr]  # as Handler.handle holds it around emit
            self._keep(line)

    def _keep(self, item: logging.LogRecord | str) -> None:
        """Kept until the timer or `max_kept`; written at once outside an event loop."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        self._kept.append(item)
        if loop is None or len(self._kept) >= self.max_kept:
            self._write_kept()
        elif self._timer is None:
            self._timer = loop.call_later(self.delay, self._on_timer)

    def _on_timer(self) -> None:
        with self.lock:  # type: ignore[union-attr]  # created by Handler.__init__
            self._timer = None
            self._write_kept()

    def _write_kept(self) -> None:
        # the timer is left to fire and find nothing: cancelling it is not safe from other threads
        if not self._kept:
            return
        records, self._kept = self._kept, []
        try:
            format_ = (self.formatter or logging.Formatter()).format  # Handler.format's choice, looked up once
            self.stream.write("".join([(r if type(r) is str else format_(r)) + self.terminator  # type: ignore[arg-type]
                                       for r in records]))
            self.flush()
        except Exception:  # as StreamHandler.emit: report, never raise into the caller
            first = records[0]
            self.handleError(first if isinstance(first, logging.LogRecord) else logging.makeLogRecord({"msg": first}))

    def close(self) -> None:
        with self.lock:  # type: ignore[union-attr]
            self._write_kept()
        super().close()
