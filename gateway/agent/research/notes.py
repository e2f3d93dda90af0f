"""Notes: what each page read said that bears on the question, under the page's number.

A page's text goes to the model with the question (`note_prompt`), cut to what the context window
leaves once the instructions and the answer's room are counted: the page is shortened, never the
instructions. Later prompts (reflection, report) hold many notes; `condense` shortens each note (at
a sentence or bullet) until they all fit, and drops the least useful ones (search snippets before
pages read, later before earlier) only when even the shortened ones do not.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from gateway.agent.research.budgets import CHARS_PER_TOKEN

NOTE_TOKENS = 500
#: Tokens kept free in every prompt: the chat template, a tokenizer that counts more than 4 chars a token.
MARGIN_TOKENS = 256
MAX_NOTE_CHARS = 2000
#: A note shortened below this says too little to cite: dropped instead.
MIN_NOTE_CHARS = 80
_NOTHING = re.compile(r"^\W*(nothing|none|no relevant|not relevant|irrelevant|n/a)\b", re.IGNORECASE)
_BREAK = re.compile(r"(?<=[.!?])\s+|\n+")


@dataclass(frozen=True)
class Note:
    number: int
    url: str
    title: str
    text: str
    #: The page was read (False: only its search result was seen, the note is the snippet).
    read: bool = True

    def heading(self) -> str:
        seen = "" if self.read else " (search result only, page not read)"
        return f"[{self.number}] {self.title} - {self.url}{seen}"

    def render(self) -> str:
        return f"{self.heading()}\n{self.text}"


def page_room(window: int, fixed_text: str) -> int:
    """Characters of page text a note prompt may hold in `window` tokens beside `fixed_text`."""
    tokens = window - NOTE_TOKENS - MARGIN_TOKENS - -(-len(fixed_text) // CHARS_PER_TOKEN)
    return max(0, tokens * CHARS_PER_TOKEN)


def note_prompt(question: str, sub_question: str, number: int, title: str, url: str, page: str) -> str:
    return (
        f"Question: {question}\nSub-question being searched: {sub_question}\n\n"
        f"Page [{number}]: {title} - {url}\n---\n{page}\n---\n\n"
        "Take notes from this page for the question: the facts it states that help answer it, as short "
        "bullet points (at most 8), each a complete sentence with the names, numbers and dates the page "
        "gives. Use only what the page says. If the page has nothing relevant, answer NOTHING.")


def note_frame(question: str, sub_question: str, number: int, title: str, url: str) -> str:
    """The note prompt without its page: what the page's room is counted beside."""
    return note_prompt(question, sub_question, number, title, url, "")


def read_note(text: str) -> str | None:
    """The note from the model's answer; None when it found nothing relevant (or said nothing)."""
    text = text.strip()
    if not text or _NOTHING.match(text):
        return None
    return text[:MAX_NOTE_CHARS]


def fallback_note(page: str) -> str:
    """A note when the model could not make one: the page's own first sentences."""
    return shorten(" ".join(page.split()), 600)


def shorten(text: str, limit: int) -> str:
    """`text` cut to `limit` characters at the last sentence or line end before it (else a word)."""
    if len(text) <= limit:
        return text
    limit = max(1, limit - 2)  # room for the " …" that says so
    head = text[:limit]
    ends = [m.start() for m in _BREAK.finditer(head)]
    cut = ends[-1] if ends and ends[-1] >= limit // 3 else head.rfind(" ")
    return head[:cut if cut > 0 else limit].rstrip() + " …"


def condense(notes: list[Note], room_chars: int) -> list[Note]:
    """The notes, shortened (and if need be fewer) so that their rendering fits `room_chars`."""
    def size(kept: list[Note]) -> int:
        return sum(len(note.render()) + 2 for note in kept)

    kept = list(notes)
    if size(kept) <= room_chars:
        return kept
    # the least useful go last: snippets before pages read, then by number (later found, later dropped)
    kept.sort(key=lambda note: (not note.read, note.number))
    while kept:
        headings = sum(len(note.heading()) + 3 for note in kept)
        share = (room_chars - headings) // len(kept)
        if share >= MIN_NOTE_CHARS:
            shortened = [replace(note, text=shorten(note.text, share)) for note in kept]
            if size(shortened) <= room_chars:
                return sorted(shortened, key=lambda note: note.number)
        kept.pop()
    return []


def rendered(notes: list[Note]) -> str:
    return "\n\n".join(note.render() for note in sorted(notes, key=lambda note: note.number))
