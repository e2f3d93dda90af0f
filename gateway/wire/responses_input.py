"""Responses API `input` items: checked, given ids, and turned into chat-format messages. Pure.

Items are messages (content a string or parts: `input_text`, `input_image`, `input_file`, `output_text`),
the client's tool calls and their outputs (`function_call`, `custom_tool_call`, their `_output`s;
gateway/wire/responses_tool_items.py), `additional_tools`, and the `reasoning` and `web_search_call`
items of an earlier response replayed as input; each gets an `id` for
`/v1/responses/{id}/input_items`. `input_to_messages` is what the agent reads.
"""

from __future__ import annotations

import secrets
from typing import Any

from gateway.errors import InvalidRequestError, echo
from gateway.wire import ids, mcp_approvals, mcp_tool, reasoning_replay, responses_tool_items, web_search_replay
from gateway.wire.file_inputs import responses_file_part
from gateway.wire.images import image_part
from gateway.wire.responses_tool_items import TOOL_OUTPUTS, FlatName

INPUT_ROLES = ("user", "assistant", "system", "developer")
WEB_ACTIONS = ("search", "open_page", "find", "find_in_page")
WEB_STATUSES = ("in_progress", "searching", "completed", "failed", "incomplete")
TEXT_PART_TYPES = ("input_text", "output_text", "text", "refusal")


def new_id(prefix: str) -> str:
    """An OpenAI-looking id: `resp_...`, `msg_...`, `fc_...`, `fco_...`."""
    return f"{prefix}_{secrets.token_hex(24)}"


def _bad(message: str, param: str) -> InvalidRequestError:
    return InvalidRequestError(message, param=param)


def _text_of_parts(parts: list[dict[str, Any]]) -> str:
    return "\n".join(part.get("text") or part.get("refusal") or "" for part in parts)


def _normalize_parts(content: Any, role: str, param: str) -> list[dict[str, Any]]:
    """Content as a list of Responses parts (`input_text`, `input_image`, `output_text`)."""
    text_type = "output_text" if role == "assistant" else "input_text"
    if isinstance(content, str):
        part: dict[str, Any] = {"type": text_type, "text": content}
        if role == "assistant":
            part["annotations"] = []
        return [part]
    if not isinstance(content, list):
        raise _bad("message 'content' must be a string or a list of parts.", param)
    parts: list[dict[str, Any]] = []
    for index, part in enumerate(content):
        where = f"{param}[{index}]"
        kind = part.get("type") if isinstance(part, dict) else None
        if kind in TEXT_PART_TYPES:
            key = "refusal" if kind == "refusal" else "text"
            if not isinstance(part.get(key), str):
                raise _bad(f"a {kind} part needs a string '{key}'.", where)
            parts.append(dict(part))
        elif kind == "input_image":
            if role == "assistant":
                raise _bad("assistant messages cannot carry images.", where)
            if not isinstance(part.get("image_url"), str):
                raise _bad("input_image needs an 'image_url' (file_id is not supported).", where)
            parts.append(dict(part))
        elif kind == "input_file":
            if role == "assistant":
                raise _bad("assistant messages cannot carry files.", where)
            responses_file_part(part, where)
            parts.append(dict(part))
        else:
            raise _bad(f"unsupported content part type {echo(repr(kind))}.", where)
    return parts


def _parts_to_chat(parts: list[dict[str, Any]]) -> str | list[dict[str, Any]]:
    """Text-only content becomes one string (what every upstream accepts); images and files keep
    parts (a file's is read into text where the turn is prepared: gateway/files/)."""
    if all(part["type"] not in ("input_image", "input_file") for part in parts):
        return _text_of_parts(parts)
    chat_parts: list[dict[str, Any]] = []
    for part in parts:
        if part["type"] == "input_image":
            chat_parts.append(image_part(part, vision=True))  # a message's images go on as sent
        elif part["type"] == "input_file":
            chat_parts.append(responses_file_part(part, "input"))
        else:
            chat_parts.append({"type": "text", "text": part.get("text") or part.get("refusal") or ""})
    return chat_parts


def _normalize_item(item: Any, param: str) -> dict[str, Any]:
    if not isinstance(item, dict):
        raise _bad("each input item must be an object.", param)
    kind = item.get("type", "message" if "role" in item else None)
    given_id = item.get("id") if isinstance(item.get("id"), str) and item["id"] else None  # "" is no id
    if given_id is not None:
        ids.check(given_id, f"{param}.id", item_id=True)
    if kind == "message":
        role = item.get("role")
        if role not in INPUT_ROLES:
            raise _bad(f"message 'role' must be one of {', '.join(INPUT_ROLES)}.", f"{param}.role")
        parts = _normalize_parts(item.get("content"), role, f"{param}.content")
        return {"id": given_id or new_id("msg"), "type": "message", "role": role, "content": parts,
                "status": "completed"}
    if kind == "function_call":
        return responses_tool_items.function_call(item, given_id or new_id("fc"), param)
    if kind == "custom_tool_call":
        return responses_tool_items.custom_tool_call(item, given_id or new_id("ctc"), param)
    if kind in TOOL_OUTPUTS:
        return _tool_output(item, kind, given_id, param)
    if kind == "additional_tools":
        return responses_tool_items.additional_tools(item, given_id or new_id("at"), param)
    if kind == "tool_search_call":
        return responses_tool_items.tool_search_call(item, given_id or new_id("tsc"), param)
    if kind == "tool_search_output":
        return responses_tool_items.tool_search_output(item, given_id or new_id("tso"), param)
    if kind == "reasoning":
        # A reasoning item the client sends back (a previous response's output as input): kept
        # with the input items; sent upstream only in the open turn (gateway/wire/reasoning_replay.py).
        summary, content = item.get("summary", []), item.get("content")
        if not isinstance(summary, list) or not (content is None or isinstance(content, list)):
            raise _bad("a reasoning item needs a 'summary' list (and 'content', if any, a list).", f"{param}.summary")
        normalized = {"id": given_id or new_id("rs"), "type": "reasoning", "summary": summary}
        if content is not None:
            normalized["content"] = content
        if isinstance(item.get("encrypted_content"), str):  # sealed by the gateway: read back, not here
            normalized["encrypted_content"] = item["encrypted_content"]
        return normalized
    if kind == "web_search_call":
        return _web_search_call(item, given_id, param)
    if kind == "mcp_list_tools":
        return mcp_tool.replayed_list(item, given_id or new_id("mcpl"), param)
    if kind == "mcp_call":
        return mcp_tool.replayed_call(item, given_id or new_id("mcp"), param)
    if kind == mcp_approvals.REQUEST:
        return mcp_approvals.request_item(item, given_id or new_id("mcpr"), param)
    if kind == mcp_approvals.RESPONSE:
        return mcp_approvals.response_item(item, given_id or new_id("mcpa"), param)
    raise _bad(
        f"unsupported input item type {echo(repr(kind))}: use messages, function_call, function_call_output, "
        "custom_tool_call, custom_tool_call_output, tool_search_call, tool_search_output, additional_tools, "
        "reasoning, web_search_call, mcp_list_tools, mcp_call, mcp_approval_request or mcp_approval_response.",
        f"{param}.type",
    )


def _tool_output(item: dict[str, Any], kind: str, given_id: str | None, param: str) -> dict[str, Any]:
    """A function's or custom tool's output: a string, or parts (text and images; an output with
    images keeps its parts, for the model and for input_items)."""
    if not isinstance(item.get("call_id"), str):
        raise _bad(f"a {kind} item needs a string 'call_id'.", f"{param}.call_id")
    output = item.get("output")
    if isinstance(output, list):
        parts = _normalize_parts(output, "tool", f"{param}.output")
        if not any(part["type"] == "input_image" for part in parts):
            output = _text_of_parts(parts)
        else:
            output = parts
    elif not isinstance(output, str):
        raise _bad(f"a {kind} item needs an 'output' string or a list of parts.", f"{param}.output")
    prefix = "fco" if kind == "function_call_output" else "ctco"
    return {"id": given_id or new_id(prefix), "type": kind, "call_id": item["call_id"], "output": output,
            "status": "completed"}


def _web_search_call(item: dict[str, Any], given_id: str | None, param: str) -> dict[str, Any]:
    """A web search the gateway ran in an earlier turn, replayed: kept as it is, never run again."""
    action = item.get("action")
    if not isinstance(action, dict) or action.get("type") not in WEB_ACTIONS:
        raise _bad(f"a web_search_call item needs an 'action' whose type is one of {', '.join(WEB_ACTIONS)}.",
                   f"{param}.action")
    status = item.get("status", "completed")
    if status not in WEB_STATUSES:
        raise _bad(f"a web_search_call 'status' must be one of {', '.join(WEB_STATUSES)}.", f"{param}.status")
    _check_action_fields(action, f"{param}.action")
    return {"id": given_id or new_id("ws"), "type": "web_search_call", "status": status, "action": dict(action)}


def _check_action_fields(action: dict[str, Any], param: str) -> None:
    """The optional fields of a replayed action, as OpenAI types them (openapi.json says the same)."""
    for name in ("query", "url"):
        if action.get(name) is not None and not isinstance(action[name], str):
            raise _bad(f"a web_search_call's 'action.{name}' must be a string.", f"{param}.{name}")
    queries = action.get("queries")
    if queries is not None and not (isinstance(queries, list) and all(isinstance(q, str) for q in queries)):
        raise _bad("a web_search_call's 'action.queries' must be a list of strings.", f"{param}.queries")
    sources = action.get("sources")
    if sources is None:
        return
    if not isinstance(sources, list):
        raise _bad("a web_search_call's 'action.sources' must be a list.", f"{param}.sources")
    for i, source in enumerate(sources):
        if (not isinstance(source, dict) or not isinstance(source.get("url"), str)
                or source.get("type", "url") != "url"):
            raise _bad("each of a web_search_call's 'action.sources' is {\"type\": \"url\", \"url\": \"...\"}.",
                       f"{param}.sources[{i}]")


def normalize_input(value: Any, param: str = "input") -> list[dict[str, Any]]:
    """`input` (a string or a list of items) as normalized items, each with an `id`; `param`
    names the field in errors (a conversation's `items` are checked the same way)."""
    if isinstance(value, str):
        return [_normalize_item({"role": "user", "content": value}, param)]
    if not isinstance(value, list):
        raise _bad(f"'{param}' must be a string or a list of input items.", param)
    return [_normalize_item(item, f"{param}[{index}]") for index, item in enumerate(value)]


def input_to_messages(items: list[dict[str, Any]], flat_name: FlatName | None = None, vision: bool = False, *,
                      replay_searches: bool = False,
                      unseal: reasoning_replay.Unseal | None = None) -> list[dict[str, Any]]:
    """Normalized input items as chat-format messages.

    Consecutive tool calls (`function_call`, `custom_tool_call`) join one assistant message
    (parallel calls), attached to a directly preceding assistant text message if there is one,
    under the upstream's function names (`flat_name`: gateway/wire/responses_tools.py); their
    outputs become `tool` messages, any images they returned following in a user message
    (images with `vision`, else notes). Replayed `web_search_call` items become a short note of
    what was searched, in the assistant message that follows them (so roles still alternate); with
    `replay_searches`, those of the open turn become web_search calls to run again
    (gateway/wire/web_search_replay.py) and its `reasoning` items the reasoning of the calls they
    led to (reasoning_replay.py).
    """
    messages: list[dict[str, Any]] = []
    note: dict[str, Any] | None = None  # the assistant message holding notes, while it is the last
    images: list[dict[str, Any]] = []  # tool outputs' image parts, shown once their run of tool messages ends
    open_turn = web_search_replay.open_turn_start(items) if replay_searches else len(items)
    thought: tuple[str, str] | None = None  # (field, text) of the open turn's reasoning, until its calls
    denials = mcp_approvals.closed_denials(items)
    for index, item in enumerate(items):
        kind = item["type"]
        if images and kind not in TOOL_OUTPUTS and kind != "tool_search_output":
            messages.append({"role": "user", "content": images})
            images = []
        if kind == "reasoning":
            thought = reasoning_replay.replayed(item, unseal) if index >= open_turn else None
        elif kind in TOOL_OUTPUTS or kind == "tool_search_output" or item.get("role") == "user":
            thought = None
        if kind == "web_search_call":
            call = web_search_replay.search_call(item) if index >= open_turn else None
            if call is not None:
                web_search_replay.add_search_call(messages, call, web_search_replay.web_note(item["action"]))
                if thought is not None:  # the round's reasoning led to its searches first
                    owner = next(m for m in reversed(messages) if m["role"] == "assistant")
                    owner[thought[0]], thought = thought[1], None
                continue
            if note is None or not messages or messages[-1] is not note:
                note = {"role": "assistant", "content": ""}
                messages.append(note)
            note["content"] = " ".join(filter(None, [note["content"], web_search_replay.web_note(item["action"])]))
        elif kind == "message":
            content = _parts_to_chat(item["content"])
            if note is not None and messages and messages[-1] is note and item["role"] == "assistant" \
                    and isinstance(content, str):
                note["content"] = f"{note['content']}\n\n{content}"
            else:
                messages.append({"role": item["role"], "content": content})
        elif kind in ("function_call", "custom_tool_call", "tool_search_call"):
            call = responses_tool_items.tool_call(item, flat_name)
            last = messages[-1] if messages else None
            if last is not None and last["role"] == "assistant":
                last.setdefault("tool_calls", []).append(call)
            else:
                last = {"role": "assistant", "content": "", "tool_calls": [call]}  # "": see agent/loop.py
                messages.append(last)
            if thought is not None:
                last[thought[0]], thought = thought[1], None
        elif kind == "mcp_call":
            messages.extend(mcp_tool.call_messages(item))
        elif index in denials:  # an earlier turn's denied approval, replayed
            messages.extend(denials[index])
        elif kind in TOOL_OUTPUTS:
            message, shown = responses_tool_items.tool_messages(item, vision)
            messages.append(message)
            images += shown
        elif kind == "tool_search_output":
            messages.append(responses_tool_items.search_message(item, flat_name))
    if images:
        messages.append({"role": "user", "content": images})
    return web_search_replay.without_marks(messages) if replay_searches else messages


# ---- the request ----------------------------------------------------------------------------
