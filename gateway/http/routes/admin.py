"""/v1/admin/keys: the keys of this gateway's profile, for admin keys only (`keys create --admin`).

- A key that is no admin (API_SERVER_KEY's `default` included: admins are made in the store) gets
  403 (OpenAI's 403 envelope, `type` `invalid_request_error`).
- A keyless gateway (no key at all, loopback only) has no admin API: 404, as an unknown route. The
  first admin key is made with the CLI (`agent-gateway keys create NAME --admin`); from then on the
  gateway requires keys and its admins manage the rest here.

A created key is in the 201's `key`, once: the store keeps its SHA-256 only. A change reaches this
replica at once and every other within the ring's refresh (keys/ring.py, 2 s). Shapes:
http/admin_keys.py; the store's keys: store/keys.py.
"""

from __future__ import annotations

import time
from typing import Any

from aiohttp import web

from gateway.common import json_out
from gateway.errors import ConflictError, NotFoundError, PermissionDeniedError, echo
from gateway.http import appkeys
from gateway.http.admin_keys import changes_of, check_name, key_object, new_key_record
from gateway.http.body import read_json_object
from gateway.keys.ring import CURRENT_CALLER, KeyRing
from gateway.store.keys import ApiKey, DuplicateKeyError, KeyStore, key_hash, new_key

routes = web.RouteTableDef()


def admin_store(request: web.Request) -> tuple[KeyRing, KeyStore]:
    """The ring and its store for an admin caller; else the 404 (keyless) or 403."""
    ring = request.app[appkeys.KEYRING]
    if ring.keyless or ring.store is None:
        raise web.HTTPNotFound()
    caller = CURRENT_CALLER.get()
    if caller is None or not caller.admin:
        raise PermissionDeniedError("This API key is not an admin key; the admin API needs one "
                                    "(agent-gateway keys create NAME --admin).", code="insufficient_permissions")
    return ring, ring.store


def json_reply(payload: Any, status: int = 200) -> web.Response:
    # no-store: a created key's text, and the keys' figures, are no cache's to keep
    return web.Response(body=json_out.dumps(payload), status=status, content_type="application/json",
                        charset="utf-8", headers={"Cache-Control": "no-store"})


async def _find(store: KeyStore, name: str) -> ApiKey:
    for key in await store.keys():
        if key.name == name:
            return key
    raise NotFoundError(f"No key named '{echo(name)}'.", param="name")


@routes.get("/v1/admin/keys")
async def list_keys(request: web.Request) -> web.Response:
    _, store = admin_store(request)
    keys, usage = await store.keys(), await store.usage()
    return json_reply({"object": "list", "data": [key_object(key, usage.get(key.name)) for key in keys]})


@routes.post("/v1/admin/keys")
async def create_key(request: web.Request) -> web.Response:
    ring, store = admin_store(request)
    body = await read_json_object(request)
    name = check_name(body.get("name"))
    changes = changes_of(body, creating=True)
    key = new_key()
    record = new_key_record(name, key_hash(key), changes)
    try:
        await store.create(record)
    except DuplicateKeyError as exc:
        raise ConflictError(exc.message, param="name") from None
    await ring.reload_keys()
    return json_reply({**key_object(record, None), "key": key}, status=201)


@routes.get("/v1/admin/keys/{name}")
async def get_key(request: web.Request) -> web.Response:
    _, store = admin_store(request)
    key = await _find(store, request.match_info["name"])
    return json_reply(key_object(key, (await store.usage()).get(key.name)))


@routes.patch("/v1/admin/keys/{name}")
async def update_key(request: web.Request) -> web.Response:
    ring, store = admin_store(request)
    name = request.match_info["name"]
    changes = changes_of(await read_json_object(request), creating=False)
    if not await store.update(name, changes):
        raise NotFoundError(f"No active key named '{echo(name)}'.", param="name")
    await ring.reload_keys()
    key = await _find(store, name)
    return json_reply(key_object(key, (await store.usage()).get(name)))


@routes.delete("/v1/admin/keys/{name}")
async def delete_key(request: web.Request) -> web.Response:
    ring, store = admin_store(request)
    name = request.match_info["name"]
    if not await store.revoke(name, int(time.time())):
        raise NotFoundError(f"No active key named '{echo(name)}'.", param="name")
    await ring.reload_keys()
    return json_reply({"object": "admin.key.deleted", "name": name, "deleted": True})
