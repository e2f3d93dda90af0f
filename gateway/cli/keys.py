"""`agent-gateway [-p PROFILE] keys create NAME [limits, access] | update NAME [...] | show NAME | list |
revoke NAME | usage [NAME] [--days N]`.

The keys live in the profile's store (its SQLite file, or the PostgreSQL database of
API_SERVER_DATABASE_URL, which every replica reads), as a SHA-256 only (store/keys.py): `create`
prints a key once and nothing can print it again. A running gateway sees a new, changed or revoked
key within a few seconds (keys/ring.py), no restart.

Access (`--models`, `--mcp`, `--no-web`) is enforced by http/access.py; `--admin` opens the admin
API (/v1/admin) to the key. `update` changes only the flags given: a limit or `--expires-days`
given as `none` is removed, `--models all` / `--mcp all` allow every route or server again.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

from gateway.cli.commands import help_line
from gateway.config.settings import Settings, load_settings
from gateway.store.api import StoreUnavailableError
from gateway.store.keys import ApiKey, DayUsage, DuplicateKeyError, KeyStore, KeyUsage, key_hash, new_key
from gateway.store.limits import BUDGET_PERIODS, settle_budget_period
from gateway.store.owners import DEFAULT_KEY, KEY_NAME, owner_of, profile_label

T = TypeVar("T")
DAY = 86400


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("keys", help=help_line("keys"))
    actions = parser.add_subparsers(dest="keys_action", metavar="ACTION", required=True)

    create = actions.add_parser("create", help="make a key named NAME and print it once")
    create.add_argument("name", metavar="NAME")
    _limit_flags(create, _positive)
    _access_flags(create, updating=False)
    create.set_defaults(func=run_create)

    update = actions.add_parser("update", help="change key NAME's limits, access or admin flag in place "
                                "(running gateways within 5 s)")
    update.add_argument("name", metavar="NAME")
    _limit_flags(update, _positive_or_none)
    _access_flags(update, updating=True)
    update.set_defaults(func=run_update)

    show = actions.add_parser("show", help="one key: created, expiry, limits, access, usage (never the key)")
    show.add_argument("name", metavar="NAME")
    show.set_defaults(func=run_show)

    listing = actions.add_parser("list", help="every key: created, last used, limits, expiry, usage (never a key)")
    listing.set_defaults(func=run_list)

    revoke = actions.add_parser("revoke", help="refuse key NAME from now on (running gateways within 5 s)")
    revoke.add_argument("name", metavar="NAME")
    revoke.set_defaults(func=run_revoke)

    usage = actions.add_parser("usage", help="tokens, model calls, web searches and extracts, stored bytes per key")
    usage.add_argument("name", metavar="NAME", nargs="?")
    usage.add_argument("--days", type=_positive, metavar="N",
                       help="per UTC day, the last N days (today included) instead of the totals")
    usage.set_defaults(func=run_usage)


def _limit_flags(parser: argparse.ArgumentParser, number: Callable[[str], int | str]) -> None:
    """The limits of `create` and `update` (`update`'s take `none` too: the limit removed)."""
    none = " ('none': no limit)" if number is _positive_or_none else ""
    parser.add_argument("--rpm", type=number, metavar="N", help=f"at most N requests per minute{none}")
    parser.add_argument("--max-concurrent", type=number, metavar="N",
                        help=f"at most N runs at once{none}")
    parser.add_argument("--max-stored-mb", type=number, metavar="N",
                        help=f"at most N MB (10^6 bytes) of stored responses and conversations{none}")
    parser.add_argument("--tpm", type=number, metavar="N", help=f"at most N tokens (input + output) per minute{none}")
    parser.add_argument("--token-budget", type=number, metavar="N",
                        help=f"at most N tokens (input + output) per budget period{none}")
    parser.add_argument("--budget-period", choices=sorted(BUDGET_PERIODS), metavar="PERIOD",
                        help="the --token-budget's period, from the key's creation: 1d, 7d, 30d or total (default)")
    parser.add_argument("--expires-days", type=number, metavar="N",
                        help="refused N days from now" + (" ('none': never)" if none else ""))


def _access_flags(parser: argparse.ArgumentParser, *, updating: bool) -> None:
    every = " ('all': every one again)" if updating else ""
    parser.add_argument("--models", type=_names, metavar="ID,...",
                        help="the model routes the key may use, by id as /v1/models lists them (the default route: "
                        f"API_SERVER_MODEL_NAME){every}")
    parser.add_argument("--mcp", type=_names, metavar="LABEL,...",
                        help=f"the configured MCP servers the key may use ('none': no configured server){every}")
    if updating:
        parser.add_argument("--web", dest="web", action="store_true", default=None, help="web tools allowed again")
        parser.add_argument("--no-web", dest="web", action="store_false", help="no web tools for the key")
        parser.add_argument("--admin", dest="admin", action="store_true", default=None,
                            help="the key may use the admin API")
        parser.add_argument("--no-admin", dest="admin", action="store_false", help="the key is no admin any more")
    else:
        parser.add_argument("--no-web", dest="web", action="store_false", default=True,
                            help="no web tools for the key (a request asking for web search is a 400)")
        parser.add_argument("--admin", action="store_true", help="the key may use the admin API (/v1/admin)")


#: `--models all` / `--mcp all`: no list (every one)
ALL = ("all",)


def _names(text: str) -> tuple[str, ...]:
    if text.strip() == "none":
        return ()
    names = tuple(dict.fromkeys(name.strip() for name in text.split(",") if name.strip()))
    if not names:
        raise argparse.ArgumentTypeError("expected a comma-separated list of names, 'all' or 'none'")
    return names


#: `update --rpm none` (and the other limits, `--expires-days`): the limit removed
REMOVE = "none"


def _positive_or_none(text: str) -> int | str:
    return REMOVE if text.strip().lower() == REMOVE else _positive(text)


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a number of at least 1, got {value}")
    return value


def _fail(message: str, code: int = 1) -> int:
    print(f"agent-gateway: {message}", file=sys.stderr)
    return code


def _with_store(args: argparse.Namespace, work: Callable[[KeyStore], Awaitable[T]]) -> T:
    settings = load_settings(profile=args.profile)

    async def run() -> T:
        store, close = _open(settings)
        try:
            return await work(store)
        finally:
            await close()

    return asyncio.run(run())


def _open(settings: Settings) -> tuple[KeyStore, Callable[[], Awaitable[None]]]:
    profile = profile_label(settings.profile)
    legacy = owner_of(settings.profile, DEFAULT_KEY)
    if settings.database_url:
        from gateway.store.postgres.database import PostgresDatabase
        from gateway.store.postgres.keys import PostgresKeyStore

        database = PostgresDatabase(settings.database_url, legacy_owner=legacy)
        return PostgresKeyStore(database, profile), database.close
    from gateway.store.sqlite.keys import SQLiteKeyStore

    store = SQLiteKeyStore(settings.db_path, profile, legacy_owner=legacy)
    return store, store.close


def run_create(args: argparse.Namespace) -> int:
    name = args.name
    if not KEY_NAME.fullmatch(name):
        return _fail(f"invalid key name {name!r}: use 1-64 characters of letters, digits, '.', '_' or '-'", 2)
    if name == DEFAULT_KEY:
        return _fail("the name 'default' is API_SERVER_KEY's; choose another name", 1)
    if args.budget_period is not None and args.token_budget is None:
        return _fail("--budget-period needs --token-budget N", 2)
    key = new_key()
    now = int(time.time())
    record = ApiKey(name=name, key_hash=key_hash(key), created_at=now, **_changes(args, creating=True))

    async def work(store: KeyStore) -> None:
        await store.open()
        await store.create(record)

    try:
        _with_store(args, work)
    except DuplicateKeyError as exc:
        return _fail(exc.message)
    except StoreUnavailableError as exc:
        return _fail(exc.message)
    print(f"created key {name}; it is shown once, keep it safe (send it as 'Authorization: Bearer <key>'):",
          file=sys.stderr)
    print(key)
    return 0


def _changes(args: argparse.Namespace, *, creating: bool) -> dict[str, Any]:
    """The store fields the flags set (for `update`, only the flags given). `creating`: the
    defaults of a new key are the store's (no limit, every route and server, web on, no admin)."""
    changes: dict[str, Any] = {}
    now = int(time.time())
    given = vars(args)
    for flag, field, scale in (("rpm", "rpm", 1), ("max_concurrent", "max_concurrent", 1),
                               ("max_stored_mb", "max_stored_bytes", 1_000_000), ("tpm", "tpm", 1),
                               ("token_budget", "token_budget", 1)):
        value = given.get(flag)
        if value is not None:
            changes[field] = None if value == REMOVE else value * scale
    if given.get("budget_period") is not None:
        changes["budget_period"] = given["budget_period"]
    settle_budget_period(changes, creating=creating)
    days = given.get("expires_days")
    if days is not None:
        changes["expires_at"] = None if days == REMOVE else now + days * DAY
    for field in ("models", "mcp"):
        names = given.get(field)
        if names is not None:
            changes[field] = None if names == ALL else names
    for field in ("web", "admin"):
        if given.get(field) is not None:
            changes[field] = bool(given[field])
    return changes


def _when(stamp: int | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.gmtime(stamp)) if stamp else "-"


def _table(rows: Sequence[tuple[str, ...]]) -> None:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        print("  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip())


def _read(args: argparse.Namespace) -> tuple[list[ApiKey], dict[str, KeyUsage]] | None:
    async def work(store: KeyStore) -> tuple[list[ApiKey], dict[str, KeyUsage]]:
        await store.open()
        return await store.keys(), await store.usage()

    try:
        return _with_store(args, work)
    except StoreUnavailableError as exc:
        _fail(exc.message)
        return None


def _status(key: ApiKey, now: float | None = None) -> str:
    now = time.time() if now is None else now
    return ("revoked" if key.revoked_at is not None
            else "expired" if key.expires_at is not None and key.expires_at <= now else "active")


def _limit(value: int | None, unit: str = "") -> str:
    return "-" if value is None else f"{value}{unit}"


def run_list(args: argparse.Namespace) -> int:
    found = _read(args)
    if found is None:
        return 1
    keys, usage = found
    rows = [("NAME", "CREATED", "LAST USED", "RPM", "CONCURRENT", "STORED MAX", "TPM", "BUDGET", "EXPIRES", "STATUS",
             "TOKENS IN/OUT", "STORED")]
    now = time.time()
    for key in keys:
        used = usage.get(key.name, KeyUsage(key.name))
        status = _status(key, now)
        rows.append((key.name, _when(key.created_at), _when(used.counted.last_used_at or None), _limit(key.rpm),
                     _limit(key.max_concurrent), _limit(key.max_stored_bytes, " B"), _limit(key.tpm),
                     _limit(key.token_budget, f"/{key.budget_period}"), _when(key.expires_at), status,
                     f"{used.counted.input_tokens}/{used.counted.output_tokens}", f"{used.stored_bytes} B"))
    if len(rows) == 1:
        print("no keys yet: make one with `agent-gateway keys create NAME`")
        return 0
    _table(rows)
    return 0


def run_revoke(args: argparse.Namespace) -> int:
    async def work(store: KeyStore) -> bool:
        await store.open()
        return await store.revoke(args.name, int(time.time()))

    try:
        revoked = _with_store(args, work)
    except StoreUnavailableError as exc:
        return _fail(exc.message)
    if not revoked:
        return _fail(f"no active key named {args.name!r} (see `agent-gateway keys list`)")
    print(f"revoked key {args.name}: running gateways refuse it within 5 seconds")
    return 0


def run_usage(args: argparse.Namespace) -> int:
    if args.days is not None:
        return _usage_days(args)
    found = _read(args)
    if found is None:
        return 1
    keys, usage = found
    names = sorted({key.name for key in keys} | set(usage))
    if args.name is not None:
        if args.name not in names:
            return _fail(f"no key named {args.name!r} (see `agent-gateway keys list`)")
        names = [args.name]
    rows = [("NAME", "INPUT TOKENS", "OUTPUT TOKENS", "MODEL CALLS", "WEB SEARCHES", "WEB EXTRACTS", "STORED BYTES",
             "REQUESTS", "MCP CALLS")]
    for name in names:
        used = usage.get(name, KeyUsage(name))
        c = used.counted
        rows.append((name, str(c.input_tokens), str(c.output_tokens), str(c.model_calls), str(c.web_searches),
                     str(c.web_extracts), str(used.stored_bytes), str(c.requests), str(c.mcp_calls)))
    _table(rows)
    return 0


def run_update(args: argparse.Namespace) -> int:
    changes = _changes(args, creating=False)
    if not changes:
        return _fail("nothing to change: give a limit, --models, --mcp, --web/--no-web or --admin/--no-admin", 2)

    async def work(store: KeyStore) -> bool:
        await store.open()
        return await store.update(args.name, changes)

    try:
        updated = _with_store(args, work)
    except StoreUnavailableError as exc:
        return _fail(exc.message)
    if not updated:
        return _fail(f"no active key named {args.name!r} (see `agent-gateway keys list`)")
    print(f"updated key {args.name} ({', '.join(sorted(changes))}): running gateways apply it within 5 seconds")
    return 0


def _access(names: tuple[str, ...] | None) -> str:
    return "all" if names is None else ", ".join(names) or "none"


def run_show(args: argparse.Namespace) -> int:
    found = _read(args)
    if found is None:
        return 1
    keys, usage = found
    key = next((key for key in keys if key.name == args.name), None)
    if key is None:
        return _fail(f"no key named {args.name!r} (see `agent-gateway keys list`)")
    used = usage.get(key.name, KeyUsage(key.name))
    c = used.counted
    rows = [
        ("name", key.name), ("status", _status(key)), ("admin", "yes" if key.admin else "no"),
        ("created", _when(key.created_at)), ("expires", _when(key.expires_at)), ("revoked", _when(key.revoked_at)),
        ("rpm", _limit(key.rpm)), ("max concurrent", _limit(key.max_concurrent)),
        ("max stored", _limit(key.max_stored_bytes, " B")),
        ("models", _access(key.models)), ("mcp servers", _access(key.mcp)), ("web tools", "yes" if key.web else "no"),
        ("last used", _when(c.last_used_at or None)), ("requests", str(c.requests)),
        ("tokens in/out", f"{c.input_tokens}/{c.output_tokens}"), ("model calls", str(c.model_calls)),
        ("web searches/extracts", f"{c.web_searches}/{c.web_extracts}"), ("mcp calls", str(c.mcp_calls)),
        ("stored", f"{used.stored_bytes} B"),
    ]
    _table(rows)
    return 0


def _usage_days(args: argparse.Namespace) -> int:
    from gateway.keys.ring import DAY as ONE_DAY
    from gateway.keys.ring import utc_day

    since = utc_day(time.time() - (args.days - 1) * ONE_DAY)

    async def work(store: KeyStore) -> list[DayUsage]:
        await store.open()
        return await store.usage_days(args.name, since)

    try:
        days = _with_store(args, work)
    except StoreUnavailableError as exc:
        return _fail(exc.message)
    if not days:
        print(f"no usage since {since}" + (f" for key {args.name}" if args.name else ""))
        return 0
    rows = [("DAY", "NAME", "REQUESTS", "INPUT TOKENS", "OUTPUT TOKENS", "MODEL CALLS", "WEB SEARCHES",
             "WEB EXTRACTS", "MCP CALLS", "STORED BYTES")]
    for day in days:
        rows.append((day.day, day.name, str(day.requests), str(day.input_tokens), str(day.output_tokens),
                     str(day.model_calls), str(day.web_searches), str(day.web_extracts), str(day.mcp_calls),
                     "-" if day.stored_bytes is None else str(day.stored_bytes)))
    _table(rows)
    return 0
