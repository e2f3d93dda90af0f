"""A small web for deep research: a corpus of pages with a multi-hop question, served on 127.0.0.1
with a SearXNG search endpoint that finds them.

The question needs two hops: fact A (on the sanctuary's page) names the island, and only a search
for that island finds fact B (on the lighthouse's page). A search for the question's own words never
finds page B, so a report holding fact B shows the run read page A, reflected and searched again.

`ResearchWeb` is one aiohttp app: `GET /search?q=..&format=json` answered as SearXNG does (the checks
and shapes of tests/fakes/searxng.py, of which it is a subclass) and `GET /page/<slug>` as HTML. Each
search is timed on the fake's own clock (`time.monotonic()` in this process) into `searches`, so a
test can assert that searches overlapped and how many were in flight at once (`max_in_flight`);
`delay` (seconds, or a function of the query) holds each answer, and a client that goes away during
the delay is noticed (`SearchSpan.abandoned`), which is how a test sees cancel close connections.
`page_padding` makes every page that many characters longer (context-window tests).

Import the fixture explicitly: `from tests.fakes.research_web import research_web  # noqa: F401`.
With the gateway: `env={"SEARXNG_URL": web.base_url}` and `allow_private_urls=True` (the pages are
on loopback), `web_search_fallback=()`.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from html import escape
from typing import Any

import pytest
from aiohttp import web

from tests.fakes.scripted import serve
from tests.fakes.searxng import FakeSearxng

WORD = re.compile(r"[a-z0-9]+")


@dataclass(frozen=True)
class Page:
    slug: str
    title: str
    #: a query containing any of these words finds the page (more matched words rank it higher)
    terms: tuple[str, ...]
    #: the search snippet; it never holds the page's facts, so the run must read the page for them
    snippet: str
    #: sentences worth a note: the scripted model copies those it finds in a page it is asked about
    facts: tuple[str, ...] = ()
    #: filler: what makes the page long, and what tells the model "this prompt holds a page"
    body: str = ""
    #: when set, a query must hold one of these words to find the page at all
    required: tuple[str, ...] = ()


@dataclass(frozen=True)
class Hop:
    """When the notes hold `known` but not `unknown`, reflection asks `follow_up`."""

    known: str
    unknown: str
    follow_up: str


@dataclass(frozen=True)
class Corpus:
    question: str
    brief: str
    sub_questions: tuple[str, ...]
    hops: tuple[Hop, ...]
    pages: tuple[Page, ...]

    def page(self, slug: str) -> Page | None:
        return next((p for p in self.pages if p.slug == slug), None)

    def facts(self) -> list[str]:
        return [fact for page in self.pages for fact in page.facts]

    def matches(self, query: str) -> list[Page]:
        words = set(WORD.findall(query.lower()))
        scored = [(sum(term in words for term in page.terms), i, page) for i, page in enumerate(self.pages)
                  if not page.required or words & set(page.required)]
        return [page for score, _, page in sorted(scored, key=lambda s: (-s[0], s[1])) if score]


FILLER = ("Visitors arrive by the morning ferry from the mainland harbour and most stay for a single day. "
          "The coast path runs past tide pools, a shingle beach and a row of old net lofts. ")

SANCTUARY_A = "The Ellison Otter Sanctuary is on Kestrel Island."
LIGHTHOUSE_B = "The Kestrel Island lighthouse was designed by the engineer Tomas Varga in 1887."

#: The multi-hop question: A (which island) leads to B (who designed its lighthouse).
MULTI_HOP = Corpus(
    question="Who designed the lighthouse on the island where the Ellison Otter Sanctuary is?",
    brief="Find the island of the Ellison Otter Sanctuary, then who designed that island's lighthouse.",
    sub_questions=(
        "Where is the Ellison Otter Sanctuary?",
        "Who founded the Ellison Otter Sanctuary?",
        "Which island lighthouses were built near otter sanctuaries?",
    ),
    hops=(Hop(SANCTUARY_A, LIGHTHOUSE_B, "Who designed the Kestrel Island lighthouse?"),),
    pages=(
        Page("ellison-sanctuary", "The Ellison Otter Sanctuary", ("ellison", "sanctuary"),
             "A rescue centre for orphaned otters, open to visitors since 1962.",
             (SANCTUARY_A, "Mara Ellison founded the sanctuary in 1962."),
             FILLER * 3),
        Page("kestrel-lighthouse", "Kestrel Island Lighthouse", ("kestrel", "lighthouse", "designed"),
             "A white tower on the northern headland, still in service.",
             (LIGHTHOUSE_B, "The tower is 31 metres tall."),
             FILLER * 3, required=("kestrel",)),
        Page("otter-facts", "River otters", ("otter", "otters", "founded"),
             "The river otter is a semi-aquatic mammal of rivers and coasts.",
             ("River otters eat mostly fish.",),
             FILLER * 2),
        Page("famous-lighthouses", "Famous lighthouses of Europe", ("lighthouse", "lighthouses", "designed"),
             "Ten towers every sailor knows, from Eddystone to Hercules.",
             ("The Tower of Hercules is the oldest lighthouse still in use.",),
             FILLER * 2),
        Page("island-ferries", "Island ferries timetable", ("island", "islands", "ferry"),
             "Crossings to the small islands of the north coast.",
             ("Ferries to the northern islands run twice a day in summer.",),
             FILLER),
    ),
)


def page_html(page: Page, padding: int = 0) -> str:
    """The page as HTML; `padding` characters of distinct filler paragraphs after its text (a long
    page, for context-window tests)."""
    texts = [page.snippet, *page.facts, page.body]
    n = 0
    while padding > 0:
        n += 1
        extra = f"Logbook entry {n} of {page.title}: the keeper noted wind, tide and {n * 7 % 31} passing boats. "
        texts.append(extra * 4)
        padding -= len(extra) * 4
    paragraphs = "".join(f"<p>{escape(text)}</p>" for text in texts if text)
    return (f"<!doctype html><html><head><title>{escape(page.title)}</title></head><body>"
            f"<nav><a href=\"/\">Home</a></nav><article><h1>{escape(page.title)}</h1>{paragraphs}</article>"
            f"<footer>Island Notes Collective</footer></body></html>")


@dataclass
class SearchSpan:
    """One search as the fake saw it, on its own clock."""

    query: str
    start: float
    end: float | None = None
    abandoned: bool = False  # the client went away before the answer


@dataclass
class PageRead:
    slug: str
    at: float


class ResearchWeb(FakeSearxng):
    def __init__(self, corpus: Corpus = MULTI_HOP) -> None:
        super().__init__()
        self.corpus = corpus
        self.delay: float | Callable[[str], float] = 0.0
        self.page_delay = 0.0
        self.page_padding = 0  # characters of filler added to every page
        #: answer a query that matches no page with every page (a real engine finds something for
        #: anything; for models whose sub-questions cannot be predicted)
        self.match_all = False
        self.searches: list[SearchSpan] = []
        self.pages_read: list[PageRead] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self._search_endpoint = self.reply  # FakeSearxng's checked GET /search handler

    # -- what tests read ---------------------------------------------------------------------
    def url(self, slug: str) -> str:
        return f"{self.base_url}/page/{slug}"

    def queries(self) -> list[str]:
        return [span.query for span in self.searches]

    def overlapping(self) -> bool:
        """Whether any two searches were in flight at the same moment."""
        spans = sorted((s for s in self.searches if s.end is not None), key=lambda s: s.start)
        return any(b.start < a.end for a, b in zip(spans, spans[1:], strict=False) if a.end is not None)

    def search_time(self) -> float:
        """The sum of every answered search's time, the figure a run's wall time is held against."""
        return sum(s.end - s.start for s in self.searches if s.end is not None)

    def read_slugs(self) -> list[str]:
        return [read.slug for read in self.pages_read]

    # -- the app -----------------------------------------------------------------------------
    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/search", self._timed_search)
        app.router.add_get("/page/{slug}", self._page)
        return app

    def _search(self, recorded: Any) -> web.StreamResponse | dict[str, Any]:
        answer = super()._search(recorded)
        if not isinstance(answer, dict):
            return answer  # SearXNG's 403 for a non-JSON format
        hits = (self.corpus.matches(answer["query"]) or (list(self.corpus.pages) if self.match_all else []))
        hits = hits[: self.result_count]
        answer["results"] = [{
            "url": self.url(page.slug), "title": page.title, "content": page.snippet, "engine": "duckduckgo",
            "engines": ["duckduckgo"], "score": 1.0 / (n + 1), "category": "general"} for n, page in enumerate(hits)]
        answer["number_of_results"] = len(hits)
        return answer

    async def _timed_search(self, request: web.Request) -> web.StreamResponse:
        span = SearchSpan(request.query.get("q", ""), time.monotonic())
        self.searches.append(span)
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            delay = self.delay(span.query) if callable(self.delay) else self.delay
            if not await _hold(request, delay):
                span.abandoned = True
                return web.Response(status=499)
            return await self._search_endpoint(request)
        except asyncio.CancelledError:  # a server that cancels handlers when their client goes
            span.abandoned = True
            raise
        finally:
            self.in_flight -= 1
            span.end = time.monotonic()

    async def _page(self, request: web.Request) -> web.StreamResponse:
        page = self.corpus.page(request.match_info["slug"])
        if page is None:
            return web.Response(status=404, text="no such page")
        self.pages_read.append(PageRead(page.slug, time.monotonic()))
        await _hold(request, self.page_delay)
        return web.Response(text=page_html(page, self.page_padding), content_type="text/html")


async def _hold(request: web.Request, seconds: float) -> bool:
    """Wait `seconds`; False as soon as the client has closed its connection (for a server that does
    not cancel a handler whose client went away, the fake looks at the transport itself)."""
    deadline = time.monotonic() + seconds
    while (left := deadline - time.monotonic()) > 0:
        if request.transport is None or request.transport.is_closing():
            return False
        await asyncio.sleep(min(left, 0.01))
    return True


@pytest.fixture
async def research_web(aiohttp_server: Any) -> ResearchWeb:
    return await serve(ResearchWeb(), aiohttp_server)

