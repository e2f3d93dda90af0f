"""One file's bytes -> its text for the model. CPU-bound: callers run it in a worker thread."""

from __future__ import annotations

import codecs
from dataclasses import dataclass

from gateway.errors import echo
from gateway.files import kinds
from gateway.files.errors import UnreadableFileError


@dataclass(frozen=True)
class ReadLimits:
    """Bounds on the work one file may cost: past them the text is cut, with a note saying where."""

    max_pages: int = 300
    max_chars: int = 1_000_000


@dataclass(frozen=True)
class Document:
    filename: str
    text: str
    #: a note the model reads after the text, or "" (the document was cut, pages had no text...)
    note: str = ""


def read_document(data: bytes, filename: str, media_type: str = "",
                  limits: ReadLimits | None = None) -> Document:
    limits = limits or ReadLimits()
    kind = kinds.kind_of(filename, media_type, data[:8])
    if kind == kinds.PDF:
        from gateway.files import pdf  # the PDF library stays out of a gateway that reads none

        text, note = pdf.read_pdf(data, filename, limits.max_pages, limits.max_chars)
        return Document(filename, text, note)
    text = _from_html(data, filename) if kind == kinds.HTML else _decoded(data, filename)
    if len(text) > limits.max_chars:
        return Document(filename, text[:limits.max_chars],
                        f"[the file was cut at {limits.max_chars} of its {len(text)} characters]")
    return Document(filename, text)


def _decoded(data: bytes, filename: str) -> str:
    if data.startswith(codecs.BOM_UTF16_LE) or data.startswith(codecs.BOM_UTF16_BE):
        encoding = "utf-16"
    else:
        encoding = "utf-8-sig"
    try:
        return data.decode(encoding)
    except UnicodeDecodeError:
        if b"\x00" in data[:4096]:  # binary content under a text name
            raise UnreadableFileError(f"The file {echo(repr(filename))} is not text (it holds binary data).",
                                      param="file") from None
        return data.decode("latin-1")  # an 8-bit text file in an older encoding: readable, not refused


def _from_html(data: bytes, filename: str) -> str:
    """The fetch provider's page reader (trafilatura: main content as Markdown, tables kept)."""
    from plugins.web.fetch.provider import readable  # heavy (lxml): imported when an HTML file is read
    from providers.urlsafety import Fetched
    from providers.web import ProviderError

    try:
        title, text = readable(Fetched(url=filename, final_url=filename, status=200, content_type="text/html",
                                       charset=None, body=data, truncated=False))
    except ProviderError as exc:
        raise UnreadableFileError(f"The HTML file {echo(repr(filename))} could not be read: {exc}.",
                                  param="file") from None
    return f"# {title}\n\n{text}" if title and not text.startswith("#") else text
