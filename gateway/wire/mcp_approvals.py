"""MCP approvals on the Responses API, OpenAI's way. Pure.

A call to an MCP tool that needs approval (the `mcp` tool's `require_approval`) is not run: the
response ends, `completed`, with an `mcp_approval_request` item (id, server_label, name,
arguments). The client answers in the next request, through `previous_response_id` or by replaying
the items with `store: false`, with an input item `{"type": "mcp_approval_response",
"approval_request_id": ..., "approve": true|false, "reason"?}`: approved, the call runs before the
model's first round (an `mcp_call` item carrying `approval_request_id`); denied, the model is told.

An answer is *open* (still to be acted on) while no `mcp_call` carries its request's id and no
assistant message follows it in `input`; a replayed history's closed denials are shown to the model
where they stand, as a call and its denial.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from gateway.agent.tool_servers import McpApproval, denied_output
from gateway.errors import InvalidRequestError, echo

REQUEST = "mcp_approval_request"
RESPONSE = "mcp_approval_response"


def _bad(message: str, param: str) -> InvalidRequestError:
    return InvalidRequestError(message, param=param)


def request_item(item: dict[str, Any], item_id: str, param: str) -> dict[str, Any]:
    """An `mcp_approval_request` of an earlier response, replayed in `input`."""
    for key in ("server_label", "name", "arguments"):
        if not isinstance(item.get(key), str):
            raise _bad(f"an mcp_approval_request item needs a string '{key}'.", f"{param}.{key}")
    return {"id": item_id, "type": REQUEST, "server_label": item["server_label"], "name": item["name"],
            "arguments": item["arguments"]}


def response_item(item: dict[str, Any], item_id: str, param: str) -> dict[str, Any]:
    """The client's `mcp_approval_response`."""
    request_id = item.get("approval_request_id")
    if not isinstance(request_id, str) or not request_id:
        raise _bad("an mcp_approval_response needs the 'approval_request_id' it answers.",
                   f"{param}.approval_request_id")
    if not isinstance(item.get("approve"), bool):
        raise _bad("an mcp_approval_response's 'approve' is true or false.", f"{param}.approve")
    reason = item.get("reason")
    if reason is not None and not isinstance(reason, str):
        raise _bad("an mcp_approval_response's 'reason' is a string.", f"{param}.reason")
    answer = {"id": item_id, "type": RESPONSE, "approval_request_id": request_id, "approve": item["approve"]}
    if reason is not None:
        answer["reason"] = reason
    return answer


def _called(items: Iterable[dict[str, Any]]) -> set[str]:
    """The request ids that `mcp_call` items carry: answered and run."""
    return {item["approval_request_id"] for item in items
            if item.get("type") == "mcp_call" and isinstance(item.get("approval_request_id"), str)}


def open_answers(items: Sequence[dict[str, Any]]) -> list[int]:
    """The indexes of the `mcp_approval_response` items of `items` still to be acted on."""
    called = _called(items)
    last_answer = max((i for i, item in enumerate(items) if item.get("type") == "message"
                       and item.get("role") == "assistant"), default=-1)
    return [index for index, item in enumerate(items) if item["type"] == RESPONSE and index > last_answer
            and item["approval_request_id"] not in called]


def call_messages(request: dict[str, Any], output: str) -> list[dict[str, Any]]:
    """An MCP call as the model sees it (its upstream name `<label>__<tool>`) and what it read."""
    name = f"{request['server_label']}__{request['name']}"[:64]
    return [{"role": "assistant", "content": "",
             "tool_calls": [{"id": request["id"], "type": "function",
                             "function": {"name": name, "arguments": request["arguments"] or "{}"}}]},
            {"role": "tool", "tool_call_id": request["id"], "content": output}]


def closed_denials(items: Sequence[dict[str, Any]]) -> dict[int, list[dict[str, Any]]]:
    """index of a closed denial in `items` -> the messages that show it (its request replayed too)."""
    if not any(item["type"] == RESPONSE for item in items):
        return {}
    opened = set(open_answers(items))
    requests = {item["id"]: item for item in items if item["type"] == REQUEST}
    return {index: call_messages(requests[item["approval_request_id"]], denied_output(item.get("reason")))
            for index, item in enumerate(items)
            if item["type"] == RESPONSE and not item["approve"] and index not in opened
            and item["approval_request_id"] in requests}


def resolve(items: Sequence[dict[str, Any]], earlier: Sequence[dict[str, Any]],
            labels: Iterable[str]) -> tuple[McpApproval, ...]:
    """The open answers of this request's input `items`, each matched with its request among `items`
    and `earlier` (the output items of the responses `previous_response_id` continues). An id no
    request has, a request already answered, or one of a server this request does not name is a
    400 naming the item's `approval_request_id`."""
    opened = open_answers(items)
    if not opened:
        return ()
    requests = {item["id"]: item for item in [*earlier, *items] if item.get("type") == REQUEST}
    called = _called(earlier)
    known = set(labels)
    seen: set[str] = set()
    approvals: list[McpApproval] = []
    for index in opened:
        answer = items[index]
        request_id = answer["approval_request_id"]
        param = f"input[{index}].approval_request_id"
        request = requests.get(request_id)
        if request is None:
            raise _bad(f"no mcp_approval_request with id '{echo(request_id)}' is in this response's context: "
                       "answer a request of the response you continue (previous_response_id) or replay it "
                       "in 'input'.", param)
        if request_id in called or request_id in seen:
            raise _bad(f"the mcp_approval_request '{echo(request_id)}' has been answered already.", param)
        if request["server_label"] not in known:
            raise _bad(f"the mcp_approval_request '{echo(request_id)}' is for the MCP server "
                       f"'{echo(request['server_label'])}', which this request's tools do not name.", param)
        seen.add(request_id)
        approvals.append(McpApproval(request_id, request["server_label"], request["name"], request["arguments"],
                                     answer["approve"], answer.get("reason")))
    return tuple(approvals)
