"""Simon Willison's `llm` (pinned in tests/support/client_installs.py) against the gateway's
Responses API, configured as the README says: a model in `extra-openai-models.yaml` with
`responses: true` and `reasoning: true` (llm then asks for `reasoning.summary: "auto"`).

llm prints the answer on stdout and the streamed reasoning on stderr, from either
`response.reasoning_summary_text.delta` or `response.reasoning_text.delta`: a gateway that streams
the same text under both makes it print the reasoning twice.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.clients.conftest import Ran, Stack, client_env
from tests.clients.model_script import steps
from tests.conftest import API_KEY
from tests.fakes.upstream import Reply, text
from tests.support import client_installs

pytestmark = pytest.mark.timeout(180)

REASONING = "The user wants pelicans; they are noble because of their posture."


def extra_models(base_url: str) -> str:
    """The README's extra-openai-models.yaml entry."""
    return f"""- model_id: agent-gateway
  model_name: agent-gateway
  api_base: {base_url}
  api_key_name: agent-gateway
  responses: true
  reasoning: true
"""


async def run_llm(stack: Stack, *args: str) -> Ran:
    installed = client_installs.llm()
    user_dir = stack.home / "llm"
    user_dir.mkdir(exist_ok=True)
    (user_dir / "extra-openai-models.yaml").write_text(extra_models(stack.url))
    env = client_env(stack.home, {"LLM_USER_PATH": str(user_dir)})
    # the key as `llm keys set agent-gateway` stores it (keys.json in the temp user dir)
    await stack.run([str(installed.executable), "keys", "set", "agent-gateway", "--value", API_KEY],
                    env=env, cwd=stack.home)
    return await stack.run([str(installed.executable), *args], env=env, cwd=stack.home, timeout=120)


async def test_llm_prints_streamed_reasoning_once(stack: Stack) -> None:
    stack.model.responder = steps(text("Pelicans are the most noble of birds.", reasoning=REASONING, chunk_size=16))
    ran = await run_llm(stack, "-m", "agent-gateway", "Why are pelicans noble?")
    assert ran.code == 0, ran.describe()
    assert ran.out.strip() == "Pelicans are the most noble of birds."
    request = stack.sent()[0]
    assert request["stream"] is True and request["reasoning"] == {"summary": "auto"}
    assert ran.err.strip() == REASONING, ran.describe()  # on main: both streams, interleaved


async def test_llm_answers_a_plain_prompt_and_continues_the_conversation(stack: Stack) -> None:
    stack.model.responder = steps(text("Noted."))
    first = await run_llm(stack, "-m", "agent-gateway", "Remember the word PINEAPPLE.")
    assert first.code == 0 and first.out.strip() == "Noted.", first.describe()

    def remembers(body: dict[str, Any]) -> Reply:
        said = str([m for m in body["messages"] if m.get("role") == "user"])
        return text("The word was PINEAPPLE." if "PINEAPPLE" in said else "No word.")

    stack.model.responder = steps(remembers)
    second = await run_llm(stack, "-c", "Which word?")  # -c: continue the last conversation
    assert second.code == 0, second.describe()
    assert second.out.strip() == "The word was PINEAPPLE."


