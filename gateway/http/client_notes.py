"""What the gateway changed in a request that the client should know of, told in a response header.

Today one thing: images sent to a route whose model reads none are replaced by a short note to
the model (wire/images.py `without_images`) rather than passed on for the upstream to refuse with a
400. The client sees `X-Agent-Gateway-Warning` on that response (JSON or stream alike: the header
goes out before the first event), once per response, whatever the client library: the Responses
and Chat Completions objects have no field for it.

A context variable, as the access line's model route: set where the turn is prepared, read by
the response-prepare hook (app.py) of the same request.
"""

from __future__ import annotations

import contextvars

from aiohttp import web

HEADER = "X-Agent-Gateway-Warning"
_NOTES: contextvars.ContextVar[tuple[str, ...]] = contextvars.ContextVar("client_notes", default=())


def warn(text: str) -> None:
    notes = _NOTES.get()
    if text not in notes:
        _NOTES.set((*notes, text))


def images_not_shown(count: int, route_id: str) -> None:
    plural = "s were" if count != 1 else " was"
    warn(f"{count} image{plural} replaced by a note: model route '{route_id}' does not read images "
         "(set vision: true on the route if its model does)")


def add_warning_header(response: web.StreamResponse) -> None:
    """Part of the response-prepare hook (app.py)."""
    notes = _NOTES.get()
    if notes:
        # a header is latin-1 on the wire: a route id from config.yaml may hold anything
        text = "; ".join(notes)
        response.headers[HEADER] = "".join(c if " " <= c <= "~" else "?" for c in text)
