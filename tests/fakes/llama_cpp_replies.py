"""Replies of a real upstream: llama-cpp-python 0.3.36's OpenAI server (`python -m llama_cpp.server`,
Gemma 3 270M Q4_K_M), recorded from it with curl (the bodies in tests/fakes/recorded/, byte for byte).

Each is what once broke the gateway (issue 26); tests/upstream/test_real_server_replies.py replays
them through the fake upstream (`Reply(raw=..., raw_content_type=...)`).
"""

from __future__ import annotations

from pathlib import Path

from tests.fakes.upstream import Reply

SSE = "text/event-stream"

RECORDED = Path(__file__).parent / "recorded"

#: `chat_format=chatml-function-calling`, a streamed call the request forced
#: (`tool_choice: {"type": "function", "function": {"name": "get_weather"}}`, "Weather in Oslo?"):
#: every fragment repeats the call's whole name and id; only `arguments` comes in pieces, which
#: join to FORCED_CALL_ARGUMENTS. No usage, though the request asked for it in `stream_options`.
FORCED_CALL_STREAM = (RECORDED / "llama_cpp_forced_call.sse").read_bytes()
FORCED_CALL_ARGUMENTS = '{ "city": "Oslo" } '

#: A 200 `text/event-stream` with an empty body: what the server answers a stream whose prompt
#: its chat template refused (the Gemma-format one of tests/real_upstream/ for a second system
#: message: the same request unstreamed is a 500 "'raise_exception' is undefined"), and, per the
#: issue, a streamed `"auto"` turn in which the model picked a tool. No frame, no finish_reason,
#: no `[DONE]`.
EMPTY_STREAM = b""

#: A plain streamed answer ("Say hello.", max_tokens 6, finish_reason "length"), with no usage:
#: the server ignores `stream_options.include_usage`.
TEXT_STREAM = (RECORDED / "llama_cpp_text.sse").read_bytes()

#: That answer's first two frames, then the end of the body: a stream cut short (not recorded:
#: made from TEXT_STREAM, as a server that dies mid-answer would leave it).
TEXT_STREAM_CUT = b"\n\n".join(TEXT_STREAM.split(b"\n\n")[:2]) + b"\n\n"


def stream(raw: bytes) -> Reply:
    return Reply(raw=raw, raw_content_type=SSE)
