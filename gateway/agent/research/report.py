"""The report: the prompt that asks for it from the notes, sized to the window, and the report the
run writes itself from the notes when the model cannot (an error, an empty answer, no tokens left).
"""

from __future__ import annotations

from gateway.agent.research.budgets import CHARS_PER_TOKEN
from gateway.agent.research.model import system_line
from gateway.agent.research.notes import MARGIN_TOKENS, Note, condense, rendered, shorten

REPORT_SYSTEM = system_line("a research analyst who writes clear, well-sourced research reports")
#: The report's room: a quarter of the window, within these bounds.
MIN_REPORT_TOKENS = 256
MAX_REPORT_TOKENS = 4096
#: Search results (never read) a report prompt may add beside the notes.
MAX_SNIPPETS = 8


def report_tokens(window: int, asked: int | None) -> int:
    room = max(MIN_REPORT_TOKENS, min(MAX_REPORT_TOKENS, window // 4))
    return min(room, asked) if asked else room


def report_prompt(question: str, brief: str, notes_text: str, stopped: str) -> str:
    aim = f"Research brief: {brief}\n" if brief else ""
    ended = (f"\nNote: {stopped}; write the report from these notes and say what is left open.\n"
             if stopped else "")
    sources = notes_text or "(no source could be read)"
    return (
        f"Question: {question}\n{aim}\nNotes from the sources, each under its number:\n\n{sources}\n{ended}\n"
        "Write the research report now, in markdown: a title, a few short sections with headings, and "
        "a conclusion that answers the question. Support every claim with the number of its source in "
        "square brackets, like [2] or [1][3], using only the numbers above; never invent a source or a "
        "URL. Do not add a list of sources at the end: it is added for you.")


def fit_notes(question: str, brief: str, notes: list[Note], stopped: str, window: int, answer: int) -> str:
    """The notes' text for the report prompt, condensed to what `window` leaves beside the rest."""
    frame = REPORT_SYSTEM + report_prompt(question, brief, "", stopped)
    room = (window - answer - MARGIN_TOKENS) * CHARS_PER_TOKEN - len(frame)
    return rendered(condense(notes, max(0, room)))


def written_by_the_run(question: str, notes: list[Note]) -> str:
    """A report made of the notes themselves, each point under its source's number."""
    lines = [f"# {question.strip()[:200]}", "", "## Findings", ""]
    for note in sorted(notes, key=lambda n: (not n.read, n.number)):
        points = [line.strip(" -*•\t") for line in note.text.splitlines() if line.strip(" -*•\t")]
        for point in points[:4]:
            lines.append(f"- {shorten(point, 400)} [{note.number}]")
    return "\n".join(lines)
