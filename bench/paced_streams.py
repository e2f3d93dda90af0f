"""Streams at c=64 with the chunks spaced as a model spaces them (`python -m bench.run --only paced`).

The `stream` scenario's c=64 figure streams 50 prebuilt frames from the fake in one burst: the
direct call then costs the fake ~100 us of CPU per stream, the gateway parses, re-encodes and writes
each frame, so its ratio measures the gateway's CPU per stream, not what a user waits for. Here the
fake writes 50 chunks 20 ms apart (~50 tokens/s, one second per stream), as a model does: both sides
are bounded by the model, and what the gateway adds is the latency before the first byte and across
the whole stream, and any stream it cannot keep up with at this concurrency.
"""

from __future__ import annotations

from bench.scenarios import MS, Bench, Row, _cpu_row, _errors, _measure, chat_body

CONCURRENCY = 64
PACED = "bench: chunks=50 chunk_delay=0.02"


async def paced_streams(bench: Bench) -> None:
    body = chat_body(stream=True, text=PACED)
    direct = await _measure(bench, bench.chat_url(False), body, CONCURRENCY, stream=True)
    gateway = await _measure(bench, bench.chat_url(True), body, CONCURRENCY, stream=True)
    scenario = f"stream 50 chunks 20 ms apart, c={CONCURRENCY}"
    ratio = gateway.rps / direct.rps if direct.rps else 0.0
    bench.rows += [
        Row(scenario, "streams/s", direct.rps, gateway.rps, "streams/s", "python", ">= 0.9x direct",
            ratio >= 0.9 and not gateway.errors, _errors(direct, gateway)),
        Row(scenario, "TTFB p50", direct.ttfb_p50 * MS, gateway.ttfb_p50 * MS, "ms", "python",
            note=f"added {(gateway.ttfb_p50 - direct.ttfb_p50) * MS:.3f} ms"),
        Row(scenario, "total p50", direct.p50 * MS, gateway.p50 * MS, "ms", "python",
            note=f"added {(gateway.p50 - direct.p50) * MS:.3f} ms"),
        Row(scenario, "total p99", direct.p99 * MS, gateway.p99 * MS, "ms", "python"),
        _cpu_row(scenario, direct, gateway),
    ]
