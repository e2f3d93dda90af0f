"""GET /metrics: the app's Prometheus registry in the text exposition format.

Registered only with API_SERVER_METRICS on (the default); behind API_SERVER_KEY like the API, so a
scraper sends the key (Prometheus' `authorization` setting). The per-key series (every key's name and
consumption) go only to API_SERVER_METRICS_KEY: any other key is a client of the gateway, not its
operator, and gets the rest of the page (not a 403: a scraper configured with a key keeps working).
"""

from __future__ import annotations

from aiohttp import web

from gateway.http import appkeys
from gateway.http.checks import METRICS_PATH, is_metrics_scrape

routes = web.RouteTableDef()


@routes.get(METRICS_PATH)
async def metrics(request: web.Request) -> web.Response:
    # prometheus_client at the first scrape, not at start: a gateway nobody scrapes never loads it
    from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

    request.app[appkeys.AFTER_REPLY].run()  # the replies so far, counted before they are shown
    metrics_ = request.app[appkeys.METRICS]
    scraper = is_metrics_scrape(request, request.app[appkeys.SETTINGS])
    body = generate_latest(metrics_.registry if scraper else metrics_.public_registry)
    return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})
