"""Every request's way in: the one middleware, calling each concern's plain functions in order.

1. request id, and the access line with the final status (gateway/request_ids.py), outermost;
2. any failure below leaves as the OpenAI error envelope, never a traceback or an HTML page;
3. admission: not shutting down (503), declared body size (413), key (401) or, with no key, Host
   (403) (gateway/middlewares.py);
   an admitted request counts as in flight until its handler returns; one that runs the agent
   takes its run slot (or its 429) before anything reads its body (gateway/http/lifecycle.py; past
   the slots a few small /v1/responses bodies are read, to queue a background one);
4. browser preflights are answered here, needing no key (gateway/cors.py);
5. Idempotency-Key, after auth, so only accepted credentials reach its cache (gateway/idempotency.py).

One middleware rather than five: each aiohttp middleware is a coroutine, a frame and a wrapper per
request, for streams held for the stream's whole life (bench/README.md has the figures).

What aiohttp refuses before any middleware runs (malformed requests, an unknown Expect) is
answered by gateway/http_server.py in the same envelope.

`serve` calls the front door straight from the server (`direct_handler`), not through the
Application's handler: same routing and the same steps, without the Application's per-request
layers around them.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time

from aiohttp import hdrs, web

from gateway.errors import GatewayError
from gateway.http import appkeys
from gateway.http.auth import KEY_RUN_SLOT
from gateway.http.checks import Handler, admit, error_response, from_http_exception, internal_error
from gateway.http.cors import preflight_response
from gateway.http.idempotency import run_idempotent, wants_idempotency
from gateway.http.key_limits import door
from gateway.http.lifecycle import OVER_SLOTS, Lifecycle
from gateway.keys.ring import CURRENT_CALLER
from gateway.observe.access_log import begin_request, log_access
from gateway.observe.log_limits import RateLimitedLog
from gateway.observe.metrics import Metrics, route_of

log = logging.getLogger("agent_gateway")
_client_details = RateLimitedLog(log)


@web.middleware
async def front_door(request: web.Request, handler: Handler) -> web.StreamResponse:
    app = request.app  # a property over the match info: read once
    after_reply = app[appkeys.AFTER_REPLY]
    request_id = begin_request(request)
    started = time.perf_counter()
    status: int | str = "-"
    try:
        lifecycle: Lifecycle | None = None
        limited = False
        try:
            lifecycle = admit(request, app)
            caller = CURRENT_CALLER.get()
            if caller is not None and caller.limited:  # a key's limits (http/key_limits.py)
                limited = True
                waiting = door(request, caller, app[appkeys.KEYRING].limits)
                if waiting is not None:  # behind replicas: the database's round trip
                    await waiting
            # a preflight is an OPTIONS request (cors.is_preflight): no call for any other method
            preflight = preflight_response(request) if request.method == "OPTIONS" else None
            response: web.StreamResponse
            if preflight is not None:
                response = preflight
            else:
                # the run slot before the body: a request that cannot run is refused unread
                limiter = app[appkeys.LIMITER]
                taken = limiter.take_for(request.method, request.path, request)
                if taken == "over":
                    request[OVER_SLOTS] = True
                # the earlier replies' bookkeeping runs once this request waits: an agent run's
                # once its model call has left (observe/agent_calls.py)
                after_reply.request_started(run_queued=taken is None)
                try:
                    if wants_idempotency(request):
                        response = await run_idempotent(request, handler)
                    else:
                        response = await handler(request)
                finally:
                    limiter.release_for(taken)
        except GatewayError as exc:
            if exc.detail and exc.status >= 500:  # where and why, for whoever runs the gateway
                log.warning("answered %d: %s", exc.status, exc.detail)
            elif exc.detail:  # a 4xx (a value the database refused): the client's to cause at will
                _client_details.log(logging.WARNING, "answered %d: %s", exc.status, exc.detail)
            response = error_response(exc)
        except web.HTTPException as exc:
            if exc.status < 400:
                raise  # a redirect is a reply, not a failure
            response = error_response(from_http_exception(exc, request))
        except ConnectionError:
            raise  # the client is gone: nothing to answer
        except Exception:
            response = internal_error(request)
        finally:
            key_slot = request.get(KEY_RUN_SLOT) if limited else None
            if key_slot is not None:  # a no-op once a background run took it over
                freed = key_slot.release()
                if freed is not None:  # its slot in the database: freed before the next run can ask
                    with contextlib.suppress(Exception):  # a store fault: the slot's lease runs out instead
                        await freed
            if lifecycle is not None:
                lifecycle.leave()
        status = response.status
        return response
    except web.HTTPException as exc:
        status = exc.status
        raise
    except asyncio.CancelledError:
        status = "cancelled"
        raise
    except ConnectionError:
        status = "disconnected"
        raise
    finally:
        # Done later: a returned reply is written right after the middleware, so its bytes leave
        # before the access line and the request's metrics are made, and the next request on a
        # kept-alive connection does not wait for them either (observe/after_reply.py,
        # bench/README.md). Run in a copy of this context: the access record carries the request id.
        # It keeps what it records, never the request: that would hold its body (up to the body
        # limit) until the queue runs, for every reply queued meanwhile.
        after_reply.add(_after_reply, app.get(appkeys.METRICS), request.method, request.path,
                        route_of(request), request_id, status, started, time.perf_counter())


def _after_reply(metrics: Metrics | None, method: str, path: str, route: str, request_id: str,
                 status: int | str, started: float, ended: float) -> None:
    log_access(method, path, request_id, status, started, ended)
    if metrics is not None:  # once per request (observe/metrics.py)
        metrics.request_done(route, method, status, started, ended)


def direct_handler(app: web.Application) -> Handler:
    """The server's request handler for `app` (gateway/http/server.py): aiohttp's
    `Application._handle` with the front door called directly. That handler wraps the middleware
    in an `_fix_request_current_app` middleware of its own (a coroutine per request, there for
    sub-applications, which the gateway has none of) and finds the wrapped chain in an lru cache
    keyed by the route's handler and the app (whose `__hash__` is a Python method); here the route
    is resolved the same way and handed to `front_door` as its handler, the `Expect` header answered
    first as aiohttp does. An app with any other middleware (OpenTelemetry's) or sub-application
    keeps aiohttp's handler."""
    if tuple(app.middlewares) != (front_door,) or app._subapps:
        return app._handle
    router = app.router

    async def handle(request: web.Request) -> web.StreamResponse:
        match_info = await router.resolve(request)
        match_info.add_app(app)
        match_info.freeze()
        request._match_info = match_info  # what Request.match_info reads, as Application._handle sets it
        if request.headers.get(hdrs.EXPECT):
            expected = await match_info.expect_handler(request)
            await request.writer.drain()
            if expected is not None:
                return expected
        return await front_door(request, match_info.handler)

    return handle
