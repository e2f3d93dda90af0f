"""A PDF's text, page by page, for the model: `[page N]` before each page's text, so the model
can say where it read something; a page with no text layer (a scan) is a note, not garbage.

pypdf (pure Python, no native code) was picked over pdfminer.six by measurement (bench/README.md,
"Reading PDFs"). It is imported here only, and this module only when a PDF is read: an idle
gateway holds none of it.
"""

from __future__ import annotations

import io
import logging

from gateway.errors import echo
from gateway.files.errors import UnreadableFileError

#: A page whose text is mostly not letters, digits, punctuation or spaces is a font without a
#: character map (the glyph ids come out as noise): the model gets a note instead.
_READABLE_SHARE = 0.6


def read_pdf(data: bytes, filename: str, max_pages: int, max_chars: int) -> tuple[str, str]:
    """(text, note): the pages read, and what the model should know about what was not."""
    from pypdf import PdfReader
    from pypdf.errors import PdfReadError

    # pypdf logs every oddity of a damaged file as a warning: a client's bad PDF is not ours to log
    logging.getLogger("pypdf").setLevel(logging.ERROR)
    try:
        reader = PdfReader(io.BytesIO(data), strict=False)
        if reader.is_encrypted and not reader.decrypt(""):  # an owner password alone still reads
            raise UnreadableFileError(f"The PDF {echo(repr(filename))} is encrypted with a password.", param="file")
        total = len(reader.pages)
        pages: list[str] = []
        size = 0
        scanned: list[int] = []
        cut_at = None
        for number in range(1, min(total, max_pages) + 1):
            text = _page_text(reader.pages[number - 1].extract_text())
            if text is None:
                scanned.append(number)
                text = "(no text on this page: it is an image, probably a scan, which the gateway cannot read)"
            page = f"[page {number}]\n{text}"
            if size + len(page) > max_chars:
                pages.append(page[:max(0, max_chars - size)])
                cut_at = number
                break
            pages.append(page)
            size += len(page) + 2
    except UnreadableFileError:
        raise
    except (PdfReadError, ValueError, TypeError, KeyError, IndexError, AttributeError, AssertionError,
            RecursionError, OSError, ArithmeticError, NotImplementedError) as exc:
        # pypdf raises more than its own errors on a damaged file: every one is the file's fault here
        raise UnreadableFileError(f"The file {echo(repr(filename))} is not a readable PDF "
                                  f"({type(exc).__name__}).", param="file") from None
    notes = []
    if cut_at is not None:
        notes.append(f"[the PDF was cut in page {cut_at} of {total}: the gateway reads up to {max_chars} "
                     "characters of a file]")
    elif total > max_pages:
        notes.append(f"[the PDF has {total} pages; the gateway read the first {max_pages}]")
    if scanned and len(scanned) == len(pages):
        notes.append("[no page of this PDF has a text layer: it is scanned images, which the gateway "
                      "cannot read; ask for a PDF with text, or send the pages as images to a model that sees]")
    return "\n\n".join(pages), "\n".join(notes)


def _page_text(text: str) -> str | None:
    """The page's text, or None when it has none worth reading (an image, or glyph noise)."""
    text = text.strip()
    if not text:
        return None
    readable = sum(1 for c in text if c.isalnum() or c.isspace() or (c.isprintable() and c.isascii()))
    return text if readable >= _READABLE_SHARE * len(text) else None

