"""aider (`aider-chat`, pinned in tests/support/client_installs.py) against the gateway's Chat
Completions API, as the README configures it: `--model openai/agent-gateway` with
`--openai-api-base` and the gateway's key, an edit in the `diff` (SEARCH/REPLACE) format, then a
second turn that continues the chat (`--restore-chat-history`) and edits the file again.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.clients.conftest import Ran, Stack, client_env
from tests.clients.model_script import steps
from tests.conftest import API_KEY
from tests.fakes.upstream import Reply, text
from tests.support import client_installs

pytestmark = pytest.mark.timeout(300)


def search_replace(before: str, after: str) -> str:
    """An edit as aider's `diff` format wants it: the file's name, then a fenced SEARCH/REPLACE block."""
    return (f"Here is the change.\n\nhello.py\n```python\n<<<<<<< SEARCH\n{before}\n=======\n{after}\n"
            ">>>>>>> REPLACE\n```\n")


def edit(body: dict[str, Any]) -> Reply:
    """The model edits the file as it reads it in the request: the first turn, then the second."""
    sent = json.dumps(body["messages"])
    if "hello, aider" in sent:
        return text(search_replace("print('hello, aider')", "print('goodbye, aider')"))
    return text(search_replace("print('hello')", "print('hello, aider')"))


async def run_aider(stack: Stack, message: str, *extra: str) -> Ran:
    installed = client_installs.aider()
    project = stack.home / "project"
    project.mkdir(exist_ok=True)
    argv = [str(installed.executable), "--model", "openai/agent-gateway", "--openai-api-base", stack.url,
            "--edit-format", "diff", "--yes-always", "--no-git", "--no-check-update", "--no-analytics",
            "--no-show-model-warnings", "--no-show-release-notes", "--no-pretty", "--no-fancy-input",
            "--map-tokens", "0", "--no-detect-urls", *extra, "--message", message, "hello.py"]
    # the key by its variable (aider reads OPENAI_API_KEY); litellm's model list from its own package
    env = client_env(stack.home, {"OPENAI_API_KEY": API_KEY, "LITELLM_LOCAL_MODEL_COST_MAP": "True"})
    return await stack.run(argv, env=env, cwd=project, timeout=240)


async def test_aider_edits_a_file_in_diff_format_then_again_in_a_second_turn(stack: Stack) -> None:
    (stack.home / "project").mkdir()
    hello = stack.home / "project" / "hello.py"
    hello.write_text("print('hello')\n")
    stack.model.responder = steps(edit)

    first = await run_aider(stack, "Make hello.py greet aider.")
    assert first.code == 0, first.describe()
    assert hello.read_text() == "print('hello, aider')\n", first.describe()

    second = await run_aider(stack, "Now make it say goodbye.", "--restore-chat-history")
    assert second.code == 0, second.describe()
    assert hello.read_text() == "print('goodbye, aider')\n", second.describe()
    # the second turn carried the first one: the first request's prompt and answer were sent again
    history = json.dumps(stack.sent("/v1/chat/completions")[-1]["messages"])
    assert "Make hello.py greet aider." in history
    assert all(e.status == 200 for e in stack.answers("/v1/chat/completions"))
