"""Who sent a request: a key's name, owner and limits, as the ring holds it (keys/ring.py)."""

from __future__ import annotations

from dataclasses import dataclass


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
