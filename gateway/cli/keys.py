"""`agent-gateway [-p PROFILE] keys create NAME [limits] | list | revoke NAME | usage [NAME]`.

The keys live in the profile's store (its SQLite file, or the PostgreSQL database of
API_SERVER_DATABASE_URL, which every replica reads), as a SHA-256 only (store/keys.py): `create`
prints a key once and nothing can print it again. A running gateway sees a new or revoked key
within a few seconds (keys/ring.py), no restart.
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
from gateway.store.keys import ApiKey, DuplicateKeyError, KeyStore, KeyUsage, key_hash, new_key
from gateway.store.limits import BUDGET_PERIODS
from gateway.store.owners import DEFAULT_KEY, KEY_NAME, owner_of, profile_label

T = TypeVar("T")
DAY = 86400


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("keys", help=help_line("keys"))
    actions = parser.add_subparsers(dest="keys_action", metavar="ACTION", required=True)

    create = actions.add_parser("create", help="make a key named NAME and print it once")
    create.add_argument("name", metavar="NAME")
    add_limit_flags(create)
    create.add_argument("--expires-days", type=_positive, metavar="N", help="refused N days from now")
    create.set_defaults(func=run_create)

    listing = actions.add_parser("list", help="every key: created, last used, limits, expiry, usage (never a key)")
    listing.set_defaults(func=run_list)

    revoke = actions.add_parser("revoke", help="refuse key NAME from now on (running gateways within 5 s)")
    revoke.add_argument("name", metavar="NAME")
    revoke.set_defaults(func=run_revoke)

    usage = actions.add_parser("usage", help="tokens, model calls, web searches and extracts, stored bytes per key")
    usage.add_argument("name", metavar="NAME", nargs="?")
    usage.set_defaults(func=run_usage)


def add_limit_flags(parser: argparse.ArgumentParser) -> None:
    """A key's limits, each off unless given: the flags of `keys create` (and of any command that
    sets limits), read back by `limits_of`."""
    parser.add_argument("--rpm", type=_positive, metavar="N", help="at most N requests per minute")
    parser.add_argument("--max-concurrent", type=_positive, metavar="N", help="at most N runs at once")
    parser.add_argument("--max-stored-mb", type=_positive, metavar="N",
                        help="at most N MB (10^6 bytes) of stored responses and conversations")
    parser.add_argument("--tpm", type=_positive, metavar="N", help="at most N tokens (input + output) per minute")
    parser.add_argument("--token-budget", type=_positive, metavar="N",
                        help="at most N tokens (input + output) per budget period")
    parser.add_argument("--budget-period", choices=sorted(BUDGET_PERIODS), metavar="PERIOD",
                        help="the --token-budget's period, from the key's creation: 1d, 7d, 30d or total (default)")


def limits_of(args: argparse.Namespace) -> dict[str, Any]:
    """The ApiKey fields the limit flags set (None: no limit; a flag not given is None too)."""
    budget_period = args.budget_period
    if args.token_budget is not None and budget_period is None:
        budget_period = "total"
    return {"rpm": args.rpm, "max_concurrent": args.max_concurrent,
            "max_stored_bytes": args.max_stored_mb * 1_000_000 if args.max_stored_mb else None,
            "tpm": args.tpm, "token_budget": args.token_budget,
            "budget_period": budget_period if args.token_budget is not None else None}


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
    record = ApiKey(name=name, key_hash=key_hash(key), created_at=now,
                    expires_at=now + args.expires_days * DAY if args.expires_days else None, **limits_of(args))

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
        status = ("revoked" if key.revoked_at is not None
                  else "expired" if key.expires_at is not None and key.expires_at <= now else "active")
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
    found = _read(args)
    if found is None:
        return 1
    keys, usage = found
    names = sorted({key.name for key in keys} | set(usage))
    if args.name is not None:
        if args.name not in names:
            return _fail(f"no key named {args.name!r} (see `agent-gateway keys list`)")
        names = [args.name]
    rows = [("NAME", "INPUT TOKENS", "OUTPUT TOKENS", "MODEL CALLS", "WEB SEARCHES", "WEB EXTRACTS", "STORED BYTES")]
    for name in names:
        used = usage.get(name, KeyUsage(name))
        c = used.counted
        rows.append((name, str(c.input_tokens), str(c.output_tokens), str(c.model_calls), str(c.web_searches),
                     str(c.web_extracts), str(used.stored_bytes)))
    _table(rows)
    return 0
