"""Optional OpenTelemetry tracing (`pip install 'agent-gateway[otel]'`).

One server span per request, from a middleware placed before the front door only when tracing is
on, so a gateway without it pays nothing per request. A W3C `traceparent` sent by the client
becomes the span's parent (OpenTelemetry's configured propagators, W3C trace context by default).
The agent's model and tool calls get child spans (gateway/observe/agent_calls.py), and each model call
carries its own span's `traceparent` upstream.

OpenTelemetry's aiohttp server instrumentation is not used: it patches `web.Application` process-
wide and keeps its state in module globals, which does not fit an app factory building many apps.

Configured by the standard variables: `OTEL_TRACES_EXPORTER` (`otlp` over HTTP, `console`, or
`none`, the default here since the extra may be installed without a collector to send to),
`OTEL_EXPORTER_OTLP_ENDPOINT` and the rest read by the exporter, `OTEL_SERVICE_NAME` (default
`agent-gateway`), `OTEL_TRACES_SAMPLER`, `OTEL_PROPAGATORS`.
"""

from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING, Any

from aiohttp import web
from aiohttp.typedefs import Handler

from gateway.observe.access_log import current_request_id
from gateway.observe.metrics import route_of

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.trace import Tracer

log = logging.getLogger("agent_gateway")
SERVICE_NAME = "agent-gateway"


def tracer_provider_from_env() -> TracerProvider | None:
    """A tracer provider exporting where `OTEL_TRACES_EXPORTER` says, or None (tracing off)."""
    names = [n.strip() for n in os.environ.get("OTEL_TRACES_EXPORTER", "none").split(",")]
    names = [n for n in names if n and n != "none"]
    if not names:
        return None
    try:
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter, SpanExporter
    except ImportError:
        log.warning("OTEL_TRACES_EXPORTER is set but OpenTelemetry is not installed: "
                    "pip install 'agent-gateway[otel]'; tracing is off")
        return None
    resource = Resource.create()
    if str(resource.attributes.get("service.name", "")).startswith("unknown_service"):
        resource = resource.merge(Resource({"service.name": SERVICE_NAME}))
    provider = TracerProvider(resource=resource)
    for name in names:
        exporter: SpanExporter
        if name == "otlp":
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

            exporter = OTLPSpanExporter()
        elif name == "console":
            exporter = ConsoleSpanExporter()
        else:
            log.warning("OTEL_TRACES_EXPORTER: unknown exporter %r (this build knows otlp and console)", name)
            continue
        provider.add_span_processor(BatchSpanProcessor(exporter))
    return provider


def tracing_middleware(tracer: Tracer) -> Any:
    """The server span of each request, parented by the client's `traceparent` if it sent one."""
    from opentelemetry import propagate
    from opentelemetry.trace import SpanKind, Status, StatusCode

    @web.middleware
    async def traced(request: web.Request, handler: Handler) -> web.StreamResponse:
        route = route_of(request)
        parent = propagate.extract(request.headers)
        attributes = {"http.request.method": request.method, "http.route": route}
        with tracer.start_as_current_span(f"{request.method} {route}", context=parent, kind=SpanKind.SERVER,
                                          attributes=attributes) as span:
            status: int | None = None  # None: cancelled, the client went away
            try:
                response = await handler(request)
                status = response.status
                return response
            except web.HTTPException as exc:
                status = exc.status
                raise
            except Exception:
                status = 500
                raise
            finally:
                request_id = current_request_id()
                if request_id is not None:
                    span.set_attribute("gateway.request_id", request_id)
                if status is not None:
                    span.set_attribute("http.response.status_code", status)
                    if status >= 500:
                        span.set_status(Status(StatusCode.ERROR))

    return traced
