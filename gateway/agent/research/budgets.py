"""A research run's budgets: tool calls, wall time and model tokens.

The searching stops when one runs out; the report is still written, from the notes so far, and
says which budget ended the run (`sentence`). Each budget is checked before the work it pays for
(a call is taken before the search starts, a model call's tokens are estimated before it is sent),
so a run never goes past a budget by more than the calls already under way. `ended` is set when one
runs out, for the stage that waits on the searches to stop them at once.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from gateway.agent.research.options import ResearchOptions

CALLS = "calls"
TIME = "time"
TOKENS = "tokens"
#: Characters a token holds, OpenAI's rule of thumb: the estimate of a prompt before it is sent.
CHARS_PER_TOKEN = 4


def estimate_tokens(text: str) -> int:
    return -(-len(text) // CHARS_PER_TOKEN)


class Budgets:
    def __init__(self, options: ResearchOptions, clock: Callable[[], float] = time.monotonic) -> None:
        self.options = options
        self._clock = clock
        self.calls_left = options.max_calls
        self.calls_made = 0
        self.deadline = clock() + options.timeout
        self.prompt_tokens = 0
        self.completion_tokens = 0
        #: Which budget ended the searching (CALLS, TIME, TOKENS), None while none has.
        self.ended_by: str | None = None
        self.ended = asyncio.Event()

    @property
    def tokens_used(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    @property
    def tokens_left(self) -> int:
        return max(0, self.options.max_tokens - self.tokens_used)

    def report_reserve(self) -> int:
        """Tokens kept for the report while searching: a full window's worth, at most a third."""
        return min(self.options.context_window, self.options.max_tokens // 3)

    def seconds_left(self) -> float:
        return max(0.0, self.deadline - self._clock())

    def end(self, why: str) -> None:
        if self.ended_by is None:
            self.ended_by = why
            self.ended.set()

    def take_call(self) -> bool:
        """One search or page read, if the budgets allow it (else the searching ends)."""
        if self.ended_by is not None:
            return False
        if self.seconds_left() <= 0:
            self.end(TIME)
            return False
        if self.calls_left <= 0:
            self.end(CALLS)
            return False
        self.calls_left -= 1
        self.calls_made += 1
        return True

    def afford(self, tokens: int) -> bool:
        """Whether a model call of about `tokens` fits beside the report's reserve (else the
        searching ends on the token budget)."""
        if self.ended_by is not None:
            return False
        if self.tokens_used + tokens + self.report_reserve() > self.options.max_tokens:
            self.end(TOKENS)
            return False
        return True

    def spend(self, prompt: int, completion: int) -> None:
        self.prompt_tokens += prompt
        self.completion_tokens += completion

    def sentence(self) -> str:
        """What the report says of the budget that ended the run ("" when none did)."""
        options = self.options
        if self.ended_by == CALLS:
            return (f"The research stopped at its limit of {options.max_calls} searches and page reads "
                    "(max_tool_calls / AGENT_RESEARCH_MAX_CALLS)")
        if self.ended_by == TIME:
            return f"The research stopped at its time limit of {options.timeout:g} s (AGENT_RESEARCH_TIMEOUT)"
        if self.ended_by == TOKENS:
            return (f"The research stopped at its token budget of {options.max_tokens} tokens "
                    "(AGENT_RESEARCH_MAX_TOKENS)")
        return ""
