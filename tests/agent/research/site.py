"""A small web for the research loop's own tests: a SearXNG search whose hits are pages served by the
same app on 127.0.0.1, and a scripted model that answers the research stages by their prompts.

The search records each query's start and end on this process's clock and how many were answered at
once (`max_in_flight`); `delay` holds every answer, and a client that leaves during it is counted
(`abandoned`). The model reads the page text in a notes prompt and copies its facts, so what the
report holds is what the run read.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from html import escape
from typing import Any

from aiohttp import web

from tests.fakes.searxng import FakeSearxng
from tests.fakes.upstream import Reply


@dataclass(frozen=True)
class Page:
    slug: str
    title: str
    words: tuple[str, ...]
    facts: tuple[str, ...]
    filler: str = ""


PAGES = (
    Page("sanctuary", "The Ellison Otter Sanctuary", ("ellison", "sanctuary", "otter"),
         ("The Ellison Otter Sanctuary is on Kestrel Island.",)),
    Page("lighthouse", "Kestrel Island Lighthouse", ("kestrel", "lighthouse"),
         ("The Kestrel Island lighthouse was designed by Tomas Varga in 1887.",)),
    Page("ferries", "Island ferries", ("island", "ferry", "otter"),
         ("Ferries to Kestrel Island leave twice a day.",)),
    Page("otters", "River otters", ("otter", "otters", "founded"),
         ("River otters eat mostly fish.",)),
)
QUESTION = "Who designed the lighthouse on the island of the Ellison Otter Sanctuary?"
SUB_QUESTIONS = ("Where is the Ellison Otter Sanctuary?", "Which otter facts matter?",
                 "Which ferries serve the island?")
FOLLOW_UP = "Who designed the Kestrel Island lighthouse?"
INVENTED = "https://invented.example.org/rumours"


@dataclass
class Span:
    query: str
    start: float
    end: float | None = None


class MiniWeb(FakeSearxng):
    def __init__(self, pages: tuple[Page, ...] = PAGES) -> None:
        super().__init__()
        self.pages = {page.slug: page for page in pages}
        self.delay: float = 0.0
        self.spans: list[Span] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self.abandoned = 0
        self.page_reads: list[str] = []

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/search", self._timed_search)
        app.router.add_get("/page/{slug}", self._page)
        return app

    async def _timed_search(self, request: web.Request) -> web.StreamResponse:
        span = Span(request.query.get("q", ""), time.monotonic())
        self.spans.append(span)
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            waited = 0.0
            while waited < self.delay:  # watching the connection: a client that leaves is noticed at once
                if request.transport is None or request.transport.is_closing():
                    self.abandoned += 1
                    return web.Response(status=499)
                await asyncio.sleep(0.02)
                waited += 0.02
            return await self.reply(request)
        except asyncio.CancelledError:
            self.abandoned += 1
            raise
        finally:
            self.in_flight -= 1
            span.end = time.monotonic()

    def _search(self, recorded: Any) -> Any:
        query = recorded.query.get("q", "")
        words = set(re.findall(r"[a-z]+", query.lower()))
        hits = [page for page in self.pages.values() if words & set(page.words)]
        return {"query": query, "number_of_results": len(hits), "answers": [], "corrections": [], "infoboxes": [],
                "suggestions": [], "unresponsive_engines": [],
                "results": [{"url": f"{self.base_url}/page/{p.slug}", "title": p.title, "content": f"About {p.title}.",
                             "engine": "duckduckgo", "engines": ["duckduckgo"], "score": 1.0, "category": "general"}
                            for p in hits]}

    async def _page(self, request: web.Request) -> web.Response:
        page = self.pages.get(request.match_info["slug"])
        if page is None:
            return web.Response(status=404, text="not here")
        self.page_reads.append(page.slug)
        body = "".join(f"<p>{escape(fact)}</p>" for fact in page.facts) + (f"<p>{escape(page.filler)}</p>"
                                                                           if page.filler else "")
        html = f"<!doctype html><html><head><title>{escape(page.title)}</title></head><body><article>" \
               f"<h1>{escape(page.title)}</h1>{body}</article></body></html>"
        return web.Response(text=html, content_type="text/html")

    async def all_abandoned_within(self, seconds: float) -> bool:
        """Whether every search started is abandoned (its connection closed) within `seconds`."""
        async with asyncio.timeout(seconds):
            while self.abandoned < len(self.spans):
                await asyncio.sleep(0.01)
        return True

    def overlapping(self) -> bool:
        """Whether two searches were under way at the same moment."""
        spans = sorted((s.start, s.end or s.start) for s in self.spans)
        return any(later[0] < earlier[1] for earlier, later in zip(spans, spans[1:], strict=False))


def facts() -> list[str]:
    return [fact for page in PAGES for fact in page.facts]


def _stage(prompt: str) -> str:
    if "Plan web research" in prompt:
        return "plan"
    if "Take notes from this page" in prompt:
        return "notes"
    if "Look for gaps" in prompt:
        return "reflect"
    if "Write the research report now" in prompt:
        return "report"
    return "other"


@dataclass
class StageModel:
    """The fake upstream's responder for research runs: one answer per stage, from the prompt."""

    invent: bool = True
    delay: dict[str, float] = field(default_factory=dict)
    overrides: dict[str, Callable[[str], str]] = field(default_factory=dict)
    prompts: list[tuple[str, str, int]] = field(default_factory=list)  # (stage, prompt, max_tokens)
    #: the server's context in tokens (4 characters each): a longer prompt + max_tokens is vLLM's 400
    window: int | None = None
    #: stage -> an HTTP status the server answers that stage with (a model server failing)
    errors: dict[str, int] = field(default_factory=dict)

    def __call__(self, body: dict[str, Any]) -> Reply:
        prompt = "\n".join(str(m.get("content") or "") for m in body["messages"])
        stage = _stage(prompt)
        self.prompts.append((stage, prompt, body.get("max_tokens", 0)))
        if stage in self.errors:
            return Reply(status=self.errors[stage], error_body={"error": {"message": "model server down",
                                                                          "type": "server_error"}})
        if self.window is not None and len(prompt) // 4 + body.get("max_tokens", 0) > self.window:
            message = (f"This model's maximum context length is {self.window} tokens. However, you requested "
                       f"{len(prompt) // 4 + body.get('max_tokens', 0)} tokens. Please reduce the length.")
            return Reply(status=400, error_body={"object": "error", "message": message, "type": "BadRequestError",
                                                 "param": None, "code": 400})
        answer = self.overrides[stage](prompt) if stage in self.overrides else self.answer(stage, prompt)
        return Reply(text=answer, usage=(len(prompt) // 4, max(1, len(answer) // 4)),
                     delay=self.delay.get(stage, 0.0))

    def stages(self) -> list[str]:
        return [stage for stage, _, _ in self.prompts]

    def answer(self, stage: str, prompt: str) -> str:
        if stage == "plan":
            return "Brief: find the island, then its lighthouse's designer.\n" + "\n".join(
                f"{i}. {q}" for i, q in enumerate(SUB_QUESTIONS, 1))
        if stage == "notes":
            found = [fact for fact in facts() if fact in prompt.split("---")[1]]
            return "\n".join(f"- {fact}" for fact in found) or "NOTHING"
        if stage == "reflect":
            known = "Kestrel Island" in prompt and "Tomas Varga" not in prompt
            return f"1. {FOLLOW_UP}" if known else "NONE"
        if stage == "report":
            return self.report(prompt)
        return "OK."

    def report(self, prompt: str) -> str:
        numbered = dict(re.findall(r"^\[(\d+)\] .*? - (\S+)", prompt, re.MULTILINE))
        lines = ["# The lighthouse", "", "## Findings", ""]
        for number in numbered:
            notes = prompt.split(f"[{number}] ", 1)[1].split("\n\n", 1)[0]
            for fact in facts():
                if fact in notes:
                    lines.append(f"{fact} [{number}]")
        if self.invent:
            lines.append(f"Some say it moved inland [{len(numbered) + 40}], see [this]({INVENTED}).")
        lines += ["", "## Sources", "", *(f"[{n}] {u}" for n, u in numbered.items()), f"[99] {INVENTED}"]
        return "\n".join(lines)
