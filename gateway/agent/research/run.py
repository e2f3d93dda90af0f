"""One research run, stage by stage: plan, search (several sub-questions at once), reflect (bounded
rounds), report; its events out to the caller as they happen.

The stages run in a task of their own and hand their events over a queue, so that the run goes on
while the client reads, and a silence of `HEARTBEAT` seconds (the model writing a long report)
still sends a `Progress`. Closing the events (the client gone, a background run cancelled) cancels
that task, and with it every search, page read and model call under way.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncGenerator
from typing import TYPE_CHECKING, Any

from gateway.agent.events import AgentEvent, Finished, McpToolsListed, Progress, ReasoningDelta, TextDeltas, Usage
from gateway.agent.observer import AgentObserver
from gateway.agent.research import checks, plan
from gateway.agent.research.budgets import CHARS_PER_TOKEN, TIME, Budgets
from gateway.agent.research.gather import DATA_SOURCE_NAME, Gatherer
from gateway.agent.research.model import StageModel, system_line
from gateway.agent.research.notes import MARGIN_TOKENS, Note, condense, rendered, shorten
from gateway.agent.research.options import ResearchOptions
from gateway.agent.research.report import (
    MAX_SNIPPETS,
    MIN_REPORT_TOKENS,
    REPORT_SYSTEM,
    fit_notes,
    report_prompt,
    report_tokens,
    written_by_the_run,
)
from gateway.agent.tool_calls import ToolRunner
from gateway.agent.toolbox import ToolContext
from gateway.agent.turn import AgentRequest, AgentRun
from gateway.agent.web.tools import cut_middle
from gateway.common.message_text import text_of
from gateway.errors import GatewayError
from gateway.upstream.client import UpstreamClient

if TYPE_CHECKING:  # the MCP code loads only when a server is configured
    from gateway.agent.mcp.tools import Listing, McpFamily

log = logging.getLogger("agent_gateway.research")

#: Seconds without an event before a `Progress` goes out anyway.
HEARTBEAT = 3.0
PLAN_SYSTEM = system_line("a research planner")
REFLECT_SYSTEM = system_line("a research planner checking notes for what they leave open")
#: Earlier messages of the conversation the plan sees, and how much of each.
CONTEXT_MESSAGES = 4
CONTEXT_CHARS = 800


class ResearchRun:
    def __init__(self, upstream: UpstreamClient, runner: ToolRunner, observer: AgentObserver,
                 request: AgentRequest, options: ResearchOptions, mcp: McpFamily | None = None,
                 named: list[Listing] | None = None) -> None:
        self.options = options
        self.runner = runner
        self.mcp = mcp
        self.named = named or []  # the listings of the MCP servers the request names
        self.observer = observer
        self.budgets = Budgets(options)
        self.model = StageModel(upstream, observer, self.budgets, request.opener, request.params)
        self.question, self.context = _question(request, options.context_window)
        self._queue: asyncio.Queue[AgentEvent | None] = asyncio.Queue()
        context = ToolContext(request.web) if request.web is not None else ToolContext()
        self.gatherer = Gatherer(runner, context, self.model, self.budgets, self._queue.put_nowait, self.question,
                                 options.concurrency, options.context_window, request.first_source)
        # what the request's API key may use (AgentRequest.no_web / mcp_labels, issue 44's key access,
        # read so that a research turn keeps to it wherever those fields exist)
        self.gatherer.web = not getattr(request, "no_web", False)
        self.mcp_labels: frozenset[str] | None = getattr(request, "mcp_labels", None)
        self.status = "Planning the research"

    def emit(self, event: AgentEvent) -> None:
        if isinstance(event, Progress):
            self.status = event.description
        self._queue.put_nowait(event)

    async def events(self, turn: AgentRun) -> AsyncGenerator[AgentEvent, None]:
        worker = asyncio.get_running_loop().create_task(self._work(turn))
        worker.add_done_callback(lambda _: self._queue.put_nowait(None))
        try:
            while True:
                try:
                    async with asyncio.timeout(HEARTBEAT):
                        event = await self._queue.get()
                except TimeoutError:
                    yield Progress(self.status)
                    continue
                if event is None:
                    break
                if isinstance(event, Progress):
                    self.status = event.description
                yield event
            worker.result()  # its error, if it failed
        finally:
            if not worker.done():
                worker.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await worker

    async def _work(self, turn: AgentRun) -> None:
        # nothing goes out before the plan (a heartbeat at most): a model that fails at once is
        # still the client's real HTTP status, not an error inside a started stream
        if self.mcp is not None:
            await self._data_sources(self.mcp)
        brief, questions = await self._plan()
        listed = "\n".join(f"{i}. {q}" for i, q in enumerate(questions, 1))
        self.emit(ReasoningDelta((f"Research brief: {brief}\n\n" if brief else "") + f"Sub-questions:\n{listed}\n"))
        asked, todo, rounds = list(questions), questions, 0
        while todo:
            await self._search(todo)
            if self.budgets.ended_by is not None or rounds >= self.options.max_rounds:
                break
            rounds += 1
            follow = await self._reflect(asked)
            gatherer = self.gatherer
            said = f"\n\nReflection {rounds}: {len(gatherer.notes)} notes from {len(gatherer.read)} pages read. "
            if follow:
                said += "Still open, searching next:\n" + "\n".join(f"- {q}" for q in follow) + "\n"
            elif self.budgets.ended_by is None:
                said += "The notes cover the question.\n"
            self.emit(ReasoningDelta(said))
            todo = follow
            asked.extend(follow)
        await self._report(turn, brief)
        self.observer.turn_finished(rounds + 1, self.budgets.prompt_tokens, self.budgets.completion_tokens)

    # -- stages --------------------------------------------------------------------------------

    async def _data_sources(self, mcp: McpFamily) -> None:
        """The configured MCP servers offered to every request (`offer: all`): their tools whose name
        says they search or query are asked each sub-question, beside the web search."""
        listings = await mcp.list_offered()
        if self.mcp_labels is not None:  # the configured servers the key may use
            listings = [listing for listing in listings if listing.label in self.mcp_labels]
        listings.extend(self.named)
        for listing in listings:
            if not listing.reused:
                self.emit(McpToolsListed(listing.label, listing.item_tools, listing.error))
        tools = [tool for listing in listings for tool in listing.tools if DATA_SOURCE_NAME.search(tool.mcp[1])]
        if tools:
            runner = self.runner
            toolbox = mcp.toolbox(runner.toolbox, listings, cache=not self.named)
            self.gatherer.use_data_sources(ToolRunner(toolbox, self.observer, runner.tool_timeout), tools)

    async def _plan(self) -> tuple[str, list[str]]:
        prompt = plan.plan_prompt(self.question, self.context)
        try:
            async with asyncio.timeout(self.budgets.seconds_left()):
                answer = await self.model.ask(PLAN_SYSTEM, prompt, plan.PLAN_TOKENS)
        except TimeoutError:
            self.budgets.end(TIME)
            return "", [self.question[:plan.MAX_QUESTION_CHARS]]
        # an upstream error here, before any work, is the client's to see (its status, its message)
        return plan.read_plan(answer, self.question)

    async def _search(self, questions: list[str]) -> None:
        """Search `questions` until they are done or a budget ends the searching."""
        budgets = self.budgets
        self.gatherer.questions_total += len(questions)
        self.emit(Progress(f"Searching: {self.gatherer.status()}"))
        searching = asyncio.ensure_future(self.gatherer.search(questions))
        stop = asyncio.ensure_future(budgets.ended.wait())
        try:
            await asyncio.wait({searching, stop}, timeout=budgets.seconds_left(),
                               return_when=asyncio.FIRST_COMPLETED)
            if not searching.done():
                budgets.end(TIME)  # the wait timed out, or another budget (already named) ran out
        finally:
            stop.cancel()
            if not searching.done():
                searching.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await searching
        if not searching.cancelled() and searching.exception() is not None:
            log.error("research: the searching failed", exc_info=searching.exception())

    def _notes_within(self, window: int, frame: str, answer: int) -> str:
        room = (window - answer - MARGIN_TOKENS) * CHARS_PER_TOKEN - len(frame)
        return rendered(condense(self.gatherer.notes, max(0, room)))

    async def _reflect(self, asked: list[str]) -> list[str]:
        if not self.gatherer.notes:
            return []  # nothing read to find gaps in: the report says what could not be found
        self.emit(Progress(f"Looking for gaps; {self.gatherer.status()}"))
        window = self.options.context_window
        frame = REFLECT_SYSTEM + plan.reflect_prompt(self.question, "", asked)
        prompt = plan.reflect_prompt(self.question, self._notes_within(window, frame, plan.REFLECT_TOKENS), asked)
        if not self.budgets.afford(self.model.prompt_tokens(REFLECT_SYSTEM, prompt) + plan.REFLECT_TOKENS):
            return []
        try:
            async with asyncio.timeout(self.budgets.seconds_left()):
                answer = await self.model.ask(REFLECT_SYSTEM, prompt, plan.REFLECT_TOKENS)
        except TimeoutError:
            self.budgets.end(TIME)
            return []
        except GatewayError as exc:
            log.warning("research: the reflection failed (%s); writing the report", exc.message)
            return []
        return plan.read_follow_ups(answer, asked)

    def _report_notes(self) -> list[Note]:
        """The notes, and the snippets of search results never read (marked so), for the report."""
        gatherer = self.gatherer
        noted = {note.number for note in gatherer.notes}
        snippets = [Note(s.number, s.url, s.title, shorten(s.text, 300), read=False)
                    for number, s in sorted(gatherer.seen.items())
                    if number not in gatherer.read and number not in noted and s.text.strip()][:MAX_SNIPPETS]
        return [*gatherer.notes, *snippets]

    async def _report(self, turn: AgentRun, brief: str) -> None:
        budgets, options, gatherer = self.budgets, self.options, self.gatherer
        stopped = budgets.sentence()
        notes = self._report_notes()
        said = f"\n\n{stopped}. " if stopped else "\n\n"
        self.emit(ReasoningDelta(said + f"Writing the report from {len(gatherer.notes)} notes "
                                 f"({len(gatherer.read)} pages read, {len(gatherer.seen)} sources seen).\n"))
        self.emit(Progress(f"Writing the report; {gatherer.status()}"))
        # the prompt and the answer within the window, and within the tokens the budget has left
        window = min(options.context_window, budgets.tokens_left)
        answer = min(report_tokens(options.context_window, options.max_output_tokens),
                     max(MIN_REPORT_TOKENS, window // 3))
        text = ""
        if window >= answer + MARGIN_TOKENS * 2:
            notes_text = fit_notes(self.question, brief, notes, stopped, window, answer)
            prompt = report_prompt(self.question, brief, notes_text, stopped)
            try:
                async with asyncio.timeout(options.report_timeout):
                    text = await self.model.ask(REPORT_SYSTEM, prompt, answer)
            except TimeoutError:
                log.warning("research: the report took longer than %g s; the run writes it from the notes",
                            options.report_timeout)
            except GatewayError as exc:
                log.warning("research: the model could not write the report (%s); the run writes it from the "
                            "notes", exc.message)
        if not text.strip() and notes:
            text = written_by_the_run(self.question, notes)
        finish = "stop"
        if not text.strip():  # not even the notes' own report: nothing was found and the model failed
            text, finish = "No report could be written: no source was read and the model gave no answer.", "length"
        checked = checks.check(checks.without_sources_section(text), gatherer.seen)
        if checked.removed:
            self.observer.citations_removed(checked.removed)
            log.info("research: removed %d citation(s) of pages the run never read nor saw", checked.removed)
        head = f"*{stopped}; this report is written from the notes gathered until then.*\n\n" if stopped else ""
        tail = checks.sources_list(checked.cited, gatherer.seen, gatherer.read)
        report = head + checked.text.strip() + (f"\n\n{tail}" if tail else "") + "\n"
        self.emit(Progress(f"Done; {gatherer.status()}", done=True))
        self.emit(TextDeltas(_paragraphs(report)))
        self.emit(Usage(budgets.prompt_tokens, budgets.completion_tokens))
        turn._add({"role": "assistant", "content": report})
        self.emit(Finished(finish, tuple(turn.messages)))


def _paragraphs(text: str) -> list[str]:
    """The report in pieces of a paragraph or so, each ending where the next begins."""
    pieces, start = [], 0
    while start < len(text):
        end = text.find("\n\n", start + 200)
        end = len(text) if end < 0 else end + 2
        pieces.append(text[start:end])
        start = end
    return pieces


def _question(request: AgentRequest, window: int) -> tuple[str, str]:
    """(the question, what came before it for context): the last user message, and a few before it."""
    messages = [m for m in request.messages if m.get("role") in ("user", "assistant")]
    last = next((i for i in range(len(messages) - 1, -1, -1) if messages[i].get("role") == "user"), None)
    question = text_of(messages[last].get("content")).strip() if last is not None else ""
    earlier = messages[:last][-CONTEXT_MESSAGES:] if last is not None else []
    context = "\n".join(f"{m['role']}: {shorten(text_of(m.get('content')).strip(), CONTEXT_CHARS)}"
                        for m in earlier if text_of(m.get("content")).strip())
    if request.instructions:
        context = f"Instructions: {shorten(request.instructions.strip(), CONTEXT_CHARS)}\n{context}".strip()
    # a question longer than a third of the window (a pasted document) keeps its head and tail
    return cut_middle(question, window * 4 // 3) or "(no question given)", context


async def research_events(upstream: UpstreamClient, runner: ToolRunner, observer: AgentObserver,
                          request: AgentRequest, turn: AgentRun,
                          mcp: McpFamily | None = None) -> AsyncGenerator[AgentEvent, None]:
    """The events of one research turn (`request.research` set); `mcp`: the MCP servers (configured,
    and those the request names, opened here and closed when the turn ends however it ends)."""
    assert request.research is not None
    named: list[Listing] = []
    opened: list[Any] = []
    if request.mcp and mcp is not None:  # a URL the gateway may not reach is a 400 before any event
        named, opened = await mcp.open_request(request.mcp)
    try:
        run = ResearchRun(upstream, runner, observer, request, request.research, mcp, named)
        async for event in run.events(turn):
            yield event
    finally:
        if opened and mcp is not None:
            await mcp.close_request(opened)
