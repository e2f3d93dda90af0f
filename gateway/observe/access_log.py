"""Request ids and the access log.

Every response carries `X-Request-Id`: the client's own id when it is sane (at most 128 characters
of `[A-Za-z0-9._-]`), a fresh `req_<hex>` otherwise. The id lives in a context variable for the
request's task, so every log record written while serving the request can carry it
(`RequestIdFilter` puts it on records as `request_id`), and one access line per request records
method, path, status, duration and id: never headers, query strings or bodies, so keys stay out of logs.
"""

from __future__ import annotations

import contextvars
import logging
import os
import re
import sys
import threading
import time
from typing import TYPE_CHECKING

from aiohttp import web

from gateway.keys.ring import CURRENT_CALLER
from gateway.observe.batched_log import BatchingStreamHandler
from gateway.observe.log_limits import printable

if TYPE_CHECKING:
    from gateway.upstream.routes import RouteTurn

HEADER = "X-Request-Id"
_SANE_ID = re.compile(r"[A-Za-z0-9._-]{1,128}")

# A context variable is a key, not shared state: each value lives in one request task's context.
_CURRENT: contextvars.ContextVar[str | None] = contextvars.ContextVar("agent_gateway_request_id", default=None)

access_log = logging.getLogger("agent_gateway.access")


def new_request_id() -> str:
    # 128 random bits as 32 hex digits, the same shape uuid4().hex gave, without building a UUID
    return "req_" + os.urandom(16).hex()


def choose_request_id(presented: str | None) -> str:
    """The client's id when it is safe to echo and log, else a fresh one."""
    if presented is not None and _SANE_ID.fullmatch(presented):
        return presented
    return new_request_id()


#: The request's model route, when routes are configured (set by gateway/http/model_routes.py). A
#: context variable, like the request id: read in the request's own task, and a lookup that costs
#: nothing when unset (a request key the request lacks would raise and catch a KeyError).
MODEL_ROUTE: contextvars.ContextVar[RouteTurn | None] = contextvars.ContextVar("model_route", default=None)


#: The MCP calls made for the request, for its access line: a cell set when the request begins, so
#: the agent's task (a stream's producer runs in a copy of the request's context) counts into the
#: same one.
_MCP_CALLS: contextvars.ContextVar[list[int] | None] = contextvars.ContextVar("agent_gateway_mcp_calls",
                                                                              default=None)


def count_mcp_call() -> None:
    cell = _MCP_CALLS.get()
    if cell is not None:
        cell[0] += 1


def current_request_id() -> str | None:
    return _CURRENT.get()


def begin_request(request: web.Request) -> str:
    """Picks the request's id and makes it current for the request's task.

    aiohttp serves each request in its own task, and the response is prepared later in that same
    task, so the value is deliberately never reset: the prepare hook still needs it, and it
    vanishes with the task."""
    request_id = choose_request_id(request.headers.get(HEADER))
    _CURRENT.set(request_id)
    _MCP_CALLS.set([0])
    return request_id


def log_access(method: str, path: str, request_id: str, status: int | str, started: float, ended: float) -> None:
    """The access line: method, path, final status, duration and id; never headers, query or body.
    Called once the reply has left (the front door schedules it), in the request's context, so the
    record carries the id."""
    if not access_log.isEnabledFor(logging.INFO):  # no record when it is off
        return
    # the path is escaped here as well as by the serve formatter, for handlers configured elsewhere
    method, path = printable(method), printable(path)
    caller = CURRENT_CALLER.get()  # the key's name, never the key (this runs in the request's context)
    key_name = caller.name if caller is not None else "-"
    turn = MODEL_ROUTE.get()  # with model routes: the one that served (a configured id, not the client's text)
    cell = _MCP_CALLS.get()
    mcp = f" mcp={cell[0]}" if cell is not None and cell[0] else ""  # only on lines of requests that made some
    handler = _serve_handler()
    if handler is not None:
        # serve's own handler is the only one: the line as LogFormatter would write the record's.
        # Every part is printable (the id is a sane one), so the message needs no second escape.
        model = "" if turn is None else f" model={printable(turn.served.id)}"
        _keep_line(handler, f"{method} {path} {status} {(ended - started) * 1000:.0f}ms id={request_id} "
                            f"key={printable(key_name)}{model}{mcp}")
    else:
        msg = "%s %s %s %.0fms id=%s key=%s"
        args: tuple[object, ...] = (method, path, status, (ended - started) * 1000, request_id, key_name)
        if turn is not None:
            msg, args = msg + " model=%s", (*args, turn.served.id)
        if mcp:  # a template of its own: the usual line keeps the usual one
            msg, args = msg + "%s", (*args, mcp)
        _log_info(msg, args)


def _log_info(msg: str, args: tuple[object, ...]) -> None:
    """`access_log.info(msg, *args)`, its record made from a template where logging would make the
    same one (AccessRecords); the record then goes through the logger's filters and handlers as
    any other."""
    record = _access_records.make(msg, args)
    if record is None:
        access_log.info(msg, *args)
    else:
        access_log.handle(record)


class AccessRecords:
    """Access-line records at a fraction of `LogRecord.__init__`'s cost (~18k instructions, a
    quarter of an access line: bench/README.md). Every field but the time, `msg` and `args` is
    the same from one access line to the next (name, level, source, thread and process as the
    logging module's flags say), so one record made the ordinary way is the template, and each
    new one is a copy of its fields with the time set as LogRecord sets it. None (make it the
    ordinary way) unless logging would call the plain record factory with no caller lookup
    (`serve` turns that off, access_log.configure_logging), or once anything the template read
    has changed (the factory, the flags, the thread)."""

    __slots__ = ("_key", "_fields")

    def __init__(self) -> None:
        self._key: tuple[object, ...] | None = None
        self._fields: dict[str, object] = {}

    def make(self, msg: str, args: tuple[object, ...]) -> logging.LogRecord | None:
        if logging._srcfile is not None or type(access_log).makeRecord is not logging.Logger.makeRecord:
            return None  # the caller's file and line, looked up per record: the ordinary way
        factory = logging.getLogRecordFactory()
        # (a missing module attribute costs getattr a formatted AttributeError: the dict's get)
        if factory is not logging.LogRecord or _LOGGING.get("logAsyncioTasks"):
            return None  # another factory's records, or (3.12+) each task's name on its records
        key = (logging.logThreads, logging.logProcesses, logging.logMultiprocessing, threading.get_ident())
        if key != self._key:
            self._fields = dict(factory(access_log.name, logging.INFO, "(unknown file)", 0, msg, args,
                                        None, "(unknown function)", None).__dict__)
            self._key = key
        record = logging.LogRecord.__new__(logging.LogRecord)
        fields = record.__dict__
        fields.update(self._fields)
        fields["msg"] = msg
        fields["args"] = args
        start = logging._startTime  # type: ignore[attr-defined]
        if type(start) is int:  # Python 3.13+: nanoseconds, as LogRecord reads them there
            now_ns = time.time_ns()
            fields["created"] = now_ns / 1e9
            fields["msecs"] = (now_ns % 1_000_000_000) // 1_000_000 + 0.0
            fields["relativeCreated"] = (now_ns - start) / 1e6
        else:
            now = time.time()
            fields["created"] = now
            fields["msecs"] = int((now - int(now)) * 1000) + 0.0
            fields["relativeCreated"] = (now - start) * 1000
        return record


_LOGGING = vars(logging)
_access_records = AccessRecords()


#: LogRecord sets `created` and `msecs` from time.time_ns() from Python 3.13 on, from time.time() before
_TIME_NS = sys.version_info >= (3, 13)


def _serve_handler() -> BatchingStreamHandler | None:
    """`serve`'s own handler when it is the only place an access record would go and the record
    would reach it unchanged: no filter on the access logger, one handler on its way up (a
    BatchingStreamHandler with serve's text format, passing INFO, only RequestIdFilter on it).
    Then the formatted line is the whole effect of `access_log.handle(record)`; anything else
    (an app's handlers or filters, the JSON format, a record factory) goes the ordinary way.
    Looked at for every line (a test or an app may add a handler at any time), so written as
    plain loops and attribute reads: no generator, no call."""
    if access_log.disabled or access_log.filters:
        return None
    found: logging.Handler | None = None
    logger: logging.Logger | None = access_log
    while logger is not None:
        for each in logger.handlers:
            if found is not None:
                return None
            found = each
        logger = logger.parent if logger.propagate else None  # type: ignore[assignment]
    if type(found) is not BatchingStreamHandler or found.level > logging.INFO:
        return None
    formatter = found.formatter
    if type(formatter) is not LogFormatter or not formatter._serve_format:
        return None
    for each_filter in found.filters:
        if type(each_filter) is not RequestIdFilter:
            return None
    if (logging._srcfile is not None or type(access_log).makeRecord is not logging.Logger.makeRecord
            or _LOGGING["_logRecordFactory"] is not logging.LogRecord):
        return None  # a caller lookup, a record class or a record factory of the app's own: the ordinary way
    return found


def _keep_line(handler: BatchingStreamHandler, message: str) -> None:
    """`message` as LogFormatter.format writes the record AccessRecords.make would make: the same
    time (as LogRecord sets `created` and `msecs`), level name, logger name and id."""
    if _TIME_NS:
        now_ns = time.time_ns()
        now = now_ns / 1e9
        msecs = (now_ns % 1_000_000_000) // 1_000_000
    else:
        now = time.time()
        msecs = int((now - int(now)) * 1000)
    formatter: LogFormatter = handler.formatter  # type: ignore[assignment]  # checked by _serve_handler
    second, text = formatter._second
    if second != int(now):
        second = int(now)
        text = time.strftime(formatter.default_time_format, formatter.converter(now))
        formatter._second = (second, text)
    handler.keep_line(f"{text},{msecs:03d} {logging.getLevelName(logging.INFO)} {access_log.name} "
                      f"[{_CURRENT.get() or '-'}] {message}")


def add_request_id_header(response: web.StreamResponse) -> None:
    """Part of the response-prepare hook (app.py), so JSON, errors and streams all carry the id."""
    request_id = _CURRENT.get()
    if request_id is None:  # a response made outside the middlewares (e.g. a malformed HTTP request)
        request_id = new_request_id()
        _CURRENT.set(request_id)
    response.headers[HEADER] = request_id


class RequestIdFilter(logging.Filter):
    """Puts the current request id on every record as `request_id` ("-" outside a request)."""

    def filter(self, record: logging.LogRecord) -> bool:
        # the instance's dict, not hasattr: a missing attribute costs hasattr a formatted AttributeError
        if "request_id" not in record.__dict__:
            record.request_id = _CURRENT.get() or "-"
        return True


LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s [%(request_id)s] %(message)s"


class LogFormatter(logging.Formatter):
    """logging.Formatter with the same output, writing the date and time once per second rather
    than per record: `time.localtime` + `strftime` were a sizeable part of every access line."""

    def __init__(self, fmt: str) -> None:
        super().__init__(fmt)
        self._second: tuple[int, str] = (-1, "")  # one tuple, swapped whole: safe across threads
        self._serve_format = fmt == LOG_FORMAT

    def format(self, record: logging.LogRecord) -> str:
        # serve's format in one step: logging.Formatter.format's five calls (usesTime, the style's
        # format and its `%` over the record's dict, ...) were ~20k instructions per access line.
        # The same text and the same record attributes set (message, asctime); a record with a
        # traceback or a stack, or without request_id (which the stock path reports), goes the
        # stock way.
        request_id = record.__dict__.get("request_id")
        if not self._serve_format or request_id is None or record.exc_info or record.exc_text or record.stack_info:
            return super().format(record)
        message = record.message = printable(record.getMessage())
        asctime = record.asctime = self.formatTime(record)
        return f"{asctime} {record.levelname} {record.name} [{request_id}] {message}"

    def formatMessage(self, record: logging.LogRecord) -> str:  # noqa: N802
        # A message may carry what a client sent (a decoded path with %0a in it): escaped, it
        # cannot start a forged line. Tracebacks are added after this and keep their lines.
        record.message = printable(record.message)
        return super().formatMessage(record)

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:  # noqa: N802
        if datefmt is not None:
            return super().formatTime(record, datefmt)
        second, text = self._second
        if second != int(record.created):
            second = int(record.created)
            text = time.strftime(self.default_time_format, self.converter(record.created))
            self._second = (second, text)
        return f"{text},{int(record.msecs):03d}"  # logging's default_msec_format, "%s,%03d"


#: Libraries whose INFO (and DEBUG) lines name request URLs, queries or connection details: httpx
#: writes `HTTP Request: GET http://user:password@searx/search?q=<the user's query>` for every web
#: search, aiohttp its access and client lines, asyncpg its connections. Only their warnings and
#: errors reach `serve`'s log; the gateway's own lines say which provider failed and how, never what
#: was asked.
QUIET_LIBRARIES = ("httpx", "httpcore", "hpack", "h2", "urllib3", "aiohttp.access", "aiohttp.client",
                   "aiohttp.server", "aiohttp.web", "asyncpg", "aiosqlite", "primp", "ddgs", "trafilatura")


def configure_logging(level: int = logging.INFO, formatter: logging.Formatter | None = None) -> None:
    """Root logging for `serve`: one stderr handler whose lines carry the request id, written in
    batches off the request path (gateway/batched_log.py); `formatter` replaces the text format."""
    handler = BatchingStreamHandler()
    handler.setFormatter(formatter or LogFormatter(LOG_FORMAT))
    logging.basicConfig(level=level, handlers=[handler])  # as before, a no-op when root has handlers
    for name in QUIET_LIBRARIES:
        logging.getLogger(name).setLevel(max(level, logging.WARNING))
    # LOG_FORMAT prints no thread or process fields; not collecting them for every record (the
    # logging HOWTO's "Optimization" knobs) saves work on every access line
    logging.logThreads = False
    logging.logProcesses = False
    logging.logMultiprocessing = False
    root_handlers = logging.getLogger().handlers
    if root_handlers == [handler]:
        # nor the caller's file, line and function (the same HOWTO table): a frame walk per
        # record for fields only a handler configured elsewhere could print
        logging._srcfile = None
    for each in root_handlers:
        if not any(isinstance(f, RequestIdFilter) for f in each.filters):
            each.addFilter(RequestIdFilter())
