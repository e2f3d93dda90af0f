"""Documents a request hands the model, read on the gateway: bytes and a filename in, text out.

Most upstreams the gateway fronts (Ollama, llama.cpp, vLLM) read no PDF, so the gateway reads a
file itself and gives the model its text, headed by the filename: PDF (page by page, each page
marked `[page N]` so the model can cite it), plain text, Markdown, CSV, JSON and HTML (through the
fetch provider's page reader). Anything else is a 400 naming the types read.

    kinds.py    what a file is (its media type, else its name, else its first bytes)
    pdf.py      a PDF's text per page, bounded; the PDF library is imported only here, when read
    read.py     one file's bytes -> a Document (text, truncated?)
    parts.py    the `file` parts of a turn's messages -> text parts (where the turn is prepared)
    errors.py   the typed 400s the routes render
"""
