"""Reading one file (gateway/files/read.py): what the model gets from each type, and the bounds."""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.files.errors import UnreadableFileError, UnsupportedFileTypeError
from gateway.files.read import ReadLimits, read_document
from tests.providers.test_idle_imports import modules_of_started_gateway
from tests.support.documents import scanned_pdf, text_pdf, two_page_pdf


def test_a_pdf_is_read_page_by_page_with_markers() -> None:
    document = read_document(two_page_pdf(), "report.pdf", "application/pdf")
    assert document.text.startswith("[page 1]\nQuarterly report")
    assert "\n\n[page 2]\nSales by region" in document.text and document.note == ""


def test_a_pdf_sent_untyped_is_known_by_its_first_bytes() -> None:
    assert "[page 2]" in read_document(two_page_pdf(), "upload.bin", "application/octet-stream").text


def test_a_scanned_page_is_a_note_and_a_scanned_pdf_says_so() -> None:
    document = read_document(scanned_pdf(), "scan.pdf", "application/pdf")
    assert "[page 1]\n(no text on this page" in document.text
    assert "no page of this PDF has a text layer" in document.note


def test_a_pdf_past_the_page_limit_is_cut_with_a_note() -> None:
    document = read_document(text_pdf(12, lines_per_page=2), "long.pdf", "application/pdf", ReadLimits(max_pages=5))
    assert "[page 5]" in document.text and "[page 6]" not in document.text
    assert document.note == "[the PDF has 12 pages; the gateway read the first 5]"


def test_a_pdf_past_the_text_limit_is_cut_in_the_page_it_reaches() -> None:
    document = read_document(text_pdf(10), "long.pdf", "application/pdf", ReadLimits(max_chars=5000))
    assert len(document.text) <= 5000 and "[page 1]" in document.text and "[page 10]" not in document.text
    assert document.note.startswith("[the PDF was cut in page ")


@pytest.mark.parametrize("data", [b"%PDF-1.4\n1 0 obj <<>> endobj trailer <<>>\n%%EOF", b"%PDF-", b"",
                                  two_page_pdf()[:300], b"\x00\xff" * 100])
def test_a_malformed_pdf_is_a_typed_error(data: bytes) -> None:
    with pytest.raises(UnreadableFileError) as raised:
        read_document(data, "broken.pdf", "application/pdf")
    assert raised.value.status == 400 and "broken.pdf" in raised.value.message


@pytest.mark.parametrize(("name", "media_type"), [("photo.png", "image/png"), ("sheet.xlsx", ""), ("noname", ""),
                                                 ("a.docx", "application/octet-stream")])
def test_other_types_are_a_400_naming_the_types_read(name: str, media_type: str) -> None:
    with pytest.raises(UnsupportedFileTypeError) as raised:
        read_document(b"PK\x03\x04....", name, media_type)
    assert raised.value.status == 400 and "PDF, plain text, Markdown, CSV, JSON and HTML" in raised.value.message


def test_text_in_an_older_encoding_is_read_and_binary_under_a_text_name_is_refused() -> None:
    assert read_document("na\u00efve".encode("latin-1"), "a.txt").text == "na\u00efve"
    assert read_document("bom".encode("utf-16"), "a.txt").text == "bom"
    with pytest.raises(UnreadableFileError):
        read_document(b"\x00\x01\x02\xff\xfe\x00", "a.txt")


def test_a_text_file_past_the_limit_is_cut_with_a_note() -> None:
    document = read_document(b"x" * 100, "a.txt", "text/plain", ReadLimits(max_chars=10))
    assert document.text == "x" * 10 and "cut at 10 of its 100 characters" in document.note


def test_an_idle_gateway_has_imported_no_pdf_or_image_library(tmp_path: Path) -> None:
    loaded = modules_of_started_gateway(tmp_path)
    assert not {name for name in loaded if name.split(".")[0] in ("pypdf", "pdfminer", "imagesize", "PIL")}
    assert "gateway.files.pdf" not in loaded


def test_a_pdf_locked_with_a_password_is_a_typed_error_naming_it() -> None:
    import io

    from pypdf import PdfReader, PdfWriter

    writer = PdfWriter()
    for page in PdfReader(io.BytesIO(two_page_pdf())).pages:
        writer.add_page(page)
    writer.encrypt(user_password="secret", owner_password="owner")
    locked = io.BytesIO()
    writer.write(locked)
    with pytest.raises(UnreadableFileError) as raised:
        read_document(locked.getvalue(), "locked.pdf", "application/pdf")
    assert "encrypted with a password" in raised.value.message
