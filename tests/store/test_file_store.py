"""Uploaded files in the store (issue 47, schema version 9), on both backends: kept per owner with
their bytes and their cached text, listed by creation, counted in the store's size and its owners'
stored bytes, evicted by the byte bound like responses (never by their own write)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from gateway.errors import NotFoundError
from gateway.store.api import ResponseStore, StoredResponse
from gateway.store.files import FileText, StoredFile, stored_bytes
from gateway.store.postgres.database import PostgresDatabase
from gateway.store.postgres.keys import PostgresKeyStore
from gateway.store.postgres.store import PostgresResponseStore
from gateway.store.sqlite.keys import SQLiteKeyStore
from gateway.store.sqlite.store import SQLiteResponseStore

Bounded = Callable[..., ResponseStore]
ALICE, BOB = "/alice", "/bob"


@pytest.fixture(params=["sqlite", "postgres"])
def make_bounded(request: pytest.FixtureRequest, tmp_path: Path) -> Bounded:
    if request.param == "sqlite":
        return lambda max_bytes=None: SQLiteResponseStore(tmp_path / "r.db", 1000, max_bytes=max_bytes)
    url = request.getfixturevalue("postgres_url")
    return lambda max_bytes=None: PostgresResponseStore(PostgresDatabase(url, max_size=4), 1000, max_bytes=max_bytes)


def _file(file_id: str, owner: str = ALICE, size: int = 10, created_at: int = 1_700_000_000,
          purpose: str = "user_data") -> StoredFile:
    return StoredFile(id=file_id, created_at=created_at, filename=f"{file_id}.txt", purpose=purpose, size=size,
                      media_type="text/plain", owner=owner)


async def test_a_file_is_kept_with_its_bytes_and_read_only_by_its_owner(make_bounded: Bounded) -> None:
    async with make_bounded() as store:
        data = bytes(range(256)) * 40  # binary, NULs included
        await store.files.add(_file("file-a", size=len(data)), data)
        got = await store.files.get(ALICE, "file-a")
        assert got is not None and (got.filename, got.size, got.media_type, got.owner) == (
            "file-a.txt", len(data), "text/plain", ALICE)
        assert await store.files.content(ALICE, "file-a") == data
        assert await store.files.get(BOB, "file-a") is None
        assert await store.files.content(BOB, "file-a") is None
        assert await store.files.text(BOB, "file-a") is None
        assert await store.files.delete(BOB, "file-a") is False
        assert await store.files.delete(ALICE, "file-a") is True
        assert await store.files.get(ALICE, "file-a") is None


async def test_the_text_read_from_a_file_is_kept_beside_it_and_counted(make_bounded: Bounded) -> None:
    async with make_bounded() as store:
        file = _file("file-a", size=5)
        await store.files.add(file, b"hello")
        assert await store.size() == stored_bytes(file)
        found = await store.files.text(ALICE, "file-a")
        assert found is not None and found[1] is None  # not read yet
        text = FileText("[page 1]\nhello\x00 world é", "[a note]")
        await store.files.keep_text(ALICE, "file-a", text)
        await store.files.keep_text(BOB, "file-a", FileText("bob's"))  # not bob's file: nothing changes
        found = await store.files.text(ALICE, "file-a")
        assert found is not None and found[1] is not None
        assert found[1].text.replace("\x00", "") == "[page 1]\nhello world é" and found[1].note == "[a note]"
        assert await store.size() >= stored_bytes(file, FileText(found[1].text, found[1].note))
        await store.files.delete(ALICE, "file-a")
        assert await store.size() == 0


async def test_files_are_listed_by_creation_in_pages_by_purpose(make_bounded: Bounded) -> None:
    async with make_bounded() as store:
        for index in range(5):
            await store.files.add(_file(f"file-{index}", created_at=100 + index,
                                        purpose="assistants" if index == 2 else "user_data"), b"x" * 10)
        await store.files.add(_file("file-bob", owner=BOB, created_at=200), b"x" * 10)
        page = await store.files.list(ALICE, limit=2)
        assert [f.id for f in page.files] == ["file-4", "file-3"] and page.has_more
        page = await store.files.list(ALICE, limit=2, after="file-3")
        assert [f.id for f in page.files] == ["file-2", "file-1"] and page.has_more
        page = await store.files.list(ALICE, limit=10, after="file-1")
        assert [f.id for f in page.files] == ["file-0"] and not page.has_more
        page = await store.files.list(ALICE, limit=10, order="asc", purpose="user_data")
        assert [f.id for f in page.files] == ["file-0", "file-1", "file-3", "file-4"] and not page.has_more
        with pytest.raises(NotFoundError):
            await store.files.list(ALICE, limit=10, after="file-bob")  # bob's id is no cursor of alice's


async def test_the_byte_bound_evicts_the_least_recently_used_file_never_the_one_being_written(
        make_bounded: Bounded) -> None:
    async with make_bounded(max_bytes=25_000) as store:
        for index in range(3):
            await store.files.add(_file(f"file-{index}", size=10_000), b"x" * 10_000)
            assert await store.size() <= 25_000
        assert await store.files.get(ALICE, "file-0") is None  # the oldest went
        assert await store.files.content(ALICE, "file-1") is not None  # a use: file-2 is older now
        await store.put(StoredResponse(id="resp_1", created_at=1, response={"text": "y" * 6000}, owner=ALICE))
        assert await store.files.get(ALICE, "file-2") is None
        assert await store.files.get(ALICE, "file-1") is not None
        big = _file("file-big", size=40_000)
        await store.files.add(big, b"z" * 40_000)  # larger than the bound alone: kept, the rest goes
        assert await store.files.get(ALICE, "file-big") is not None


async def test_files_count_in_their_owners_stored_bytes(make_bounded: Bounded, tmp_path: Path,
                                                        request: pytest.FixtureRequest) -> None:
    async with make_bounded() as store:
        await store.files.add(_file("file-a", owner="/alice", size=3000), b"x" * 3000)
        await store.files.add(_file("file-b", owner="/bob", size=1000), b"x" * 1000)
        if isinstance(store, SQLiteResponseStore):
            keys = SQLiteKeyStore(store.path, "")
        else:
            assert isinstance(store, PostgresResponseStore)
            keys = PostgresKeyStore(store.database, "")  # type: ignore[assignment]
        await keys.open()
        try:
            usage = await keys.usage()
        finally:
            await keys.close()
        assert usage["alice"].stored_bytes == stored_bytes(_file("file-a", owner="/alice", size=3000))
        assert usage["bob"].stored_bytes == stored_bytes(_file("file-b", owner="/bob", size=1000))
