"""The research stages read whatever a model answers: JSON, numbered or bulleted lines, think blocks,
junk; and the report's citations are checked against the sources the run saw. Pure functions."""

from __future__ import annotations

import pytest

from gateway.agent.events import Source
from gateway.agent.research import checks, plan
from gateway.agent.research.notes import Note, condense, read_note, rendered, shorten

QUESTION = "Who designed the Kestrel lighthouse?"


@pytest.mark.parametrize("answer", [
    'Brief: find the designer.\n1. Where is Kestrel?\n2) Who designed its lighthouse?',
    '**Research brief:** find the designer.\n- Where is Kestrel?\n* Who designed its lighthouse?',
    '```json\n{"brief": "find the designer.", "questions": ["Where is Kestrel?", "Who designed its lighthouse?"]}\n```',
    'Sure! Here is my plan.\nWhere is Kestrel?\nWho designed its lighthouse?',
], ids=["numbered", "bulleted-bold", "json-fenced", "question-lines"])
def test_a_plan_is_read_in_whatever_form_it_comes(answer: str):
    brief, questions = plan.read_plan(answer, QUESTION)
    assert questions == ["Where is Kestrel?", "Who designed its lighthouse?"]
    assert brief in ("", "find the designer.")


@pytest.mark.parametrize("answer", ["", "I cannot help with that.", "{}", "1. ok", "[]"])
def test_a_plan_with_no_usable_question_falls_back_to_the_question_itself(answer: str):
    assert plan.read_plan(answer, QUESTION)[1] == [QUESTION]


def test_a_plan_keeps_at_most_five_questions_without_repeats():
    answer = "\n".join(f"{i}. Question number {i % 7}?" for i in range(1, 20))
    questions = plan.read_plan(answer, QUESTION)[1]
    assert len(questions) == 5 and len(set(questions)) == 5


@pytest.mark.parametrize(("answer", "expected"), [
    ("NONE", []), ("None.", []), ("Nothing is missing.", []), ("No gaps.", []),
    ("1. Who designed the Kestrel lighthouse?\n2. When was it built?", ["When was it built?"]),
    ('{"questions": ["When was it built?"], "done": false}', ["When was it built?"]),
])
def test_follow_ups_are_read_without_questions_already_searched(answer: str, expected: list[str]):
    assert plan.read_follow_ups(answer, ["Who designed the Kestrel lighthouse?"]) == expected


def test_a_note_saying_nothing_relevant_is_no_note():
    assert read_note("NOTHING") is None and read_note("- Nothing relevant on this page.") is None
    assert read_note("- The tower is 31 m tall.") == "- The tower is 31 m tall."


SEEN = {1: Source("https://a.example/one", "One", 1), 3: Source("https://b.example/three", "Three", 3)}


def test_citations_to_sources_never_seen_are_removed_and_counted():
    checked = checks.check("Built in 1887 [1][7]. Tall [3, 9]. See [x](https://made.up/page) and "
                           "https://made.up/other. Also [One](https://a.example/one).", SEEN)
    assert checked.text == "Built in 1887 [1]. Tall [3]. See x and. Also [One](https://a.example/one)."
    assert checked.removed == 4 and checked.cited == (1, 3)


def test_a_range_of_citations_is_spelt_out_and_checked():
    checked = checks.check("Facts [1-3].", SEEN)
    assert checked.text == "Facts [1][3]." and checked.removed == 1


def test_the_models_own_sources_list_is_dropped_for_the_runs():
    report = "# Title\n\nA fact [1].\n\nMore text here for length.\n\n## References\n\n[1] https://a.example/one\n[2] x"
    body = checks.without_sources_section(report)
    assert body.endswith("More text here for length.")
    listed = checks.sources_list((1, 3), SEEN, read={1})
    assert "[1] One - https://a.example/one" in listed
    assert "[3] Three - https://b.example/three (search result; the page was not read)" in listed


def test_notes_are_condensed_to_fit_and_the_least_useful_dropped_last():
    notes = [Note(n, f"https://e.example/{n}", f"Page {n}", "A fact. " * 100, read=n < 4) for n in range(1, 6)]
    room = 1500
    kept = condense(notes, room)
    assert len(rendered(kept)) <= room and {n.number for n in kept} >= {1, 2, 3}
    assert all(note.text.startswith("A fact.") for note in kept)
    assert condense(notes, 10) == []
    assert shorten("One. Two. Three.", 10) == "One. …"
