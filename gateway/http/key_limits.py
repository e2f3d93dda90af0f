"""The front door's part of a limited key's limits: tokens everywhere, every limit behind replicas.

A request of a key with no limit pays one attribute test (`Caller.limited`). A limited key's:
- **at the door** (the middleware, before the body): one process counts rpm in auth.py and runs in
  auth.enter_run, in memory; behind replicas, one round trip asks the database for its rpm and, on
  a run's path, a run slot (keys/limits.py). A run of a key with token limits asks nothing here:
- **at the estimate** (the route, once the body is parsed, before anything goes upstream):
  `admit_tokens` reserves the run's estimated tokens against the tpm and the budget; behind
  replicas the same single round trip also counts its rpm and its run slot. At most one round trip
  per request either way; a run with a slot in the database frees it as it ends (one more write,
  which the request waits for, so a client's next run never finds its own last one still counted).

Refusals: past the rpm 429 `requests`, past the concurrent runs 429 (both with Retry-After); past
the tpm 429 type `tokens` code `rate_limit_exceeded` with Retry-After (as OpenAI's); past the
budget 429 `insufficient_quota`, naming when the budget resets. Headers: auth.add_rate_headers.
"""

from __future__ import annotations

import math
import time
from collections.abc import Awaitable
from functools import partial
from typing import Any

from aiohttp import web

from gateway.errors import InsufficientQuotaError, RateLimitError, TokenRateLimitError
from gateway.http.auth import KEY_RUN_SLOT, RUN_PATHS, KeyRunSlot, enter_run
from gateway.keys.limits import CURRENT_TICKET, CURRENT_TOKENS, DEFAULT_OUTPUT, KeyLimits, Ticket
from gateway.keys.ring import CURRENT_RATE, Caller
from gateway.store.api import StoreUnavailableError
from gateway.store.limits import Admission, Ask, period_end, period_start
from gateway.wire import context_budget


def door(request: web.Request, caller: Caller, limits: KeyLimits) -> Awaitable[None] | None:
    """A limited key's checks before its body is read (429s); a run's slot in request[KEY_RUN_SLOT].
    What is counted in memory (one process) is done here and now; behind replicas the database's
    round trip is returned, for the caller to await (no coroutine for a request that needs none)."""
    runs = request.method == "POST" and request.path in RUN_PATHS
    if limits.shared is None:
        if runs:
            if caller.max_concurrent is not None:
                enter_run(request, caller)
        elif caller.token_limited:
            CURRENT_TOKENS.set(limits.local_figures(caller, time.monotonic()))
        return None
    if caller.token_limited:
        if runs:
            return None  # everything in admit_tokens' one round trip
        CURRENT_TOKENS.set(limits.last_figures(caller))
    if caller.rpm is None and not (runs and caller.max_concurrent is not None):
        return None
    return _door_shared(request, caller, limits, runs)


async def _door_shared(request: web.Request, caller: Caller, limits: KeyLimits, runs: bool) -> None:
    ask = limits.ask(caller, runs=runs, estimate=None)
    _answer(request, limits, caller, ask, await limits.admit_shared(ask), None)


def token_estimate(items: list[Any], max_output: int | None) -> int:
    """The tokens a run reserves: its input and tools (`items`), as the context budget counts them,
    and its max output (DEFAULT_OUTPUT when it sets none)."""
    return context_budget.fixed_tokens_at_most(items, max_output or DEFAULT_OUTPUT)


def admit_tokens(request: web.Request, caller: Caller, limits: KeyLimits, estimate: int) -> Awaitable[None] | None:
    """A run of a key with token limits (`caller.token_limited`): its `estimate` reserved, or a 429.
    In memory (one process) at once; behind replicas the round trip is returned, to be awaited."""
    if limits.shared is not None:
        return _admit_tokens_shared(request, caller, limits, estimate)
    ticket, refused, retry = limits.admit_local(caller, estimate, time.monotonic())
    if ticket is None:
        raise _refusal(caller, refused or "tokens", retry, limits)
    # its concurrent-runs slot (auth.enter_run, only for a key with that limit), freed with it
    held = request.get(KEY_RUN_SLOT) if caller.max_concurrent is not None else None
    request[KEY_RUN_SLOT] = KeyRunSlot(partial(_finish_local, limits, ticket, held))
    CURRENT_TICKET.set(ticket)
    return None


async def _admit_tokens_shared(request: web.Request, caller: Caller, limits: KeyLimits, estimate: int) -> None:
    ask = limits.ask(caller, runs=True, estimate=estimate)
    admission = await limits.admit_shared(ask)
    CURRENT_TOKENS.set(limits.shared_figures(caller, admission))
    ticket = Ticket(caller, estimate, period_start=ask.period_start, admission_id=admission.admission_id)
    _answer(request, limits, caller, ask, admission, ticket)
    CURRENT_TICKET.set(ticket)


def _finish_local(limits: KeyLimits, ticket: Ticket, held: KeyRunSlot | None) -> Awaitable[None] | None:
    limits.finish(ticket, None)
    return held.release() if held is not None else None


def _answer(request: web.Request, limits: KeyLimits, caller: Caller, ask: Ask, admission: Admission,
            ticket: Ticket | None) -> None:
    if caller.rpm is not None:
        CURRENT_RATE.set((caller.rpm, caller.rpm - admission.requests, admission.requests_reset))
    if admission.refused is not None:
        raise _refusal(caller, admission.refused, admission.retry_after, limits)
    if ticket is not None or ask.run_id is not None:
        run_id = ask.run_id
        request[KEY_RUN_SLOT] = KeyRunSlot(lambda: limits.finish(ticket, run_id))


def _refusal(caller: Caller, refused: str, retry: float, limits: KeyLimits) -> RateLimitError:
    retry = max(1.0, retry)
    if refused == "requests":
        return RateLimitError(f"Rate limit reached for key '{caller.name}': {caller.rpm} requests per minute. "
                              f"Try again in {math.ceil(retry)} s.", retry_after=retry)
    if refused == "runs":
        return RateLimitError(f"Key '{caller.name}' already has {caller.max_concurrent} runs in progress, its "
                              "limit; retry when one ends.", retry_after=1)
    if refused == "tokens":
        return TokenRateLimitError(f"Rate limit reached for key '{caller.name}' on tokens per min (TPM): Limit "
                                   f"{caller.tpm}. Try again in {math.ceil(retry)} s.", retry_after=retry)
    end = period_end(caller.created_at, caller.budget_period, time.time())
    when = ("it does not reset (budget period `total`)" if end is None
            else "it resets at " + time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(end)))
    return InsufficientQuotaError(f"Key '{caller.name}' has used its token budget of {caller.token_budget} tokens "
                                  f"for this period; {when}.", param=None)


async def claimed_limits(limits: KeyLimits, caller: Caller, held: KeyRunSlot | None) -> KeyRunSlot | None:
    """A queued run claimed to start (admitted when it was queued): its slot in the database taken
    whatever the limit (replicas), and its tokens counted as it ends (its create request's
    reservation was given back when that request ended)."""
    ticket = Ticket(caller, 0, minute=True) if caller.token_limited else None
    if ticket is not None and caller.token_budget is not None:
        ticket.period_start = period_start(caller.created_at, caller.budget_period, time.time())
    run_id = None
    if limits.shared is not None and caller.max_concurrent is not None:
        ask = limits.ask(caller, runs=True, estimate=None)
        ask.rpm = None  # counted when it was queued
        try:
            await limits.admit_shared(ask, force=True)
            run_id = ask.run_id
        except StoreUnavailableError:  # it runs anyway: the slot is counted on this replica only
            pass
    if ticket is None and run_id is None:
        return held
    CURRENT_TICKET.set(ticket)  # the run's task copies this context

    def release() -> Awaitable[None] | None:
        freed = limits.finish(ticket, run_id)
        if held is not None:
            held.release()
        return freed

    return KeyRunSlot(release)
