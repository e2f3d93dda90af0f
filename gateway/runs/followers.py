"""How many streams may follow background runs at once, on this replica: per run
(API_SERVER_MAX_FOLLOWERS_PER_RUN) and per key (API_SERVER_MAX_FOLLOWERS_PER_KEY). Past either
bound a new follower gets a 429 before anything is sent (the followers already there go on).

Counted in this process, not the store: a follower is a connection to this replica, and a count
in the database would cost a round trip per follower and leak when a replica dies. With N
replicas a run may have N times the bound in all; each replica's memory and store load are what
the bound protects. Every follower counts, the stream of a background create (`stream: true`)
included.
"""

from __future__ import annotations

from collections import Counter

from gateway.errors import RateLimitError


class TooManyFollowersError(RateLimitError):
    """Past API_SERVER_MAX_FOLLOWERS_PER_RUN or _PER_KEY: 429, retry once a stream has ended."""


class FollowerSlot:
    """One follower's place in the counts, given back once (by `release`, idempotent)."""

    def __init__(self, slots: FollowerSlots, response_id: str, owner: str) -> None:
        self._slots, self.response_id, self.owner = slots, response_id, owner
        self._held = True

    def release(self) -> None:
        if self._held:
            self._held = False
            self._slots._leave(self.response_id, self.owner)


class FollowerSlots:
    def __init__(self) -> None:
        self._per_run: Counter[str] = Counter()
        self._per_owner: Counter[str] = Counter()

    def admit(self, response_id: str, owner: str, *, per_run: int, per_key: int) -> FollowerSlot:
        """A slot for one more follower of `response_id` by `owner` (a key, store/owned.py), or
        TooManyFollowersError."""
        if self._per_run[response_id] >= per_run:
            raise TooManyFollowersError(
                f"{per_run} streams already follow this background response, the most this gateway allows "
                "(API_SERVER_MAX_FOLLOWERS_PER_RUN); close one, or poll it with GET, and retry.", retry_after=5)
        if self._per_owner[owner] >= per_key:
            raise TooManyFollowersError(
                f"This API key already has {per_key} background response streams open, the most this gateway "
                "allows (API_SERVER_MAX_FOLLOWERS_PER_KEY); close one, or poll with GET, and retry.", retry_after=5)
        self._per_run[response_id] += 1
        self._per_owner[owner] += 1
        return FollowerSlot(self, response_id, owner)

    def _leave(self, response_id: str, owner: str) -> None:
        for counts, name in ((self._per_run, response_id), (self._per_owner, owner)):
            counts[name] -= 1
            if counts[name] <= 0:
                del counts[name]  # a run or key with no follower left leaves nothing behind

    def following(self, response_id: str) -> int:
        """How many streams follow `response_id` here now."""
        return self._per_run[response_id]
