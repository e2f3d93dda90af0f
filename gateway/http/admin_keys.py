"""The admin API's shapes: a key as `/v1/admin/keys` shows it (`admin.key`), and the body of a
create or update read into the store's fields. Pure (no I/O); the routes are routes/admin*.py.

A body field is checked as the CLI checks its flag (`keys create/update`): a limit is a whole number
of at least 1 or null (no limit), `expires_days` at least 1 or null (never), an access list a list
of names or null (all). An unknown field is a 400 naming it, so a misspelt limit is never silently
no limit. `budget_period` is one of 1d, 7d, 30d, total (a budget set without it: `total`; a budget
removed takes its period with it).
"""

from __future__ import annotations

import time
from typing import Any

from gateway.errors import InvalidRequestError, echo
from gateway.store.keys import ApiKey, KeyUsage
from gateway.store.limits import BUDGET_PERIODS, settle_budget_period
from gateway.store.owners import DEFAULT_KEY, KEY_NAME

DAY = 86400
#: the limits a key shows, and the store field each is kept in
LIMITS: dict[str, str] = {"rpm": "rpm", "max_concurrent": "max_concurrent", "max_stored_bytes": "max_stored_bytes",
                          "tpm": "tpm", "token_budget": "token_budget", "budget_period": "budget_period"}
_FIELDS = frozenset({"name", "admin", "expires_days", "limits", "access"})
_ACCESS = frozenset({"models", "mcp", "web"})
MAX_NAMES = 256  # entries of one access list


def key_object(key: ApiKey, usage: KeyUsage | None) -> dict[str, Any]:
    counted = usage.counted if usage is not None else None
    return {
        "object": "admin.key",
        "name": key.name,
        "created_at": key.created_at,
        "expires_at": key.expires_at,
        "revoked_at": key.revoked_at,
        "admin": key.admin,
        "limits": {field: getattr(key, column) for field, column in LIMITS.items()},
        "access": {"models": None if key.models is None else list(key.models),
                   "mcp": None if key.mcp is None else list(key.mcp), "web": key.web},
        "usage": {"input_tokens": counted.input_tokens if counted else 0,
                  "output_tokens": counted.output_tokens if counted else 0,
                  "requests": counted.requests if counted else 0,
                  "last_used_at": (counted.last_used_at or None) if counted else None},
    }


def check_name(name: Any, param: str = "name") -> str:
    if not isinstance(name, str) or not KEY_NAME.fullmatch(name):
        raise InvalidRequestError(f"Invalid key name {echo(name)!r}: use 1-64 characters of letters, digits, "
                                  "'.', '_' or '-'.", param=param)
    if name == DEFAULT_KEY:
        raise InvalidRequestError("The name 'default' is API_SERVER_KEY's; choose another name.", param=param)
    return name


def changes_of(body: dict[str, Any], *, creating: bool) -> dict[str, Any]:
    """The store fields a create or update body sets (an update: only those it names)."""
    unknown = set(body) - (_FIELDS if creating else _FIELDS - {"name"})
    if unknown:
        field = sorted(unknown)[0]
        raise InvalidRequestError(f"Unknown field '{echo(field)}'.", param=field)
    changes: dict[str, Any] = {}
    if "admin" in body:
        changes["admin"] = _bool(body["admin"], "admin")
    if "expires_days" in body:
        days = _count(body["expires_days"], "expires_days")
        changes["expires_at"] = None if days is None else int(time.time()) + days * DAY
    limits = _object(body.get("limits"), "limits")
    for field, value in limits.items():
        if field not in LIMITS:
            raise InvalidRequestError(f"Unknown limit '{echo(field)}'.", param=f"limits.{field}")
        if field == "budget_period":
            if value is not None and value not in BUDGET_PERIODS:
                raise InvalidRequestError(f"'limits.budget_period' must be one of {', '.join(sorted(BUDGET_PERIODS))}"
                                          " or null.", param="limits.budget_period")
            changes["budget_period"] = value
            continue
        changes[LIMITS[field]] = _count(value, f"limits.{field}")
    settle_budget_period(changes, creating=creating)
    access = _object(body.get("access"), "access")
    for field, value in access.items():
        if field not in _ACCESS:
            raise InvalidRequestError(f"Unknown access field '{echo(field)}'.", param=f"access.{field}")
        changes[field] = _bool(value, "access.web") if field == "web" else _names(value, f"access.{field}")
    return changes


def new_key_record(name: str, key_hash: str, changes: dict[str, Any]) -> ApiKey:
    return ApiKey(name=name, key_hash=key_hash, created_at=int(time.time()), **changes)


def _object(value: Any, param: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise InvalidRequestError(f"'{param}' must be an object.", param=param)
    return value


def _bool(value: Any, param: str) -> bool:
    if not isinstance(value, bool):
        raise InvalidRequestError(f"'{param}' must be true or false.", param=param)
    return value


def _count(value: Any, param: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1 or value > 2**62:
        raise InvalidRequestError(f"'{param}' must be a whole number of at least 1, or null.", param=param)
    return value


def _names(value: Any, param: str) -> tuple[str, ...] | None:
    if value is None:
        return None
    if not isinstance(value, list) or len(value) > MAX_NAMES or \
            not all(isinstance(name, str) and 0 < len(name) <= 256 for name in value):
        raise InvalidRequestError(f"'{param}' must be a list of names (at most {MAX_NAMES}), or null for all.",
                                  param=param)
    return tuple(dict.fromkeys(value))
