"""`python -m bench.run --only metrics`: the plain chat path with metrics on and off, in one run.

Two gateways on the same fake upstream, identical but for API_SERVER_METRICS; each round runs
both (alternating which goes first) non-streamed and streamed, at c=1 and c=16. The table's
"direct" column is the gateway with metrics off, "gateway" the one with them on (the default), so
the ratio is on/off. Server CPU per request is the steadier figure on a shared machine.
"""

from __future__ import annotations

from bench.loadgen import LoadResult, run_load
from bench.processes import Process
from bench.scenarios import MS, Bench, Row, chat_body

ROUNDS = 3


async def _run(server: Process, body: bytes, concurrency: int, stream: bool, bench: Bench) -> LoadResult:
    url = f"{server.url}/v1/chat/completions"
    await run_load(url, body, concurrency=concurrency, max_requests=concurrency * 4, max_seconds=1, stream=stream)
    cpu = server.cpu_seconds()
    result = await run_load(url, body, concurrency=concurrency, max_requests=bench.budget.requests,
                            max_seconds=bench.budget.seconds, stream=stream)
    result.server_cpu = server.cpu_seconds() - cpu
    if result.errors:
        bench.say(f"{server.name} c={concurrency}: {result.errors} error(s): {'; '.join(result.error_samples)}")
    return result


def _merge(results: list[LoadResult]) -> LoadResult:
    merged = LoadResult("python", results[0].concurrency)
    for r in results:
        merged.ok += r.ok
        merged.errors += r.errors
        merged.elapsed += r.elapsed
        merged.latencies += r.latencies
        merged.server_cpu = (merged.server_cpu or 0.0) + (r.server_cpu or 0.0)
    merged.latencies.sort()
    return merged


async def metrics_overhead(bench: Bench, metrics_off: Process) -> None:
    on = bench.gateway
    for stream in (False, True):
        body = chat_body(stream=stream)
        for concurrency in (1, 16):
            runs: dict[str, list[LoadResult]] = {"on": [], "off": []}
            for n in range(ROUNDS):
                order = [("on", on), ("off", metrics_off)] if n % 2 == 0 else [("off", metrics_off), ("on", on)]
                for label, server in order:
                    runs[label].append(await _run(server, body, concurrency, stream, bench))
            with_, without = _merge(runs["on"]), _merge(runs["off"])
            scenario = f"metrics on/off, {'stream' if stream else 'chat'}, c={concurrency}"
            note = "direct column: API_SERVER_METRICS=false"
            bench.rows.append(Row(scenario, "server CPU/req", without.cpu_us_per_request, with_.cpu_us_per_request,
                                  "us", "python", note=note))
            bench.rows.append(Row(scenario, "req/s", without.rps, with_.rps, "req/s", "python"))
            bench.rows.append(Row(scenario, "p50", without.p50 * MS, with_.p50 * MS, "ms", "python"))
