"""A failed upstream call as the typed gateway error a client gets. No I/O.

The transport (gateway/upstream/transport.py) has said what happened in library-neutral terms;
the client's words say what happened and never where: the upstream's address is the operator's
business, so the log line written here names it (`agent_gateway.upstream`), the error does not.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from gateway.errors import GatewayError, UpstreamError, UpstreamTimeoutError
from gateway.upstream.text import relayed
from gateway.upstream.transport import ClosedUnanswered, Disconnected, Unreachable

log = logging.getLogger("agent_gateway.upstream")
WHERE = "the upstream model"


def fault(exc: BaseException, base_url: str, secrets: Iterable[str | None]) -> GatewayError:
    """The error for `exc` (a `TransportFault`, or a `TimeoutError`), raised calling the upstream
    at `base_url`; `secrets` (its key, and its address) are scrubbed from any words relayed."""
    original = exc.__cause__ or exc  # the library's own error, for the log
    log.warning("upstream model at %s: %s", base_url, f"{type(original).__name__}: {original}")
    if isinstance(exc, TimeoutError):
        return UpstreamTimeoutError(f"{WHERE} timed out")
    if isinstance(exc, Unreachable):
        return UpstreamError(f"{WHERE} is unreachable ({relayed(exc.reason, secrets)})",
                             code="upstream_unreachable")
    if isinstance(exc, ClosedUnanswered | Disconnected | ConnectionError):
        return UpstreamError(f"{WHERE} closed the connection mid-reply")
    return UpstreamError(f"{WHERE} failed: {relayed(str(exc) or type(exc).__name__, secrets)}")
