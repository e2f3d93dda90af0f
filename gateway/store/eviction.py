"""The byte bound's last resort, shared by both backends: when a profile's stored objects pass
`max_bytes`, the largest owner gives up its least recently used objects first, so one key filling
the store costs that key its oldest objects and never another key's.

The count bound (`max_responses`) is per owner in each backend's SQL (each key keeps its newest
`max_responses` records); this module only decides the order in which the byte bound evicts. It
runs only when the cheap total (one row read) says the bound is passed, so a write under the bound
pays nothing for it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

#: candidates per look at one owner's oldest objects
BATCH = 64

#: (kind, id, size): kind "response", "conversation" or "file", oldest first
Candidate = tuple[str, str, int]


async def evict_largest_first(sizes: dict[str, int], excess: int, keep: set[str],
                              oldest: Callable[[str], Awaitable[list[Candidate]]],
                              delete: Callable[[dict[str, list[str]]], Awaitable[bool]]) -> None:
    """Evicts until `excess` bytes are gone: the largest owner's oldest objects first, moving on to
    the next owner once it is no longer the largest. Never one of `keep` (what this write wrote: an
    object larger than the bound alone stays until the next write). `sizes` (owner -> bytes) is
    updated as objects go; `delete` says whether it removed anything (a backend may skip a busy row)."""
    spared: set[str] = set()
    while excess > 0:
        live = {owner: size for owner, size in sizes.items() if owner not in spared and size > 0}
        if not live:
            return
        owner = max(live, key=lambda name: (live[name], name))
        runner_up = max((size for name, size in live.items() if name != owner), default=0)
        evict: dict[str, list[str]] = {"response": [], "conversation": [], "file": []}
        for kind, object_id, size in await oldest(owner):
            if excess <= 0 or sizes[owner] < runner_up:
                break
            if object_id in keep:
                continue
            evict[kind].append(object_id)
            excess -= size
            sizes[owner] -= size
        if not any(evict.values()) or not await delete(evict):
            spared.add(owner)  # nothing of it can go now: the next owner
