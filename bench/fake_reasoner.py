"""A scripted fake model that reasons, searches and cites, plus a fake SearXNG, in one process.

`python -m bench.fake_reasoner --port 0` prints `fake reasoner listening on http://127.0.0.1:PORT`.
Used by bench/openwebui_screenshot.py to show, in a real Open WebUI, what the gateway relays of a
reasoning model's turn. For one chat it plays the part of a Qwen3/DeepSeek-R1-style server on vLLM:

- round 1 (the last message is the user's and `web_search` is offered): streams its thinking in
  `delta.reasoning_content`, slowly enough that "Thought for N seconds" has an N, then calls
  `web_search` with the query "what do otters eat";
- round 2 (the last message is the tool result): a little more thinking, then an answer that
  cites the hits by the numbers the gateway gave them in the tool result (`"id": 1` -> `[1]`),
  as the gateway's system prompt asks (Open WebUI draws them as chips, SDKs get `url_citation`s);
- anything else (a request without `web_search`, e.g. a title or tag task Open WebUI may send):
  one short plain answer.

`GET /search?q=..&format=json` answers as SearXNG does, with otter pages as hits.
"""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

from aiohttp import web

from bench.serving import run_main, searxng_reply, serve_forever

MODEL = "fake-reasoner"
QUERY = "what do otters eat"
#: Pause between streamed pieces of thinking, in seconds: eight pieces give "Thought for 2 seconds".
THINK_DELAY = 0.3

THINKING_1 = [
    "The user asks what otters eat. ", "There are thirteen otter species, ", "and their diets differ: ",
    "sea otters and river otters eat different prey. ", "I should not answer from memory alone; ",
    "a quick web search will give me a source to cite. ", "Searching for otter diet.",
]
THINKING_2 = [
    "The search found a page on otter diet. ", "It says fish is the staple, ",
    "with crustaceans, frogs and, for sea otters, sea urchins and clams. ", "I will answer and cite it.",
]
ANSWER = (
    "Otters are carnivores. Most river otters live mainly on **fish**, and add crayfish, crabs, frogs, "
    "birds' eggs and small mammals when they can catch them {a}{c}. Sea otters eat hard-shelled sea "
    "creatures instead: sea urchins, clams, mussels and crabs, which they crack open with a stone "
    "while floating on their backs {a}. An adult sea otter eats about a quarter of its body weight "
    "every day {b}."
)
HITS = [
    {"url": "https://en.wikipedia.org/wiki/Otter", "title": "Otter - Wikipedia",
     "content": "Otters are carnivorous mammals. Their diet is mainly fish, plus crustaceans, frogs, "
                "birds and, for sea otters, sea urchins and clams."},
    {"url": "https://www.nationalgeographic.com/animals/mammals/facts/sea-otter",
     "title": "Sea otter facts | National Geographic",
     "content": "Sea otters eat about 25 percent of their body weight in food each day."},
    {"url": "https://www.fws.gov/species/northern-river-otter-lontra-canadensis",
     "title": "Northern river otter | U.S. Fish & Wildlife Service",
     "content": "River otters feed on fish, crayfish, frogs and turtles."},
]


def _frame(obj: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(obj, separators=(",", ":")).encode() + b"\n\n"


def _chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
    return _frame({"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 1700000000,
                   "model": MODEL, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts
        return " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


def _numbers(messages: list[dict[str, Any]]) -> dict[str, str]:
    """`[n]` for the first three hits of the last tool result, by the `id` the gateway gave them
    (`[1]`, `[2]`, `[3]` when the result has none)."""
    try:
        hits = json.loads(_text(messages[-1].get("content")))["data"]["web"]
        ids = [f"[{hit['id']}]" for hit in hits[:3]]
    except (ValueError, KeyError, TypeError):  # not the gateway's result (Open WebUI's own search)
        ids = []
    ids += [f"[{n}]" for n in range(len(ids) + 1, 4)]
    return {"a": ids[0], "b": ids[1], "c": ids[2]}


async def _stream(request: web.Request, pieces: list[tuple[dict[str, Any], float]],
                  finish: str) -> web.StreamResponse:
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
    await response.prepare(request)
    await response.write(_chunk({"role": "assistant", "content": ""}))
    for delta, pause in pieces:
        await response.write(_chunk(delta))
        if pause:
            await asyncio.sleep(pause)
    await response.write(_chunk({}, finish))
    await response.write(b"data: [DONE]\n\n")
    await response.write_eof()
    return response


def _whole(message: dict[str, Any], finish: str) -> web.Response:
    return web.json_response({
        "id": "chatcmpl-fake", "object": "chat.completion", "created": 1700000000, "model": MODEL,
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": 20, "completion_tokens": 80, "total_tokens": 100}})


async def chat(request: web.Request) -> web.StreamResponse:
    body = await request.json()
    messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
    names = {(t.get("function") or {}).get("name") for t in body.get("tools") or ()}
    # the gateway's search, or (Open WebUI talking to this model directly, its own search on) Open WebUI's
    search_tool = "web_search" if "web_search" in names else "search_web" if "search_web" in names else None
    offered = search_tool is not None
    last = messages[-1].get("role") if messages else None
    stream = bool(body.get("stream"))
    if last == "tool":
        answer = ANSWER.format(**_numbers(messages))
        if not stream:
            return _whole({"role": "assistant", "content": answer,
                           "reasoning_content": "".join(THINKING_2)}, "stop")
        words = re.findall(r"\S+\s*", answer)
        pieces: list[tuple[dict[str, Any], float]] = [({"reasoning_content": t}, THINK_DELAY) for t in THINKING_2]
        pieces += [({"content": w}, 0.02) for w in words]
        return await _stream(request, pieces, "stop")
    if offered and last == "user":
        args = json.dumps({"query": QUERY})
        call: dict[str, Any] = {"id": "call_otters", "type": "function",
                                "function": {"name": search_tool, "arguments": args}}
        if not stream:
            return _whole({"role": "assistant", "content": None, "reasoning_content": "".join(THINKING_1),
                           "tool_calls": [call]}, "tool_calls")
        pieces = [({"reasoning_content": t}, THINK_DELAY) for t in THINKING_1]
        pieces.append(({"tool_calls": [{"index": 0, **call, "function": {"name": search_tool,
                                                                        "arguments": ""}}]}, 0))
        pieces.append(({"tool_calls": [{"index": 0, "function": {"arguments": args}}]}, 0))
        return await _stream(request, pieces, "tool_calls")
    text = "Otters"  # a side task (title, tags, follow-ups): short, and no tool
    if not stream:
        return _whole({"role": "assistant", "content": text}, "stop")
    return await _stream(request, [({"content": text}, 0)], "stop")


async def models(request: web.Request) -> web.Response:
    return web.json_response({"object": "list", "data": [
        {"id": MODEL, "object": "model", "created": 1700000000, "owned_by": "bench"}]})


async def search(request: web.Request) -> web.Response:
    if request.query.get("format") != "json":
        return web.Response(status=403, text="format not allowed")  # what SearXNG does
    return web.Response(body=searxng_reply(request.query.get("q", ""), HITS), content_type="application/json")


async def serve(port: int) -> None:
    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)
    app.router.add_get("/v1/models", models)
    app.router.add_get("/search", search)
    await serve_forever(web.AppRunner(app, access_log=None), port, "fake reasoner")


def main() -> None:
    run_main("scripted fake model (reasons, searches, cites) and fake SearXNG", serve)


if __name__ == "__main__":
    main()
