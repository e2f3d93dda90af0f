"""xAI (https://docs.x.ai): web search through the Responses API's server-side `web_search` tool.

There is no plain search endpoint: Grok searches, reads and then *writes* the results. We ask
for a JSON list of results and parse it from the `output_text`; when the model answers in prose
we fall back to its `url_citation` annotations, then to the response's `citations` list. Every
description says "model-written" so the agent knows these are not a search engine's snippets.
`include: ["no_inline_citations"]` keeps `[[1]](url)` markup out of the JSON we parse.

Model: XAI_MODEL (default `grok-4.3`, the replacement xAI named when it retired the grok-4-1/4-fast
family on 2026-05-15). A model xAI does not serve (retired, misspelt, not on the team's plan) is a
fallback-worthy failure of kind `model_retired`: the chain moves on and the sentence says to set
XAI_MODEL. Allowed domains go to the web_search tool's own `allowed_domains` (at most 5).
Time: agentic searches with a reasoning model often run past the gateway's 30 s tool timeout, so
the plugin asks for `reasoning: {"effort": "low"}` (XAI_REASONING_EFFORT; `none` sends no
reasoning field, for a model that refuses one); the HTTP client waits as long as the tool may run.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from providers.failures import MODEL_RETIRED
from providers.http import HTTPStatusError, decoded_body
from providers.payload import bounded, clip, env_value, require_object, text
from providers.service import ServiceProvider
from providers.web import Envelope, ProviderError, search_result

if TYPE_CHECKING:
    from providers.http import ServiceResponse

SERVICE = "xAI"
MODEL_VAR = "XAI_MODEL"
DEFAULT_MODEL = "grok-4.3"
EFFORT_VAR = "XAI_REASONING_EFFORT"
DEFAULT_EFFORT = "low"
MAX_DOMAINS = 5  # the web_search tool's cap on allowed_domains
_EFFORTS = {"low", "medium", "high"}

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


def _names_a_missing_model(status: int, body: Any) -> bool:
    """xAI answers a request naming a model it does not serve (retired on 2026-05-15, misspelt,
    not on the team's plan) with 404, or 400 for a retired one, and a sentence about the model."""
    if status not in (400, 404):
        return False
    words = json.dumps(body).lower() if not isinstance(body, str) else body.lower()
    return "model" in words and any(
        w in words for w in ("does not exist", "not found", "retired", "deprecated", "no longer available"))


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
        effort = env_value(env, EFFORT_VAR).lower() or DEFAULT_EFFORT
        self._effort = effort if effort in _EFFORTS else None  # "none" (or nonsense): send no field

    @property
    def display_name(self) -> str:
        return "xAI Grok web search (model-written results)"

    def auth_headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self._key}"}

    def http_error(self, response: ServiceResponse) -> HTTPStatusError:
        if _names_a_missing_model(response.status_code, decoded_body(response)):
            # Not this request's fault: every search fails until XAI_MODEL changes, so the chain
            # moves on (retryable) and the cool-down soon skips xAI.
            return HTTPStatusError(
                f"{SERVICE} does not serve the model {self._model!r} (retired or unknown; HTTP "
                f"{response.status_code}): set {MODEL_VAR} to a current model, e.g. {DEFAULT_MODEL}",
                response.status_code, retryable=True, kind=MODEL_RETIRED,
            )
        return super().http_error(response)

    async def do_search(self, query: str, limit: int, *, allowed_domains: list[str] | None = None) -> Envelope:
        limit = bounded(limit, 20)
        tool: dict[str, Any] = {"type": "web_search"}
        if allowed_domains:
            # Native filter, at most 5 domains; the gateway drops hits outside the full list.
            tool["allowed_domains"] = list(allowed_domains[:MAX_DOMAINS])
        payload = {
            "model": self._model,
            "input": [
                {"role": "system", "content": INSTRUCTIONS},
                {"role": "user", "content": f"Find up to {limit} web pages for: {query}"},
            ],
            "tools": [tool],
            "include": ["no_inline_citations"],
            "store": False,
        }
        if self._effort:
            payload["reasoning"] = {"effort": self._effort}
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
