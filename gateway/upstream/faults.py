"""A failed upstream call as the typed gateway error a client gets. No I/O.

The client's words say what happened and never where: the upstream's address is the operator's
business, so the log line written here names it (`agent_gateway.upstream`), the error does not.
"""

from __future__ import annotations

import logging
import os
import socket
import ssl
from collections.abc import Iterable

import aiohttp

from gateway.errors import GatewayError, UpstreamError, UpstreamTimeoutError
from gateway.upstream.text import relayed

log = logging.getLogger("agent_gateway.upstream")
WHERE = "the upstream model"


def connect_reason(exc: aiohttp.ClientConnectorError) -> str:
    """A connect failure in the OS's words: "Connection refused", "Name or service not known" ..."""
    if isinstance(exc, aiohttp.ClientConnectorCertificateError):
        return f"TLS: {getattr(exc.certificate_error, 'reason', None) or exc.certificate_error}"
    error = exc.os_error
    if isinstance(error, ssl.SSLError):
        return f"TLS: {error.reason or error}"
    if error.errno and error.errno > 0 and not isinstance(error, socket.gaierror):
        return os.strerror(error.errno)  # asyncio words it "Connect call failed (...)"
    return error.strerror or str(error) or type(error).__name__


def fault(exc: BaseException, base_url: str, secrets: Iterable[str | None]) -> GatewayError:
    """The error for `exc`, raised calling the upstream at `base_url`; `secrets` (its key, and
    its address) are scrubbed from any words of the exception relayed."""
    log.warning("upstream model at %s: %s", base_url, f"{type(exc).__name__}: {exc}")
    if isinstance(exc, TimeoutError):
        return UpstreamTimeoutError(f"{WHERE} timed out")
    if isinstance(exc, aiohttp.ClientConnectorError):
        return UpstreamError(f"{WHERE} is unreachable ({relayed(connect_reason(exc), secrets)})",
                             code="upstream_unreachable")
    if isinstance(exc, aiohttp.ServerDisconnectedError | aiohttp.ClientPayloadError | ConnectionError):
        return UpstreamError(f"{WHERE} closed the connection mid-reply")
    return UpstreamError(f"{WHERE} failed: {relayed(str(exc) or type(exc).__name__, secrets)}")
