"""Real documents made in the test: PDFs written by fpdf2 (text, a table, a scanned page) and
images whose headers state their size."""

from __future__ import annotations

import base64
import io

from fpdf import FPDF
from PIL import Image

TABLE = [("Region", "Units", "Revenue"), ("North", "1200", "48000"), ("South", "850", "34000")]


def two_page_pdf() -> bytes:
    """Page 1 an introduction, page 2 a sales table."""
    pdf = FPDF()
    pdf.set_font("Helvetica", size=12)
    pdf.add_page()
    pdf.multi_cell(0, 8, "Quarterly report. The introduction says the year went well.")
    pdf.add_page()
    pdf.multi_cell(0, 8, "Sales by region")
    with pdf.table() as table:
        for row in TABLE:
            cells = table.row()
            for value in row:
                cells.cell(value)
    return bytes(pdf.output())


def text_pdf(pages: int, lines_per_page: int = 40) -> bytes:
    pdf = FPDF()
    pdf.set_font("Helvetica", size=10)
    for number in range(1, pages + 1):
        pdf.add_page()
        for line in range(lines_per_page):
            pdf.cell(0, 6, f"Page {number} line {line}: the quick brown fox jumps over the lazy dog.",
                     new_x="LMARGIN", new_y="NEXT")
    return bytes(pdf.output())


def scanned_pdf() -> bytes:
    """One page holding only an image (a scan): no text layer."""
    scan = Image.new("L", (600, 800), color=255)
    for y in range(100, 700, 20):  # dark bands where a scan has lines of text
        scan.paste(0, (60, y, 540, y + 8))
    pdf = FPDF()
    pdf.add_page()
    pdf.image(scan, x=0, y=0, w=210)
    return bytes(pdf.output())


def png(width: int, height: int) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (width, height), color=(200, 30, 30)).save(out, format="PNG")
    return out.getvalue()


def noisy_png(width: int, height: int) -> bytes:
    """A PNG that compresses badly: its base64 is large for its size (the old estimate's trap)."""
    import os

    return png_from(Image.frombytes("RGB", (width, height), os.urandom(width * height * 3)))


def png_from(image: Image.Image) -> bytes:
    out = io.BytesIO()
    image.save(out, format="PNG")
    return out.getvalue()


def data_url(data: bytes, media_type: str) -> str:
    return f"data:{media_type};base64,{base64.b64encode(data).decode()}"
