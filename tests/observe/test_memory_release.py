"""The memory releaser: a trim once the gateway is idle after a burst, never during traffic."""

from __future__ import annotations

import asyncio

from gateway.http.lifecycle import Lifecycle
from gateway.observe.memory_release import MemoryReleaser, malloc_trim


class Trims:
    def __init__(self, available: bool = True) -> None:
        self.count = 0
        self.available = available

    def __call__(self) -> bool:
        self.count += 1
        return self.available


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def burst(lifecycle: Lifecycle, size: int) -> None:
    for _ in range(size):
        lifecycle.enter()
    for _ in range(size):
        lifecycle.leave()


async def settle() -> None:
    for _ in range(3):
        await asyncio.sleep(0)


def wired(trims: Trims, clock: Clock | None = None, **options: float) -> Lifecycle:
    lifecycle = Lifecycle()
    releaser = MemoryReleaser(lambda: lifecycle.in_flight == 0, trims, min_peak=3, delay=0,
                              clock=clock or Clock(), **options)
    lifecycle.on_idle = releaser.after_idle
    return lifecycle


async def test_a_burst_is_followed_by_one_trim_once_idle():
    trims = Trims()
    lifecycle = wired(trims)
    burst(lifecycle, 5)
    await settle()
    assert trims.count == 1


async def test_ordinary_traffic_below_the_peak_never_trims():
    trims = Trims()
    lifecycle = wired(trims)
    for _ in range(20):
        burst(lifecycle, 2)
    await settle()
    assert trims.count == 0


async def test_no_trim_while_requests_are_in_flight_then_one_when_idle():
    trims = Trims()
    lifecycle = wired(trims)
    burst(lifecycle, 5)
    lifecycle.enter()  # busy again before the trim runs
    await settle()
    assert trims.count == 0
    lifecycle.leave()  # a small request ends: the burst is still owed its trim
    await settle()
    assert trims.count == 1


async def test_trims_are_spaced_by_the_minimum_interval():
    trims, clock = Trims(), Clock()
    lifecycle = wired(trims, clock, min_interval=30)
    burst(lifecycle, 5)
    await settle()
    clock.now += 1
    burst(lifecycle, 5)
    await settle()
    assert trims.count == 1  # the second waits for the interval; not run yet


async def test_without_malloc_trim_it_stops_trying():
    trims = Trims(available=False)
    lifecycle = wired(trims, min_interval=0)
    burst(lifecycle, 5)
    await settle()
    burst(lifecycle, 5)
    await settle()
    assert trims.count == 1


def test_malloc_trim_is_harmless_on_this_platform():
    assert malloc_trim() in (True, False)
