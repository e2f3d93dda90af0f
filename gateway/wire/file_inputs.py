"""Files a request hands the model, on the wire: checked and typed. Pure, no I/O.

Both APIs name a file three ways (openai-python's `ResponseInputFileParam` and chat's `File` part):
its bytes inline (`file_data`: a `data:` URL, or bare base64 with a `filename` saying what it is),
a URL (`file_url`, Responses only) or an uploaded file (`file_id`). A Responses `input_file` part
becomes the chat part `{"type": "file", "file": {...}}` in the messages the agent reads, so one
reader (gateway/files/) serves both APIs, where the turn is prepared; `file_input` turns such a part
into an `InlineFile` or a `FileReference` there, and the reader reads or resolves it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from gateway.errors import InvalidRequestError

#: `data:[<media type>][;param=value...][;base64],<data>`: the media type and whether it is base64
_DATA_URL = re.compile(r"data:(?P<type>[^;,]*)(?P<params>(?:;[^;,]*)*),", re.ASCII)
#: what a chat `file` part may hold (openai-python's `File` content part, plus the Responses-only URL)
_CHAT_FILE_FIELDS = ("file_data", "file_id", "filename", "file_url")


@dataclass(frozen=True)
class InlineFile:
    """A file sent whole in the request: `data` is its base64 text, not decoded here (the reader
    decodes it once, where its bytes are needed)."""

    filename: str
    #: the `data:` URL's media type, or "" (bare base64: the filename says the type)
    media_type: str
    data: str


@dataclass(frozen=True)
class FileReference:
    """A file the request names rather than holds: an uploaded file's id or a URL to fetch."""

    kind: str  # "file_id" or "file_url"
    value: str
    filename: str | None = None


def _bad(message: str, param: str) -> InvalidRequestError:
    return InvalidRequestError(message, param=param)


def chat_file_part(part: dict[str, Any], param: str) -> dict[str, Any]:
    """A chat `{"type": "file", "file": {...}}` part, checked (a 400 naming the field otherwise)."""
    file = part.get("file")
    if not isinstance(file, dict):
        raise _bad("a file part needs a 'file' object with 'file_data' and 'filename', or 'file_id'.",
                   f"{param}.file")
    file_input({"type": "file", "file": file}, f"{param}.file")
    return part


def responses_file_part(part: dict[str, Any], param: str) -> dict[str, Any]:
    """A Responses `input_file` part, checked; returned as the chat `file` part the agent reads."""
    file = {name: part[name] for name in _CHAT_FILE_FIELDS if part.get(name) is not None}
    chat = {"type": "file", "file": file}
    file_input(chat, param)
    return chat


def file_input(part: dict[str, Any], param: str = "file") -> InlineFile | FileReference:
    """What a chat `file` part names. Exactly one of `file_data`, `file_id`, `file_url`."""
    file = part["file"]
    given = [name for name in ("file_data", "file_id", "file_url") if file.get(name) is not None]
    if len(given) != 1:
        raise _bad("a file needs exactly one of 'file_data' (with 'filename'), 'file_id' or 'file_url'.", param)
    name = given[0]
    value = file[name]
    if not isinstance(value, str) or not value:
        raise _bad(f"'{name}' must be a non-empty string.", f"{param}.{name}")
    filename = file.get("filename")
    if filename is not None and not isinstance(filename, str):
        raise _bad("'filename' must be a string.", f"{param}.filename")
    if name != "file_data":
        return FileReference(name, value, filename or None)
    match = _DATA_URL.match(value)
    if match is not None:
        if ";base64" not in match["params"].lower():
            raise _bad("a 'file_data' data: URL must be base64 (data:<type>;base64,...).", f"{param}.file_data")
        media_type, data = match["type"].strip().lower(), value[match.end():]
    elif value.startswith("data:"):
        raise _bad("'file_data' is not a valid data: URL (data:<type>;base64,...).", f"{param}.file_data")
    else:
        media_type, data = "", value
    if not filename:
        if not media_type:
            raise _bad("'filename' is required with bare base64 'file_data': it says what the file is.",
                       f"{param}.filename")
        filename = "file"
    return InlineFile(filename, media_type, data)
