"""GET /v1/admin/usage?key=NAME&days=N: usage by key and UTC day, for admin keys only (routes/admin.py).

`days` (default 30; the store keeps API_SERVER_USAGE_DAYS) counts today: `days=1` is today's row. Days a key
made no request and had no stored bytes read have no row. Figures reach the store with each replica's
batched usage write (keys/ring.py, every 2 s).
"""

from __future__ import annotations

import re
import time
from typing import Any

from aiohttp import web

from gateway.errors import InvalidRequestError, echo
from gateway.http.routes.admin import admin_store, json_reply
from gateway.keys.ring import DAY, utc_day
from gateway.store.keys import COUNTERS, DayUsage
from gateway.store.owners import KEY_NAME

routes = web.RouteTableDef()
DEFAULT_DAYS = 30


MAX_DAYS = 3660  # older days are deleted anyway (API_SERVER_USAGE_DAYS)
_DAYS = re.compile(r"[0-9]{1,4}")


def day_object(row: DayUsage) -> dict[str, Any]:
    return {"key": row.name, "day": row.day, **{c: getattr(row, c) for c in COUNTERS}, "stored_bytes": row.stored_bytes}


@routes.get("/v1/admin/usage")
async def usage(request: web.Request) -> web.Response:
    _, store = admin_store(request)
    name = request.query.get("key") or None
    if name is not None and not KEY_NAME.fullmatch(name):
        raise InvalidRequestError(f"Invalid key name {echo(name)!r}.", param="key")
    text = request.query.get("days", str(DEFAULT_DAYS))
    if not _DAYS.fullmatch(text) or not 1 <= int(text) <= MAX_DAYS:
        raise InvalidRequestError(f"'days' must be a whole number from 1 to {MAX_DAYS}.", param="days")
    since = utc_day(time.time() - (int(text) - 1) * DAY)
    rows = await store.usage_days(name, since)
    return json_reply({"object": "list", "data": [day_object(row) for row in rows]})
