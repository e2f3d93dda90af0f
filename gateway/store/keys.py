"""API keys and their usage, kept in the profile's store (the SQLite file, or the PostgreSQL
database every replica shares): the contract, and the tables both backends create (schema v4).

A key is kept as the SHA-256 of its text, never the text. A slow KDF (bcrypt, scrypt) protects
passwords, which people choose from a small space; a key is 32 random bytes from `secrets`, so its
hash cannot be reversed by guessing, and one SHA-256 keeps auth to one hash per request.

Usage (tokens, model calls, web searches and extracts) is added in batches by each replica
(http/auth.py), so replicas on one database add up; stored bytes are not counted but summed from
the objects each owner has now.
"""

from __future__ import annotations

import hashlib
import secrets
from abc import ABC, abstractmethod
from dataclasses import dataclass, field, fields

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
    tpm: int | None = None
    token_budget: int | None = None
    budget_period: str | None = None  # store/limits.py BUDGET_PERIODS; None with no budget

    @property
    def token_limited(self) -> bool:
        return self.tpm is not None or self.token_budget is not None


@dataclass
class UsageDelta:
    """What one replica counted for one key since its last write."""

    input_tokens: int = 0
    output_tokens: int = 0
    model_calls: int = 0
    web_searches: int = 0
    web_extracts: int = 0
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


COUNTERS = ("input_tokens", "output_tokens", "model_calls", "web_searches", "web_extracts")


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

    @abstractmethod
    async def revoke(self, name: str, at: int) -> bool:
        """False: no live key of that name."""

    @abstractmethod
    async def add_usage(self, deltas: dict[str, UsageDelta]) -> None:
        """Adds each key name's counts (one transaction)."""

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
