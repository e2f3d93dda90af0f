"""What the agent reads from its web tools' arguments and results for the events (queries, URLs, sources)."""

from __future__ import annotations

import json

from gateway.agent.events import Source
from gateway.agent.sources import MAX_SOURCES, found, outcome, wanted


def test_a_search_wants_its_query_and_an_extract_its_urls():
    assert wanted("web_search", {"query": "  otters  "}) == (("otters",), ())
    assert wanted("web_extract", {"urls": ["https://a.example", 7, ""]}) == ((), ("https://a.example",))
    assert wanted("web_extract", {"urls": "https://a.example"}) == ((), ("https://a.example",))
    assert wanted("lookup", {"query": "x"}) == ((), ())
    assert wanted("web_search", "the arguments were not valid JSON") == ((), ())


def test_search_hits_become_sources_with_their_titles_or_the_url_when_untitled():
    output = json.dumps({"success": True, "data": {"web": [
        {"title": "Otters", "url": "https://a.example/otters"},
        {"title": "  ", "url": "https://b.example/"},
        {"title": "dup", "url": "https://a.example/otters"},
        {"title": "no url"},
    ]}})
    assert found("web_search", output) == (Source("https://a.example/otters", "Otters", 1),
                                           Source("https://b.example/", "https://b.example/", 2))


def test_pages_read_become_sources_except_those_that_failed():
    output = json.dumps({"success": True, "data": [
        {"url": "https://a.example/page", "title": "A page", "content": "..."},
        {"url": "https://b.example/", "title": "", "content": "", "error": "404"},
    ]})
    assert found("web_extract", output) == (Source("https://a.example/page", "A page", 1, "..."),)


def test_failures_other_tools_and_garbage_give_no_sources():
    assert found("web_search", json.dumps({"success": False, "error": "down"})) == ()
    assert found("web_search", "not json") == ()
    assert found("web_search", json.dumps({"success": True, "data": []})) == ()
    assert found("lookup", json.dumps({"success": True, "data": [{"url": "https://a.example"}]})) == ()


def test_a_flood_of_results_is_capped():
    hits = [{"title": str(n), "url": f"https://a.example/{n}"} for n in range(MAX_SOURCES + 20)]
    assert len(found("web_search", json.dumps({"success": True, "data": {"web": hits}}))) == MAX_SOURCES


def test_a_web_tool_whose_envelope_says_it_failed_did_not_work_and_other_tools_did():
    failed = json.dumps({"success": False, "error": "searxng: HTTP 403"})
    assert outcome("web_search", failed) == (False, ())
    assert outcome("web_extract", "not json") == (False, ())
    assert outcome("web_search", json.dumps({"success": True, "data": {"web": []}})) == (True, ())
    assert outcome("lookup", "any text at all") == (True, ())


def test_a_turn_numbers_its_pages_once_and_the_model_reads_the_numbers():
    from gateway.agent.sources import SourceNumbers

    numbers = SourceNumbers()
    first = json.dumps({"success": True, "data": {"web": [
        {"title": "A", "url": "https://a.example/", "description": "Otters eat fish."},
        {"title": "B", "url": "https://b.example/", "description": "And crabs."}]}})
    worked, seen, hits = numbers.outcome("web_search", first)
    assert worked and [h["id"] for h in json.loads(seen)["data"]["web"]] == [1, 2]
    assert hits[0] == Source("https://a.example/", "A", 1, "Otters eat fish.")
    # a page read later in the turn: a URL already seen keeps its number, a new one gets the next
    read = json.dumps({"success": True, "data": [{"url": "https://c.example/", "title": "C", "content": "x" * 5000},
                                                 {"url": "https://b.example/", "title": "B", "content": "crabs"}]})
    _, seen, pages = numbers.outcome("web_extract", read)
    assert [p["id"] for p in json.loads(seen)["data"]] == [3, 2]
    assert [p.number for p in pages] == [3, 2] and len(pages[0].text) == 2000
    # documents already numbered [1] and [2] in the request: the web starts at 3
    assert SourceNumbers(first=3).outcome("web_search", first)[2][0].number == 3
