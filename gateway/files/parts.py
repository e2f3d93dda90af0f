"""The `file` parts of a turn's messages read into text parts, where the turn is prepared (the
wire only checks and types them: gateway/wire/file_inputs.py).

A file's text reaches the model as a text part headed by its filename (`[file: report.pdf]`); a
message left with text parts only becomes one string, as the Responses input's text does. Reading
is CPU-bound (a 100-page PDF takes a while: bench/README.md), so it runs in a worker thread.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
from dataclasses import dataclass
from typing import Any

from gateway.errors import InvalidRequestError, echo
from gateway.files.errors import FileReferenceNotSupportedError, UnreadableFileError
from gateway.files.read import Document, ReadLimits, read_document
from gateway.files.sources import FileSources
from gateway.wire.context_budget import cut_to_tokens
from gateway.wire.file_inputs import FileReference, InlineFile, file_input

HEADING = "[file: {}]"
#: what the note on a cut file costs, at most
_NOTE_TOKENS = 32


@dataclass
class ReadFile:
    """A file read into one of the messages: where its text part is, to cut it to a budget later."""

    message: dict[str, Any]
    index: int
    document: Document


def has_files(messages: list[dict[str, Any]]) -> bool:
    """Whether any message holds a `file` part (most hold none: a cheap check before any work)."""
    for message in messages:  # a loop, not any() over a generator: this runs for every request
        content = message.get("content")
        if content.__class__ is list and any(_is_file(part) for part in content):
            return True
    return False


async def read_file_parts(messages: list[dict[str, Any]], *, param: str, limits: ReadLimits | None = None,
                          sources: FileSources | None = None) -> tuple[list[dict[str, Any]], list[ReadFile]]:
    """The messages with every file part read into a text part (new message objects where one
    changed; the others as they were), and the files read. `sources` reads `file_id` and
    `file_url` parts (files/sources.py); without it they are a 400."""
    out: list[dict[str, Any]] = []
    read: list[ReadFile] = []
    for m_index, message in enumerate(messages):
        content = message.get("content")
        if not isinstance(content, list) or not any(_is_file(p) for p in content):
            out.append(message)
            continue
        parts: list[Any] = []
        documents: list[tuple[int, Document]] = []
        for p_index, part in enumerate(content):
            if not _is_file(part):
                parts.append(part)
                continue
            where = f"{param}[{m_index}].content[{p_index}]" if param == "messages" else param
            document = await _read(file_input(part, where), where, limits, sources)
            documents.append((len(parts), document))
            parts.append({"type": "text", "text": text_part(document)})
        changed = {**message, "content": parts}
        if all(isinstance(p, dict) and p.get("type") == "text" for p in parts):
            changed["content"] = "\n\n".join(p["text"] for p in parts)
            read += [ReadFile(changed, -1, document) for _, document in documents]
        else:
            read += [ReadFile(changed, index, document) for index, document in documents]
        out.append(changed)
    return out, read


def text_part(document: Document, text: str | None = None, note: str | None = None) -> str:
    body = document.text if text is None else text
    said = document.note if note is None else note
    return "\n\n".join(filter(None, [HEADING.format(document.filename), body, said]))


def cut_files(read: list[ReadFile], over: int) -> bool:
    """Cut the files' texts by about `over` tokens, the longest first, each with a note saying so;
    False when they are too short to give that much (the turn is over the window whatever they hold)."""
    over += _NOTE_TOKENS * len(read)  # each cut file gets a note saying so
    for file in sorted(read, key=lambda f: len(f.document.text), reverse=True):
        if over <= 0:
            break
        text, cut = cut_to_tokens(file.document.text, over)
        over -= cut
        note = "\n".join(filter(None, [file.document.note, "[the rest of the file was cut to fit the model's "
                                                           "context window]"]))
        _replace(file, text, note)
    return over <= 0


def _replace(file: ReadFile, text: str, note: str) -> None:
    old, new = text_part(file.document), text_part(file.document, text, note)
    content = file.message["content"]
    if file.index < 0:  # the message became one string: its file's text is a slice of it
        file.message["content"] = content.replace(old, new, 1)
    else:
        content[file.index] = {"type": "text", "text": new}
    file.document = Document(file.document.filename, text, note)


def _is_file(part: Any) -> bool:
    return isinstance(part, dict) and part.get("type") == "file"


async def _read(given: InlineFile | FileReference, param: str, limits: ReadLimits | None,
                sources: FileSources | None) -> Document:
    if isinstance(given, FileReference):
        if sources is None:
            what = "uploaded files (file_id)" if given.kind == "file_id" else "files by URL (file_url)"
            raise FileReferenceNotSupportedError(f"{what} are not read here: send the file's contents as "
                                                 "'file_data' (a data: URL, or base64 with 'filename').", param=param)

        async def read(data: bytes, filename: str, media_type: str, where: str) -> Document:
            return await _read_bytes(data, filename, media_type, where, limits)

        return await sources.document(given, param, limits, read)
    return await _read_bytes(_decoded(given.data, param), given.filename, given.media_type, param, limits)


async def _read_bytes(data: bytes, filename: str, media_type: str, param: str, limits: ReadLimits | None) -> Document:
    try:
        return await asyncio.to_thread(read_document, data, filename, media_type, limits)
    except InvalidRequestError as exc:  # the file's type, or a damaged file: named where it was given
        exc.param = param
        raise
    except Exception as exc:  # noqa: BLE001 - a parser's failure on a client's file is the file's fault
        raise UnreadableFileError(f"The file {echo(repr(filename))} could not be read "
                                  f"({type(exc).__name__}).", param=param) from None


def _decoded(data: str, param: str) -> bytes:
    compact = "".join(data.split())  # base64 wrapped at 76 columns is still base64
    try:
        return base64.b64decode(compact, validate=True)
    except (binascii.Error, ValueError):
        try:  # the URL-safe alphabet
            return base64.b64decode(compact, altchars=b"-_", validate=True)
        except (binascii.Error, ValueError):
            raise UnreadableFileError("'file_data' is not valid base64.", param=f"{param}.file_data") from None
