"""Ids and names a client gives: checked here, the same whatever the store behind them.

A response id, a conversation id or name, an item id: at most MAX_ID_CHARS characters and no
control character (NUL included). A client-given item id also holds no `/ ? # %` and no
whitespace, and is not `.` or `..`: it is a path segment of `/v1/conversations/{id}/items/{item_id}`,
which a client must be able to write back. Without these bounds, SQLite and PostgreSQL answered
differently: PostgreSQL refuses a NUL and an index key over its btree limit (2,704 bytes), which the
gateway reported as an outage (503, retried by every SDK) where SQLite answered 404.

A bad value in a body or a query is a 400 naming the field; in a path it names nothing that can
exist, so it is the same 404 as an unknown id.
"""

from __future__ import annotations

import re

from gateway.errors import InvalidRequestError, NotFoundError, echo

MAX_ID_CHARS = 256
# C0, DEL and C1 control characters
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_NOT_IN_ITEM_ID = re.compile(r"[/?#%\s]")


def problem(value: str, *, item_id: bool = False) -> str | None:
    """What is wrong with `value` as an id or name, or None."""
    if len(value) > MAX_ID_CHARS:
        return f"at most {MAX_ID_CHARS} characters"
    if _CONTROL.search(value):
        return "no control characters"
    if item_id:
        if value in (".", ".."):
            return "not '.' or '..'"
        if _NOT_IN_ITEM_ID.search(value):
            return "no '/', '?', '#', '%' or whitespace"
    return None


def check(value: str, param: str, *, item_id: bool = False) -> str:
    """`value` from a body or a query, or a 400 naming `param`."""
    found = problem(value, item_id=item_id)
    if found is not None:
        raise InvalidRequestError(f"'{param}' must be an id of {found}.", param=param, code="invalid_id")
    return value


def check_path(value: str, what: str, param: str, *, item_id: bool = False) -> str:
    """`value` from a URL path, or the 404 of an id that cannot exist (`what`: "response", ...)."""
    if problem(value, item_id=item_id) is not None:
        raise NotFoundError(f"No {what} found with id '{echo(value)}'.", param=param)
    return value
