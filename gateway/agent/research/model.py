"""One stage's question to the model: a plain completion (no tools, asked whole), its text with any
`<think>` block taken out, its tokens counted against the run's budget and reported to the observer."""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Mapping
from typing import Any

from gateway.agent.observer import AgentObserver, upstream_outcome
from gateway.agent.research.budgets import Budgets, estimate_tokens
from gateway.upstream.client import Opener, UpstreamClient
from gateway.upstream.deltas import Text, Texts, TokenUsage

log = logging.getLogger("agent_gateway.research")

#: Sampling fields of the client's request that reach the stages' model calls; the rest (tools,
#: tool_choice, response formats) would change what the stages ask.
PASSED_PARAMS = ("temperature", "top_p", "seed")
#: Reasoning models' thinking left in the text (llama.cpp, some Ollama builds); the stages read answers.
_THINK = re.compile(r"<think>.*?(</think>|$)", re.DOTALL | re.IGNORECASE)


def system_line(role: str) -> str:
    today = time.strftime("%A, %d %B %Y", time.gmtime())
    return f"You are {role}. Today is {today} (UTC). Answer in the language of the question."


class StageModel:
    def __init__(self, upstream: UpstreamClient, observer: AgentObserver, budgets: Budgets,
                 opener: Opener | None, params: Mapping[str, Any]) -> None:
        self.upstream = upstream
        self.observer = observer
        self.budgets = budgets
        self.opener = opener
        self.params = {key: params[key] for key in PASSED_PARAMS if key in params}

    @staticmethod
    def prompt_tokens(system: str, user: str) -> int:
        return estimate_tokens(system) + estimate_tokens(user) + 16  # + the chat template's own tokens

    async def ask(self, system: str, user: str, max_tokens: int) -> str:
        """The model's answer to one stage's prompt; the upstream's errors are raised as they come."""
        messages = [{"role": "system", "content": system}, {"role": "user", "content": user}]
        payload: dict[str, Any] = {**self.params, "messages": messages, "max_tokens": max_tokens}
        call = self.observer.upstream_call(False)
        try:
            reply = await self.upstream.whole(payload, headers=call.headers, opener=self.opener)
        except BaseException as exc:
            call.finish(upstream_outcome(exc))
            raise
        call.finish("ok")
        parts: list[str] = []
        usage: TokenUsage | None = None
        for delta in reply:
            if type(delta) is Texts:
                parts.extend(delta.texts)
            elif type(delta) is Text:
                parts.append(delta.text)
            elif type(delta) is TokenUsage:
                usage = delta
        text = "".join(parts)
        if usage is not None:
            prompt, completion = usage.prompt_tokens, usage.completion_tokens
        else:  # unreported: estimated, as the agent's own loop does
            prompt, completion = self.prompt_tokens(system, user), estimate_tokens(text)
        self.observer.round_usage(prompt, completion, estimated=usage is None)
        self.budgets.spend(prompt, completion)
        return _THINK.sub("", text).strip()
