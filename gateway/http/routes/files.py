"""/v1/files: OpenAI's Files API (upload, list, retrieve, content, delete), each key its own files.

Thin: the upload is read here, part by part, without holding more than the file itself; the files
are kept by the store (store/files.py), both backends, so every replica serves them; a turn that
names one (`file_id`) reads it through gateway/files/sources.py. Another key's file and an unknown
id are the same 404.

An upload is bounded by API_SERVER_MAX_FILE_MB, not by the general body limit: a declared length
past it is a 413 before a byte is read (http/checks.py, and no `100 Continue` for it), a chunked one
is cut off with the 413 as soon as the file part passes it.
"""

from __future__ import annotations

import asyncio
import re
import secrets
import string
import time
from typing import Any
from urllib.parse import quote

from aiohttp import BodyPartReader, web
from aiohttp.http_exceptions import HttpProcessingError
from aiohttp.web_urldispatcher import _default_expect_handler

from gateway.common import json_out
from gateway.errors import (
    InvalidRequestError,
    RequestTimeoutError,
    UndecodableBodyError,
    UnsupportedMediaTypeError,
    echo,
)
from gateway.files.sources import FileSources
from gateway.http import appkeys
from gateway.http.auth import quota_before_run, store_of
from gateway.http.checks import UPLOAD_SLACK, file_limit, file_too_large
from gateway.store.api import ResponseStore
from gateway.store.files import OwnedFiles, StoredFile, UnknownFileError
from gateway.store.owned import OwnedStore
from gateway.wire import ids

routes = web.RouteTableDef()

#: what a client may upload a file for: what the gateway uses files for (OpenAI's other purposes,
#: batch, fine-tune, evals, are for endpoints this gateway does not have)
PURPOSES = ("assistants", "user_data")
#: a form field other than the file (purpose, expires_after[...]) is a few bytes: more is refused
_FIELD_BYTES = 1024
_MAX_PARTS = 16
_MAX_FILENAME = 255
_ID_ALPHABET = string.ascii_letters + string.digits
_LIST_LIMIT = 10_000
_CHUNK = 64 * 1024
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
#: what a part may say of its bytes (RFC 2045; browsers and SDKs send none)
_TRANSFER_ENCODINGS = ("binary", "8bit", "7bit", "base64", "quoted-printable")


def new_file_id() -> str:
    """`file-` and 24 letters and digits, as OpenAI's ids look."""
    return "file-" + "".join(secrets.choice(_ID_ALPHABET) for _ in range(24))


def _json(payload: Any) -> web.Response:
    return web.Response(body=json_out.dumps(payload), content_type="application/json", charset="utf-8")


def _files(request: web.Request) -> OwnedFiles:
    return store_of(request).owned_files  # the caller's files only


def sources_for(app: web.Application, store: ResponseStore) -> FileSources:
    """Where a turn's `file_id` and `file_url` parts are read from: `store`'s owner's files (the
    request's view of the store), and URLs under the web tools' address rules."""
    settings = app[appkeys.SETTINGS]
    files = store.owned_files if isinstance(store, OwnedStore) else None
    return FileSources(files, max_bytes=file_limit(settings), allow_private_urls=settings.allow_private_urls)


def _file_id(request: web.Request) -> str:
    file_id = request.match_info["file_id"]
    if ids.problem(file_id) is not None:
        raise UnknownFileError.on(file_id)  # an id that cannot exist reads as an unknown one
    return file_id


async def _continue_if_it_fits(request: web.Request) -> None:
    """`Expect: 100-continue` (curl's way with a large upload): no 100 for a body past the limit, so
    the client's first answer is the 413 and it never sends the file."""
    length = request.content_length
    if length is not None and length > file_limit(request.app[appkeys.SETTINGS]) + UPLOAD_SLACK:
        return None
    return await _default_expect_handler(request)


@routes.post("/v1/files", expect_handler=_continue_if_it_fits)
async def create_file(request: web.Request) -> web.Response:
    if request.content_type != "multipart/form-data":
        raise UnsupportedMediaTypeError("POST /v1/files takes 'multipart/form-data' with a 'file' and a 'purpose'")
    quota_before_run(request, request.content_length or 0)  # a key at its quota: refused before the body
    settings = request.app[appkeys.SETTINGS]
    try:
        async with asyncio.timeout(settings.body_timeout):
            upload = await _read_upload(request)
    except TimeoutError:
        raise RequestTimeoutError(f"the upload did not arrive within API_SERVER_BODY_TIMEOUT "
                                  f"({settings.body_timeout:g} s)") from None
    except web.RequestPayloadError:  # its framing or Content-Encoding broke: the connection cannot go on
        raise UndecodableBodyError("the upload could not be read: it does not match its Content-Encoding or "
                                   "Transfer-Encoding") from None
    except (HttpProcessingError, ValueError, AssertionError) as exc:
        # aiohttp's multipart reader on a malformed part (a bad header, a broken boundary): the client's
        raise InvalidRequestError(f"the upload is not valid multipart/form-data ({type(exc).__name__})") from None
    filename, media_type, data, purpose = upload
    file = StoredFile(id=new_file_id(), created_at=int(time.time()), filename=filename, purpose=purpose,
                      size=len(data), media_type=media_type)
    file = await _files(request).add(file, data)
    return _json(file.object())


async def _read_upload(request: web.Request) -> tuple[str, str, bytes | bytearray, str]:
    settings = request.app[appkeys.SETTINGS]
    reader = await request.multipart()  # no boundary: a ValueError, a 400 (create_file)
    purpose: str | None = None
    found: tuple[str, str, bytes | bytearray] | None = None
    for _ in range(_MAX_PARTS):
        part = await reader.next()
        if part is None:
            break
        if not isinstance(part, BodyPartReader):  # a nested multipart: not a form's
            raise InvalidRequestError("the upload holds a nested multipart part; send 'file' and 'purpose' only")
        if part.name == "file":
            if found is not None:
                raise InvalidRequestError("send one 'file' per upload", param="file")
            data = await _read_part(part, file_limit(settings), too_large=lambda: file_too_large(settings))
            found = (_filename(part.filename), part.headers.get("Content-Type", "").partition(";")[0].strip().lower(),
                     data)
        else:
            field = str(part.name)
            value = await _read_part(part, _FIELD_BYTES, too_large=lambda: InvalidRequestError(
                f"the form field '{echo(field)}' is longer than {_FIELD_BYTES} bytes", param=field))  # noqa: B023
            if part.name == "purpose":
                purpose = value.decode("utf-8", "replace").strip()
            # others (`expires_after[anchor]`, `expires_after[seconds]`): accepted; files here expire only
            # by deletion or the store's byte bound
    else:
        raise InvalidRequestError(f"the upload has more than {_MAX_PARTS} parts")
    if found is None:
        raise InvalidRequestError("the upload has no 'file' part", param="file")
    if purpose is None:
        raise InvalidRequestError("'purpose' is required: one of " + ", ".join(f"'{p}'" for p in PURPOSES),
                                  param="purpose")
    if purpose not in PURPOSES:
        raise InvalidRequestError(f"'purpose' {echo(repr(purpose))} is not supported by this gateway; use one of "
                                  + ", ".join(f"'{p}'" for p in PURPOSES), param="purpose")
    if not found[2]:
        raise InvalidRequestError("the file is empty", param="file")
    filename, media_type, data = found
    return filename, media_type, data, purpose


async def _read_part(part: BodyPartReader, limit: int, *, too_large: Any) -> bytes | bytearray:
    """The part's bytes, or `too_large()` as soon as they pass `limit` (the rest is never read).
    The buffer itself, not a copy: both database drivers take a bytearray, so an upload is held once."""
    # a compressed part would be inflated past every bound (aiohttp's decode does not stop): refused
    if part.headers.get("Content-Encoding", "identity").strip().lower() != "identity":
        raise InvalidRequestError("a compressed multipart part (Content-Encoding) is not accepted; send the file as is",
                                  param=part.name)
    transfer = part.headers.get("Content-Transfer-Encoding", "binary").strip().lower()
    if transfer not in _TRANSFER_ENCODINGS:
        raise InvalidRequestError(f"Content-Transfer-Encoding {echo(repr(transfer))} is not one of "
                                  f"{', '.join(_TRANSFER_ENCODINGS)}", param=part.name)
    body = bytearray()
    while chunk := await part.read_chunk(_CHUNK):
        if len(body) + len(chunk) > limit:
            raise too_large()
        body += chunk
    # base64 and quoted-printable only shrink what they decode: still within the limit
    return bytes(part.decode(body)) if transfer in ("base64", "quoted-printable") else body


def _filename(given: str | None) -> str:
    """The name as the file's own (a browser's `C:\\path\\x.pdf` becomes `x.pdf`), bounded, printable."""
    name = (given or "").replace("\\", "/").rpartition("/")[2].strip()
    name = _CONTROL.sub("", name)[:_MAX_FILENAME]
    return name or "upload"


@routes.get("/v1/files")
async def list_files(request: web.Request) -> web.Response:
    query = request.query
    order = query.get("order", "desc")
    if order not in ("asc", "desc"):
        raise InvalidRequestError("'order' must be 'asc' or 'desc'", param="order")
    limit_text = query.get("limit", str(_LIST_LIMIT))
    if not (limit_text.isascii() and limit_text.isdigit()) or not 1 <= int(limit_text) <= _LIST_LIMIT:
        raise InvalidRequestError(f"'limit' must be an integer from 1 to {_LIST_LIMIT}", param="limit")
    after = query.get("after") or None
    if after is not None:
        ids.check(after, "after")
    purpose = query.get("purpose") or None
    page = await _files(request).list(limit=int(limit_text), order=order, after=after, purpose=purpose)
    data = [file.object() for file in page.files]
    return _json({"object": "list", "data": data, "first_id": data[0]["id"] if data else None,
                  "last_id": data[-1]["id"] if data else None, "has_more": page.has_more})


@routes.get("/v1/files/{file_id}")
async def retrieve_file(request: web.Request) -> web.Response:
    file_id = _file_id(request)
    file = await _files(request).get(file_id)
    if file is None:
        raise UnknownFileError.on(file_id)
    return _json(file.object())


@routes.get("/v1/files/{file_id}/content")
async def file_content(request: web.Request) -> web.Response:
    file_id = _file_id(request)
    files = _files(request)
    file = await files.get(file_id)
    data = await files.content(file_id) if file is not None else None
    if file is None or data is None:
        raise UnknownFileError.on(file_id)
    # always octet-stream and an attachment: an uploaded HTML file must never render as a page of
    # the gateway's origin (nosniff is on every response)
    return web.Response(body=data, content_type="application/octet-stream", headers={
        "Content-Disposition": _attachment(file.filename)})


def _attachment(filename: str) -> str:
    plain = "".join(c if c.isascii() and c.isprintable() and c not in '"\\' else "_" for c in filename)
    return f"attachment; filename=\"{plain}\"; filename*=UTF-8''{quote(filename, safe='')}"


@routes.delete("/v1/files/{file_id}")
async def delete_file(request: web.Request) -> web.Response:
    file_id = _file_id(request)
    if not await _files(request).delete(file_id):
        raise UnknownFileError.on(file_id)
    return _json({"id": file_id, "object": "file", "deleted": True})
