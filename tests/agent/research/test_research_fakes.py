"""The research fakes themselves: the corpus's search finds page B only after fact A, searches are
timed on the fake's clock (overlap, the in-flight peak, a client that left), and the scripted model
answers each stage from what its prompt holds."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import aiohttp

from tests.fakes.research_model import INVENTED_URL, ResearchModel, prompt_text
from tests.fakes.research_web import LIGHTHOUSE_B, MULTI_HOP, SANCTUARY_A, ResearchWeb, research_web  # noqa: F401
from tests.fakes.upstream import FakeUpstream
from tests.support.web_tools import run_tool, web_tools_maker


async def _search(web: ResearchWeb, query: str, session: aiohttp.ClientSession) -> list[str]:
    async with session.get(web.base_url + "/search", params={"q": query, "format": "json"}) as reply:
        assert reply.status == 200
        return [hit["url"] for hit in (await reply.json())["results"]]


async def test_the_question_finds_page_a_and_only_the_island_finds_page_b(research_web: ResearchWeb) -> None:  # noqa: F811
    async with aiohttp.ClientSession() as session:
        for question in (MULTI_HOP.question, *MULTI_HOP.sub_questions):
            assert research_web.url("kestrel-lighthouse") not in await _search(research_web, question, session)
        assert (await _search(research_web, MULTI_HOP.sub_questions[0], session))[0] == research_web.url(
            "ellison-sanctuary")
        follow_up = MULTI_HOP.hops[0].follow_up
        assert (await _search(research_web, follow_up, session))[0] == research_web.url("kestrel-lighthouse")


async def test_the_real_web_tools_search_the_corpus_and_read_its_pages(research_web: ResearchWeb, tmp_path) -> None:  # noqa: F811
    async with web_tools_maker(tmp_path, {"SEARXNG_URL": research_web.base_url}, web_search_fallback=(),
                               web_extract_fallback=(), allow_private_urls=True) as make:
        search, extract = make()
        found = await run_tool(search, query=MULTI_HOP.sub_questions[0])
        urls = [hit["url"] for hit in found["data"]["web"]]
        assert urls[0] == research_web.url("ellison-sanctuary")
        read = await run_tool(extract, urls=[urls[0]])
        assert SANCTUARY_A in read["data"][0]["content"]
    assert research_web.read_slugs() == ["ellison-sanctuary"]


async def test_searches_are_timed_on_the_fakes_clock_and_overlap_is_seen(research_web: ResearchWeb) -> None:  # noqa: F811
    research_web.delay = 0.2
    async with aiohttp.ClientSession() as session:
        await asyncio.gather(*(_search(research_web, q, session) for q in MULTI_HOP.sub_questions))
    assert research_web.max_in_flight == 3 and research_web.overlapping()
    assert all(span.end is not None and span.end - span.start >= 0.2 for span in research_web.searches)
    assert research_web.search_time() >= 0.6


async def test_sequential_searches_do_not_overlap(research_web: ResearchWeb) -> None:  # noqa: F811
    research_web.delay = 0.05
    async with aiohttp.ClientSession() as session:
        for query in MULTI_HOP.sub_questions:
            await _search(research_web, query, session)
    assert research_web.max_in_flight == 1 and not research_web.overlapping()


async def test_a_client_that_leaves_during_the_delay_is_seen_as_abandoned(research_web: ResearchWeb) -> None:  # noqa: F811
    research_web.delay = 5.0
    async with aiohttp.ClientSession() as session:
        task = asyncio.ensure_future(_search(research_web, "otters", session))
        await asyncio.sleep(0.2)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    async with asyncio.timeout(2):
        while research_web.searches[0].end is None:
            await asyncio.sleep(0.01)
    assert research_web.searches[0].abandoned and research_web.in_flight == 0


def _body(*texts: str) -> dict[str, Any]:
    return {"model": "m", "messages": [{"role": "system", "content": texts[0]},
                                       *({"role": "user", "content": t} for t in texts[1:])]}


def test_the_model_plans_with_the_corpus_sub_questions_in_lines_or_json() -> None:
    model = ResearchModel()
    lines = model(_body("Break the question into sub-questions, one per line.", MULTI_HOP.question)).text
    assert all(q in lines for q in MULTI_HOP.sub_questions)
    as_json = json.loads(model(_body("Answer in JSON: brief, questions.", MULTI_HOP.question)).text)
    assert as_json["questions"] == list(MULTI_HOP.sub_questions)
    assert model.stages() == ["plan", "plan"]


def test_the_model_notes_only_facts_of_the_page_it_was_given() -> None:
    model = ResearchModel()
    page = MULTI_HOP.page("ellison-sanctuary")
    assert page is not None
    notes = model(_body("Condense this page into notes for the question.",
                        f"{page.title}\n{page.snippet}\n{' '.join(page.facts)}\n{page.body}")).text
    assert SANCTUARY_A in notes and LIGHTHOUSE_B not in notes
    assert model.stages() == ["notes"]


def test_the_model_reflects_a_follow_up_after_fact_a_and_none_after_fact_b() -> None:
    model = ResearchModel()
    first = model(_body("What gaps remain? List follow-up questions.", f"Notes: {SANCTUARY_A}")).text
    assert MULTI_HOP.hops[0].follow_up in first
    second = model(_body("What gaps remain? List follow-up questions.", f"Notes: {SANCTUARY_A} {LIGHTHOUSE_B}")).text
    assert second == "none"
    assert model.stages() == ["reflect", "reflect"]


def test_the_report_cites_the_prompts_numbers_and_one_invented_url() -> None:
    model = ResearchModel()
    sources = ("[1] The sanctuary http://127.0.0.1:1/page/ellison-sanctuary\n"
               "[2] Lighthouse http://127.0.0.1:1/page/kestrel-lighthouse")
    prompt = f"{sources}\nNotes: {SANCTUARY_A} {LIGHTHOUSE_B}"
    report = model(_body("Write the final report with [n] citations.", prompt)).text
    assert f"{SANCTUARY_A} [1]" in report and f"{LIGHTHOUSE_B} [2]" in report
    assert f"[3] {INVENTED_URL}" in report and f"1990 [3], as [a page of rumours]({INVENTED_URL})" in report
    assert model.stages() == ["report"]


def test_a_prompt_over_the_context_window_is_refused_with_a_400() -> None:
    model = ResearchModel(context_tokens=100)
    reply = model(_body("Write the report.", "x" * 1000))
    assert reply.status == 400 and "maximum context length" in reply.error_body["message"]


async def test_the_model_answers_a_streamed_request_through_the_fake_upstream(upstream: FakeUpstream) -> None:
    upstream.responder = ResearchModel()
    body = {**_body("Sub-questions, one per line.", MULTI_HOP.question), "stream": True}
    async with aiohttp.ClientSession() as session:
        async with session.post(upstream.base_url + "/chat/completions", json=body) as reply:
            text = await reply.text()
    streamed = "".join(json.loads(line[6:])["choices"][0]["delta"].get("content") or ""
                       for line in text.splitlines() if line.startswith("data: {") and '"choices": [{' in line)
    assert MULTI_HOP.sub_questions[0] in streamed
    assert prompt_text(upstream.requests[0]).startswith("Sub-questions")

