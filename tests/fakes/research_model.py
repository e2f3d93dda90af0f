"""A scripted research model: answers the deep-research stages' prompts by reading them, as a model
would, from the corpus of tests/fakes/research_web.py.

Set it as the fake upstream's responder: `upstream.responder = ResearchModel(MULTI_HOP)`. It tells
the stages apart by what the prompt holds, not by the gateway's wording, so the research prompts can
change without breaking it:

- a prompt holding a page of the corpus (its filler text) asks for **notes**: the model answers with
  the corpus facts it finds in that prompt (nothing else, so notes are what the run read);
- a prompt holding neither a corpus URL nor a fact is the **plan**: a brief and the corpus's
  sub-questions;
- a prompt with notes that talks about gaps (gap, missing, follow-up, reflect, enough, more) is a
  **reflection**: a follow-up question for each hop whose known fact is in the notes but whose unknown
  one is not, else "none";
- anything else with notes is the **report**: sections, every fact found in the prompt cited as
  `[n]` by the number the prompt gave its page (or by order of first appearance), a sources list,
  plus one invented source that no search returned (`INVENTED_URL`), cited both as `[k]` (k past
  the prompt's numbers, listed under Sources) and as a markdown link in the text.

Replies are plain lines, or JSON when the prompt asks for JSON (`{"brief", "questions"}`,
`{"questions", "done"}`, `{"notes"}`). Usage is counted as characters / 4 (what `tokens` budgets
see). `context_tokens` refuses a longer prompt with vLLM's 400, as a model server does. Every call is
kept in `calls` with its stage and times on this process's clock.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tests.fakes.research_web import MULTI_HOP, Corpus
from tests.fakes.upstream import Reply

INVENTED_URL = "https://invented.example.org/lighthouse-rumours"
URL = re.compile(r"https?://[^\s\)\]\}>\"'<,]+")
NUMBERED_URL = re.compile(r"(?:\[(\d+)\]|^\s*(\d+)[.):])[^\n]*?(https?://[^\s\)\]\}>\"'<,]+)", re.MULTILINE)
REFLECT_WORDS = ("gap", "missing", "follow-up", "follow up", "reflect", "enough", "more research", "unanswered")
STAGES = ("plan", "notes", "reflect", "report", "other")


@dataclass
class Call:
    stage: str
    start: float
    end: float
    prompt_chars: int
    reply: str


def prompt_text(body: dict[str, Any]) -> str:
    """Every message's text, parts joined (a chat request's whole prompt)."""
    out = []
    for message in body.get("messages") or []:
        content = message.get("content")
        if isinstance(content, list):
            content = " ".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
        out.append(str(content or ""))
    return "\n".join(out)


@dataclass
class ResearchModel:
    corpus: Corpus = MULTI_HOP
    #: seconds each call takes before answering (per stage, or for all under "*")
    latency: dict[str, float] = field(default_factory=dict)
    #: the context window the "server" holds; a longer prompt is refused (None: no limit)
    context_tokens: int | None = None
    #: add a citation of INVENTED_URL to the report (the citation check must remove it)
    invent: bool = True
    calls: list[Call] = field(default_factory=list)
    #: a test's own answers for a stage, replacing the model's
    overrides: dict[str, Callable[[str], str]] = field(default_factory=dict)

    # -- the responder ---------------------------------------------------------------------------
    def __call__(self, body: dict[str, Any]) -> Reply:
        started = time.monotonic()
        prompt = prompt_text(body)
        prompt_tokens = len(prompt) // 4
        if self.context_tokens is not None and prompt_tokens > self.context_tokens:
            message = (f"This model's maximum context length is {self.context_tokens} tokens. However, you "
                       f"requested {prompt_tokens} tokens in the messages. Please reduce the length of the messages.")
            self.calls.append(Call("refused", started, time.monotonic(), len(prompt), ""))
            return Reply(status=400, error_body={"object": "error", "message": message, "type": "BadRequestError",
                                                 "param": None, "code": 400})
        stage = self.stage(prompt)
        wants_json = "json" in prompt.lower()
        answer = self.overrides[stage](prompt) if stage in self.overrides else self.answer(stage, prompt, wants_json)
        self.calls.append(Call(stage, started, time.monotonic(), len(prompt), answer))
        delay = self.latency.get(stage, self.latency.get("*", 0.0))
        return Reply(text=answer, usage=(max(1, prompt_tokens), max(1, len(answer) // 4)), delay=delay,
                     chunk_size=64)

    def stages(self) -> list[str]:
        return [call.stage for call in self.calls]

    # -- telling the stages apart ----------------------------------------------------------------
    def stage(self, prompt: str) -> str:
        if any(page.body and page.body[:120] in prompt for page in self.corpus.pages):
            return "notes"
        has_notes = any(fact in prompt for fact in self.corpus.facts()) or self._corpus_urls(prompt)
        if not has_notes:
            return "plan" if self._mentions_question(prompt) else "other"
        lowered = prompt.lower()
        if any(word in lowered for word in REFLECT_WORDS) and "report" not in self._instructions(lowered):
            return "reflect"
        return "report"

    def _instructions(self, lowered: str) -> str:
        """The prompt without the corpus's own sentences (what the gateway wrote, roughly)."""
        for fact in self.corpus.facts():
            lowered = lowered.replace(fact.lower(), "")
        return lowered[:400] + lowered[-400:]

    def _mentions_question(self, prompt: str) -> bool:
        words = set(re.findall(r"[a-z]+", self.corpus.question.lower())) - {"the", "on", "is", "where", "who"}
        return len(words & set(re.findall(r"[a-z]+", prompt.lower()))) >= max(1, len(words) // 2)

    def _corpus_urls(self, prompt: str) -> list[str]:
        slugs = {page.slug for page in self.corpus.pages}
        return [url for url in URL.findall(prompt) if url.rstrip("/.").rsplit("/", 1)[-1] in slugs]

    # -- the answers -----------------------------------------------------------------------------
    def answer(self, stage: str, prompt: str, wants_json: bool) -> str:
        if stage == "plan":
            questions = list(self.corpus.sub_questions)
            if wants_json:
                return json.dumps({"brief": self.corpus.brief, "questions": questions})
            return f"Brief: {self.corpus.brief}\n\n" + "\n".join(f"{i}. {q}" for i, q in enumerate(questions, 1))
        if stage == "notes":
            found = [fact for fact in self.corpus.facts() if fact in prompt]
            if wants_json:
                return json.dumps({"notes": found})
            return "\n".join(f"- {fact}" for fact in found) or "- Nothing relevant on this page."
        if stage == "reflect":
            follow = [hop.follow_up for hop in self.corpus.hops if hop.known in prompt and hop.unknown not in prompt]
            if wants_json:
                return json.dumps({"questions": follow, "done": not follow})
            return "\n".join(f"{i}. {q}" for i, q in enumerate(follow, 1)) if follow else "none"
        if stage == "report":
            return self.report(prompt)
        return "OK."

    def report(self, prompt: str) -> str:
        numbers = self.source_numbers(prompt)
        lines = ["# Findings", ""]
        cited: dict[int, str] = {}
        for page in self.corpus.pages:
            url = next((u for u in numbers if u.rstrip("/").endswith("/page/" + page.slug)), None)
            for fact in page.facts:
                if fact in prompt and url is not None:
                    n = numbers[url]
                    cited[n] = url
                    lines.append(f"{fact} [{n}]")
        if self.invent:
            invented = max([*numbers.values(), 0]) + 1
            cited[invented] = INVENTED_URL
            lines.append(f"Some say the lighthouse was moved inland in 1990 [{invented}], as "
                         f"[a page of rumours]({INVENTED_URL}) claims.")
        lines += ["", "## Sources", ""]
        lines += [f"[{n}] {url}" for n, url in sorted(cited.items())]
        return "\n".join(lines)

    def source_numbers(self, prompt: str) -> dict[str, int]:
        """URL -> the number the prompt gave it ("[3] Title https://..." or "3. https://..."), else
        the order of first appearance."""
        numbers: dict[str, int] = {}
        for match in NUMBERED_URL.finditer(prompt):
            numbers.setdefault(match.group(3).rstrip("."), int(match.group(1) or match.group(2)))
        if numbers:
            return numbers
        for url in URL.findall(prompt):
            numbers.setdefault(url.rstrip("."), len(numbers) + 1)
        return numbers
