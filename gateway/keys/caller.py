"""Who sent a request: a key's name, owner, limits and access, as the ring holds it (keys/ring.py)."""

from __future__ import annotations

from dataclasses import dataclass

from gateway.store.keys import ApiKey


@dataclass
class Caller:
    """Who sent a request: a key's name and its limits (None: no limit)."""

    name: str
    owner: str
    expires_at: int | None = None
    rpm: int | None = None
    max_concurrent: int | None = None
    max_stored_bytes: int | None = None
    tpm: int | None = None
    token_budget: int | None = None
    budget_period: str | None = None
    created_at: int = 0  # where its budget periods start
    #: any limit at all (set by the ring): the one test a request of an unlimited key pays
    limited: bool = False
    #: a tpm or a token budget (set by the ring; a field, not a property: read on every run)
    token_limited: bool = False
    admin: bool = False
    #: the model route ids it may use (None: all), the configured MCP server labels (None: all)
    models: frozenset[str] | None = None
    mcp: frozenset[str] | None = None
    web: bool = True

    @classmethod
    def of(cls, key: ApiKey, owner: str) -> Caller:
        token_limited = key.token_limited
        return cls(key.name, owner, key.expires_at, key.rpm, key.max_concurrent, key.max_stored_bytes, key.tpm,
                   key.token_budget, key.budget_period, key.created_at,
                   limited=key.rpm is not None or key.max_concurrent is not None or token_limited,
                   token_limited=token_limited, admin=key.admin,
                   models=None if key.models is None else frozenset(key.models),
                   mcp=None if key.mcp is None else frozenset(key.mcp), web=key.web)
