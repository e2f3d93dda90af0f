"""Which HTTP transport an upstream client starts with (`LLM_HTTP_CLIENT`; gateway/upstream/transport.py
says which upstream gets which). It lives apart from the transports' shared terms so that neither
implementation imports the module that imports it back: only the chosen one's module is imported.
"""

from __future__ import annotations

from gateway.upstream.transport import Transport, TransportSettings


def open_transport(settings: TransportSettings) -> Transport:
    """The transport a client starts with, its pool ready, as `settings.client` chooses (the
    module's docstring says which upstream gets which). Only the chosen one's module is imported;
    looked up here at each start, so that bench/reqwest_gateway.py can name another for an A/B."""
    if settings.client == "auto" and plain_reach(settings.url):
        from gateway.upstream.plain_transport import PlainTransport

        return PlainTransport(settings)
    from gateway.upstream.aiohttp_transport import AiohttpTransport

    return AiohttpTransport(settings)


def plain_reach(url: str) -> bool:
    """Whether `url` is `http://` and no proxy applies to it: the environment's rule, the one
    aiohttp's client follows (HTTP_PROXY, NO_PROXY ...), read at start."""
    from aiohttp.helpers import get_env_proxy_for_url
    from yarl import URL

    parsed = URL(url)
    if parsed.scheme != "http":
        return False
    try:
        get_env_proxy_for_url(parsed)
    except LookupError:
        return True
    return False
