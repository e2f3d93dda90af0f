"""What a file is: its media type if it states one we read, else its name's extension, else its
first bytes (a PDF sent as application/octet-stream is still a PDF)."""

from __future__ import annotations

from gateway.errors import echo
from gateway.files.errors import UnsupportedFileTypeError

PDF, TEXT, HTML = "pdf", "text", "html"

#: What the 400 for any other type names.
READ_TYPES = "PDF, plain text, Markdown, CSV, JSON and HTML"

_BY_MEDIA_TYPE = {
    "application/pdf": PDF, "application/x-pdf": PDF,
    "text/plain": TEXT, "text/markdown": TEXT, "text/x-markdown": TEXT, "text/csv": TEXT,
    "application/csv": TEXT, "application/json": TEXT, "text/json": TEXT, "application/ld+json": TEXT,
    "text/html": HTML, "application/xhtml+xml": HTML,
}
_BY_EXTENSION = {
    "pdf": PDF, "txt": TEXT, "text": TEXT, "md": TEXT, "markdown": TEXT, "csv": TEXT, "json": TEXT,
    "jsonl": TEXT, "log": TEXT, "html": HTML, "htm": HTML, "xhtml": HTML,
}
#: media types that say nothing of the content: the name or the bytes decide
_UNTYPED = frozenset({"", "application/octet-stream", "binary/octet-stream"})


def kind_of(filename: str, media_type: str, head: bytes) -> str:
    """PDF, TEXT or HTML, or UnsupportedFileTypeError naming the types read."""
    if media_type not in _UNTYPED:
        kind = _BY_MEDIA_TYPE.get(media_type)
        if kind is not None:
            return kind
        raise _unsupported(filename, media_type)
    extension = filename.rpartition(".")[2].lower() if "." in filename else ""
    kind = _BY_EXTENSION.get(extension)
    if kind is not None:
        return kind
    if head.startswith(b"%PDF-"):
        return PDF
    raise _unsupported(filename, media_type)


def _unsupported(filename: str, media_type: str) -> UnsupportedFileTypeError:
    extension = f"'.{filename.rpartition('.')[2]}'" if "." in filename else "an untyped file"
    what = echo(media_type or extension)
    return UnsupportedFileTypeError(
        f"The file {echo(repr(filename))} ({what}) cannot be read: the gateway reads {READ_TYPES} "
        "(by media type, else by the filename's extension).", param="file")
