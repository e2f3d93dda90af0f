"""Codex CLI (`@openai/codex`, pinned in tests/support/client_installs.py) against the gateway, as a
user runs it: the README's `config.toml` provider block, no feature flags, `codex exec`.

Each test scripts the fake model's side of one session and asserts what the user sees (the exit
code, the answer printed, the file edited) and what crossed the wire (Codex's requests, the
gateway's answers, the model's requests). Every session of issue 48's "done when" passes: a
catalog model (`-m gpt-5.5`) also gets Codex's client-run `tool_search` (openai-python's
ToolSearchTool), which the gateway offers the model as a function.
"""

from __future__ import annotations

import json
import struct
import zlib
from typing import Any

import pytest

from gateway.upstream.deltas import REASONING_FIELDS
from tests.clients.codex import Codex, make_codex
from tests.clients.conftest import Ran, Stack
from tests.clients.model_script import GAVE_UP, offered, steps, tool_results
from tests.fakes.upstream import Reply, text, tool_call

pytestmark = pytest.mark.timeout(300)


@pytest.fixture
def codex(stack: Stack) -> Codex:
    return make_codex(stack)


def succeeded(ran: Ran) -> None:
    assert ran.code == 0, ran.describe()
    assert all(e.status == 200 for e in ran.exchanges if e.path == "/v1/responses"), ran.describe()
    assert GAVE_UP not in ran.out, ran.describe()


def png(width: int = 2, height: int = 2) -> bytes:
    """A small valid red PNG (zlib and struct: no imaging library needed)."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    rows = b"".join(b"\x00" + b"\xff\x00\x00" * width for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")


def shell(command: str) -> tuple[str, dict[str, Any]]:
    """A call of Codex's shell tool (`exec_command`, its unified exec) running `command`."""
    return ("exec_command", {"cmd": command})


async def test_codex_prints_a_plain_answer(codex: Codex, stack: Stack) -> None:
    stack.model.responder = steps(text("Six times seven is 42."))
    ran = await codex.exec("What is six times seven?")
    succeeded(ran)
    assert "Six times seven is 42." in ran.out
    request = stack.sent()[0]
    assert request["stream"] is True and request["store"] is False  # Codex keeps its own history


async def test_codex_runs_a_shell_command_the_model_calls(codex: Codex, stack: Stack) -> None:
    stack.model.responder = steps(tool_call(shell("echo codex-was-here > proof.txt")), text("Wrote proof.txt."))
    ran = await codex.exec("Write proof.txt")
    succeeded(ran)
    assert (codex.project / "proof.txt").read_text().strip() == "codex-was-here"
    assert "Wrote proof.txt." in ran.out
    # the command's result went back to the model through the gateway
    assert len(tool_results(stack.model.requests[-1])) == 1


async def test_codex_runs_two_parallel_shell_commands(codex: Codex, stack: Stack) -> None:
    stack.model.responder = steps(tool_call(shell("echo one > a.txt"), shell("echo two > b.txt")),
                                  text("Both written."))
    ran = await codex.exec("Write a.txt and b.txt")
    succeeded(ran)
    assert (codex.project / "a.txt").read_text().strip() == "one"
    assert (codex.project / "b.txt").read_text().strip() == "two"
    assert stack.sent()[0]["parallel_tool_calls"] is True
    assert len(tool_results(stack.model.requests[-1])) == 2


async def test_codex_gets_an_answer_from_a_gateway_web_search(codex: Codex, stack: Stack) -> None:
    stack.model.responder = steps(tool_call(("web_search", {"query": "otter diet"})),
                                  text("Otters eat fish ([Result 1](https://example.org/1))."))
    ran = await codex.exec("What do otters eat? Search the web.")
    succeeded(ran)
    assert "Otters eat fish" in ran.out
    assert [r.query.get("q") for r in stack.search.requests_to("/search")] == ["otter diet"]
    frames = [f for e in stack.answers() for f in e.frames() if isinstance(f, dict)]
    done = [f["item"] for f in frames if f.get("type") == "response.output_item.done"]
    assert "web_search_call" in [item["type"] for item in done]


async def test_codex_searches_then_runs_a_command(codex: Codex, stack: Stack) -> None:
    stack.model.responder = steps(tool_call(("web_search", {"query": "otter diet"})),
                                  tool_call(shell("echo fish > otters.txt")),
                                  text("Saved what otters eat."))
    ran = await codex.exec("Find what otters eat and save it to otters.txt")
    succeeded(ran)
    assert (codex.project / "otters.txt").read_text().strip() == "fish"
    assert "Saved what otters eat." in ran.out
    # the search's results still reached the model once Codex replayed the turn (store: false)
    last = stack.model.requests[-1]
    assert any("example.org/1" in result for result in tool_results(last)), tool_results(last)


async def test_codex_round_with_a_web_search_and_a_command_runs_both(codex: Codex, stack: Stack) -> None:
    stack.model.responder = steps(tool_call(("web_search", {"query": "otter diet"}), shell("echo fish > otters.txt")),
                                  text("Searched and saved."))
    ran = await codex.exec("Find what otters eat and save it to otters.txt")
    succeeded(ran)
    assert (codex.project / "otters.txt").read_text().strip() == "fish"
    assert [r.query.get("q") for r in stack.search.requests_to("/search")] == ["otter diet"]
    first = [f["item"]["type"] for f in stack.answers()[0].frames()
             if isinstance(f, dict) and f.get("type") == "response.output_item.done"]
    assert first == ["web_search_call", "function_call"]
    assert any("example.org/1" in result for result in tool_results(stack.model.requests[-1]))


async def test_codex_replayed_reasoning_reaches_the_model(codex: Codex, stack: Stack) -> None:
    stack.model.responder = steps(tool_call(shell("echo r > r.txt"), reasoning="I should write r.txt first."),
                                  text("Done."))
    ran = await codex.exec("Write r.txt")
    succeeded(ran)
    replayed = [item for item in stack.sent()[-1]["input"] if item.get("type") == "reasoning"]
    assert replayed and replayed[0]["encrypted_content"]  # Codex asked for it with include
    assistant = next(m for m in stack.model.requests[-1]["messages"] if m.get("tool_calls"))
    assert "I should write r.txt first." in [assistant.get(f) for f in REASONING_FIELDS]


async def test_codex_views_an_image_with_view_image(codex: Codex, stack: Stack) -> None:
    (codex.project / "pixel.png").write_bytes(png())
    stack.model.responder = steps(tool_call(("view_image", {"path": str(codex.project / "pixel.png")})),
                                  text("The picture is a red square."))
    ran = await codex.exec("Look at pixel.png and tell me its colour.")
    succeeded(ran)
    assert "red square" in ran.out
    # Codex sent the picture inside the tool's output; the model got the tool's result back
    replayed = [item for item in stack.sent()[-1]["input"] if item.get("type") == "function_call_output"]
    assert replayed and "input_image" in json.dumps(replayed)
    assert tool_results(stack.model.requests[-1])


def patch_call(body: dict[str, Any]) -> Reply:
    """The model's call of `apply_patch`, offered upstream as a function of one string argument."""
    properties = offered(body)["apply_patch"]["parameters"]["properties"]
    (argument,) = properties
    patch = ("*** Begin Patch\n*** Update File: hello.py\n@@\n-print('hello')\n+print('hello, gateway')\n"
             "*** End Patch\n")
    return tool_call(("apply_patch", {argument: patch}))


async def test_codex_with_a_catalog_model_edits_a_file_with_its_freeform_apply_patch(
        codex: Codex, stack: Stack) -> None:
    (codex.project / "hello.py").write_text("print('hello')\n")
    stack.model.responder = steps(patch_call, text("Patched hello.py."))
    ran = await codex.exec("-m", "gpt-5.5", "Make hello.py greet the gateway")
    succeeded(ran)
    assert (codex.project / "hello.py").read_text() == "print('hello, gateway')\n"
    tools = {t.get("name"): t for t in stack.sent()[0]["tools"]}
    assert tools["apply_patch"]["type"] == "custom"
    replayed = [item["type"] for item in stack.sent()[-1]["input"]]
    assert "custom_tool_call" in replayed and "custom_tool_call_output" in replayed


async def test_codex_with_reasoning_effort_max_reaches_the_model(codex: Codex, stack: Stack) -> None:
    codex.configure(extra='model_reasoning_effort = "max"')
    stack.model.responder = steps(text("Thought hard: 42."))
    ran = await codex.exec("Think hard: six times seven?")
    succeeded(ran)
    assert "Thought hard: 42." in ran.out
    assert stack.sent()[0]["reasoning"]["effort"] == "max"
    assert stack.model.requests[0]["reasoning_effort"] == "max"


async def test_codex_with_the_newest_catalog_model_prints_a_plain_answer(codex: Codex, stack: Stack) -> None:
    stack.model.responder = steps(text("Six times seven is 42."))
    ran = await codex.exec("-m", "gpt-5.6-sol", "What is six times seven?")
    succeeded(ran)
    assert "Six times seven is 42." in ran.out
    assert stack.sent()[0]["input"][0]["type"] == "additional_tools"
    assert stack.model.requests[0]["tools"]  # its tools were offered to the model


def remembers(body: dict[str, Any]) -> Reply:
    """The second turn's answer: the first turn's word, if the history reached the model."""
    said = json.dumps([m for m in body["messages"] if m.get("role") == "user"])
    return text("The word was PINEAPPLE." if "PINEAPPLE" in said else "I was never told a word.")


async def test_codex_exec_resume_last_continues_the_session(codex: Codex, stack: Stack) -> None:
    stack.model.responder = steps(text("Noted."))
    first = await codex.exec("Remember the word PINEAPPLE.")
    succeeded(first)
    stack.model.responder = steps(remembers)
    ran = await codex.exec("resume", "--last", "Which word did I ask you to remember?")
    succeeded(ran)
    assert "The word was PINEAPPLE." in ran.out
    assert len(stack.sent()) == 2


def test_codex_binary_runs() -> None:
    """The cached install itself works (a broken cache would read as gateway failures above)."""
    import subprocess

    from tests.support import client_installs

    installed = client_installs.codex()
    version = subprocess.run([str(installed.executable), "--version"], capture_output=True, text=True, timeout=60)
    assert version.stdout.strip() == f"codex-cli {client_installs.CODEX_VERSION}"

