"""`API_SERVER_LOG_FORMAT=json`: every line the server writes is one JSON object, for log shippers.

Each object has `time` (UTC, ISO 8601 with milliseconds), `level`, `logger`, `request_id` (null
outside a request) and `message`; access lines add `method`, `path`, `status`, `duration_ms` and
`key` (the key's name, "-" without one);
a record with a traceback adds `exception` (the traceback as one string: the line stays one line).
`serve`'s own start-up lines (the banner, its warnings) go through `json_line` in the same shape.
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any

ACCESS_LOGGER = "agent_gateway.access"


def _timestamp(created: float) -> str:
    whole = int(created)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(whole)) + f".{int((created - whole) * 1000):03d}Z"


def json_line(message: str, *, level: str = "INFO", logger: str = "agent_gateway",
              created: float | None = None) -> str:
    """One log line as the JSON formatter writes it, for text written outside logging."""
    return _dumps({"time": _timestamp(time.time() if created is None else created), "level": level,
                   "logger": logger, "request_id": None, "message": message})


def _dumps(fields: dict[str, Any]) -> str:
    # ensure_ascii: a line stays 7-bit clean whatever a message holds (and a lone surrogate from a
    # client's header cannot make the encoder fail)
    return json.dumps(fields, ensure_ascii=True, default=str)


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        request_id = getattr(record, "request_id", None)
        fields: dict[str, Any] = {
            "time": _timestamp(record.created),
            "level": record.levelname,
            "logger": record.name,
            "request_id": None if request_id in (None, "-") else request_id,
            "message": record.getMessage(),
        }
        if record.name == ACCESS_LOGGER and isinstance(record.args, tuple) and len(record.args) in (6, 7):
            # gateway/observe/access_log.py log_access: method, path, status, milliseconds, id, key name[, model route]
            method, path, status, elapsed_ms = record.args[:4]
            fields.update(method=method, path=path, status=status, key=record.args[5],
                          duration_ms=round(elapsed_ms, 1) if isinstance(elapsed_ms, float) else elapsed_ms)
            if len(record.args) == 7:
                fields["model"] = record.args[6]
        if record.exc_info:
            fields["exception"] = self.formatException(record.exc_info)
        elif record.exc_text:
            fields["exception"] = record.exc_text
        if record.stack_info:
            fields["stack"] = self.formatStack(record.stack_info)
        return _dumps(fields)
