"""The upstream model: any OpenAI-compatible `/v1` endpoint, over one keep-alive connection pool.

Faults become typed gateway errors with the upstream's own message:
unreachable -> 502, timeout -> 504, upstream 429 -> 429 (its Retry-After kept),
upstream 400/422 (the request was refused) -> 400, anything else -> 502.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncGenerator
from typing import Any

from gateway import __version__
from gateway.errors import (
    GatewayError,
    InvalidRequestError,
    RateLimitError,
    UpstreamError,
    UpstreamTimeoutError,
)
from gateway.upstream.sse_frames import is_done, is_text_delta, load_stdlib, load_text_delta, plain_text, sse_batches
from gateway.wire import json_out, jsontext
from providers.upstream_http import (
    ConnectFault,
    ConnectTimeout,
    Disconnected,
    HttpFault,
    OriginPool,
    ReadTimeout,
    Response,
)

#: After `[DONE]`, how long (and how much) to read for the end of the body, so that the connection
#: goes back to the pool instead of being closed (a new TCP connection per stream otherwise).
DRAIN_SECONDS = 0.05
DRAIN_BYTES = 64 * 1024
JSON = "application/json"


def _error_message(body: bytes) -> str:
    try:
        data = json.loads(body)
    except ValueError:
        text = body.decode("utf-8", "replace").strip()
        return text[:300] or "no details"
    if isinstance(data, dict):
        error = data.get("error", data)
        if isinstance(error, dict):
            message = error.get("message") or error.get("detail")
            if message:
                return str(message)[:500]
        elif isinstance(error, str):
            return error[:500]
        if "detail" in data:
            return str(data["detail"])[:500]
    return json.dumps(data)[:300]


def _parse_retry_after(value: str | None) -> float | None:
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None


class UpstreamClient:
    """One pool of keep-alive connections to the upstream model for the app's lifetime."""

    def __init__(
        self,
        base_url: str,
        *,
        api_key: str | None,
        model: str | None,
        connect_timeout: float,
        read_timeout: float,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self._api_key = api_key
        self._model = model
        self._connect_timeout = connect_timeout
        self._read_timeout = read_timeout
        self._pool: OriginPool | None = None
        self._model_lock = asyncio.Lock()

    async def start(self) -> None:
        headers = {"Accept": JSON, "User-Agent": f"agent-gateway/{__version__}"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        self._pool = OriginPool(self.base_url, connect_timeout=self._connect_timeout,
                                read_timeout=self._read_timeout, headers=headers)

    async def close(self) -> None:
        if self._pool is not None:
            await self._pool.close()
            self._pool = None

    @property
    def pool(self) -> OriginPool:
        if self._pool is None:
            raise RuntimeError("UpstreamClient.start() was not awaited")
        return self._pool

    def _fault(self, exc: HttpFault) -> GatewayError:
        if isinstance(exc, ReadTimeout | ConnectTimeout):
            return UpstreamTimeoutError(f"the upstream model at {self.base_url} timed out")
        if isinstance(exc, ConnectFault):
            return UpstreamError(f"the upstream model at {self.base_url} is unreachable ({exc.reason})",
                                 code="upstream_unreachable")
        if isinstance(exc, Disconnected):
            return UpstreamError(f"the upstream model at {self.base_url} closed the connection mid-reply")
        return UpstreamError(f"the upstream model at {self.base_url} failed: {exc}")

    async def _request(self, method: str, path: str, body: bytes | None = None) -> Response:
        """The reply's head, or the typed gateway error for an HTTP status of 400 and above."""
        response = await self.pool.request(method, path, body, JSON if body is not None else None)
        if response.status >= 400:
            async with response:
                await self._raise_for_status(response)
        return response

    async def _post_chat(self, payload: dict[str, Any], *, stream: bool) -> Response:
        """POST /chat/completions. The encoded body lives only for the call: a stream's generator
        frame would otherwise hold it until the stream ends (~8 KB per open stream, tracemalloc)."""
        body: dict[str, Any] = {**payload, "model": await self.model(), "stream": stream}
        if stream:
            body["stream_options"] = {"include_usage": True}
        return await self._request("POST", "/chat/completions", json_out.dumps(body, ensure_ascii=True))

    async def _raise_for_status(self, response: Response) -> None:
        try:
            body = await response.read(1024 * 1024)
        except HttpFault:
            body = b""
        message = f"upstream model error (HTTP {response.status}): {_error_message(body)}"
        if response.status == 429:
            raise RateLimitError(message, retry_after=_parse_retry_after(response.headers.get("retry-after")))
        if response.status in (400, 422):
            raise InvalidRequestError(message, code="upstream_rejected")
        raise UpstreamError(message)

    async def model(self) -> str:
        """The configured model, or the first one the upstream lists (looked up once)."""
        if self._model:
            return self._model
        async with self._model_lock:
            if not self._model:
                models = await self.list_models()
                if not models:
                    raise UpstreamError(
                        f"the upstream at {self.base_url} lists no models; set LLM_MODEL", code="no_upstream_model"
                    )
                self._model = models[0]
        return self._model

    async def list_models(self) -> list[str]:
        try:
            async with await self._request("GET", "/models") as response:
                data = jsontext.loads(await response.read())
        except HttpFault as exc:
            raise self._fault(exc) from exc
        except ValueError as exc:
            raise UpstreamError(f"the upstream at {self.base_url}/models did not return JSON") from exc
        items = data.get("data") if isinstance(data, dict) else None
        if not isinstance(items, list):
            raise UpstreamError(f"the upstream at {self.base_url}/models did not return a model list")
        return [str(item["id"]) for item in items if isinstance(item, dict) and "id" in item]

    async def complete(self, payload: dict[str, Any]) -> dict[str, Any]:
        """A non-streaming chat completion; returns the upstream's JSON object."""
        try:
            async with await self._post_chat(payload, stream=False) as response:
                raw = await response.read()
        except HttpFault as exc:
            raise self._fault(exc) from exc
        try:
            data = jsontext.loads(raw)
        except ValueError as exc:
            raise UpstreamError("the upstream model returned a body that is not JSON") from exc
        if not isinstance(data, dict) or not isinstance(data.get("choices"), list) or not data["choices"]:
            raise UpstreamError("the upstream model returned a completion without choices")
        if not _well_formed(data, "message"):
            raise UpstreamError("the upstream model returned a completion of an unexpected shape")
        return data

    async def stream(self, payload: dict[str, Any]) -> AsyncGenerator[dict[str, Any] | str, None]:
        """A streaming chat completion; yields each parsed `chat.completion.chunk`, except that the
        usual one (one choice, nothing but text, not finished) is handed over as its text alone
        ("" when it has none): the consumer then skips probing a dict for what it cannot hold."""
        try:
            async with await self._post_chat(payload, stream=True) as response:
                if not response.headers.get("content-type", "").startswith("text/event-stream"):
                    # Some servers ignore stream=true; accept a whole completion as one chunk.
                    yield _completion_as_chunk(await self._read_json(response))
                    return
                # closed here, not left to the loop's finaliser hook (a task and a wake-up per
                # stream), when the stream returns at [DONE]
                async with contextlib.aclosing(sse_batches(response.next_piece)) as batches:
                    async for frames in batches:
                        for frame in frames:
                            if is_done(frame):  # before JSON: a refused parse raises, which is dear
                                await _finish_body(response)
                                return
                            chunk = load_text_delta(frame)  # the fast lane: most frames end here
                            if chunk is not None:
                                text = plain_text(chunk)
                                yield chunk if text is None else text
                                continue
                            chunk = _checked_frame(frame)
                            if chunk is not None:
                                yield chunk
        except HttpFault as exc:
            raise self._fault(exc) from exc

    async def _read_json(self, response: Response) -> dict[str, Any]:
        try:
            data = jsontext.loads(await response.read())
        except ValueError as exc:
            raise UpstreamError("the upstream model returned a body that is not JSON") from exc
        if not isinstance(data, dict):
            raise UpstreamError("the upstream model returned an unexpected body")
        return data


def _checked_frame(payload: bytes) -> dict[str, Any] | None:
    """One stream frame the stdlib way: its chunk, None for JSON that is not an object (skipped),
    or an UpstreamError for malformed JSON, an error object or a chunk of the wrong shape."""
    try:
        chunk = load_stdlib(payload)
    except ValueError as exc:
        raise UpstreamError("the upstream model sent a malformed stream frame") from exc
    if not isinstance(chunk, dict):
        return None
    if "error" in chunk:
        # the message read from the leniently decoded text, as the frame itself was
        lenient = payload.strip().decode("utf-8", "replace").encode()
        raise UpstreamError(f"upstream model error mid-stream: {_error_message(lenient)}")
    if not is_text_delta(chunk) and not _well_formed(chunk, "delta"):
        raise UpstreamError("the upstream model sent a malformed stream frame (unexpected shape)")
    return chunk


def _optional(value: Any, kind: type | tuple[type, ...]) -> bool:
    return value is None or isinstance(value, kind)


def _well_formed(data: dict[str, Any], body_key: str) -> bool:
    """Whether a completion (`body_key` "message") or chunk ("delta") has the shape the agent reads:
    a well-formed JSON object of the wrong shape must be an upstream error, not a crash (500)."""
    if not _optional(data.get("usage"), dict) or not _optional(data.get("choices"), list):
        return False
    if isinstance(data.get("usage"), dict) and not all(
        _optional(data["usage"].get(k), int) for k in ("prompt_tokens", "completion_tokens")
    ):
        return False
    for choice in data.get("choices") or ():
        if not isinstance(choice, dict) or not _optional(choice.get("finish_reason"), str):
            return False
        body = choice.get(body_key)
        if not _optional(body, dict):
            return False
        body = body or {}
        if not _optional(body.get("content"), str) or not _optional(body.get("tool_calls"), list):
            return False
        for call in body.get("tool_calls") or ():
            if not isinstance(call, dict) or not _optional(call.get("function"), dict):
                return False
            function = call.get("function") or {}
            if not _optional(function.get("name"), str) or not _optional(function.get("arguments"), str):
                return False
            if not _optional(call.get("id"), str):
                return False
    return True


def _completion_as_chunk(data: dict[str, Any]) -> dict[str, Any]:
    choices = data.get("choices") or [{}]
    message = choices[0].get("message") or {}
    delta: dict[str, Any] = {"content": message.get("content")}
    if message.get("tool_calls"):
        delta["tool_calls"] = [{**call, "index": i} for i, call in enumerate(message["tool_calls"])]
    return {"choices": [{"index": 0, "delta": delta, "finish_reason": choices[0].get("finish_reason")}],
            "usage": data.get("usage")}


async def _finish_body(response: Response) -> None:
    """Read what follows `[DONE]` (normally only the chunked-encoding terminator, a few bytes behind)
    so the connection can be reused; a server that keeps talking is left to be closed as before."""
    if response.release_if_ended():  # the usual case: the terminator came with [DONE]
        return
    drained = 0
    with contextlib.suppress(TimeoutError, HttpFault):
        async with asyncio.timeout(DRAIN_SECONDS):
            while drained <= DRAIN_BYTES:
                piece = await response.next_piece()
                if not piece:
                    return
                drained += len(piece)
