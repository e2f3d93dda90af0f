"""Replayed `web_search_call` items as the upstream reads them. Pure.

A client that keeps its own history (`store: false`, or without `previous_response_id`) sends back
the `web_search_call` items of the gateway's earlier output; their results are not in them (OpenAI's
item has none, and Codex CLI keeps only `status` and `action`). A search of an earlier turn, which
the model answered from, becomes a short note of what was searched in the next assistant message.

A search of the *open* turn (after the last user message: the model has not answered the user
since) becomes what the gateway's own loop would have kept: an assistant `web_search` tool call
and a tool message, the note at first. The agent runs those calls again (`AgentRequest.replayed`:
the web tools' cache answers one run within `web.cache_ttl`) and puts the results in place of the
note, so that a round in which the model called web_search beside one of the client's tools, which
ended the turn with the client's call, reaches the model with its results on the next request.
"""

from __future__ import annotations

import json
from typing import Any

from gateway.agent.sources import SEARCH_TOOL

#: (call id, tool name, arguments JSON): a call of the gateway's own tools to run again
ReplayedCall = tuple[str, str, str]


def open_turn_start(items: list[dict[str, Any]]) -> int:
    """The index of the first item after the last user message (0 when there is none)."""
    for index in range(len(items) - 1, -1, -1):
        item = items[index]
        if item["type"] == "message" and item["role"] == "user":
            return index + 1
    return 0


def search_call(item: dict[str, Any]) -> dict[str, Any] | None:
    """The chat tool call a replayed search stands for; None for other actions or no query."""
    action = item["action"]
    query = action.get("query") if action["type"] == "search" else None
    if not isinstance(query, str) or not query.strip():
        return None
    return {"id": item["id"], "type": "function",
            "function": {"name": SEARCH_TOOL, "arguments": json.dumps({"query": query}, ensure_ascii=False)}}


def replayed_calls(items: list[dict[str, Any]]) -> tuple[ReplayedCall, ...]:
    """The open turn's replayed searches, to run again (see the module's docstring)."""
    calls = []
    for item in items[open_turn_start(items):]:
        call = search_call(item) if item["type"] == "web_search_call" else None
        if call is not None:
            calls.append((call["id"], call["function"]["name"], call["function"]["arguments"]))
    return tuple(calls)


def add_search_call(messages: list[dict[str, Any]], call: dict[str, Any], note: str) -> None:
    """Append a replayed search as an assistant tool call and its tool message (the note until the
    agent has the results). Searches in a row join one assistant message, their tool messages
    after it; a call after an assistant's text joins that message, as the round's own would."""
    last = messages[-1] if messages else None
    if last is not None and last["role"] == "tool" and last.get("replayed_search"):
        # the previous replayed search's round: find its assistant message, after its tool messages
        owner = next(m for m in reversed(messages) if m["role"] == "assistant")
        owner["tool_calls"].append(call)
    elif last is not None and last["role"] == "assistant" and not last.get("tool_calls"):
        last["tool_calls"] = [call]
    else:
        messages.append({"role": "assistant", "content": "", "tool_calls": [call]})
    messages.append({"role": "tool", "tool_call_id": call["id"], "content": note, "replayed_search": True})


def without_marks(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The messages without the marks add_search_call leaves for itself."""
    return [{k: v for k, v in m.items() if k != "replayed_search"} if "replayed_search" in m else m
            for m in messages]


def web_note(action: dict[str, Any]) -> str:
    """What a replayed web_search_call tells the model: what was searched or read (its results are
    not in the item; a client that wants the model to have them chains with previous_response_id)."""
    kind = action["type"]
    url = action.get("url") if isinstance(action.get("url"), str) else None
    if kind == "open_page":
        return f"(opened {url})" if url else "(opened a web page)"
    if kind in ("find", "find_in_page"):
        return f"(searched {url or 'a web page'} for {action.get('pattern')!r})"
    listed, found = action.get("queries"), action.get("sources")
    asked = [action.get("query"), *(listed if isinstance(listed, list) else [])]
    queries = [q for q in asked if isinstance(q, str) and q]
    found = [s.get("url") for s in (found if isinstance(found, list) else []) if isinstance(s, dict)]
    urls = [u for u in found if isinstance(u, str)]
    said = "; ".join(repr(q) for q in dict.fromkeys(queries))
    return f"(searched the web{' for ' + said if said else ''}{'; found ' + ', '.join(urls) if urls else ''})"
