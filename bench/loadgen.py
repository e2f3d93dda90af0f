"""The Python load generator: N workers on one aiohttp session, bounded in count AND time.

Good for latency (p50/p99, time to first content byte) at low concurrency; at high concurrency it
saturates its own core before the gateway does, and `bench/wrk.py` takes over for throughput.
"""

from __future__ import annotations

import asyncio
import re
import time
from dataclasses import dataclass, field

import aiohttp

#: A chat chunk that carries at least one character of text (the role chunk has `"content":""`).
FIRST_CONTENT = re.compile(rb'"content":\s*"[^"]')


def percentile(values: list[float], pct: float) -> float:
    """Nearest-rank percentile of already sorted values; NaN when there are none."""
    if not values:
        return float("nan")
    rank = max(0, min(len(values) - 1, round(pct / 100 * len(values) + 0.5) - 1))
    return values[rank]


@dataclass
class LoadResult:
    tool: str
    concurrency: int
    ok: int = 0
    errors: int = 0
    elapsed: float = 0.0
    latencies: list[float] = field(default_factory=list)  # seconds, sorted after the run
    ttfb: list[float] = field(default_factory=list)  # seconds to the first content byte (streams)
    error_samples: list[str] = field(default_factory=list)
    #: wrk reports percentiles itself; the Python generator computes them from `latencies`.
    fixed_p50: float | None = None
    fixed_p99: float | None = None
    #: CPU seconds the measured server process spent during the run (set by the caller).
    server_cpu: float | None = None

    @property
    def cpu_us_per_request(self) -> float | None:
        return self.server_cpu / self.ok * 1e6 if self.server_cpu is not None and self.ok else None

    @property
    def rps(self) -> float:
        return self.ok / self.elapsed if self.elapsed else 0.0

    @property
    def p50(self) -> float:
        return self.fixed_p50 if self.fixed_p50 is not None else percentile(self.latencies, 50)

    @property
    def p99(self) -> float:
        return self.fixed_p99 if self.fixed_p99 is not None else percentile(self.latencies, 99)

    @property
    def ttfb_p50(self) -> float:
        return percentile(self.ttfb, 50)

    @property
    def ttfb_p99(self) -> float:
        return percentile(self.ttfb, 99)


async def _one(session: aiohttp.ClientSession, url: str, body: bytes, stream: bool,
               result: LoadResult) -> None:
    started = time.perf_counter()
    first: float | None = None
    try:
        async with session.post(url, data=body, headers={"Content-Type": "application/json"}) as response:
            if stream:
                tail = b""  # enough of the recent bytes to match a frame split across reads
                async for piece in response.content.iter_any():
                    tail = tail[-64:] + piece
                    if first is None and FIRST_CONTENT.search(tail):
                        first = time.perf_counter()
                # A stream that ends without [DONE] (or carries an error frame) is a failure.
                payload_ok = first is not None and tail.rstrip().endswith(b"data: [DONE]")
            else:
                await response.read()
                payload_ok = True
            if response.status != 200 or not payload_ok:
                raise RuntimeError(f"HTTP {response.status}")
    except (aiohttp.ClientError, RuntimeError, TimeoutError) as exc:
        result.errors += 1
        if len(result.error_samples) < 5:
            result.error_samples.append(f"{type(exc).__name__}: {exc}")
        return
    done = time.perf_counter()
    result.ok += 1
    result.latencies.append(done - started)
    if first is not None:
        result.ttfb.append(first - started)


async def run_load(url: str, body: bytes, *, concurrency: int, max_requests: int, max_seconds: float,
                   stream: bool = False) -> LoadResult:
    """Send `body` to `url` from `concurrency` workers until `max_requests` or `max_seconds`."""
    result = LoadResult("python", concurrency)
    connector = aiohttp.TCPConnector(limit=concurrency, force_close=False)
    timeout = aiohttp.ClientTimeout(total=30)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
        sent = 0
        started = time.perf_counter()
        deadline = started + max_seconds

        async def worker() -> None:
            nonlocal sent
            while sent < max_requests and time.perf_counter() < deadline:
                sent += 1
                await _one(session, url, body, stream, result)

        await asyncio.gather(*(worker() for _ in range(concurrency)))
        result.elapsed = time.perf_counter() - started
    result.latencies.sort()
    result.ttfb.sort()
    return result
