"""The report's citations, checked before the client sees them.

A numbered citation `[n]` stays only when `n` is a page the run read or a search result it saw;
`[1, 3]` and `[1-3]` are read as `[1][3]` and `[1][2][3]` and kept in that form. A link (markdown or
bare URL) stays only when its URL is one the run saw; a markdown link to anything else keeps its
label, a bare URL goes. The model's own list of sources is dropped: the run writes the list itself
from the citations kept (`sources_list`), marking search results it never read as such. What was
removed is counted, for the metric and the log.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from gateway.agent.events import Source
from gateway.common.links import find_links, normalize_url

_GROUP = re.compile(r"\[(\d{1,4}(?:\s*(?:[,;]|-|–|and)\s*\d{1,4})*)\](?!\()")
_RANGE = re.compile(r"^(\d{1,4})\s*[-–]\s*(\d{1,4})$")
_LABEL = re.compile(r"^\[((?:[^\[\]\n]|\[[^\[\]\n]*\])*)\]\(")
#: A heading (or bold line, or `Sources:` line) that starts the model's own list of sources.
_SOURCES_HEADING = re.compile(
    r"^[ \t]*(?:#{1,6}[ \t]*|\*\*|__)?[ \t]*(?:sources|references|bibliography|works cited|citations)"
    r"[ \t]*(?:\*\*|__)?[ \t]*:?[ \t]*(?:\*\*|__)?[ \t]*$", re.IGNORECASE | re.MULTILINE)
_SPACE_BEFORE_PUNCTUATION = re.compile(r"[ \t]+(?=[.,;:!?])")
_MAX_RANGE = 20


@dataclass(frozen=True)
class Checked:
    text: str
    #: Citations and links removed: numbers and URLs the run never saw.
    removed: int
    #: The source numbers the text still cites, in order of first citation.
    cited: tuple[int, ...]


def without_sources_section(text: str) -> str:
    """The report without the model's own sources list (the run adds its own)."""
    # the last such heading: a section named "Sources of ..." earlier is the report's own
    match = next(reversed(list(_SOURCES_HEADING.finditer(text))), None)
    if match is None or match.start() < len(text) // 3:
        return text
    return text[:match.start()].rstrip()


def _numbers(group: str) -> list[int]:
    numbers: list[int] = []
    for part in re.split(r"\s*(?:[,;]|and)\s*", group):
        ranged = _RANGE.match(part)
        if ranged is not None:
            low, high = int(ranged.group(1)), int(ranged.group(2))
            numbers.extend(range(low, high + 1) if 0 < high - low <= _MAX_RANGE else (low, high))
        elif part.strip().isdigit():
            numbers.append(int(part))
    return numbers


def check(text: str, allowed: Mapping[int, Source]) -> Checked:
    """`text` with every citation of a source not in `allowed` (by number, or by URL) removed."""
    urls = {normalize_url(source.url) for source in allowed.values()}
    removed = 0
    cited: dict[int, None] = {}
    out: list[str] = []
    last = 0
    for start, end, url in find_links(text):  # links first: a `[3]` inside a link's label is the link's
        if normalize_url(url) in urls:
            continue
        removed += 1
        label = _LABEL.match(text[start:end])
        out.append(text[last:start])
        out.append(label.group(1) if label is not None else "")
        last = end
    out.append(text[last:])
    text = "".join(out)

    def numbered(match: re.Match[str]) -> str:
        nonlocal removed
        kept = []
        for number in _numbers(match.group(1)):
            if number in allowed:
                kept.append(f"[{number}]")
                cited.setdefault(number)
            else:
                removed += 1
        return "".join(dict.fromkeys(kept))

    text = _GROUP.sub(numbered, text)
    if removed:
        text = _SPACE_BEFORE_PUNCTUATION.sub("", text)
    return Checked(text, removed, tuple(cited))


def sources_list(cited: tuple[int, ...], allowed: Mapping[int, Source], read: set[int]) -> str:
    """The report's list of sources: each one cited, by number, searched-only ones marked."""
    if not cited:
        return ""
    lines = ["## Sources", ""]
    for number in sorted(cited):
        source = allowed[number]
        seen = "" if number in read else " (search result; the page was not read)"
        lines.append(f"[{number}] {source.title} - {source.url}{seen}  ")
    return "\n".join(lines).rstrip()
