"""What a call to one of the agent's web tools is after and what it found, for the events.

The agent reads its own tools' arguments and result envelopes (providers/web.py's shapes) here, once
per call, so that wire code gets plain `queries`, `urls` and `Source`s on the events
(ToolCallStarted, ToolCallFinished) and never parses tool JSON itself. Calls to any other tool give
nothing.

Every page a turn's web tools return gets a number, the same for the same URL all turn long, and
the tool's output the model reads carries it (`"id": 3` on the hit or page): the model cites by
number (`[3]`), which frontends draw as chips and the wire turns into `url_citation`s.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gateway.agent.events import Source
from gateway.common import json_in, json_out

SEARCH_TOOL = "web_search"
EXTRACT_TOOL = "web_extract"
#: Sources kept from one call at most: enough for any answer, bounded for a provider that floods.
MAX_SOURCES = 50
#: What a source keeps of a page's text (a snippet is shorter): enough to show what it says.
MAX_SOURCE_TEXT = 2000


def wanted(name: str, arguments: Mapping[str, Any] | str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(queries, urls) the call asks for; empty for other tools or arguments of the wrong shape."""
    if not isinstance(arguments, Mapping):
        return (), ()
    if name == SEARCH_TOOL:
        query = arguments.get("query")
        return ((query.strip(),) if isinstance(query, str) and query.strip() else ()), ()
    if name == EXTRACT_TOOL:
        urls = arguments.get("urls")
        if isinstance(urls, str):
            urls = [urls]
        if isinstance(urls, list):
            return (), tuple(u for u in urls if isinstance(u, str) and u)[:MAX_SOURCES]
    return (), ()


class SourceNumbers:
    """One turn's numbering of the pages its web tools returned: 1, 2, ... in the order first
    seen, a URL seen again keeps its number. `first` is the number of the first page (a request
    whose documents already hold [1] and [2] numbers the web from 3)."""

    def __init__(self, first: int = 1) -> None:
        self._numbers: dict[str, int] = {}
        self._next = first

    def number(self, url: str) -> int:
        if url not in self._numbers:
            self._numbers[url] = self._next
            self._next += 1
        return self._numbers[url]

    def outcome(self, name: str, output: str) -> tuple[bool, str, tuple[Source, ...]]:
        """(whether it worked, the output with each page's number, the pages it returned) of a call
        that ran: a web tool whose envelope says `success: false` (every provider failed, no page
        could be read) did not work. Other tools' outputs are not read: they worked, and name no pages."""
        if name not in (SEARCH_TOOL, EXTRACT_TOOL):
            return True, output, ()
        try:
            # orjson's way (gateway/common/json_in.py): the stdlib's parse and dump of the output
            # were a tenth of a web_search round's own CPU. Our tools escape lone surrogates
            # (web_tools.to_json); "surrogatepass" keeps any other text's from failing the encode.
            envelope = json_in.loads(output.encode("utf-8", "surrogatepass"))
        except ValueError:
            return False, output, ()
        if not isinstance(envelope, dict) or envelope.get("success") is not True:
            return False, output, ()
        found = self._sources(name, envelope)
        if not found:
            return True, output, found
        return True, json_out.dumps(envelope, ensure_ascii=True).decode(), found

    def _sources(self, name: str, envelope: dict[str, Any]) -> tuple[Source, ...]:
        """The pages of the envelope, each entry numbered in place (`id`)."""
        data = envelope.get("data")
        entries = data.get("web") if name == SEARCH_TOOL and isinstance(data, dict) else data
        if not isinstance(entries, list):
            return ()
        sources: list[Source] = []
        seen: set[str] = set()
        for entry in entries:
            if not isinstance(entry, dict) or entry.get("error"):
                continue
            url, title = entry.get("url"), entry.get("title")
            if not isinstance(url, str) or not url or url in seen or len(sources) >= MAX_SOURCES:
                continue
            seen.add(url)
            number = self.number(url)
            entry["id"] = number
            text = entry.get("description") if name == SEARCH_TOOL else entry.get("content")
            sources.append(Source(url, title if isinstance(title, str) and title.strip() else url, number,
                                  text[:MAX_SOURCE_TEXT].strip() if isinstance(text, str) else ""))
        return tuple(sources)


def outcome(name: str, output: str) -> tuple[bool, tuple[Source, ...]]:
    """(whether it worked, the pages it returned), numbered as the only call of a turn."""
    worked, _, found = SourceNumbers().outcome(name, output)
    return worked, found


def found(name: str, output: str) -> tuple[Source, ...]:
    """The pages a successful web tool call returned: search hits, or pages read without error."""
    return outcome(name, output)[1]
