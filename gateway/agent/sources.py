"""What a call to one of the agent's web tools is after and what it found, for the events.

The agent reads its own tools' arguments and result envelopes (providers/web.py's shapes) here, once
per call, so that wire code gets plain `queries`, `urls` and `Source`s on the events
(ToolCallStarted, ToolCallFinished) and never parses tool JSON itself. Calls to any other tool give
nothing.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from gateway.agent.events import Source

SEARCH_TOOL = "web_search"
EXTRACT_TOOL = "web_extract"
#: Sources kept from one call at most: enough for any answer, bounded for a provider that floods.
MAX_SOURCES = 50


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


def outcome(name: str, output: str) -> tuple[bool, tuple[Source, ...]]:
    """(whether it worked, the pages it returned) of a call that ran: a web tool whose envelope says
    `success: false` (every provider failed, no page could be read) did not work. Other tools'
    outputs are not read: they worked, and name no pages."""
    if name not in (SEARCH_TOOL, EXTRACT_TOOL):
        return True, ()
    try:
        envelope = json.loads(output)
    except ValueError:
        return False, ()
    if not isinstance(envelope, dict) or envelope.get("success") is not True:
        return False, ()
    return True, _sources(name, envelope)


def found(name: str, output: str) -> tuple[Source, ...]:
    """The pages a successful web tool call returned: search hits, or pages read without error."""
    return outcome(name, output)[1]


def _sources(name: str, envelope: dict[str, Any]) -> tuple[Source, ...]:
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
        if not isinstance(url, str) or not url or url in seen:
            continue
        seen.add(url)
        sources.append(Source(url, title if isinstance(title, str) and title.strip() else url))
        if len(sources) >= MAX_SOURCES:
            break
    return tuple(sources)
