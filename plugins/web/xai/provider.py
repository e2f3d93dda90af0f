"""xAI (https://docs.x.ai): web search through the Responses API's server-side `web_search` tool.

There is no plain search endpoint: Grok searches, reads and then *writes* the results. We ask
for a JSON list of results and parse it from the `output_text`; when the model answers in prose
we fall back to its `url_citation` annotations, then to the response's `citations` list. Every
description says "model-written" so the agent knows these are not a search engine's snippets.
`include: ["no_inline_citations"]` keeps `[[1]](url)` markup out of the JSON we parse.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from providers.payload import bounded, clip, env_value, require_object, text
from providers.service import ServiceProvider
from providers.web import Envelope, ProviderError, search_result

SERVICE = "xAI"
MODEL_VAR = "XAI_MODEL"
DEFAULT_MODEL = "grok-4-1-fast-reasoning"

INSTRUCTIONS = (
    "You are a web search backend. Use the web_search tool, then reply with JSON only: an array "
    'of objects {"title": string, "url": string, "snippet": string} for the most relevant pages, '
    "best first. Use only URLs you actually found; the snippet summarises what the page says in "
    "one or two sentences. No prose, no markdown fences."
)


def _output_parts(body: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The `output_text` parts of the response's message items."""
    parts: list[Mapping[str, Any]] = []
    output = body.get("output")
    if not isinstance(output, list):
        return parts
    for item in output:
        if isinstance(item, Mapping) and item.get("type") == "message" and isinstance(item.get("content"), list):
            parts.extend(p for p in item["content"] if isinstance(p, Mapping) and p.get("type") == "output_text")
    return parts


def _json_items(raw: str) -> list[Mapping[str, Any]] | None:
    """The first JSON array (or `{"results": [...]}`) in the text, tolerating fences and preamble."""
    decoder = json.JSONDecoder()
    for start, char in enumerate(raw):
        if char not in "[{":
            continue
        try:
            value, _end = decoder.raw_decode(raw, start)
        except ValueError:
            continue
        if isinstance(value, dict):
            value = value.get("results")
        # Keep scanning past things like "[1]" in a preamble: only a list of objects counts.
        items = [v for v in value if isinstance(v, Mapping)] if isinstance(value, list) else []
        if items:
            return items
    return None


def _web_url(value: Any) -> str:
    url = text(value)
    return url if url.startswith(("http://", "https://")) else ""


def _described(snippet: str) -> str:
    if snippet:
        return clip(f"Model-written summary (xAI Grok): {snippet}")
    return "Cited by a model-written answer (xAI Grok); open the page to see what it says."


def _dedupe(hits: Iterable[dict[str, str]], limit: int) -> list[dict[str, str]]:
    seen: set[str] = set()
    unique = []
    for hit in hits:
        if hit["url"] not in seen:
            seen.add(hit["url"])
            unique.append(hit)
    return unique[:limit]


class XaiProvider(ServiceProvider):
    name = "xai"
    service = SERVICE
    key_var = "XAI_API_KEY"
    url_var = "XAI_API_URL"
    default_url = "https://api.x.ai/v1"

    def __init__(self, env: Mapping[str, str], *, timeout: float = 90.0) -> None:
        # Agentic search runs several searches and reads pages before answering: allow minutes.
        super().__init__(env, timeout=timeout)
        self._model = env_value(env, MODEL_VAR) or DEFAULT_MODEL

    @property
    def display_name(self) -> str:
        return "xAI Grok web search (model-written results)"

    def auth_headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self._key}"}

    async def do_search(self, query: str, limit: int) -> Envelope:
        limit = bounded(limit, 20)
        payload = {
            "model": self._model,
            "input": [
                {"role": "system", "content": INSTRUCTIONS},
                {"role": "user", "content": f"Find up to {limit} web pages for: {query}"},
            ],
            "tools": [{"type": "web_search"}],
            "include": ["no_inline_citations"],
            "store": False,
        }
        body = require_object(await self.post_json("/responses", payload), SERVICE)
        self._raise_for_failed_response(body)
        hits = self._hits(body, limit)
        if not hits:
            raise ProviderError(f"{SERVICE} returned no results (the model cited no pages)")
        return search_result(hits)

    @staticmethod
    def _raise_for_failed_response(body: Mapping[str, Any]) -> None:
        # A 200 can still carry an error (overload, refusal) or a failed status.
        error = body.get("error")
        if error:
            detail = text(error.get("message")) if isinstance(error, Mapping) else text(error)
            raise ProviderError(f"{SERVICE} reported an error: {detail or 'no reason given'}")
        status = text(body.get("status"))
        if status in ("failed", "cancelled"):
            raise ProviderError(f"{SERVICE} search {status} before producing results")
        if "output" not in body:
            raise ProviderError(f"{SERVICE} returned an unexpected response (no 'output')")

    @staticmethod
    def _hits(body: Mapping[str, Any], limit: int) -> list[dict[str, str]]:
        parts = _output_parts(body)
        items = _json_items("\n".join(text(p.get("text")) for p in parts))
        if items:
            hits = _dedupe(
                (
                    {
                        "title": text(i.get("title")),
                        "url": _web_url(i.get("url")),
                        "description": _described(text(i.get("snippet")) or text(i.get("description"))),
                    }
                    for i in items
                    if _web_url(i.get("url"))
                ),
                limit,
            )
            if hits:
                return hits
        # Prose answer: the pages it cited are the results we can stand behind.
        cited = [
            {"title": text(a.get("title")), "url": _web_url(a.get("url")), "description": _described("")}
            for p in parts
            for a in (p.get("annotations") if isinstance(p.get("annotations"), list) else [])
            if isinstance(a, Mapping) and a.get("type") == "url_citation" and _web_url(a.get("url"))
        ]
        if cited:
            return _dedupe(cited, limit)
        citations = body.get("citations") if isinstance(body.get("citations"), list) else []
        return _dedupe(
            ({"title": "", "url": _web_url(c), "description": _described("")} for c in citations if _web_url(c)),
            limit,
        )
