"""Group commit, shared by the store backends: puts that arrive while one transaction is being
written go together in the next one (one transaction, one fsync or lock, one eviction for all).

Nothing waits to fill a group: a put with no write in progress starts one at once. Each put
awaits its own future; a group's failure fails every put of it, a put whose conversation moved on
while it ran fails alone with a 409, and cancellation (the loop closing) cancels whatever waits.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

from gateway.errors import GatewayError
from gateway.store.api import ConversationConflictError

Row = TypeVar("Row")
#: Writes one group of (row, expected conversation head); returns, per put, whether it was refused.
WriteGroup = Callable[[list[tuple[Row, str | None]]], Awaitable[list[bool]]]


class GroupCommit(Generic[Row]):
    def __init__(self, write_group: WriteGroup[Row], conversation_of: Callable[[Row], str]) -> None:
        self._write_group = write_group
        self._conversation_of = conversation_of
        self._waiting: list[tuple[Row, str | None, asyncio.Future[None]]] = []
        self._writer: asyncio.Task[None] | None = None

    async def put(self, row: Row, expected_head: str | None) -> None:
        written: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting.append((row, expected_head, written))
        if self._writer is None:
            self._writer = asyncio.get_running_loop().create_task(self._write_puts())
        try:
            await written
        except GatewayError as exc:
            # raised afresh for each put: a shared exception object would gather every waiter's traceback
            raise copy.copy(exc) from None

    async def drain(self) -> None:
        """Wait until the puts already accepted are written (or have failed)."""
        if self._writer is not None:
            await asyncio.wait([self._writer])

    async def _write_puts(self) -> None:
        try:
            while self._waiting:
                group, self._waiting = self._waiting, []
                try:
                    refused = await self._write_group([(row, expected) for row, expected, _ in group])
                except Exception as exc:
                    for _, _, written in group:
                        if not written.done():
                            written.set_exception(exc)
                except BaseException:  # cancelled (the loop is closing): so are the waiting puts
                    for _, _, written in [*group, *self._waiting]:
                        written.cancel()
                    raise
                else:
                    for (row, _, written), conflict in zip(group, refused, strict=True):
                        if written.done():
                            continue
                        if conflict:
                            written.set_exception(ConversationConflictError.on(self._conversation_of(row)))
                        else:
                            written.set_result(None)
        finally:
            self._writer = None
