"""The searching: for several sub-questions at once, a web search, then the best new pages read and
each condensed into a note. Bounded by AGENT_RESEARCH_CONCURRENCY (tool calls under way at once, and
model calls for notes at once) and by the run's budgets.

Every search and page read goes through the agent's own tools (fallback chains, cache, domain
filters, the metrics) and shows as a `ToolCallStarted` / `ToolCallFinished` pair; the finished
event numbers the pages (SourceNumbers) when it is emitted, so sources are numbered in the order
the client sees them. A call cut by the end of the searching (a budget, a cancel) still gets its
finished event, failed, so no item stays open.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import re
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any
from urllib.parse import quote

from gateway.agent.events import AgentEvent, Progress, Source, ToolCallFinished, ToolCallStarted
from gateway.agent.research.budgets import Budgets
from gateway.agent.research.model import StageModel, system_line
from gateway.agent.research.notes import (
    NOTE_TOKENS,
    Note,
    fallback_note,
    note_frame,
    note_prompt,
    page_room,
    read_note,
)
from gateway.agent.sources import EXTRACT_TOOL, SEARCH_TOOL, SourceNumbers
from gateway.agent.tool_calls import ToolCall, ToolRunner, tool_error
from gateway.agent.toolbox import AgentTool, ToolContext
from gateway.agent.web.tools import cut_middle
from gateway.errors import GatewayError

log = logging.getLogger("agent_gateway.research")

#: Results a search asks for, and how many new pages of them are read per sub-question.
SEARCH_RESULTS = 6
PAGES_PER_QUESTION = 3
NOTES_SYSTEM = system_line("a careful research assistant taking notes from web pages")
#: An MCP tool whose name says it searches or queries is a data source: asked every sub-question.
DATA_SOURCE_NAME = re.compile(r"search|query", re.IGNORECASE)

Emit = Callable[[AgentEvent], None]


class Gatherer:
    """The searching of one run: its notes, what it has read, and the numbers of its sources."""

    def __init__(self, runner: ToolRunner, context: ToolContext, model: StageModel, budgets: Budgets,
                 emit: Emit, question: str, concurrency: int, window: int, first_source: int = 1) -> None:
        self.runner = runner
        self.context = context
        self.model = model
        self.budgets = budgets
        self.emit = emit
        self.question = question
        self.window = window
        self.numbers = SourceNumbers(first_source)
        self.tools = asyncio.Semaphore(concurrency)
        self.thinking = asyncio.Semaphore(concurrency)
        self.notes: list[Note] = []
        #: Every source seen (search hits and pages read), by number: what a report may cite.
        self.seen: dict[int, Source] = {}
        self.read: set[int] = set()
        self._claimed: set[str] = set()  # URLs read or being read
        self._ids = itertools.count(1)
        self.questions_total = 0
        self.questions_done = 0
        #: MCP tools used as data sources (`use_data_sources`), asked beside the web search.
        self.data_sources: tuple[AgentTool, ...] = ()
        #: Whether the web is searched (False: the request's key may not use the web tools).
        self.web = True

    def use_data_sources(self, runner: ToolRunner, tools: Sequence[AgentTool]) -> None:
        """Ask these MCP tools too (`runner` knows them beside the web tools)."""
        self.runner = runner
        self.data_sources = tuple(tools)

    def status(self) -> str:
        return (f"{self.questions_done} of {self.questions_total} questions, "
                f"{len(self.read)} sources read")

    async def search(self, questions: list[str]) -> None:
        """Search every question (counted in `questions_total` by the caller), at once within the
        bounds, each followed by its page reads."""
        async with asyncio.TaskGroup() as group:
            for question in questions:
                group.create_task(self._question(question))

    async def _question(self, question: str) -> None:
        try:
            async with asyncio.TaskGroup() as group:
                group.create_task(self._web(question))
                for tool in self.data_sources:
                    group.create_task(self._data_source(question, tool))
        finally:
            self.questions_done += 1
            self.emit(Progress(self.status()))

    async def _web(self, question: str) -> None:
        if not self.web or not self.budgets.take_call():
            return
        finished = await self._call(SEARCH_TOOL, {"query": question, "limit": SEARCH_RESULTS})
        if finished is None or not finished.ok:
            return
        fresh = [s for s in finished.sources if s.url not in self._claimed][:PAGES_PER_QUESTION]
        self._claimed.update(source.url for source in fresh)
        async with asyncio.TaskGroup() as group:
            for source in fresh:
                group.create_task(self._read(question, source))

    async def _data_source(self, question: str, tool: AgentTool) -> None:
        """One MCP data source asked the question; its answer is noted as a source of its own,
        `mcp://server/tool?query=...` (MCP results carry no page address)."""
        if not self.budgets.take_call():
            return
        label, name = getattr(tool, "mcp", ("mcp", tool.name))
        address = f"mcp://{label}/{name}?query={quote(question)}"
        found = Source(address, f"{name} on {label}: {question}"[:200])
        finished = await self._call(tool.name, {_query_parameter(tool): question}, source=found)
        if finished is None or not finished.ok or not finished.output.strip():
            return
        source = finished.sources[0]
        self.read.add(source.number)
        note = await self._note(question, source, finished.output)
        if note:
            self.notes.append(Note(source.number, source.url, source.title, note))

    async def _read(self, question: str, hit: Source) -> None:
        if not self.budgets.take_call():
            return
        finished = await self._call(EXTRACT_TOOL, {"urls": [hit.url]})
        if finished is None or not finished.ok:
            return
        page = _page_text(finished.output)
        source = next(iter(finished.sources), hit)
        self.read.add(source.number)
        self.emit(Progress(self.status()))
        if not page.strip():
            return
        note = await self._note(question, source, page)
        if note:
            self.notes.append(Note(source.number, source.url, source.title, note))

    async def _note(self, question: str, source: Source, page: str) -> str | None:
        frame = note_frame(self.question, question, source.number, source.title, source.url)
        room = page_room(self.window, NOTES_SYSTEM + frame)
        if room < 400:  # a window too small for any page: its start stands as the note
            return fallback_note(page)
        prompt = note_prompt(self.question, question, source.number, source.title, source.url,
                             cut_middle(page, room))
        if not self.budgets.afford(self.model.prompt_tokens(NOTES_SYSTEM, prompt) + NOTE_TOKENS):
            return None
        async with self.thinking:
            try:
                answer = await self.model.ask(NOTES_SYSTEM, prompt, NOTE_TOKENS)
            except GatewayError as exc:  # one page's note: its own words stand in
                log.warning("research: no note for %s (%s); the page's start stands in", source.url, exc.message)
                return fallback_note(page)
        return read_note(answer)

    async def _call(self, name: str, arguments: dict[str, Any],
                    source: Source | None = None) -> ToolCallFinished | None:
        """One tool call through the agent's runner, within the concurrency bound, its events
        emitted; `source`: what a call that worked found (numbered as it is emitted), for a tool
        that names no page itself."""
        call = ToolCall(f"call_research_{next(self._ids)}", name, json.dumps(arguments))
        started = False
        finished: ToolCallFinished | None = None
        async with self.tools:
            try:
                async for event in self.runner.run([call], True, self.context, self.numbers):
                    if isinstance(event, ToolCallStarted):
                        started = True
                        # progress is the reasoning's and the status line's: no marker in the report's text
                        self.emit(replace(event, marker=None))
                    elif isinstance(event, ToolCallFinished):
                        if source is not None and event.ok:
                            number = self.numbers.number(source.url)
                            event = replace(event, sources=(replace(source, number=number, text=event.output[:2000]),))
                        finished = event
                        for source in event.sources:
                            self.seen.setdefault(source.number, source)
                        self.emit(event)
            except asyncio.CancelledError:
                if started and finished is None:
                    self.emit(ToolCallFinished(call.id, name, tool_error("stopped: the research ended"), False))
                raise
        return finished


def _page_text(output: str) -> str:
    """The text of the first page an extract returned."""
    try:
        envelope = json.loads(output)
    except ValueError:
        return ""
    pages = envelope.get("data") if isinstance(envelope, dict) else None
    if not isinstance(pages, list):
        return ""
    for page in pages:
        if isinstance(page, dict) and not page.get("error") and isinstance(page.get("content"), str):
            return str(page["content"])
    return ""


def _query_parameter(tool: AgentTool) -> str:
    """The argument a data source takes the question in: its first required string, else its first
    string, else `query`."""
    parameters = tool.schema().get("function", {}).get("parameters") or {}
    properties = parameters.get("properties") if isinstance(parameters, dict) else None
    if not isinstance(properties, dict):
        return "query"
    strings = [key for key, value in properties.items() if isinstance(value, dict) and value.get("type") == "string"]
    required = [key for key in parameters.get("required") or () if key in strings]
    return (required or strings or ["query"])[0]
