"""AGENT_RUN_TIMEOUT for whole (non-streamed) runs, without a timer of their own per run.

`asyncio.timeout()` per request arms and cancels one event-loop timer and runs five Python calls
around it: ~16k instructions of a ~1,130k chat request (bench/README.md, "Round 3 session 4").
Every run of an app has the same timeout, so the runs' deadlines come in the order they started:
the runs in flight are kept in that order, and one timer at a time is armed, for the earliest.
A run that ends is only taken off the list; when the timer fires it cancels the runs past their
deadline and is armed again for the earliest left. At concurrency 1 with the default timeout that
is one timer every AGENT_RUN_TIMEOUT seconds, not one per request.

What a run sees is what `asyncio.timeout` gives: past its deadline its task is cancelled, and the
`CancelledError` that causes, if no one else cancelled the task meanwhile, is the caller's cue to
raise `TimeoutError` instead (`leave`); a cancellation from elsewhere stays a cancellation.
"""

from __future__ import annotations

import asyncio

#: Seconds a deadline counts as passed before the clock says so: a timer fired for it may come that early.
_EARLY = 0.002


class Run:
    __slots__ = ("task", "deadline", "cancelling", "expired")

    def __init__(self, task: asyncio.Task[object], deadline: float) -> None:
        self.task = task
        self.deadline = deadline
        self.cancelling = task.cancelling()  # cancellations already asked for before the run began
        self.expired = False


class RunDeadlines:
    def __init__(self, timeout: float) -> None:
        self.timeout = timeout
        self._runs: dict[Run, None] = {}  # in the order they began: the order of their deadlines
        self._timer: asyncio.TimerHandle | None = None
        self._loop: asyncio.AbstractEventLoop | None = None  # the timer's (an app served again on a new loop re-arms)

    def enter(self) -> Run:
        """The current task's run begins; its deadline is `timeout` seconds from now."""
        task = asyncio.current_task()
        assert task is not None, "a run is a task's"
        loop = task.get_loop()
        run = Run(task, loop.time() + self.timeout)
        self._runs[run] = None
        if self._timer is None or self._loop is not loop:
            self._loop = loop
            self._timer = loop.call_at(run.deadline, self._expire, loop)
        return run

    def leave(self, run: Run, exc: BaseException | None = None) -> bool:
        """The run is over (`exc`: what ended it, if anything raised). True when it ended because
        its deadline passed: the caller raises TimeoutError from `exc`."""
        self._runs.pop(run, None)
        if not run.expired:
            return False
        run.expired = False  # answered once
        # as asyncio.Timeout.__aexit__: the cancellation asked for here is taken back whatever ended the run
        return run.task.uncancel() <= run.cancelling and isinstance(exc, asyncio.CancelledError)

    def _expire(self, loop: asyncio.AbstractEventLoop) -> None:
        self._timer = None
        if loop is not self._loop:
            return  # a timer of a loop this app no longer runs on
        now = loop.time() + _EARLY  # timers may fire a little before their time (libuv counts milliseconds)
        runs = self._runs
        while runs:
            first = next(iter(runs))
            if first.deadline > now:
                self._timer = loop.call_at(first.deadline, self._expire, loop)
                return
            del runs[first]
            first.expired = True
            first.task.cancel()
