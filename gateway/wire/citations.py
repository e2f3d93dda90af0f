"""Links in an answer -> OpenAI `url_citation` annotations. Pure: no I/O, no agent state.

A link is a markdown link `[label](url)` or a bare `http(s)://` URL. It becomes a citation when its
URL, normalized (scheme and host lower-case, no fragment, a trailing slash ignored), is one of the
sources the agent's tools returned this turn; the citation's title is the tool's title for it and
its span the link's span in the text the client receives, in code points (Python string indices,
which is what OpenAI's offsets count). A span is checked against the text before it is handed out:
one that does not hold its link is dropped, never sent with wrong offsets.

A numbered citation `[3]` (how the agent's prompt asks the model to cite: every page its tools
return has a number, gateway/agent/sources.py) becomes a citation of the source with that number,
its span the `[3]`; `[2][3]` are two. A `[3]` that is a markdown link's label is the link's.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from gateway.agent.events import Source
from gateway.common.links import find_links, normalize_url

__all__ = ["Citation", "checked", "citations", "find_links", "normalize_url"]

_NUMBERED = re.compile(r"\[(\d{1,4})\](?!\()")


@dataclass(frozen=True, slots=True)
class Citation:
    start: int
    end: int
    url: str  # as written in the answer
    title: str

    def chat(self) -> dict[str, Any]:
        """The nested form of Chat Completions' `message.annotations`."""
        return {"type": "url_citation", "url_citation": {
            "start_index": self.start, "end_index": self.end, "url": self.url, "title": self.title}}

    def responses(self) -> dict[str, Any]:
        """The flat form of a Responses `output_text` part's `annotations`."""
        return {"type": "url_citation", "start_index": self.start, "end_index": self.end,
                "url": self.url, "title": self.title}


def citations(text: str, sources: Iterable[Source]) -> list[Citation]:
    """The citations for the links in `text` whose URL one of `sources` has."""
    titles: dict[str, str] = {}
    numbered: dict[int, Source] = {}
    for source in sources:
        titles.setdefault(normalize_url(source.url), source.title or source.url)
        if source.number:
            numbered.setdefault(source.number, source)
    found = []
    if titles and "http" in text.lower():
        for start, end, url in find_links(text):
            title = titles.get(normalize_url(url))
            if title is not None:
                found.append(Citation(start, end, url, title))
    if numbered and "[" in text:
        for match in _NUMBERED.finditer(text):
            cited = numbered.get(int(match.group(1)))
            if cited is not None and not any(c.start <= match.start() < c.end for c in found):
                found.append(Citation(match.start(), match.end(), cited.url, cited.title or cited.url))
        found.sort(key=lambda c: c.start)
    return checked(text, found)


def checked(text: str, found: Iterable[Citation]) -> list[Citation]:
    """The citations whose span still holds their link in `text`; the others are dropped."""
    return [c for c in found if 0 <= c.start < c.end <= len(text)
            and (c.url in text[c.start:c.end] or _NUMBERED.fullmatch(text[c.start:c.end]) is not None)]
