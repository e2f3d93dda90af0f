"""Reading PDFs on the gateway: pypdf against pdfminer.six (issue 47; bench/README.md "Reading PDFs").

    python -m bench.pdf_read                 # the gateway's reader (pypdf) on a 100-page PDF
    python -m bench.pdf_read --compare       # both libraries on 10 and 100 pages, a scan, real PDFs
    python -m bench.pdf_read --uploaded      # an uploaded file (file_id): first use, then its kept text

Each reading runs in a fresh interpreter, so its peak RSS (VmHWM) is its own: the library's
import plus the reading. The PDFs are written by fpdf2 (a test dependency): 40 lines of text a page
and a table every tenth page; a scanned page is an image only. `--pdf PATH` adds a PDF of your own.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from tests.support.documents import scanned_pdf

_READ = """
import json, sys, time
def hwm():  # VmHWM: this process's peak RSS since its exec (ru_maxrss keeps the forking parent's)
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
path, how = sys.argv[1], sys.argv[2]
before = hwm()
start = time.perf_counter()
data = open(path, "rb").read()
def uploaded(path, data):
    import asyncio, tempfile
    from gateway.files.parts import read_file_parts
    from gateway.files.sources import FileSources
    from gateway.store.files import OwnedFiles, StoredFile
    from gateway.store.sqlite.store import SQLiteResponseStore

    async def run():
        with tempfile.TemporaryDirectory() as home:
            async with SQLiteResponseStore(home + "/responses.db", 100) as store:
                files = OwnedFiles(store.files, "/bench")
                t0 = time.perf_counter()
                await files.add(StoredFile("file-bench", 0, "report.pdf", "user_data", len(data),
                                           "application/pdf"), data)
                t1 = time.perf_counter()
                part = [{"role": "user", "content": [{"type": "file", "file": {"file_id": "file-bench"}}]}]
                sources = FileSources(files, max_bytes=len(data))
                first, _ = await read_file_parts(part, param="input", sources=sources)
                t2 = time.perf_counter()
                after_first = hwm()
                second, _ = await read_file_parts(part, param="input", sources=sources)
                t3 = time.perf_counter()
                assert first == second
                return {"store_s": t1 - t0, "first_use_s": t2 - t1, "second_use_s": t3 - t2,
                        "peak_rss_mib": after_first, "peak_after_second_mib": hwm(), "start_rss_mib": before,
                        "chars": len(first[0]["content"])}

    return asyncio.run(run())
if how == "uploaded":  # the Files API's path: store the file, read it by file_id twice (store/files.py)
    print(json.dumps(uploaded(path, data)))
    raise SystemExit
if how == "gateway":
    from gateway.files.read import read_document
    document = read_document(data, path, "application/pdf")
    text, pages = document.text + document.note, document.text.count("[page ")
elif how == "pypdf":
    import io, pypdf
    reader = pypdf.PdfReader(io.BytesIO(data))
    texts = [page.extract_text() for page in reader.pages]
    text, pages = "\\n".join(texts), len(texts)
else:
    import io
    from pdfminer.high_level import extract_text
    text = extract_text(io.BytesIO(data))
    pages = text.count("\\f")
seconds = time.perf_counter() - start
print(json.dumps({"seconds": seconds, "peak_rss_mib": hwm(), "start_rss_mib": before, "chars": len(text),
                  "pages": pages, "head": text[:160]}))
"""


def table_pdf(pages: int) -> bytes:
    from fpdf import FPDF

    pdf = FPDF()
    pdf.set_font("Helvetica", size=10)
    for number in range(1, pages + 1):
        pdf.add_page()
        for line in range(40):
            pdf.cell(0, 6, f"Page {number} line {line}: the quick brown fox jumps over the lazy dog.",
                     new_x="LMARGIN", new_y="NEXT")
        if number % 10 == 0:
            with pdf.table() as table:
                for row in (("Region", "Units", "Revenue"), ("North", "1200", "48000")):
                    cells = table.row()
                    for value in row:
                        cells.cell(value)
    return bytes(pdf.output())


def measure(path: Path, how: str) -> dict[str, object]:
    out = subprocess.run([sys.executable, "-c", _READ, str(path), how], capture_output=True, text=True,
                         check=True, cwd=Path(__file__).resolve().parents[1])
    return json.loads(out.stdout.splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--compare", action="store_true", help="pypdf and pdfminer.six, several PDFs")
    parser.add_argument("--pdf", action="append", default=[], help="a PDF of your own to add")
    parser.add_argument("--uploaded", action="store_true", help="the 100-page PDF uploaded, used twice by file_id")
    args = parser.parse_args()
    if args.uploaded:
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp, "p100.pdf")
            path.write_bytes(table_pdf(100))
            r = measure(path, "uploaded")
            print(f"100 pages, {path.stat().st_size} bytes: store {r['store_s']:.3f} s, first use (parse, keep the "
                  f"text) {r['first_use_s']:.3f} s, second use (kept text) {r['second_use_s']:.3f} s; peak RSS "
                  f"{r['peak_rss_mib']:.1f} MiB after the first, {r['peak_after_second_mib']:.1f} after the second "
                  f"(start {r['start_rss_mib']:.1f}); {r['chars']} characters to the model")
        return
    with tempfile.TemporaryDirectory() as tmp:
        files = {"100 pages": Path(tmp, "p100.pdf")}
        files["100 pages"].write_bytes(table_pdf(100))
        if args.compare:
            files["10 pages"] = Path(tmp, "p10.pdf")
            files["10 pages"].write_bytes(table_pdf(10))
            files["scanned page"] = Path(tmp, "scan.pdf")
            files["scanned page"].write_bytes(scanned_pdf())
        for given in args.pdf:
            files[Path(given).name] = Path(given)
        readers = ["gateway", "pypdf", "pdfminer"] if args.compare else ["gateway"]
        print(f"{'pdf':<32} {'reader':<9} {'bytes':>9} {'pages':>5} {'s':>7} {'peak MiB':>9} {'start':>6} {'chars':>8}")
        for name, path in files.items():
            for how in readers:
                r = measure(path, how)
                print(f"{name:<32} {how:<9} {path.stat().st_size:>9} {r['pages']:>5} {r['seconds']:>7.3f} "
                      f"{r['peak_rss_mib']:>9.1f} {r['start_rss_mib']:>6.1f} {r['chars']:>8}")
                if name == "scanned page":
                    print(f"    text: {r['head']!r}")


if __name__ == "__main__":
    main()
