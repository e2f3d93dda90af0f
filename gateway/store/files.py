"""Uploaded files (the Files API, `file-...` ids): the contract both backends keep (schema version 9).

A file is kept whole in the store (its bytes, so every replica on one database serves it) with its
owner, name, purpose and media type, and the text the gateway read from it the first time a turn
used it (`FileText`, cached beside it: a second use parses no PDF again; the text is the reader's,
cut to its limits, and its size counts in the file's stored bytes once it is kept).

What every backend guarantees, beside `ResponseStore`'s:
- **Owned**: every operation names the owner; another owner's file reads exactly as an unknown id
  (None, False), so a route answers both with the same 404.
- **Counted and bounded as responses are**: a file's stored bytes (`bytes` column: its data, its
  cached text, its name) are in the store's size, in its owner's stored bytes (the key quota's
  refresh) and in the byte bound. Files are evicted by the byte bound like responses and
  conversations (the largest owner's least recently used object first; a file's last use is its
  upload, a turn that read it, or a read of its content). They are not in the count bound
  (`max_responses` counts responses only). An upload is never evicted by its own write.
- **Durable on return**, as a put: `add`, `keep_text` and `delete` survive a killed process.
"""

from __future__ import annotations

import dataclasses
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from gateway.errors import NotFoundError, echo

#: room(size, object_id): the owner's stored-bytes quota check (store/owned.py), or what to await
#: for its answer (behind replicas it asks the database)
Room = Callable[[int, str | None], Awaitable[None] | None]


@dataclass
class StoredFile:
    """A file's metadata (never its bytes: those are read apart, `content`)."""

    id: str
    created_at: int
    filename: str
    purpose: str
    #: the file's own size in bytes (what the client uploaded)
    size: int
    media_type: str = ""
    owner: str = ""

    def object(self) -> dict[str, Any]:
        """As OpenAI returns it (openai-python's `FileObject`)."""
        return {"id": self.id, "object": "file", "bytes": self.size, "created_at": self.created_at,
                "filename": self.filename, "purpose": self.purpose, "status": "processed",
                "expires_at": None, "status_details": None}


@dataclass(frozen=True)
class FileText:
    """The text the gateway read from a file, and the note the model reads after it ("" if none)."""

    text: str
    note: str = ""


@dataclass
class FilePage:
    files: list[StoredFile]
    has_more: bool


def stored_bytes(file: StoredFile, text: FileText | None = None) -> int:
    """What a file counts in the store: its data, its name, and its cached text once kept."""
    kept = len(file.filename.encode()) + len(file.purpose) + len(file.media_type)
    if text is not None:
        kept += len(text.text.encode()) + len(text.note.encode())
    return file.size + kept


class FileStore(ABC):
    @abstractmethod
    async def add(self, file: StoredFile, data: bytes | bytearray) -> None:
        """Keep a new file (its id is new) with its bytes; then the byte bound, never evicting it."""

    @abstractmethod
    async def get(self, owner: str, file_id: str) -> StoredFile | None:
        """The owner's file's metadata, or None (unknown, another owner's, deleted or evicted)."""

    @abstractmethod
    async def content(self, owner: str, file_id: str) -> bytes | None:
        """The file's bytes (a use: it counts as an access for the byte bound's order)."""

    @abstractmethod
    async def text(self, owner: str, file_id: str) -> tuple[StoredFile, FileText | None] | None:
        """The file and its cached text (None: not read yet), counted as a use; None if unknown."""

    @abstractmethod
    async def keep_text(self, owner: str, file_id: str, text: FileText) -> None:
        """Cache the text read from the file (a file deleted meanwhile: nothing happens)."""

    @abstractmethod
    async def list(self, owner: str, *, limit: int, order: str = "desc", after: str | None = None,
                   purpose: str | None = None) -> FilePage:
        """At most `limit` of the owner's files by creation time, newest first ("desc") or oldest
        first ("asc"), after the file `after` in that order, only those of `purpose` if given.
        Raises UnknownFileError (param "after") for an `after` that is not the owner's file."""

    @abstractmethod
    async def delete(self, owner: str, file_id: str) -> bool:
        """Remove the file; False if the owner has no such file."""


class UnknownFileError(NotFoundError):
    """No file with this id for this owner (never uploaded, another owner's, deleted, evicted): 404,
    the same body whichever it is."""

    @classmethod
    def on(cls, file_id: str, param: str = "file_id") -> UnknownFileError:
        return cls(f"No such File object: {echo(file_id)}", param=param)


class OwnedFiles:
    """One owner's view of the files (made by store/owned.py): the owner filled in, the quota checked
    before an upload is written (a 429 `insufficient_quota` from `room`)."""

    def __init__(self, inner: FileStore, owner: str, room: Room | None = None) -> None:
        self.inner = inner
        self.owner = owner
        self._room = room

    async def add(self, file: StoredFile, data: bytes | bytearray) -> StoredFile:
        checked = self._room(stored_bytes(file), None) if self._room is not None else None
        if checked is not None:
            await checked
        file = dataclasses.replace(file, owner=self.owner)
        await self.inner.add(file, data)
        return file

    async def get(self, file_id: str) -> StoredFile | None:
        return await self.inner.get(self.owner, file_id)

    async def content(self, file_id: str) -> bytes | None:
        return await self.inner.content(self.owner, file_id)

    async def text(self, file_id: str) -> tuple[StoredFile, FileText | None] | None:
        return await self.inner.text(self.owner, file_id)

    async def keep_text(self, file_id: str, text: FileText) -> None:
        await self.inner.keep_text(self.owner, file_id, text)

    async def list(self, *, limit: int, order: str = "desc", after: str | None = None,
                   purpose: str | None = None) -> FilePage:
        return await self.inner.list(self.owner, limit=limit, order=order, after=after, purpose=purpose)

    async def delete(self, file_id: str) -> bool:
        return await self.inner.delete(self.owner, file_id)
