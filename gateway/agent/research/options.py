"""What one research run may do: set per request by the HTTP layer from the settings, the route's
context window and the request's own bounds (`max_tool_calls`)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ResearchOptions:
    #: Searches and page reads under way at once (AGENT_RESEARCH_CONCURRENCY).
    concurrency: int = 4
    #: Searches and page reads in all (AGENT_RESEARCH_MAX_CALLS, or a lower max_tool_calls).
    max_calls: int = 40
    #: Seconds of searching and reading (AGENT_RESEARCH_TIMEOUT, within AGENT_RUN_TIMEOUT).
    timeout: float = 300.0
    #: Seconds the report may take once the searching ended.
    report_timeout: float = 120.0
    #: Model tokens, prompt and completion, over the whole run (AGENT_RESEARCH_MAX_TOKENS).
    max_tokens: int = 200_000
    #: Rounds of reflection after the first searches (AGENT_RESEARCH_MAX_ROUNDS).
    max_rounds: int = 2
    #: The route's context window in tokens: every stage's prompt and answer fit in it.
    context_window: int = 32768
    #: The most tokens the report may have (the request's max_output_tokens); None: sized to the window.
    max_output_tokens: int | None = None
