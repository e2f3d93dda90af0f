"""What the wire reads off a frontend's request: Open WebUI, its housekeeping, its documents."""

from __future__ import annotations

from gateway.wire.frontends import (
    first_web_source,
    is_background_task,
    is_open_webui,
    tool_progress,
    without_gateway_writing,
)

AIOHTTP = {"User-Agent": "Python/3.11 aiohttp/3.14.5"}
OWUI_TOOLS = [{"type": "function", "function": {"name": n}} for n in ("get_current_timestamp", "ask_user")]


def user(text: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": text}]


def test_open_webui_is_its_aiohttp_agent_with_its_tools_or_templates_or_its_headers():
    assert is_open_webui(AIOHTTP, OWUI_TOOLS, user("hi"))
    assert is_open_webui(AIOHTTP, [], user("### Task:\nGenerate a concise title"))
    assert is_open_webui({"X-OpenWebUI-User-Id": "u1"}, [], user("hi"))
    assert not is_open_webui(AIOHTTP, [], user("hi"))  # any aiohttp script
    assert not is_open_webui({"User-Agent": "OpenAI/Python 1.109.1"}, OWUI_TOOLS, user("hi"))
    assert not is_open_webui({"User-Agent": "ai-sdk/openai/3.0.141"}, OWUI_TOOLS, user("hi"))


def test_auto_picks_the_display_and_a_set_mode_is_kept():
    assert tool_progress("auto", AIOHTTP, OWUI_TOOLS, user("hi")) == "openwebui"
    assert tool_progress("auto", {}, OWUI_TOOLS, user("hi")) == "inline"
    assert tool_progress("off", AIOHTTP, OWUI_TOOLS, user("hi")) == "off"


def test_housekeeping_is_an_unstreamed_tool_less_task_that_is_not_the_document_template():
    title = user("### Task:\nGenerate a concise title summarizing the chat history.")
    rag = user("### Task:\nRespond to the user query using the provided context, incorporating ...")
    assert is_background_task(title, stream=False, tools=False)
    assert not is_background_task(title, stream=True, tools=False)
    assert not is_background_task(title, stream=False, tools=True)
    assert not is_background_task(rag, stream=False, tools=False)
    assert not is_background_task(user("What do otters eat?"), stream=False, tools=False)


def test_the_web_is_numbered_after_the_documents_of_the_question():
    assert first_web_source(user('<source id="1" name="a">x</source><source id="3" name="b">y</source>')) == 4
    assert first_web_source(user("What do otters eat?")) == 1


def test_the_gateways_writing_leaves_the_history_and_other_text_stays():
    messages = [*user("q"), {"role": "assistant", "content": "`🔍 otters`\n\n<think>\nhm\n</think>\n\nFish."},
                {"role": "assistant", "content": [{"type": "text", "text": "`🔍 x`\n\nCrabs `code`."}]},
                {"role": "user", "content": "<think>mine</think>"}]
    cleaned = without_gateway_writing(messages)
    assert cleaned[1]["content"] == "Fish."
    assert cleaned[2]["content"] == [{"type": "text", "text": "Crabs `code`."}]
    assert cleaned[3] == messages[3]  # a user's own text is theirs
    plain = [*user("q"), {"role": "assistant", "content": "Fish."}]
    assert without_gateway_writing(plain) is plain
