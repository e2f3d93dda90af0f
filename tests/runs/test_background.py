"""Background responses (issue 28) through the official openai SDK and raw HTTP: create and poll,
cancel a slow turn (the upstream call abandoned), a stream the client left resumed after event n,
and the 4xx of bad input. One in-process gateway over a real SQLite file and the fake upstream."""

from __future__ import annotations

import asyncio
from typing import Any

import openai
import pytest

from tests.conftest import API_KEY
from tests.fakes.upstream import FakeUpstream, Reply, text

AUTH = {"Authorization": f"Bearer {API_KEY}"}


async def _until(sdk: Any, response_id: str, statuses: set[str]) -> Any:
    """Poll as a client does until the response reaches one of `statuses`."""
    for _ in range(500):
        response = await sdk.responses.retrieve(response_id)
        if response.status in statuses:
            return response
        await asyncio.sleep(0.02)
    raise AssertionError(f"{response_id} stayed {response.status}")


async def _upstream_gone(upstream: FakeUpstream) -> None:
    for _ in range(500):
        if upstream.disconnects:
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the upstream call was not abandoned")


async def test_background_create_answers_at_once_then_polls_to_completed(sdk: Any, upstream: FakeUpstream) -> None:
    upstream.queue(Reply(text="Done in the background.", chunk_size=4, chunk_delay=0.02))
    created = await sdk.responses.create(model="m", input="take your time", background=True)
    assert created.background is True
    assert created.status in ("queued", "in_progress")
    assert created.output == []
    assert (await sdk.responses.retrieve(created.id)).status in ("queued", "in_progress")
    done = await _until(sdk, created.id, {"completed", "failed", "incomplete", "cancelled"})
    assert done.status == "completed"
    assert done.background is True
    assert done.output_text == "Done in the background."


async def test_background_needs_store(gateway: Any) -> None:
    async with gateway.post("/v1/responses", json={"model": "m", "input": "x", "background": True, "store": False},
                            headers=AUTH) as reply:
        assert reply.status == 400
        error = (await reply.json())["error"]
    assert error["param"] == "background" and error["type"] == "invalid_request_error"
    assert "store" in error["message"]


async def test_cancel_stops_a_slow_turn_and_abandons_the_upstream_call(sdk: Any, upstream: FakeUpstream) -> None:
    upstream.queue(Reply(text="never finished", endless=True, chunk_delay=0.05))
    created = await sdk.responses.create(model="m", input="slow", background=True)
    while not upstream.requests:
        await asyncio.sleep(0.01)
    cancelled = await sdk.responses.cancel(created.id)
    assert cancelled.status == "cancelled" and cancelled.id == created.id
    await _upstream_gone(upstream)
    assert (await sdk.responses.retrieve(created.id)).status == "cancelled"
    # a finished one is returned unchanged
    again = await sdk.responses.cancel(created.id)
    assert again.status == "cancelled" and again.output == cancelled.output


async def test_delete_stops_a_running_background_response_and_it_stays_deleted(
        sdk: Any, upstream: FakeUpstream) -> None:
    """Issue 42 (item 8): it ran on and came back `completed` after the DELETE."""
    upstream.queue(Reply(text="a slow answer", chunk_size=2, chunk_delay=0.05))
    created = await sdk.responses.create(model="m", input="slow", background=True)
    while not upstream.requests:
        await asyncio.sleep(0.01)
    deleted = await sdk.responses.delete(created.id)
    assert deleted is None  # openai-python's delete returns nothing on a 200
    await _upstream_gone(upstream)
    await asyncio.sleep(1.0)  # longer than the reply would have taken
    with pytest.raises(openai.NotFoundError):
        await sdk.responses.retrieve(created.id)


async def test_cancel_of_a_finished_response_returns_it_unchanged(sdk: Any, upstream: FakeUpstream) -> None:
    upstream.queue(text("quick"))
    created = await sdk.responses.create(model="m", input="x", background=True)
    done = await _until(sdk, created.id, {"completed"})
    after = await sdk.responses.cancel(created.id)
    assert after.status == "completed" and after.output_text == "quick" == done.output_text


async def test_cancel_refuses_a_foreground_response_and_an_unknown_id(sdk: Any, upstream: FakeUpstream) -> None:
    upstream.queue(text("foreground"))
    plain = await sdk.responses.create(model="m", input="x")
    with pytest.raises(openai.BadRequestError) as info:
        await sdk.responses.cancel(plain.id)
    assert "background" in info.value.message
    with pytest.raises(openai.NotFoundError):
        await sdk.responses.cancel("resp_" + "0" * 32)


async def test_a_cancelled_turn_is_not_appended_to_its_conversation(sdk: Any, upstream: FakeUpstream) -> None:
    conversation = await sdk.conversations.create()
    upstream.queue(Reply(text="never finished", endless=True, chunk_delay=0.05), text("kept answer"))
    slow = await sdk.responses.create(model="m", input="first", background=True, conversation=conversation.id)
    while not upstream.requests:
        await asyncio.sleep(0.01)
    await sdk.responses.cancel(slow.id)
    assert [item async for item in sdk.conversations.items.list(conversation.id)] == []
    kept = await sdk.responses.create(model="m", input="second", background=True, conversation=conversation.id)
    await _until(sdk, kept.id, {"completed"})
    items = [item async for item in sdk.conversations.items.list(conversation.id, order="asc")]
    assert [item.role for item in items] == ["user", "assistant"]
    assert items[1].content[0].text == "kept answer"


async def test_a_dropped_stream_resumes_after_event_n_with_exactly_the_rest(sdk: Any, upstream: FakeUpstream) -> None:
    upstream.queue(Reply(text="one two three four five six", chunk_size=3, chunk_delay=0.02))
    stream = await sdk.responses.create(model="m", input="x", background=True, stream=True)
    seen = []
    async for event in stream:
        seen.append(event)
        if len(seen) == 4:
            break
    await stream.close()  # the client leaves; the run goes on
    response_id = seen[0].response.id
    assert seen[0].response.background is True
    last = seen[-1].sequence_number
    resumed = await sdk.responses.retrieve(response_id, stream=True, starting_after=last)
    rest = [event async for event in resumed]
    assert [event.sequence_number for event in seen + rest] == list(range(len(seen) + len(rest)))
    assert rest[-1].type == "response.completed"
    assert rest[-1].response.output_text == "one two three four five six"
    # from the start: every event, the same ones
    everything = [event async for event in await sdk.responses.retrieve(response_id, stream=True)]
    assert [e.model_dump() for e in everything] == [e.model_dump() for e in seen + rest]


async def test_stream_resume_refuses_bad_input(gateway: Any, sdk: Any, upstream: FakeUpstream) -> None:
    upstream.queue(text("background"), text("foreground"))
    created = await sdk.responses.create(model="m", input="x", background=True)
    await _until(sdk, created.id, {"completed"})
    plain = await sdk.responses.create(model="m", input="x")
    cases = [(created.id, "abc", "starting_after"), (created.id, "9999", "starting_after"),
             (plain.id, "0", "stream")]
    # int() reads these as numbers; a sequence number is ASCII digits only (issue 42)
    cases += [(created.id, after, "starting_after") for after in ("1_0", "+3", "\u0661", " 1", "1 ", "-0")]
    for response_id, after, param in cases:
        async with gateway.get(f"/v1/responses/{response_id}", params={"stream": "true", "starting_after": after},
                               headers=AUTH) as reply:
            assert reply.status == 400, (after, await reply.text())
            assert (await reply.json())["error"]["param"] == param


async def test_a_background_run_holds_a_run_slot(make_client: Any, upstream: FakeUpstream) -> None:
    gateway = await make_client(api_key=API_KEY, max_concurrent_runs=1)
    upstream.queue(Reply(text="slow", endless=True, chunk_delay=0.05))
    async with gateway.post("/v1/responses", json={"model": "m", "input": "x", "background": True},
                            headers=AUTH) as reply:
        assert reply.status == 200
        response_id = (await reply.json())["id"]
    async with gateway.post("/v1/responses", json={"model": "m", "input": "y"}, headers=AUTH) as reply:
        assert reply.status == 429
    async with gateway.post(f"/v1/responses/{response_id}/cancel", headers=AUTH) as reply:
        assert (await reply.json())["status"] == "cancelled"
    upstream.queue(text("now there is room"))
    async with gateway.post("/v1/responses", json={"model": "m", "input": "y"}, headers=AUTH) as reply:
        assert reply.status == 200


async def test_shutdown_stops_a_running_background_response_as_incomplete(make_client: Any,
                                                                          upstream: FakeUpstream) -> None:
    first = await make_client(api_key=API_KEY)
    upstream.queue(Reply(text="cut by the shutdown", endless=True, chunk_delay=0.05))
    async with first.post("/v1/responses", json={"model": "m", "input": "x", "background": True},
                          headers=AUTH) as reply:
        response_id = (await reply.json())["id"]
    while not upstream.requests:
        await asyncio.sleep(0.01)
    await first.close()  # the app's cleanup: its runs stopped before the store closes
    await _upstream_gone(upstream)
    second = await make_client(api_key=API_KEY)  # the same SQLite file
    async with second.get(f"/v1/responses/{response_id}", headers=AUTH) as reply:
        response = await reply.json()
    assert response["status"] == "incomplete" and response["background"] is True


async def test_continuing_a_running_background_response_is_a_400_until_it_ends(sdk: Any,
                                                                                upstream: FakeUpstream) -> None:
    upstream.queue(Reply(text="slow", endless=True, chunk_delay=0.05))
    running = await sdk.responses.create(model="m", input="x", background=True)
    with pytest.raises(openai.BadRequestError) as info:
        await sdk.responses.create(model="m", input="next", previous_response_id=running.id)
    assert info.value.param == "previous_response_id"
    await sdk.responses.cancel(running.id)
