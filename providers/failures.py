"""What kind of failure a provider call was, named once for the fallback log and `tools --check`.

A failure envelope may carry `kind` (one of `KINDS`); `ProviderError(kind=...)` sets it, and the
HTTP kit (providers/http.py) sets it from the status for every service. For an envelope without
it (a third-party plugin, an older one) `failure_kind` reads the sentence: the bundled kit words
its failures in a fixed way ("rejected the API key", "rate limit reached", ...), so the reading
is reliable for them and a fair guess for the rest.

`describe_kind` says it in the words a user looks for: "bad key", "out of credit",
"rate-limited (resets in 30 s)", "unreachable", "model retired", "blocked by the URL guard".
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

BAD_KEY = "bad_key"
OUT_OF_CREDIT = "out_of_credit"
RATE_LIMITED = "rate_limited"
TIMEOUT = "timeout"
UNREACHABLE = "unreachable"
MODEL_RETIRED = "model_retired"
URL_BLOCKED = "url_blocked"
NOT_CONFIGURED = "not_configured"
REJECTED = "rejected"  # the service refused this request (400/403/422): plan, permission or a bad field
SERVICE_ERROR = "service_error"  # 5xx, a body of the wrong shape
FAILED = "failed"  # anything else

#: Each kind as a user says it.
KINDS: dict[str, str] = {
    BAD_KEY: "bad key",
    OUT_OF_CREDIT: "out of credit",
    RATE_LIMITED: "rate-limited",
    TIMEOUT: "timed out",
    UNREACHABLE: "unreachable",
    MODEL_RETIRED: "model retired",
    URL_BLOCKED: "blocked by the URL guard",
    NOT_CONFIGURED: "not configured",
    REJECTED: "request rejected",
    SERVICE_ERROR: "service error",
    FAILED: "failed",
}


def kind_for_status(status: int) -> str:
    """The kind of an HTTP error answer."""
    if status == 401:
        return BAD_KEY
    if status in (402, 432, 433):  # 432/433: Tavily's plan and pay-as-you-go limits
        return OUT_OF_CREDIT
    if status == 429:
        return RATE_LIMITED
    if status == 408:
        return TIMEOUT
    if status >= 500:
        return SERVICE_ERROR
    return REJECTED


# Checked in order: the first pattern found in the sentence names the kind.
_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    (NOT_CONFIGURED, re.compile(r"is not configured|^set [A-Z_]+$")),
    (URL_BLOCKED, re.compile(r"\bblocked: |URL guard|private address", re.IGNORECASE)),
    (MODEL_RETIRED, re.compile(r"\bmodel\b.*\b(retired|not found|does not exist|unknown)\b", re.IGNORECASE)),
    (BAD_KEY, re.compile(r"rejected the API key|\(401\)|invalid API key|unauthori[sz]ed", re.IGNORECASE)),
    (OUT_OF_CREDIT, re.compile(r"out of credits?|\((402|432|433)\)|usage limit|insufficient credit",
                               re.IGNORECASE)),
    (RATE_LIMITED, re.compile(r"rate limit|\(429\)|ratelimit", re.IGNORECASE)),
    (TIMEOUT, re.compile(r"timed out|did not answer within|did not finish within|took longer than",
                         re.IGNORECASE)),
    (UNREACHABLE, re.compile(r"could not be reached|cannot resolve|connection (refused|error)",
                             re.IGNORECASE)),
    (SERVICE_ERROR, re.compile(r"server error|unexpected response|not JSON|malformed", re.IGNORECASE)),
    (REJECTED, re.compile(r"refused the request|answered HTTP 4\d\d|\((400|403|404|422)\)", re.IGNORECASE)),
)


def kind_of_text(message: str) -> str:
    """The kind a failure sentence describes; FAILED when it says nothing recognisable."""
    for kind, pattern in _PATTERNS:
        if pattern.search(message):
            return kind
    return FAILED


def failure_kind(envelope: Mapping[str, Any]) -> str:
    """The kind of a failure envelope: its `kind` field when it has a known one, else its sentence."""
    declared = envelope.get("kind")
    if isinstance(declared, str) and declared in KINDS:
        return declared
    return kind_of_text(str(envelope.get("error") or ""))


def describe_kind(kind: str, retry_after: float | None = None) -> str:
    """"rate-limited (resets in 30 s)", "bad key", ... for a log line or the check's report."""
    words = KINDS.get(kind, KINDS[FAILED])
    if kind == RATE_LIMITED and retry_after is not None:
        return f"{words} (resets in {retry_after:.0f} s)"
    return words
