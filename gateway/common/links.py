"""Links in text: markdown links and bare URLs, and the form two URLs are compared in. Pure.

Shared by the wire (citations become `url_citation` annotations, gateway/wire/citations.py) and the
research loop (a report's links to pages it never saw are removed, gateway/agent/research/).
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit, urlunsplit

#: `[label](url)` or `[label](url "title")`; the label may hold brackets one level deep.
_MARKDOWN_LINK = re.compile(r"\[((?:[^\[\]\n]|\[[^\[\]\n]*\])*)\]\(\s*<?(https?://[^\s()<>]+(?:\([^\s()<>]*\)[^\s()<>]*)*)>?"
                            r"(?:\s+\"[^\"\n]*\")?\s*\)", re.IGNORECASE)
_BARE_URL = re.compile(r"https?://[^\s<>\"'`\[\]{}|\\^]+", re.IGNORECASE)
#: Characters that end a sentence rather than a URL when a bare URL ends on them.
_TRAILING = ".,;:!?'\"*_~"


def normalize_url(url: str) -> str:
    """The form two URLs are compared in: scheme and host lower-case, no fragment, no trailing slash."""
    try:
        parts = urlsplit(url.strip())
    except ValueError:
        return url.strip()
    path = parts.path.rstrip("/")
    return urlunsplit((parts.scheme.lower(), parts.netloc.lower(), path, parts.query, ""))


def find_links(text: str) -> list[tuple[int, int, str]]:
    """(start, end, url) for every link in `text`, in order: markdown links span `[label](url)`,
    bare URLs span the URL (trailing punctuation and an unbalanced closing parenthesis left out)."""
    links: list[tuple[int, int, str]] = []
    taken: list[tuple[int, int]] = []
    for match in _MARKDOWN_LINK.finditer(text):
        links.append((match.start(), match.end(), match.group(2)))
        taken.append((match.start(), match.end()))
    for match in _BARE_URL.finditer(text):
        start, url = match.start(), match.group(0)
        if any(a <= start < b for a, b in taken):
            continue
        url = _trim(url)
        if len(url) > len("https://"):
            links.append((start, start + len(url), url))
    links.sort()
    return links


def _trim(url: str) -> str:
    while url:
        if url[-1] in _TRAILING:
            url = url[:-1]
        elif url[-1] == ")" and url.count("(") < url.count(")"):
            url = url[:-1]
        else:
            break
    return url
