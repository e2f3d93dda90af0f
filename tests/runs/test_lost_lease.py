"""A background run whose lease runs out while its replica is still working (issue 45's replica
test, about 1 run in 15 on a loaded host: the run's row `failed` by expiry, the response
`completed`, a resumed stream ending cleanly without the response's end).

Reproduced deterministically in one gateway over a real SQLite file: while the run waits on the
fake model's last chunk, the test does what another replica's sweep does when a lease ran out
(the lease set to end now, `expire`, `record_expired`); then the model answers and the run
finishes its work. Its replica must write nothing more: the response stays `failed`, and every
follower (the stream still open on the replica, and a stream resumed from the store) ends with
an `error` event, never a clean end without the response's end."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from gateway.runs.background import BACKGROUND_RUNS
from gateway.runs.frames import LOST_MESSAGE
from gateway.runs.keeper import record_expired
from tests.fakes.upstream import FakeUpstream, Reply

ENDINGS = {"response.completed", "response.failed", "response.incomplete", "error"}


async def _expire_as_another_replica_would(app: Any, response_id: str) -> None:
    runs = app[BACKGROUND_RUNS]
    await runs.store.runs.renew(runs.replica, [response_id], lease_seconds=-1.0)  # its lease ran out now
    expired = await runs.store.runs.expire()
    assert [run.response_id for run in expired] == [response_id]
    await record_expired(app, expired)


@pytest.mark.parametrize("text_chunk", [12, 100], ids=["mid-answer", "just-before-its-end"])
async def test_a_run_whose_lease_ran_out_while_it_worked_ends_failed_and_every_follower_gets_an_error_event(
        gateway: Any, sdk: Any, upstream: FakeUpstream, text_chunk: int) -> None:
    """mid-answer: more text comes after the loss (its replica finds out storing it).
    just-before-its-end: the whole text came, its events are stored, and only the model's finish
    comes after the loss, so the replica's next write would have been its `completed` record
    (the bug: that record saved over the failure, its last events refused)."""
    upstream.queue(Reply(text="first part, then the rest", chunk_size=text_chunk, chunk_delay=1.0))
    stream = await sdk.responses.create(model="m", input="x", background=True, stream=True)
    seen: list[Any] = []
    async with asyncio.timeout(30):
        async for event in stream:
            seen.append(event)
            if event.type == "response.output_text.delta":
                break
        response_id = seen[0].response.id
        await asyncio.sleep(0.2)  # the events so far are stored (a batch goes within 50 ms)
        await _expire_as_another_replica_would(gateway.server.app, response_id)
        seen += [event async for event in stream]  # the model answers; the run ends on its replica

    assert seen[-1].type == "error", [e.type for e in seen]
    assert seen[-1].code == "server_error" and seen[-1].message == LOST_MESSAGE
    assert "response.completed" not in [e.type for e in seen]
    assert [e.sequence_number for e in seen] == list(range(len(seen)))

    await asyncio.sleep(0.5)  # anything the replica would still write has landed by now
    retrieved = await sdk.responses.retrieve(response_id)
    assert retrieved.status == "failed" and retrieved.error is not None
    assert retrieved.error.code == "server_error" and retrieved.error.message == LOST_MESSAGE
    run = await gateway.server.app[BACKGROUND_RUNS].store.runs.get(response_id)
    assert run is not None and run.status == "failed"

    resumed = [event async for event in await sdk.responses.retrieve(response_id, stream=True)]
    assert resumed[-1].type == "error" and resumed[-1].message == LOST_MESSAGE
    assert [e.sequence_number for e in resumed] == list(range(len(resumed)))
    assert resumed[-1].sequence_number == run.last_seq + 1
    assert not {e.type for e in resumed[:-1]} & ENDINGS


async def test_a_run_that_keeps_its_lease_ends_with_its_own_end_and_no_error_event(
        sdk: Any, upstream: FakeUpstream) -> None:
    upstream.queue(Reply(text="all of it", chunk_size=3, chunk_delay=0.02))
    stream = await sdk.responses.create(model="m", input="x", background=True, stream=True)
    events = [event async for event in stream]
    assert events[-1].type == "response.completed"
    resumed = [event async for event in await sdk.responses.retrieve(events[0].response.id, stream=True)]
    assert [e.type for e in resumed] == [e.type for e in events]
