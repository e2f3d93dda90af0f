"""API keys and their usage, kept in the profile's store (the SQLite file, or the PostgreSQL
database every replica shares): the contract, and the tables both backends create (schema v4; v8
adds each key's access and admin columns, two more counters and the usage by UTC day).

A key is kept as the SHA-256 of its text, never the text. A slow KDF (bcrypt, scrypt) protects
passwords, which people choose from a small space; a key is 32 random bytes from `secrets`, so its
hash cannot be reversed by guessing, and one SHA-256 keeps auth to one hash per request.

Usage (tokens, model calls, web searches and extracts) is added in batches by each replica
(http/auth.py), so replicas on one database add up; stored bytes are not counted but summed from
the objects each owner has now.

Access (schema v8): `models` and `mcp` are lists of route ids and MCP server labels the key may use,
None for all (kept as JSON text in both backends); `web` False: no web tools for the key. Usage by
day: one row per key and UTC day (`YYYY-MM-DD`, which sorts as it reads), added to in the same
batched write as the totals; `stored_bytes` is the day's last figure (null: not read that day).
"""

from __future__ import annotations

import hashlib
import json
import secrets
from abc import ABC, abstractmethod
from dataclasses import dataclass, field, fields
from typing import Any

from gateway.errors import InvalidRequestError

KEY_PREFIX = "agk_"
KEY_TABLES = (
    """CREATE TABLE IF NOT EXISTS api_keys (
        profile TEXT NOT NULL,
        name TEXT NOT NULL,
        key_hash TEXT NOT NULL UNIQUE,
        created_at BIGINT NOT NULL,
        expires_at BIGINT,
        revoked_at BIGINT,
        rpm BIGINT,
        max_concurrent BIGINT,
        max_stored_bytes BIGINT,
        PRIMARY KEY (profile, name)
    )""",
    # apart from api_keys: API_SERVER_KEY's `default` has usage too, and a revoked key keeps its figures
    """CREATE TABLE IF NOT EXISTS key_usage (
        profile TEXT NOT NULL,
        name TEXT NOT NULL,
        input_tokens BIGINT NOT NULL DEFAULT 0,
        output_tokens BIGINT NOT NULL DEFAULT 0,
        model_calls BIGINT NOT NULL DEFAULT 0,
        web_searches BIGINT NOT NULL DEFAULT 0,
        web_extracts BIGINT NOT NULL DEFAULT 0,
        last_used_at BIGINT,
        PRIMARY KEY (profile, name)
    )""",
)


#: Usage by key and UTC day (schema v8), in both backends; the counters are COUNTERS'.
KEY_USAGE_DAYS = (
    """CREATE TABLE IF NOT EXISTS key_usage_days (
        profile TEXT NOT NULL,
        name TEXT NOT NULL,
        day TEXT NOT NULL,
        requests BIGINT NOT NULL DEFAULT 0,
        input_tokens BIGINT NOT NULL DEFAULT 0,
        output_tokens BIGINT NOT NULL DEFAULT 0,
        model_calls BIGINT NOT NULL DEFAULT 0,
        web_searches BIGINT NOT NULL DEFAULT 0,
        web_extracts BIGINT NOT NULL DEFAULT 0,
        mcp_calls BIGINT NOT NULL DEFAULT 0,
        stored_bytes BIGINT,
        PRIMARY KEY (profile, day, name)
    )""",
)


#: Schema v7 (issue 46): token limits, and the tokens each key used per budget period (a period's
#: start in seconds since the epoch; `total` has one period, from the key's creation).
KEY_TABLES_7 = (
    "ALTER TABLE api_keys ADD COLUMN tpm BIGINT",
    "ALTER TABLE api_keys ADD COLUMN token_budget BIGINT",
    "ALTER TABLE api_keys ADD COLUMN budget_period TEXT",
    """CREATE TABLE IF NOT EXISTS key_budgets (
        profile TEXT NOT NULL,
        name TEXT NOT NULL,
        period_start BIGINT NOT NULL,
        tokens BIGINT NOT NULL DEFAULT 0,
        PRIMARY KEY (profile, name, period_start)
    )""",
)


class DuplicateKeyError(InvalidRequestError):
    """A key of this name exists (or existed: a revoked name is not reused, its usage stays its own)."""


def new_key() -> str:
    return KEY_PREFIX + secrets.token_urlsafe(32)


def key_hash(key: str | bytes) -> str:
    data = key if isinstance(key, bytes) else key.encode("utf-8", "surrogateescape")
    return hashlib.sha256(data).hexdigest()


@dataclass
class ApiKey:
    name: str
    key_hash: str
    created_at: int
    expires_at: int | None = None
    revoked_at: int | None = None
    rpm: int | None = None
    max_concurrent: int | None = None
    max_stored_bytes: int | None = None
    #: an admin key may use the admin API (/v1/admin)
    admin: bool = False
    #: the model routes (ids) the key may use; None: every route
    models: tuple[str, ...] | None = None
    #: the configured MCP servers (labels) the key may use; None: every one
    mcp: tuple[str, ...] | None = None
    #: False: no web tools for the key
    web: bool = True
    tpm: int | None = None
    token_budget: int | None = None
    budget_period: str | None = None  # store/limits.py BUDGET_PERIODS; None with no budget

    @property
    def token_limited(self) -> bool:
        return self.tpm is not None or self.token_budget is not None


#: The columns of api_keys in the order both backends read them (ApiKey's fields).
KEY_COLUMNS = ("name", "key_hash", "created_at", "expires_at", "revoked_at", "rpm", "max_concurrent",
               "max_stored_bytes", "admin", "models", "mcp", "web",
               "tpm", "token_budget", "budget_period")
#: What `update` may change, in place (name, hash and creation never change; revoking is `revoke`).
UPDATABLE = frozenset({"expires_at", "rpm", "max_concurrent", "max_stored_bytes", "admin", "models", "mcp", "web",
                       "tpm", "token_budget", "budget_period"})


def encode_names(names: tuple[str, ...] | list[str] | None) -> str | None:
    """An access list as stored: JSON text, None for "all"."""
    return None if names is None else json.dumps(list(names))


def decode_names(text: str | None) -> tuple[str, ...] | None:
    return None if text is None else tuple(str(name) for name in json.loads(text))


def column_value(column: str, value: Any) -> Any:
    """A field's value as both backends store it (lists as JSON text, flags as they are)."""
    return encode_names(value) if column in ("models", "mcp") else value


def key_from_row(row: Any) -> ApiKey:
    values = dict(zip(KEY_COLUMNS, row, strict=True))
    values["admin"], values["web"] = bool(values["admin"]), bool(values["web"])
    values["models"], values["mcp"] = decode_names(values["models"]), decode_names(values["mcp"])
    return ApiKey(**values)


@dataclass
class UsageDelta:
    """What one replica counted for one key since its last write."""

    input_tokens: int = 0
    output_tokens: int = 0
    model_calls: int = 0
    web_searches: int = 0
    web_extracts: int = 0
    requests: int = 0
    mcp_calls: int = 0
    last_used_at: int = 0
    #: how much of the tokens above is the agent's estimate (rounds the upstream reported no usage
    #: for); not a stored column (COUNTERS): the metrics show it
    estimated_tokens: int = 0

    def add(self, other: UsageDelta) -> None:
        for f in fields(self):
            if f.name == "last_used_at":
                self.last_used_at = max(self.last_used_at, other.last_used_at)
            else:
                setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))


@dataclass
class KeyUsage:
    name: str
    counted: UsageDelta = field(default_factory=UsageDelta)
    stored_bytes: int = 0


COUNTERS = ("input_tokens", "output_tokens", "model_calls", "web_searches", "web_extracts", "requests", "mcp_calls")


@dataclass
class DayUsage:
    """One key's usage on one UTC day."""

    name: str
    day: str  # YYYY-MM-DD
    requests: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    model_calls: int = 0
    web_searches: int = 0
    web_extracts: int = 0
    mcp_calls: int = 0
    stored_bytes: int | None = None  # the day's last figure read; None: none read that day


def day_from_row(row: Any) -> DayUsage:
    """(name, day, *COUNTERS, stored_bytes) as both backends read it."""
    counts = {c: int(v) for c, v in zip(COUNTERS, row[2:2 + len(COUNTERS)], strict=True)}
    stored = row[2 + len(COUNTERS)]
    return DayUsage(row[0], row[1], **counts, stored_bytes=None if stored is None else int(stored))


@dataclass
class UsageWrite:
    """One batched write of usage: the counts per key (totals and `day`'s row), the stored bytes
    read per key (the day's last figure), and the first day kept (older rows deleted; None: none)."""

    deltas: dict[str, UsageDelta]
    day: str | None  # None: the totals only
    stored: dict[str, int] = field(default_factory=dict)
    keep_from: str | None = None


class KeyStore(ABC):
    """One profile's keys (`profile`: its label, store/owners.py)."""

    profile: str

    @abstractmethod
    async def open(self) -> None: ...

    @abstractmethod
    async def close(self) -> None: ...

    @abstractmethod
    async def create(self, key: ApiKey) -> None:
        """Raises DuplicateKeyError for a name already taken (revoked ones too)."""

    @abstractmethod
    async def keys(self) -> list[ApiKey]:
        """Every key of the profile, revoked ones too, by name."""

    async def keys_version(self) -> int:
        """A number that changes whenever the profile's keys do (schema version 10: bumped by the key
        table's triggers), read before `keys`, so a refresh with nothing changed reads one row instead
        of every key; -1: not known, read the keys."""
        return -1

    @abstractmethod
    async def revoke(self, name: str, at: int) -> bool:
        """False: no live key of that name."""

    @abstractmethod
    async def update(self, name: str, changes: dict[str, Any]) -> bool:
        """Sets the fields `changes` names (among UPDATABLE) on the live key `name`; False: no live key."""

    @abstractmethod
    async def add_usage(self, deltas: dict[str, UsageDelta] | UsageWrite) -> None:
        """Adds each key name's counts (one transaction); a UsageWrite adds its day's rows too,
        sets the day's stored bytes and deletes the days before `keep_from`."""

    @abstractmethod
    async def usage_days(self, name: str | None, since: str) -> list[DayUsage]:
        """The days from `since` (YYYY-MM-DD) on, of one key or every key, by day then name."""

    @abstractmethod
    async def usage(self) -> dict[str, KeyUsage]:
        """Per key name: the counts so far and the bytes its objects take now."""

    @abstractmethod
    async def budgets(self, periods: dict[str, int]) -> dict[str, int]:
        """Tokens each key name used in its period starting at the given second (absent: none)."""

    @abstractmethod
    async def add_budgets(self, deltas: dict[tuple[str, int], int]) -> None:
        """Adds tokens to each (key name, period start)'s counter (one transaction)."""

    def _owner_range(self) -> tuple[str, str]:
        # every owner of this profile sorts in [profile + "/", profile + "0"): '0' follows '/'
        return self.profile + "/", self.profile + "0"
