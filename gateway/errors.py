"""The exception tree of the whole distribution, and the typed errors one middleware renders.

    AgentGatewayError                 (providers/errors.py) the one root: gateway/, providers/, plugins/
    ├── GatewayError                  500 server_error: rendered as the OpenAI error envelope
    │   ├── InvalidRequestError       400 invalid_request_error
    │   │   ├── NotFoundError         404
    │   │   │   ├── UnknownConversationError (store) no conversation with this conv_ id
    │   │   │   ├── UnknownItemError      (store) no item with this id in the conversation
    │   │   │   └── UnknownFileError      (store/files) no file with this id for this key
    │   │   ├── DuplicateItemError    (store) an item id already in the conversation
    │   │   ├── DuplicateKeyError     (store/keys) `keys create` of a name already taken: exit 1
    │   │   ├── ContextLengthExceededError (wire/context_budget) a turn over the model's context window
    │   │   ├── UnsupportedFileTypeError (files) a file of a type the gateway does not read
    │   │   ├── UnreadableFileError   (files) a file it cannot read: bad base64, a broken PDF
    │   │   ├── FileReferenceNotSupportedError (files) a file reference of a kind not read here
    │   │   ├── UnknownFileIdError    (files/sources) an input's file_id the key has no file for
    │   │   ├── UnstorableValueError  a value the database refuses as data (a NUL, a size limit)
    │   │   ├── ConflictError         409
    │   │   │   ├── ConversationConflictError  (store) another turn of the conversation was stored first
    │   │   │   └── IdempotencyInProgressError (store/postgres/idempotency) a duplicate waited its bound
    │   │   ├── UnprocessableError    422
    │   │   │   └── IdempotencyKeyReusedError  (idempotency_store) same key, different request
    │   │   ├── RequestTimeoutError   408 (+ Connection: close)
    │   │   ├── UndecodableBodyError  400 (+ Connection: close)
    │   │   ├── PayloadTooLargeError  413
    │   │   └── UnsupportedMediaTypeError 415
    │   ├── AuthenticationError       401 (code invalid_api_key)
    │   ├── PermissionDeniedError     403
    │   ├── RateLimitError            429 type requests, code rate_limit_exceeded (+ Retry-After)
    │   │   ├── TokenRateLimitError 429 type tokens: a key's tokens per minute (http/key_limits)
    │   │   ├── InsufficientQuotaError 429 insufficient_quota: a key's stored-bytes quota or token budget
    │   │   ├── QueueFullError    429 (store/runs) the background queue is full: retry later
    │   │   │   └── OwnerQueueFullError 429 (store/runs) one key's share of the queue is full
    │   │   └── TooManyFollowersError 429 (runs/followers) past a background response's follower bounds
    │   ├── EventsLimitError          (runs/background) a background run passed API_SERVER_MAX_RUN_EVENTS_MB
    │   ├── UpstreamError             502 upstream_error
    │   │   └── EmptyStreamError      (upstream/client) a stream that ended before its first frame:
    │   │                             the agent asks again unstreamed (code upstream_stream_cut)
    │   ├── ServiceUnavailableError   503 service_unavailable (+ Retry-After)
    │   │   └── StoreUnavailableError (store) the store cannot read or write
    │   └── UpstreamTimeoutError      504 timeout
    ├── ProviderError                 (providers/web.py) a web provider's failure: the tool's failure envelope
    │   ├── HTTPStatusError           (providers/http.py) the service answered an HTTP error
    │   └── BlockedUrlError           (providers/urlsafety.py) a URL the gateway will not fetch
    ├── BodyTooLarge                  (providers/http_session.py) a service's answer passed 16 MiB:
    │                                 providers/http.py makes it the provider's ProviderError
    ├── McpError                      (agent/mcp/results) a failed MCP exchange: OpenAI's `mcp_call.error`
    │   ├── McpProtocolError          mcp_protocol_error: a JSON-RPC error, or a reply that is not MCP
    │   └── McpHttpError              http_error: an HTTP status, no connection, a dead child, a timeout (504)
    │       └── McpBlockedUrlError    (agent/mcp/http) a server URL at a non-public address: a client's 400
    ├── ToolFailed                    (agent/toolbox) a tool's call failed as a client sees it: what the model reads
    ├── PluginLoadError               (providers/errors.py) a plugin cannot load: reported, the rest load
    ├── DuplicateProviderError        (providers/registry.py; also a ValueError) a provider name is taken
    ├── SettingsError                 (settings; also a ValueError) a bad setting: serve refuses to start
    ├── ProfileError                  (profiles) a profile command cannot go ahead: exit 1
    ├── BindError                     (cli/serve) the listening socket cannot be opened: exit 1
    ├── SchemaVersionError            (store) the database has a newer schema than this gateway: exit 1
    ├── LostRunError                  (store/runs) this replica no longer holds a background run: it stops
    ├── StalledClientError            (http/sse; also a ConnectionError) a follower's client took no write: dropped
    ├── TransportFault                (upstream/transport) an upstream HTTP exchange failed, library-neutral:
    │   │                             upstream/faults.py makes it the client's UpstreamError
    │   ├── Unreachable               no connection (refused, no such host, TLS)
    │   ├── ClosedUnanswered          closed before any byte of a reply (retried once on a pooled one)
    │   ├── Disconnected              closed mid-reply
    │   └── Unreadable                bytes that are not a readable HTTP reply
    └── UsageError                    (cli_config) a bad key or value on the command line: exit 2

Every GatewayError carries `message`, `param` and `code`; the class fixes `status` and `type`. A
`detail`, when set, goes to the log with the reply and never to the client (a store's file or host).
The classes outside GatewayError never reach a client as such: the CLI prints them, the web tools
turn them into failure envelopes, the app factory logs them.
"""

from __future__ import annotations

from typing import Any

from providers.errors import AgentGatewayError as AgentGatewayError  # the root, re-exported

_CLASS_DEFAULT: Any = object()

#: How much of a value the client sent an error message repeats: enough to recognise it, never an
#: 8 KB `after` or a 10,000-character type sent back whole.
ECHO_CHARS = 200


def echo(value: object) -> str:
    """`value` as an error message quotes it: cut to ECHO_CHARS characters ("..." marks the cut)."""
    text = value if isinstance(value, str) else repr(value)
    return text if len(text) <= ECHO_CHARS else text[:ECHO_CHARS] + "..."


class GatewayError(AgentGatewayError):
    status: int = 500
    type: str = "server_error"
    code: str | None = None

    def __init__(
        self,
        message: str,
        *,
        param: str | None = None,
        code: str | None = _CLASS_DEFAULT,
        retry_after: float | None = None,
        should_retry: bool | None = None,
        detail: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        # For the gateway's log only, never a client: where and why (a file path, a masked URL).
        self.detail = detail
        self.param = param
        if code is not _CLASS_DEFAULT:
            self.code = code  # None is a real value here: OpenAI sends `code: null` for some errors
        self.retry_after = retry_after
        # None leaves the SDK's own retry policy alone; False tells it not to re-run the request.
        self.should_retry = should_retry

    def envelope(self) -> dict[str, Any]:
        return {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}}

    def headers(self) -> dict[str, str]:
        headers: dict[str, str] = {}
        if self.retry_after is not None:
            headers["Retry-After"] = str(max(1, round(self.retry_after)))
        if self.should_retry is not None:
            headers["x-should-retry"] = "true" if self.should_retry else "false"
        return headers


class InvalidRequestError(GatewayError):
    status = 400
    type = "invalid_request_error"


class NotFoundError(InvalidRequestError):
    status = 404
    code = "not_found"


class ConflictError(InvalidRequestError):
    status = 409
    code = "conflict"


class UnstorableValueError(InvalidRequestError):
    """A value the database refuses as data (PostgreSQL's DataError, a btree row over its size
    limit): the client's request, not an outage, so a 400 that no SDK retries, never a 503."""

    code = "invalid_value"

    def __init__(self, detail: str) -> None:
        super().__init__("A value in this request cannot be stored (an id or name that is too long or holds a "
                         "character the database refuses).", detail=detail)


class UnprocessableError(InvalidRequestError):
    status = 422
    code = "unprocessable_entity"


class RequestTimeoutError(InvalidRequestError):
    """The request body arrived too slowly; the connection is closed after the reply."""

    status = 408
    code = "request_timeout"

    def headers(self) -> dict[str, str]:
        return {**super().headers(), "Connection": "close"}


class UndecodableBodyError(InvalidRequestError):
    """A body that does not match its Content-Encoding: the connection cannot carry another request."""

    code = "invalid_body"

    def headers(self) -> dict[str, str]:
        return {**super().headers(), "Connection": "close"}


class PayloadTooLargeError(InvalidRequestError):
    status = 413
    code = "request_too_large"


class UnsupportedMediaTypeError(InvalidRequestError):
    status = 415
    code = "unsupported_media_type"


class AuthenticationError(GatewayError):
    status = 401
    type = "invalid_request_error"
    code = "invalid_api_key"


class PermissionDeniedError(GatewayError):
    status = 403
    type = "invalid_request_error"
    code = "forbidden"


class RateLimitError(GatewayError):
    """As OpenAI's own 429 for a requests-per-minute limit: `type` "requests" (the limit's kind;
    "tokens" is the other), `code` "rate_limit_exceeded"."""

    status = 429
    type = "requests"
    code = "rate_limit_exceeded"


class TokenRateLimitError(RateLimitError):
    """A key's tokens per minute (as OpenAI's own: `type` "tokens")."""

    type = "tokens"


class UpstreamError(GatewayError):
    status = 502
    type = "upstream_error"
    code = "upstream_error"


class EmptyStreamError(UpstreamError):
    """A streamed reply that ended (or whose connection closed) before its first frame: nothing
    reached the client yet, so the round can be asked for again, unstreamed."""

    code = "upstream_stream_cut"


class ServiceUnavailableError(GatewayError):
    status = 503
    type = "service_unavailable"
    code = "service_unavailable"


class UpstreamTimeoutError(GatewayError):
    status = 504
    type = "timeout"
    code = "upstream_timeout"


class InsufficientQuotaError(RateLimitError):
    """A key's stored-bytes quota would be passed (as OpenAI's out-of-quota 429)."""

    type = "insufficient_quota"
    code = "insufficient_quota"
