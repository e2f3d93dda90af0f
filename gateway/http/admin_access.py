"""Who may use the admin routes (/v1/admin/...): admin keys only.

Until keys carry an admin flag, the admin is the operator's own key, API_SERVER_KEY (the key named
`default`); a keyless gateway has no admin (everything there is anyone's on loopback, so the admin
routes answer 403 rather than opening key management to any local page).
"""

from __future__ import annotations

from aiohttp import web

from gateway.errors import PermissionDeniedError
from gateway.http import appkeys
from gateway.keys.ring import CURRENT_CALLER
from gateway.store.owners import DEFAULT_KEY


def require_admin(request: web.Request) -> None:
    """403 unless the request's key is an admin key."""
    caller = CURRENT_CALLER.get()
    ring = request.app[appkeys.KEYRING]
    if caller is None or ring.keyless or caller.name != DEFAULT_KEY:
        raise PermissionDeniedError("This route needs an admin key.", code="admin_key_required")
