"""GET /metrics: the app's Prometheus registry in the text exposition format.

Registered only with API_SERVER_METRICS on (the default); behind API_SERVER_KEY like the API, so a
scraper sends the key (Prometheus' `authorization` setting).
"""

from __future__ import annotations

from aiohttp import web

from gateway.http import appkeys

routes = web.RouteTableDef()


@routes.get("/metrics")
async def metrics(request: web.Request) -> web.Response:
    # prometheus_client at the first scrape, not at start: a gateway nobody scrapes never loads it
    from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

    request.app[appkeys.AFTER_REPLY].run()  # the replies so far, counted before they are shown
    body = generate_latest(request.app[appkeys.METRICS].registry)
    return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})
