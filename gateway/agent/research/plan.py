"""The plan (a research brief and sub-questions) and the reflection (follow-up questions for the gaps
the notes leave): the prompts, and lenient readers of the answers.

Local models are poor at JSON and at following a format, so the readers take what comes: a JSON
object or list, numbered or bulleted lines, or lines ending in a question mark; a `<think>` block is
already gone (model.py). An answer with nothing usable falls back: the plan to the question itself
as its one sub-question, the reflection to "no gaps".
"""

from __future__ import annotations

import json
import re
from typing import Any

#: Sub-questions a plan may have, follow-ups a reflection may ask.
MAX_QUESTIONS = 5
MAX_FOLLOW_UPS = 3
MAX_QUESTION_CHARS = 300
PLAN_TOKENS = 600
REFLECT_TOKENS = 400

_ITEM = re.compile(r"^\s*(?:\(?\d{1,2}[.):]|[-*•+]|q\d{1,2}[.):]|sub-?question\s*\d*[.):])\s*(.+)$", re.IGNORECASE)
_BRIEF = re.compile(r"^\s*(?:\*\*)?(?:research\s+)?brief(?:\*\*)?\s*[:\-]\s*(?:\*\*)?\s*(.*)$", re.IGNORECASE)
_NONE = re.compile(r"^\W*(none|nothing|no gaps?|no follow[- ]?ups?|no further questions?|n/a)\b", re.IGNORECASE)
_FENCE = re.compile(r"^```[a-z]*\s*|\s*```$", re.IGNORECASE)


def plan_prompt(question: str, context: str) -> str:
    extra = f"\nWhat the user said before, for context:\n{context}\n" if context else ""
    return (
        f"Question: {question}\n{extra}\n"
        "Plan web research that answers this question well. First write a short research brief: one "
        "or two sentences saying what a complete answer must establish. Then write up to "
        f"{MAX_QUESTIONS} sub-questions that web searches can answer, each on its own numbered line, "
        "each specific enough to type into a search engine.\n\n"
        "Answer in exactly this form:\nBrief: ...\n1. ...\n2. ...")


def reflect_prompt(question: str, notes: str, asked: list[str]) -> str:
    searched = "\n".join(f"- {q}" for q in asked)
    return (
        f"Question: {question}\n\nNotes gathered so far, by source:\n{notes}\n\n"
        f"Already searched:\n{searched}\n\n"
        "Look for gaps: which parts of the question do the notes not answer yet, and what did a source "
        "mention that needs a search of its own (a name, a place, a date)? Write up to "
        f"{MAX_FOLLOW_UPS} follow-up search questions for what is missing, each on its own numbered "
        "line, none repeating one already searched. If nothing is missing, answer NONE.")


def _unfenced(text: str) -> str:
    return _FENCE.sub("", text.strip())


def _from_json(text: str) -> tuple[str, list[str]] | None:
    """(brief, questions) from a JSON answer, if it is one."""
    try:
        value: Any = json.loads(_unfenced(text))
    except ValueError:
        return None
    if isinstance(value, list):
        return "", [str(item) for item in value if isinstance(item, str | int | float)]
    if not isinstance(value, dict):
        return None
    brief = value.get("brief") or value.get("research_brief") or ""
    keys = ("questions", "sub_questions", "subquestions", "follow_ups", "queries")
    questions: list[Any] = next((value[key] for key in keys if isinstance(value.get(key), list)), [])
    return (brief if isinstance(brief, str) else ""), [str(q) for q in questions if isinstance(q, str | int | float)]


def _clean(item: str) -> str:
    item = re.sub(r"\*\*|__|`", "", item).strip().strip('"').strip()
    return item[:MAX_QUESTION_CHARS]


def _lines(text: str) -> tuple[str, list[str]]:
    brief, items, asks = "", [], []
    for line in _unfenced(text).splitlines():
        if not line.strip():
            continue
        if not brief and (match := _BRIEF.match(line)) is not None:
            brief = match.group(1).strip()
            continue
        match = _ITEM.match(line)
        if match is not None:
            items.append(match.group(1))
        elif line.strip().endswith("?"):
            asks.append(line)
    return brief, items or asks


def read_questions(text: str, limit: int) -> tuple[str, list[str]]:
    """(brief, questions) from an answer, however it came; questions cleaned and without repeats."""
    brief, found = _from_json(text) or _lines(text)
    seen: set[str] = set()
    questions = []
    for item in found:
        question = _clean(item)
        key = question.lower().rstrip("?. ")
        if len(key) < 3 or key in seen or _NONE.match(question):
            continue
        seen.add(key)
        questions.append(question)
    return _clean(brief), questions[:limit]


def read_plan(text: str, question: str) -> tuple[str, list[str]]:
    """The plan's brief and sub-questions; the question itself when the answer held none."""
    brief, questions = read_questions(text, MAX_QUESTIONS)
    return brief, questions or [question[:MAX_QUESTION_CHARS]]


def read_follow_ups(text: str, asked: list[str]) -> list[str]:
    """The reflection's follow-ups, without the questions already searched; none for NONE."""
    if _NONE.match(_unfenced(text)):
        return []
    done = {q.lower().rstrip("?. ") for q in asked}
    return [q for q in read_questions(text, MAX_FOLLOW_UPS)[1] if q.lower().rstrip("?. ") not in done]
