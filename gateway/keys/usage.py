"""The agent's usage counted per key: tokens, model calls, web searches and extracts, MCP tool calls
(every MCP tool's call is observed as tool "mcp"; requests are counted at the front door, http/auth.py).

Wraps the gateway's observer (metrics, tracing): each figure goes into the key ring's pending
usage, written to the store in batches (keys/ring.py) and, with metrics on, added to
`agent_gateway_key_usage_total{key,kind}` with each batch (at most 2 s late; no counter per call).
Tokens are counted per model call as its round ends, however it ends; a round the upstream reported
no usage for (cut before its usage chunk, or a server that sends none) is estimated, and the
estimate is also counted apart (kind `estimated_tokens`, in the metrics only).
The key is the one of the request whose task runs the agent (`keyring.CURRENT_CALLER`, copied into
a stream's producer task with the context).
"""

from __future__ import annotations

from gateway.agent.observer import AgentObserver, McpCallNames, ToolCall, UpstreamCall
from gateway.keys.limits import CURRENT_TICKET
from gateway.keys.ring import CURRENT_CALLER, KeyRing

#: No turn has a trillion tokens; a figure past that is an upstream's nonsense, kept bounded.
MAX_PER_CALL = 10**12
#: every MCP tool's calls are observed as tool "mcp" (agent/tool_calls.py)
_TOOL_COUNTERS = {"web_search": "web_searches", "web_extract": "web_extracts", "mcp": "mcp_calls"}


class KeyUsageObserver(AgentObserver):
    def __init__(self, inner: AgentObserver | None, ring: KeyRing) -> None:
        self.inner = inner or AgentObserver()
        self.ring = ring

    def _count(self, kind: str, amount: int) -> None:
        caller = CURRENT_CALLER.get()
        if caller is None or amount <= 0:
            return
        amount = min(amount, MAX_PER_CALL)  # an upstream's absurd count must not overflow a BIGINT
        delta = self.ring.usage_of(caller.name)
        setattr(delta, kind, getattr(delta, kind) + amount)  # the metrics get it with the batch (app.py)

    def upstream_call(self, stream: bool) -> UpstreamCall:
        self._count("model_calls", 1)
        return self.inner.upstream_call(stream)

    def tool_call(self, tool: str, mcp: McpCallNames | None = None) -> ToolCall:
        kind = _TOOL_COUNTERS.get(tool)
        if kind is not None:
            self._count(kind, 1)
        return self.inner.tool_call(tool, mcp)

    def round_usage(self, prompt_tokens: int, completion_tokens: int, *, estimated: bool) -> None:
        """Counted per round as it ends, not per turn: a client that leaves, or cancels, before the
        turn's last usage chunk still pays for the rounds it used."""
        caller = CURRENT_CALLER.get()
        if caller is not None and (prompt_tokens > 0 or completion_tokens > 0):  # both counts, one lookup
            delta = self.ring.usage_of(caller.name)
            prompt_tokens, completion_tokens = min(max(prompt_tokens, 0), MAX_PER_CALL), \
                min(max(completion_tokens, 0), MAX_PER_CALL)
            delta.input_tokens += prompt_tokens
            delta.output_tokens += completion_tokens
            if estimated:  # in the totals too; this says how much of them is an estimate
                delta.estimated_tokens += prompt_tokens + completion_tokens
            if caller.limited and (ticket := CURRENT_TICKET.get()) is not None:  # its run's token limits
                ticket.used += prompt_tokens + completion_tokens
        self.inner.round_usage(prompt_tokens, completion_tokens, estimated=estimated)

    def turn_finished(self, tool_rounds: int, prompt_tokens: int, completion_tokens: int) -> None:
        self.inner.turn_finished(tool_rounds, prompt_tokens, completion_tokens)  # the key's tokens: per round

    def citations_removed(self, count: int) -> None:
        self.inner.citations_removed(count)
