"""The upstream model: any OpenAI-compatible `/v1` endpoint, through one HTTP transport
(gateway/upstream/transport.py: a lean asyncio+httptools one for a plain `http://` upstream without
a proxy, aiohttp's client otherwise or with `LLM_HTTP_CLIENT=aiohttp`).

It honours `HTTPS_PROXY`/`HTTP_PROXY`/`NO_PROXY` (read at start), keeps connections alive
between requests, and times out a connect after `LLM_CONNECT_TIMEOUT` and a read after `LLM_TIMEOUT`
without a byte. Replies, streamed or whole, come out as typed deltas (`providers.upstream_deltas`).

Faults become typed gateway errors with the upstream's own message, cut short and scrubbed of
anything key-like (`gateway.upstream.text`): unreachable -> 502, timeout -> 504, upstream 429 ->
429 (its Retry-After kept), upstream 400/422 (the request was refused) -> 400, anything else -> 502.
The base URL's credentials, if any, never appear in a message.
"""

from __future__ import annotations

import asyncio
import base64
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping
from typing import Any

from yarl import URL

from gateway import __version__
from gateway.common import json_in, json_out
from gateway.errors import (
    EmptyStreamError,
    GatewayError,
    InvalidRequestError,
    RateLimitError,
    UpstreamError,
)
from gateway.upstream import transport_choice
from gateway.upstream.deltas import Finish, Text, Texts, UpstreamDelta, deltas_of
from gateway.upstream.faults import fault
from gateway.upstream.shapes import completion_deltas, well_formed
from gateway.upstream.sse_frames import (
    SSELines,
    UsualFrames,
    fast_chunk,
    is_done,
    is_text_delta,
    load_stdlib,
    usual_text,
)
from gateway.upstream.text import error_message, without_credentials
from gateway.upstream.transport import JSON, ClosedUnanswered, Reply, Transport, TransportSettings

#: After `[DONE]`, how long (and how much) to read for the end of the body, so that the connection
#: goes back to the pool instead of being closed (a new TCP connection per stream otherwise).
DRAIN_SECONDS = 0.05
DRAIN_BYTES = 64 * 1024
MAX_BODY = 64 * 1024 * 1024  # a whole (non-streamed) reply larger than this is not a model reply
MAX_ERROR_BODY = 1024 * 1024  # of an error reply, read for its message
#: Sends one chat request (payload, stream, headers) and returns its reply's head with the client it came from.
Opener = Callable[[dict[str, Any], bool, "Mapping[str, str] | None"],
                  Awaitable[tuple[Reply, "UpstreamClient"]]]


def _parse_retry_after(value: str | None) -> float | None:
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None


class UpstreamClient:
    """One HTTP transport (its keep-alive connection pool) to the upstream model for the app's lifetime."""

    def __init__(
        self,
        base_url: str,
        *,
        api_key: str | None,
        model: str | None,
        connect_timeout: float,
        read_timeout: float,
        http_client: str = "auto",
    ) -> None:
        url = URL(base_url.rstrip("/"))
        self._authorization = f"Bearer {api_key}" if api_key else None
        if url.user is not None and not api_key:  # `http://user:pass@host/v1`: HTTP basic auth
            pair = f"{url.user}:{url.password or ''}".encode()
            self._authorization = "Basic " + base64.b64encode(pair).decode("ascii")
        self._url = url.with_user(None)
        #: the URL as messages name it: never its credentials
        self.base_url = without_credentials(base_url.rstrip("/"))
        # never relayed, whatever an upstream echoes; nor the address, which only the log names
        self._secrets = (api_key, url.password, str(self._url.origin()), url.host and f"{url.host}:{url.port}")
        self._model = model
        self._connect_timeout = connect_timeout
        self._read_timeout = read_timeout
        self._http_client = http_client  # LLM_HTTP_CLIENT
        self._transport: Transport | None = None
        self._errors: tuple[type[BaseException], ...] = ()
        self._model_lock = asyncio.Lock()
        self._chat_url = str(self._url / "chat/completions")
        self._models_url = str(self._url / "models")

    async def start(self) -> None:
        headers = {"Accept": JSON, "User-Agent": f"agent-gateway/{__version__}"}
        if self._authorization:
            headers["Authorization"] = self._authorization
        self._transport = transport_choice.open_transport(TransportSettings(
            str(self._url), headers, self._connect_timeout, self._read_timeout, self._http_client))
        self._errors = self._transport.errors

    async def close(self) -> None:
        if self._transport is not None:
            await self._transport.close()
            self._transport = None

    @property
    def transport(self) -> Transport:
        if self._transport is None:
            raise RuntimeError("UpstreamClient.start() was not awaited")
        return self._transport

    def _fault(self, exc: BaseException) -> GatewayError:
        return fault(self.transport.neutral(exc), self.base_url, self._secrets)

    async def _request(self, method: str, url: str, body: bytes | None = None,
                       headers: Mapping[str, str] | None = None, stream: bool = False) -> Reply:
        """The reply's head, or the typed gateway error for a fault or an HTTP status of 400 and above."""
        transport = self._transport or self.transport  # the property only to say start() was not awaited
        for attempt in (1, 2):
            try:
                reply = await transport.send(method, url, body, headers, stream=stream)
            except ClosedUnanswered as exc:
                # closed unanswered on a pooled connection: the request never reached the server
                if attempt == 1 and exc.reused:
                    continue
                raise fault(exc, self.base_url, self._secrets) from exc.__cause__
            except self._errors as exc:
                raise self._fault(exc) from exc
            break
        if reply.status >= 400:
            try:
                await self._raise_for_status(reply)
            finally:
                await reply.close()
        return reply

    async def post_chat(self, payload: dict[str, Any], *, stream: bool, headers: Mapping[str, str] | None = None,
                        model: str | None = None) -> Reply:
        """POST /chat/completions for `model` (default: the configured one), up to the reply's
        head: a fault or an error status raises here, before any byte of the reply is read. The
        encoded body lives only for the call: a stream's generator frame would otherwise hold it
        until the stream ends."""
        # the configured model read here: `model()` (a coroutine) only when it must be looked up
        body: dict[str, Any] = {**payload, "model": model or self._model or await self.model(), "stream": stream}
        if stream:
            body["stream_options"] = {"include_usage": True}
        return await self._request("POST", self._chat_url, json_out.dumps(body, ensure_ascii=True), headers,
                                   stream)

    async def _raise_for_status(self, reply: Reply) -> None:
        try:
            body = await reply.read_whole(MAX_ERROR_BODY)
        except UpstreamError:  # larger than MAX_ERROR_BODY
            body = b""
        except self._errors:
            body = b""
        message = f"upstream model error (HTTP {reply.status}): {error_message(body, self._secrets)}"
        if reply.status == 429:
            raise RateLimitError(message, retry_after=_parse_retry_after(reply.header("Retry-After")))
        if reply.status in (400, 422):
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
                        "the upstream lists no models; set LLM_MODEL", code="no_upstream_model"
                    )
                self._model = models[0]
        return self._model

    async def list_models(self) -> list[str]:
        return [str(entry["id"]) for entry in await self.model_entries()]

    async def model_entries(self) -> list[dict[str, Any]]:
        """The upstream's `/models` list as it sent it (each entry an object with an `id`)."""
        response = await self._request("GET", self._models_url)
        data = await self._read_json(response, what="the upstream's model list")
        items = data.get("data")
        if not isinstance(items, list):
            raise UpstreamError("the upstream's /models did not return a model list")
        return [item for item in items if isinstance(item, dict) and "id" in item]

    async def get_json(self, path: str, *, at_root: bool = False) -> dict[str, Any]:
        """GET `path` under the base URL (or the server's root: llama.cpp's `/props`), as JSON."""
        response = await self._request("GET", str((self._url.parent if at_root else self._url) / path))
        return await self._read_json(response, what="the upstream's model list")

    async def whole(self, payload: dict[str, Any], *, headers: Mapping[str, str] | None = None,
                    opener: Opener | None = None) -> list[UpstreamDelta]:
        """One chat completion asked for whole, as the deltas a stream of it would bring, in one
        list: they cross to the agent in one step rather than as an async generator's items
        (its creation, a resume per delta, its closing). `headers` and `opener` as for `deltas`."""
        if opener is None:
            response, client = await self.post_chat(payload, stream=False, headers=headers), self
        else:
            response, client = await opener(payload, False, headers)
        # no `close` after: `read_whole` lets the reply go however it ends, and nothing can come
        # between here and its start (no await), so no reply is left open
        return completion_deltas(await client._read_json(response))

    async def deltas(self, payload: dict[str, Any], *, stream: bool, headers: Mapping[str, str] | None = None,
                     opener: Opener | None = None) -> AsyncGenerator[UpstreamDelta, None]:
        """One chat completion as typed deltas, streamed (`stream`) or asked for whole; `headers`
        go with the request (a trace's `traceparent`). `opener` (model routes,
        gateway/upstream/routes.py) sends the request instead and names the client whose reply it
        is (a fallback's); the reply is read the same way, in this generator."""
        if opener is None:
            response, client = await self.post_chat(payload, stream=stream, headers=headers), self
        else:
            response, client = await opener(payload, stream, headers)
        framed: bool | None = None  # None: not a stream; False until a stream's first frame
        try:
            if not stream or not (response.header("Content-Type") or "").startswith("text/event-stream"):
                # Some servers ignore stream=true; a whole completion is the same deltas.
                for delta in completion_deltas(await client._read_json(response)):
                    yield delta
                return
            finished = False  # a finish_reason came: a stream without [DONE] after it is whole
            framed = False  # a frame came: a stream cut after it is cut, not empty
            # The text deltas of one received piece go out as one `Texts` (one async step for the
            # burst, not one per frame), except a call's first text, which leaves alone at once:
            # the time to the first byte stays one frame's, not the whole burst's parse.
            first = True
            usual = UsualFrames()  # the usual frame by its bytes, once one has been parsed
            # the socket's pieces split into frames by plain calls: no async generator between
            lines, read, piece = SSELines(), response.read_chunk, b"."
            while piece:
                piece = await read()
                frames = lines.feed(piece) if piece else lines.end()
                if not frames:
                    continue
                framed = True
                texts: list[str] = []  # this piece's text deltas so far
                for frame in frames:
                    # before JSON: a refused parse raises, which is dear; a frame longer than
                    # 16 bytes is never [DONE] (the length first: no call for the usual frame)
                    if len(frame) <= 16 and is_done(frame):
                        if texts:
                            yield Texts(texts)
                        await response.finish(DRAIN_SECONDS, DRAIN_BYTES)
                        return
                    text = usual.text(frame)  # the fastest lane: no parse
                    if text is None:
                        chunk = fast_chunk(frame)  # the fast lane: most other frames end below
                        text = usual_text(chunk)
                        if text:
                            usual.learn(frame, text)
                    if text is not None:
                        if not text:
                            continue
                        if first:
                            first = False
                            yield Text(text)
                        else:
                            texts.append(text)
                        continue
                    if texts:  # the text before this frame leaves first (even if it is malformed)
                        yield Texts(texts)
                        texts = []
                    if not is_text_delta(chunk):  # refused by orjson, or not a text delta
                        chunk = client._checked_frame(frame)
                        if chunk is None:
                            continue
                    for delta in deltas_of(chunk, "delta"):
                        finished = finished or type(delta) is Finish
                        yield delta
                if texts:  # never held past the piece: the next read may be a while
                    yield Texts(texts)
            if not framed:  # llama-cpp-python's empty 200 when its template fails, or with tools
                raise EmptyStreamError("the upstream model ended its stream before its first frame")
            if not finished:
                raise UpstreamError("the upstream model ended its stream unfinished "
                                    "(no finish_reason, no [DONE])", code="upstream_stream_cut")
        except client._errors as exc:
            if framed is False and not isinstance(client.transport.neutral(exc), TimeoutError):
                # closed before its first frame: as empty as an empty body (a timeout is not retried)
                raise EmptyStreamError("the upstream model closed its stream before its first frame") from exc
            raise client._fault(exc) from exc
        finally:
            await response.close()  # a no-op once the reply was read whole and its connection released

    async def _read_json(self, response: Reply, *, what: str = "the upstream model") -> dict[str, Any]:
        try:
            raw = await response.read_whole(MAX_BODY)
        except self._errors as exc:
            raise self._fault(exc) from exc
        try:
            data = json_in.loads(raw)
        except (ValueError, RecursionError) as exc:  # RecursionError: JSON nested thousands deep
            raise UpstreamError(f"{what} returned a body that is not JSON (or nested too deep)") from exc
        if not isinstance(data, dict):
            raise UpstreamError(f"{what} returned an unexpected body")
        return data

    def _checked_frame(self, payload: bytes) -> dict[str, Any] | None:
        """One stream frame the stdlib way: its chunk, None for JSON that is not an object (skipped),
        or an UpstreamError for malformed JSON, an error object or a chunk of the wrong shape."""
        try:
            chunk = load_stdlib(payload)
        except (ValueError, RecursionError) as exc:
            raise UpstreamError("the upstream model sent a malformed stream frame") from exc
        if not isinstance(chunk, dict):
            return None
        if "error" in chunk:
            # the message read from the leniently decoded text, as the frame itself was
            lenient = payload.strip().decode("utf-8", "replace").encode()
            raise UpstreamError(f"upstream model error mid-stream: {error_message(lenient, self._secrets)}")
        if not is_text_delta(chunk) and not well_formed(chunk, "delta"):
            raise UpstreamError("the upstream model sent a malformed stream frame (unexpected shape)")
        return chunk

