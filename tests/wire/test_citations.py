"""Links in an answer -> url_citation spans: finding links, comparing URLs, checking spans."""

from __future__ import annotations

import pytest

from gateway.agent.events import Source
from gateway.wire.citations import Citation, checked, citations, find_links, normalize_url

OTTERS = Source("https://example.org/otters", "All about otters")


def test_a_markdown_link_spans_label_and_url_and_gets_the_tools_title():
    text = "Otters eat fish [source](https://example.org/otters)."
    [citation] = citations(text, [OTTERS])
    assert text[citation.start:citation.end] == "[source](https://example.org/otters)"
    assert (citation.url, citation.title) == ("https://example.org/otters", "All about otters")


def test_a_bare_url_spans_the_url_without_the_sentence_punctuation():
    text = "See https://example.org/otters, and (https://example.org/otters)."
    spans = [text[c.start:c.end] for c in citations(text, [OTTERS])]
    assert spans == ["https://example.org/otters", "https://example.org/otters"]


@pytest.mark.parametrize("written", [
    "HTTPS://Example.ORG/otters", "https://example.org/otters/", "https://example.org/otters#diet",
])
def test_urls_are_compared_with_scheme_and_host_lowercased_no_fragment_and_no_trailing_slash(written):
    [citation] = citations(f"Read [this]({written}).", [OTTERS])
    assert citation.url == written


def test_a_path_differing_in_case_or_query_is_another_page():
    assert citations("[a](https://example.org/Otters) [b](https://example.org/otters?x=1)", [OTTERS]) == []


def test_links_to_pages_the_tools_did_not_return_are_not_citations():
    assert citations("Made up: [x](https://elsewhere.example/otters)", [OTTERS]) == []


def test_no_sources_or_no_links_give_no_citations():
    assert citations("[source](https://example.org/otters)", []) == []
    assert citations("no links here", [OTTERS]) == []


def test_spans_count_code_points_not_bytes_or_utf16_units():
    text = "🦦 Otters 🐟: [fish](https://example.org/otters)"
    [citation] = citations(text, [OTTERS])
    assert citation.start == text.index("[")
    assert text[citation.start:citation.end] == "[fish](https://example.org/otters)"


def test_a_url_in_a_markdown_link_is_not_counted_again_as_a_bare_url():
    text = "[https://example.org/otters](https://example.org/otters)"
    assert find_links(text) == [(0, len(text), "https://example.org/otters")]


def test_a_url_with_balanced_parentheses_keeps_them():
    wiki = Source("https://en.wikipedia.org/wiki/Otter_(disambiguation)", "Otter")
    text = "See https://en.wikipedia.org/wiki/Otter_(disambiguation)."
    [citation] = citations(text, [wiki])
    assert text[citation.start:citation.end] == "https://en.wikipedia.org/wiki/Otter_(disambiguation)"


def test_a_span_that_no_longer_holds_its_link_is_dropped():
    text = "x [s](https://example.org/otters)"
    good = Citation(2, len(text), "https://example.org/otters", "t")
    shifted = Citation(0, len(text) - 2, "https://example.org/otters", "t")
    past_the_end = Citation(2, len(text) + 5, "https://example.org/otters", "t")
    assert checked(text, [good, shifted, past_the_end]) == [good]


def test_both_wire_forms():
    citation = Citation(1, 9, "https://a.example", "A")
    assert citation.chat() == {"type": "url_citation", "url_citation": {
        "start_index": 1, "end_index": 9, "url": "https://a.example", "title": "A"}}
    assert citation.responses() == {"type": "url_citation", "start_index": 1, "end_index": 9,
                                    "url": "https://a.example", "title": "A"}


def test_normalize_url_keeps_what_tells_pages_apart():
    assert normalize_url("HTTP://A.Example/Path/?q=1#top") == "http://a.example/Path?q=1"


def test_numbered_citations_span_their_brackets_and_cite_the_source_with_that_number():
    first, second = Source("https://a.example/", "A", 1), Source("https://b.example/", "B", 2)
    text = "Fish [1][2], crabs [2], urchins [7] and a label [1](https://a.example/)."
    found = citations(text, [first, second])
    assert [(text[c.start:c.end], c.url, c.title) for c in found] == [
        ("[1]", "https://a.example/", "A"), ("[2]", "https://b.example/", "B"), ("[2]", "https://b.example/", "B"),
        ("[1](https://a.example/)", "https://a.example/", "A"),  # a link's label is the link's, not a number
    ]
    # a source without a number (0) is cited by its link only
    assert citations("Fish [1].", [Source("https://a.example/", "A")]) == []
