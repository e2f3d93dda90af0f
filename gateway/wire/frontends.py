"""What chat frontends send, read off their requests. Pure.

Open WebUI is recognised without configuration by what its requests carry: its backend talks to
an OpenAI connection through one shared aiohttp session created with no headers of its own
(backend/open_webui/utils/session_pool.py; utils/headers.py adds only Content-Type, Authorization
and, when an admin turns them on, `X-OpenWebUI-*` user headers), so every request says aiohttp's
default `User-Agent: Python/3.x aiohttp/3.x`; the SDKs name themselves (`OpenAI/Python`,
`OpenAI/JS`, `ai-sdk/...`; litellm and langchain go through the openai SDK). Any aiohttp script
says the same, so the request must also be Open WebUI's by its body: a chat offers its built-in
tools (backend/open_webui/tools/builtin.py: `get_current_timestamp`, `search_web`, `ask_user` ...),
or the question is one of its `### Task:` templates. An `X-OpenWebUI-*` header alone is enough.

Its housekeeping prompts (a title, tags, follow-ups, search queries, autocompletion) start with
`### Task:`, come one user message alone, never streamed and with no tools
(backend/open_webui/routers/tasks.py); its document template (`DEFAULT_RAG_TEMPLATE`, a chat with a
file, a knowledge base or its legacy web search) starts with `### Task:` too but is the user's own
question, streamed and with the chat's tools: the web tools stay on for it.

The gateway's own writing in an answer a frontend saved and sends back (inline progress markers,
`<think>` reasoning blocks sent to Open WebUI) is taken out of the history here, before the agent
sees it: a model that sees earlier answers begin with `🔍 query` learns to type them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from gateway.common.message_text import text_of
from gateway.wire.markers import strip_markers

TASK_PREFIX = "### Task:"
#: The first line of Open WebUI's document template (its task line), which is a user's question.
RAG_TASK = "Respond to the user query using the provided context"
_AIOHTTP_AGENT = re.compile(r"^Python/\d+\.\d+ aiohttp/\d")
_SOURCE_ID = re.compile(r'<source id="(\d+)"')
#: Reasoning blocks as Open WebUI saves them (`<details type="reasoning" ...>`) or as the gateway
#: sent them (`<think>`), whole, with the blank lines after them.
_REASONING_BLOCK = re.compile(r'<details type="reasoning"[^>]*>.*?</details>\s*|<think>.*?</think>\s*', re.DOTALL)


#: Open WebUI's built-in tools that no other client names so (backend/open_webui/tools/builtin.py).
OPEN_WEBUI_TOOLS = frozenset({
    "get_current_timestamp", "calculate_timestamp", "ask_user", "search_web", "fetch_url", "search_memories",
    "add_memory", "search_notes", "view_note", "write_note", "search_chats", "view_chat", "search_channels",
    "list_knowledge_bases", "search_knowledge_bases", "query_knowledge_files", "view_knowledge_file", "view_skill",
    "search_tools", "create_automation", "search_calendar_events", "generate_image", "execute_code",
})


def is_open_webui(headers: Mapping[str, str], tools: list[dict[str, Any]], messages: list[dict[str, Any]]) -> bool:
    """Whether a request comes from Open WebUI's backend (see the module's docstring)."""
    if any(name.lower().startswith("x-openwebui-") for name in headers):
        return True
    if not _AIOHTTP_AGENT.match(headers.get("User-Agent", "")):
        return False
    names = {t["function"]["name"] for t in tools}
    return len(names & OPEN_WEBUI_TOOLS) >= 2 or last_user_text(messages).lstrip().startswith(TASK_PREFIX)


def tool_progress(setting: str, headers: Mapping[str, str], tools: list[dict[str, Any]],
                  messages: list[dict[str, Any]]) -> str:
    """The progress display for one chat stream: AGENT_TOOL_PROGRESS as set, or under `auto`
    Open WebUI's own events for Open WebUI and inline markers (plain OpenAI chunks) for the rest."""
    if setting != "auto":
        return setting
    return "openwebui" if is_open_webui(headers, tools, messages) else "inline"


def last_user_text(messages: list[dict[str, Any]]) -> str:
    for message in reversed(messages):
        if message.get("role") == "user":
            return text_of(message.get("content"))
    return ""


def is_background_task(messages: list[dict[str, Any]], *, stream: bool, tools: bool, text: str | None = None) -> bool:
    """A frontend's housekeeping prompt (Open WebUI's title/tags/follow-ups/queries): no web tools.
    `text`: `last_user_text(messages)` when the caller has it already."""
    if stream or tools:
        return False
    text = (last_user_text(messages) if text is None else text).lstrip()
    return text.startswith(TASK_PREFIX) and not text[len(TASK_PREFIX):].lstrip().startswith(RAG_TASK)


def first_web_source(messages: list[dict[str, Any]], *, text: str | None = None) -> int:
    """The number the web's first source gets: after the `<source id="N">` documents of Open
    WebUI's document template in the question, so that `[1]` still means its first document.
    `text`: `last_user_text(messages)` when the caller has it already."""
    text = last_user_text(messages) if text is None else text
    if "<source id=" not in text:
        return 1
    return max((int(n) for n in _SOURCE_ID.findall(text)), default=0) + 1


def _cleaned(text: str) -> str:
    if "<details" in text or "<think>" in text:
        text = _REASONING_BLOCK.sub("", text)
    return strip_markers(text)


def without_gateway_writing(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The messages with the gateway's own writing taken out of earlier answers (markers,
    reasoning blocks); the list itself when there was none, as in most requests."""
    out: list[dict[str, Any]] | None = None
    for index, message in enumerate(messages):
        if message.get("role") != "assistant":
            continue
        content = message.get("content")
        if isinstance(content, str):
            cleaned: Any = _cleaned(content)
            changed = cleaned != content
        elif isinstance(content, list):
            cleaned = [{**p, "text": _cleaned(p["text"])} if isinstance(p, dict) and isinstance(p.get("text"), str)
                       else p for p in content]
            changed = cleaned != content
        else:
            continue
        if changed:
            out = out if out is not None else list(messages)
            out[index] = {**message, "content": cleaned}
    return out if out is not None else messages
