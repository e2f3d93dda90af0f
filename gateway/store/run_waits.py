"""Followers' wake-ups for the background runs, in this process: `wait(key)` until `announce(key)`.

Both run stores use it (store/sqlite/runs.py announces its own writes; store/postgres/runs.py what its
LISTEN connection hears). The key is a response id, or `QUEUE` for "a run was queued".

No lost wake-up between a read and the wait: a follower reads the run (its events), finds nothing
new, then waits; a change committed between the two would be announced to nobody and cost it a
whole timeout. So a read marks the key as *seen* by the task that reads (`seen`, called before
the read goes to the database), and that task's next `wait` on the key returns at once if a change
was announced since. The mark is the asyncio.Event current at the read: `announce` sets it and
drops it (the next read or wait makes a fresh one). Marks are per task and weakly held, so a task
that ends, or reads without waiting, leaves nothing behind.
"""

from __future__ import annotations

import asyncio
import contextlib
import weakref

#: the key of "a run was queued (or ended, so a slot may be free)": never a response id
QUEUE = "\0queue"
#: how many keys one task's marks keep (a task reading many runs keeps its latest reads')
_MARKS_PER_TASK = 64


class Announcements:
    def __init__(self) -> None:
        # the event that the next announce of a key sets, while a reader or a waiter holds it
        self._current: weakref.WeakValueDictionary[str, asyncio.Event] = weakref.WeakValueDictionary()
        self._marks: weakref.WeakKeyDictionary[asyncio.Task[object], dict[str, asyncio.Event]] = (
            weakref.WeakKeyDictionary())

    def _event(self, key: str) -> asyncio.Event:
        event = self._current.get(key)
        if event is None:
            event = self._current[key] = asyncio.Event()
        return event

    def seen(self, key: str) -> None:
        """The current task is about to read `key`: a change announced from now on wakes its next wait."""
        task = asyncio.current_task()
        if task is None:
            return
        marks = self._marks.get(task)
        if marks is None:
            marks = self._marks[task] = {}
        marks.pop(key, None)
        marks[key] = self._event(key)
        if len(marks) > _MARKS_PER_TASK:
            del marks[next(iter(marks))]  # the oldest read's

    def announce(self, key: str) -> None:
        event = self._current.pop(key, None)
        if event is not None:
            event.set()

    def announce_all(self) -> None:
        """Anything may have changed (a listener connection dropped or came back): every follower looks again."""
        events = list(self._current.values())
        self._current.clear()
        for event in events:
            event.set()

    async def wait(self, key: str, timeout: float) -> None:
        task = asyncio.current_task()
        marks = self._marks.get(task) if task is not None else None
        event = marks.pop(key, None) if marks else None
        if event is None:
            event = self._event(key)
        if event.is_set() or timeout <= 0:
            return
        # asyncio.timeout, not wait_for: Python 3.11's wait_for runs `event.wait()` in a task of its
        # own, a task per wait that outlives a request in which a long-lived follower (the queue's
        # worker) woke and waited again
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                await event.wait()
