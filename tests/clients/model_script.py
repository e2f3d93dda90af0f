"""The fake model's side of a client session: what to answer at each step of a turn, as a model would.

A client's turn goes back and forth: the model calls tools, the client (or the gateway, for its own
`web_search`) runs them and sends the results, the model answers. `steps(a, b, c)` answers the
gateway's request with the step the conversation has reached: the number of tool-calling rounds
since the user last spoke (a user message that follows a tool result, as an image from a tool is
passed on, is not the user speaking). So a scenario reads as the session it scripts, and a client
that retries or resumes gets the answer a model would give at that point.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from tests.fakes.upstream import Reply

Responder = Callable[[dict[str, Any]], Reply]
Step = Reply | Responder
#: A session that keeps calling tools past this many requests is stopped with this answer, so a
#: loop (the model never sees a tool's result) fails the test on its assertions, not its timeout.
MAX_REQUESTS = 12
GAVE_UP = "GAVE-UP: the session looped"


def rounds_since_user(messages: list[dict[str, Any]]) -> int:
    """Tool-calling assistant messages after the user's latest own message."""
    start = 0
    for i, message in enumerate(messages):
        if message.get("role") == "user" and not (i and messages[i - 1].get("role") == "tool"):
            start = i
    return sum(1 for m in messages[start:] if m.get("role") == "assistant" and m.get("tool_calls"))


def steps(*replies: Step) -> Responder:
    """Step n of a turn answers with `replies[n]` (the last one from there on); a step may be a
    function of the request (to fill a tool's arguments by the schema the gateway offered)."""
    seen = 0

    def respond(body: dict[str, Any]) -> Reply:
        nonlocal seen
        seen += 1
        if seen > MAX_REQUESTS:
            return Reply(text=GAVE_UP)
        step = replies[min(rounds_since_user(body.get("messages", [])), len(replies) - 1)]
        return step if isinstance(step, Reply) else step(body)

    return respond


def offered(body: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The tools the gateway offered the model, by name: each function's JSON schema."""
    return {t["function"]["name"]: t["function"] for t in body.get("tools", []) if t.get("type") == "function"}


def tool_results(body: dict[str, Any]) -> list[str]:
    """The text of every tool result the model was sent in this request, in order."""
    out: list[str] = []
    for message in body.get("messages", []):
        if message.get("role") == "tool":
            content = message.get("content")
            out.append(content if isinstance(content, str) else json.dumps(content))
    return out
