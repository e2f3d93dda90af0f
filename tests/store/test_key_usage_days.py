"""The keys' schema step 8 in both backends (issue 46): access and admin fields kept and changed in
place, usage by UTC day added to by batched writes (two replicas' add up), the day's stored bytes
the last figure written, and days past API_SERVER_USAGE_DAYS deleted by the ring's write."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from gateway.keys.ring import KeyRing, utc_day
from gateway.store.keys import ApiKey, KeyStore, UsageDelta, UsageWrite
from gateway.store.postgres.database import PostgresDatabase
from gateway.store.postgres.keys import PostgresKeyStore
from gateway.store.sqlite.keys import SQLiteKeyStore


@pytest.fixture(params=["sqlite", "postgres"])
async def keys(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[KeyStore]:
    if request.param == "sqlite":
        store: KeyStore = SQLiteKeyStore(tmp_path / "responses.db", "p")
        await store.open()
        yield store
        await store.close()
        return
    database = PostgresDatabase(request.getfixturevalue("postgres_url"), max_size=2)
    store = PostgresKeyStore(database, "p")
    await store.open()
    yield store
    await database.close()


async def test_access_and_admin_are_kept_and_changed_in_place(keys: KeyStore) -> None:
    await keys.create(ApiKey("a", "h1", 1, admin=True, models=("one", "two"), mcp=(), web=False))
    await keys.create(ApiKey("b", "h2", 1))
    a, b = await keys.keys()
    assert (a.admin, a.models, a.mcp, a.web) == (True, ("one", "two"), (), False)
    assert (b.admin, b.models, b.mcp, b.web, b.rpm) == (False, None, None, True, None)
    assert await keys.update("b", {"models": ("x",), "rpm": 7, "web": False, "admin": True})
    assert await keys.update("a", {"models": None, "mcp": None, "web": True})
    a, b = await keys.keys()
    assert (a.models, a.mcp, a.web, a.admin) == (None, None, True, True)
    assert (b.models, b.rpm, b.web, b.admin, b.key_hash) == (("x",), 7, False, True, "h2")
    assert await keys.update("b", {})  # a live key with nothing to change
    assert await keys.revoke("b", 2)
    assert not await keys.update("b", {"rpm": 1}) and not await keys.update("nobody", {"rpm": 1})
    with pytest.raises(ValueError):
        await keys.update("a", {"key_hash": "stolen"})


async def test_two_writers_days_add_up_and_stored_bytes_is_the_last_figure(keys: KeyStore) -> None:
    for requests, stored in ((3, 100), (2, 250)):  # two replicas' batches on one day
        await keys.add_usage(UsageWrite({"k": UsageDelta(input_tokens=10, output_tokens=5, model_calls=1,
                                                         requests=requests, mcp_calls=1, last_used_at=9)},
                                        "2026-01-02", {"k": stored}))
    await keys.add_usage(UsageWrite({"k": UsageDelta(requests=1)}, "2026-01-03"))
    await keys.add_usage({"k": UsageDelta(requests=1)})  # the totals only, as before step 8
    days = await keys.usage_days(None, "2026-01-01")
    assert [(d.day, d.requests, d.input_tokens, d.output_tokens, d.model_calls, d.mcp_calls, d.stored_bytes)
            for d in days] == [("2026-01-02", 5, 20, 10, 2, 2, 250), ("2026-01-03", 1, 0, 0, 0, 0, None)]
    assert [d.day for d in await keys.usage_days("k", "2026-01-03")] == ["2026-01-03"]
    assert await keys.usage_days("other", "2026-01-01") == []
    total = (await keys.usage())["k"].counted
    assert (total.requests, total.mcp_calls, total.input_tokens) == (7, 2, 20)


async def test_the_rings_write_deletes_the_days_past_keeping(keys: KeyStore) -> None:
    await keys.create(ApiKey("k", "h", 1))
    old, kept = utc_day(time.time() - 3 * 86400), utc_day(time.time() - 2 * 86400)
    for day in (old, kept):
        await keys.add_usage(UsageWrite({"k": UsageDelta(requests=1)}, day))
    ring = KeyRing("p", None, keys, usage_days=3)  # today and the two days before
    ring.usage_of("k").requests += 4
    await ring.refresh()
    days = await keys.usage_days(None, "2000-01-01")
    assert [(d.day, d.requests) for d in days] == [(kept, 1), (utc_day(time.time()), 4)]
