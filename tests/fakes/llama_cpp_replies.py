"""Replies of a real upstream, byte for byte: llama-cpp-python 0.3.36's OpenAI server
(`python -m llama_cpp.server`, Gemma 3 270M Q4_K_M), recorded through tests/support/recording_proxy.py.

Each is what once broke the gateway (issue 26); tests/upstream/test_real_server_replies.py replays
them through the fake upstream (`Reply(raw=..., raw_content_type=...)`). Only the ids and times the
server made up were shortened.
"""

from __future__ import annotations

from tests.fakes.upstream import Reply

SSE = "text/event-stream"

#: `chat_format=chatml-function-calling`, a streamed call the request forced
#: (`tool_choice: {"type": "function", "function": {"name": "get_weather"}}`): every fragment
#: repeats the call's whole name (and its id); only `arguments` comes in pieces.
FORCED_CALL_STREAM = (
    b'data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gemma-3-270m",'
    b'"choices":[{"index":0,"finish_reason":null,"logprobs":null,"delta":{"role":"assistant","content":null,'
    b'"function_call":null,"tool_calls":null}}]}\r\n\r\n'
    b'data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gemma-3-270m",'
    b'"choices":[{"index":0,"finish_reason":null,"logprobs":null,"delta":{"role":null,"content":null,'
    b'"function_call":{"name":"get_weather","arguments":"{\\""},"tool_calls":[{"index":0,'
    b'"id":"call__0_get_weather_cmpl-1","type":"function","function":{"name":"get_weather",'
    b'"arguments":"{\\""}}]}}]}\r\n\r\n'
    b'data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gemma-3-270m",'
    b'"choices":[{"index":0,"finish_reason":null,"logprobs":null,"delta":{"role":null,"content":null,'
    b'"function_call":{"name":"get_weather","arguments":"city"},"tool_calls":[{"index":0,'
    b'"id":"call__0_get_weather_cmpl-1","type":"function","function":{"name":"get_weather",'
    b'"arguments":"city"}}]}}]}\r\n\r\n'
    b'data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gemma-3-270m",'
    b'"choices":[{"index":0,"finish_reason":null,"logprobs":null,"delta":{"role":null,"content":null,'
    b'"function_call":{"name":"get_weather","arguments":"\\": \\"Oslo\\"}"},"tool_calls":[{"index":0,'
    b'"id":"call__0_get_weather_cmpl-1","type":"function","function":{"name":"get_weather",'
    b'"arguments":"\\": \\"Oslo\\"}"}}]}}]}\r\n\r\n'
    b'data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gemma-3-270m",'
    b'"choices":[{"index":0,"finish_reason":"tool_calls","logprobs":null,"delta":{"role":null,"content":null,'
    b'"function_call":null,"tool_calls":null}}]}\r\n\r\n'
    b"data: [DONE]\r\n\r\n"
)

#: A 200 `text/event-stream` with an empty body: what the server answers a stream whose prompt
#: its template refused (Gemma's, for a second system message), and a streamed `"auto"` turn in
#: which the model picked a tool. No frame, no finish_reason, no `[DONE]`.
EMPTY_STREAM = b""

#: A plain streamed answer as this server sends it: no usage (it ignores `stream_options`).
TEXT_STREAM = (
    b'data: {"id":"chatcmpl-2","object":"chat.completion.chunk","created":1,"model":"gemma-3-270m",'
    b'"choices":[{"index":0,"delta":{"role":"assistant"},"logprobs":null,"finish_reason":null}]}\r\n\r\n'
    b'data: {"id":"chatcmpl-2","object":"chat.completion.chunk","created":1,"model":"gemma-3-270m",'
    b'"choices":[{"index":0,"delta":{"content":"Hello"},"logprobs":null,"finish_reason":null}]}\r\n\r\n'
    b'data: {"id":"chatcmpl-2","object":"chat.completion.chunk","created":1,"model":"gemma-3-270m",'
    b'"choices":[{"index":0,"delta":{"content":" there"},"logprobs":null,"finish_reason":null}]}\r\n\r\n'
    b'data: {"id":"chatcmpl-2","object":"chat.completion.chunk","created":1,"model":"gemma-3-270m",'
    b'"choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"length"}]}\r\n\r\n'
    b"data: [DONE]\r\n\r\n"
)

#: The same answer's first frames, and then the end of the body: a stream cut short.
TEXT_STREAM_CUT = TEXT_STREAM[:TEXT_STREAM.index(b'"content":" there"')].rsplit(b"data:", 1)[0]


def stream(raw: bytes) -> Reply:
    return Reply(raw=raw, raw_content_type=SSE)
