"""The scenarios: each runs once direct to the fake upstream and once through the gateway, and
returns table rows. Every loop is bounded by a request count and a wall-clock budget."""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field

import aiohttp

from bench import processes, wrk
from bench.loadgen import FIRST_CONTENT, LoadResult, percentile, run_load
from bench.processes import Process

MS = 1000.0


@dataclass
class Row:
    scenario: str
    metric: str
    direct: float | None
    gateway: float | None
    unit: str
    generator: str
    target: str = ""
    met: bool | None = None
    note: str = ""

    @property
    def ratio(self) -> float | None:
        if self.direct and self.gateway is not None:
            return self.gateway / self.direct
        return None


@dataclass
class Budget:
    """How long each measurement may run; `--quick` shrinks all of them."""

    seconds: float
    requests: int
    open_streams: int = 1000
    settle_seconds: float = 0  # a second RSS reading this long after the open streams closed

    @classmethod
    def of(cls, quick: bool) -> Budget:
        if quick:
            return cls(seconds=3, requests=1500)
        return cls(seconds=10, requests=20_000, settle_seconds=33)


@dataclass
class Bench:
    fake: Process
    gateway: Process
    budget: Budget
    use_wrk: bool
    rows: list[Row] = field(default_factory=list)
    log: list[str] = field(default_factory=list)

    def say(self, text: str) -> None:
        print(f"  {text}", flush=True)
        self.log.append(text)

    def chat_url(self, through_gateway: bool) -> str:
        return f"{(self.gateway if through_gateway else self.fake).base_url}/v1/chat/completions"


def chat_body(stream: bool, text: str = "Say hello.", tools: list[dict] | None = None) -> bytes:
    body: dict = {"model": "bench-model", "messages": [{"role": "user", "content": text}], "stream": stream}
    if tools:
        body["tools"] = tools
    return json.dumps(body).encode()


def conversation_body(stream: bool, turns: int = 12) -> bytes:
    """A chat as a frontend sends it after a few turns (~32 KB): a system prompt, then user
    questions and long markdown answers with code, backticks and numbers, each sent back whole,
    as Open WebUI and LibreChat do. The small bodies above hide per-byte costs; this shows them."""
    answer = (
        "Here is how the retry loop works in version 3.11.7, measured on 2024-05-17:\n\n"
        "```python\nfor attempt in range(5):\n    delay = min(30, 0.5 * 2 ** attempt)  # 1800 ms cap\n"
        "    response = await client.post(url, json=payload, timeout=12.5)\n```\n\n"
        "The `delay` doubles each time; with `max_retries=5` the worst case waits 15.5 s. "
        "Status codes 408, 409, 429 and 5xx are retried; the others return at once. "
    ) * 6
    messages: list[dict] = [{"role": "system", "content": "You are a careful assistant. " * 20}]
    for turn in range(turns):
        messages.append({"role": "user", "content": f"Question {turn + 1}: how does the retry loop behave "
                                                    f"when the upstream answers 429 after {turn * 250} ms?"})
        messages.append({"role": "assistant", "content": answer})
    messages.append({"role": "user", "content": "Say hello."})
    return json.dumps({"model": "bench-model", "messages": messages, "stream": stream}).encode()


def _check(result: LoadResult, label: str, bench: Bench) -> None:
    if result.errors:
        bench.say(f"{label}: {result.errors} error(s): {'; '.join(result.error_samples)}")


async def _measure(bench: Bench, url: str, body: bytes, concurrency: int, *, stream: bool = False,
                   generator: str = "python") -> LoadResult:
    """One load run; also records the CPU time the server under test spent (the gateway's own, or
    the fake's for a direct run): on a shared machine it is steadier than wall-clock rates."""
    server = bench.gateway if url.startswith(bench.gateway.base_url) else bench.fake
    if generator == "wrk":
        await run_load(url, body, concurrency=min(concurrency, 16), max_requests=200, max_seconds=1, stream=stream)
        cpu = server.cpu_seconds()
        result = await wrk.run_wrk(url, body, concurrency=concurrency, seconds=bench.budget.seconds)
    else:
        await run_load(url, body, concurrency=concurrency, max_requests=concurrency * 4, max_seconds=1,
                       stream=stream)
        cpu = server.cpu_seconds()
        result = await run_load(url, body, concurrency=concurrency, max_requests=bench.budget.requests,
                                max_seconds=bench.budget.seconds, stream=stream)
    result.server_cpu = server.cpu_seconds() - cpu
    _check(result, f"{url} c={concurrency} {generator}", bench)
    return result


def _cpu_row(scenario: str, direct: LoadResult, gateway: LoadResult) -> Row:
    return Row(scenario, "server CPU/req", direct.cpu_us_per_request, gateway.cpu_us_per_request, "us", direct.tool,
               note="direct: the fake's CPU; gateway: the gateway's own")


async def non_streaming(bench: Bench) -> None:
    body = chat_body(stream=False)
    for concurrency in (1, 16, 64):
        # wrk at c=1 too: its own per-request work is a few us against the Python generator's
        # ~200 us, so its latency figures hold less of the client (both are shown)
        generators = ["python"] + (["wrk"] if bench.use_wrk else [])
        for generator in generators:
            direct = await _measure(bench, bench.chat_url(False), body, concurrency, generator=generator)
            gateway = await _measure(bench, bench.chat_url(True), body, concurrency, generator=generator)
            scenario = f"chat, c={concurrency}"
            rps_target, rps_met = "", None
            if concurrency == 64 and (generator == "wrk" or not bench.use_wrk):
                rps_target, rps_met = ">= 2500", gateway.rps >= 2500 and gateway.errors == 0
            bench.rows.append(Row(scenario, "req/s", direct.rps, gateway.rps, "req/s", generator,
                                  rps_target, rps_met, _errors(direct, gateway)))
            p50 = Row(scenario, "p50", direct.p50 * MS, gateway.p50 * MS, "ms", generator)
            if concurrency == 1:
                added = (gateway.p50 - direct.p50) * MS
                p50.target, p50.met = "added <= 0.5 ms", added <= 0.5
                p50.note = f"added {added:.3f} ms"
            bench.rows.append(p50)
            bench.rows.append(Row(scenario, "p99", direct.p99 * MS, gateway.p99 * MS, "ms", generator))
            if generator == "wrk" or concurrency == 1:
                bench.rows.append(_cpu_row(scenario, direct, gateway))


async def conversation(bench: Bench) -> None:
    """The ~32 KB chat history a frontend sends after a dozen turns, at c=1: what the per-byte
    work (reading, checking and re-encoding the messages) adds. No target in the issue; shown so
    a per-byte cost cannot hide behind the tiny bodies above."""
    size = len(conversation_body(stream=False)) // 1024
    scenario = f"chat, {size} KB history, c=1"
    for generator in ["python"] + (["wrk"] if bench.use_wrk else []):
        body = conversation_body(stream=False)
        direct = await _measure(bench, bench.chat_url(False), body, 1, generator=generator)
        gateway = await _measure(bench, bench.chat_url(True), body, 1, generator=generator)
        note = "; ".join(filter(None, [f"added {(gateway.p50 - direct.p50) * MS:.3f} ms", _errors(direct, gateway)]))
        bench.rows += [Row(scenario, "p50", direct.p50 * MS, gateway.p50 * MS, "ms", generator, note=note),
                       _cpu_row(scenario, direct, gateway)]
    body = conversation_body(stream=True)
    direct = await _measure(bench, bench.chat_url(False), body, 1, stream=True)
    gateway = await _measure(bench, bench.chat_url(True), body, 1, stream=True)
    added = (gateway.ttfb_p50 - direct.ttfb_p50) * MS
    bench.rows.append(Row(f"stream, {size} KB history, c=1", "TTFB p50", direct.ttfb_p50 * MS, gateway.ttfb_p50 * MS,
                          "ms", "python", note=f"added {added:.3f} ms"))


def _errors(direct: LoadResult, gateway: LoadResult) -> str:
    if direct.errors or gateway.errors:
        return f"errors: direct {direct.errors}, gateway {gateway.errors}"
    return ""


async def streaming(bench: Bench) -> None:
    body = chat_body(stream=True, text="bench: chunks=50")
    for concurrency in (1, 64):
        direct = await _measure(bench, bench.chat_url(False), body, concurrency, stream=True)
        gateway = await _measure(bench, bench.chat_url(True), body, concurrency, stream=True)
        scenario = f"stream 50 chunks, c={concurrency}"
        ttfb = Row(scenario, "TTFB p50", direct.ttfb_p50 * MS, gateway.ttfb_p50 * MS, "ms", "python")
        if concurrency == 1:
            added = (gateway.ttfb_p50 - direct.ttfb_p50) * MS
            ttfb.target, ttfb.met, ttfb.note = "added <= 1 ms", added <= 1.0, f"added {added:.3f} ms"
        bench.rows += [
            ttfb,
            Row(scenario, "TTFB p99", direct.ttfb_p99 * MS, gateway.ttfb_p99 * MS, "ms", "python"),
            Row(scenario, "total p50", direct.p50 * MS, gateway.p50 * MS, "ms", "python"),
            Row(scenario, "total p99", direct.p99 * MS, gateway.p99 * MS, "ms", "python"),
        ]
        streams = Row(scenario, "streams/s", direct.rps, gateway.rps, "streams/s", "python",
                      note=_errors(direct, gateway))
        if concurrency == 64 and not bench.use_wrk:
            streams.target, streams.met = ">= 1000, no errors", gateway.rps >= 1000 and not gateway.errors
        bench.rows += [streams, _cpu_row(scenario, direct, gateway)]
        if concurrency == 64 and bench.use_wrk:
            # wrk reads the chunked body to its end but cannot judge the frames; the Python run above
            # checked every stream for content and `[DONE]`.
            direct_w = await _measure(bench, bench.chat_url(False), body, concurrency, stream=True, generator="wrk")
            gateway_w = await _measure(bench, bench.chat_url(True), body, concurrency, stream=True, generator="wrk")
            bench.rows.append(Row(scenario, "streams/s", direct_w.rps, gateway_w.rps, "streams/s", "wrk",
                                  ">= 1000, no errors",
                                  gateway_w.rps >= 1000 and not gateway_w.errors and not gateway.errors,
                                  _errors(direct_w, gateway_w)))
            bench.rows.append(Row(scenario, "total p50", direct_w.p50 * MS, gateway_w.p50 * MS, "ms", "wrk"))


WEB_SEARCH_TOOL = {"type": "function", "function": {
    "name": "web_search", "description": "Search the web.",
    "parameters": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}}}


async def _stats(session: aiohttp.ClientSession, bench: Bench) -> dict[str, int]:
    async with session.get(f"{bench.fake.base_url}/_bench/stats") as response:
        return await response.json()


async def tool_round_trip(bench: Bench) -> None:
    """One round: model asks for web_search -> search -> model answers. Direct, the client plays
    the agent (three calls); through the gateway, one request and the gateway does the rest."""
    scenario = "tool round (web_search)"
    async with aiohttp.ClientSession() as session:
        before = await _stats(session, bench)
        async with session.post(bench.chat_url(True), data=chat_body(False, "bench: tool"),
                                headers={"Content-Type": "application/json"}) as response:
            await response.read()
        after = await _stats(session, bench)
        if after["web_search_offered"] == before["web_search_offered"]:
            message = "skipped: the gateway does not offer web_search yet (web tools not on main)"
            bench.say(f"{scenario}: {message}")
            bench.rows.append(Row(scenario, "p50", None, None, "ms", "python", note=message))
            return
        if after["searches"] == before["searches"]:
            message = "skipped: the gateway offered web_search but did not query the fake SearXNG"
            bench.say(f"{scenario}: {message}")
            bench.rows.append(Row(scenario, "p50", None, None, "ms", "python", note=message))
            return

        count = max(50, bench.budget.requests // 10)
        deadline = time.perf_counter() + bench.budget.seconds
        direct: list[float] = []
        gateway: list[float] = []
        plain: list[float] = []
        for _ in range(count):
            if time.perf_counter() > deadline:
                break
            direct.append(await _direct_round(session, bench))
            gateway.append(await _timed_post(session, bench.chat_url(True), chat_body(False, "bench: tool")))
            plain.append(await _timed_post(session, bench.chat_url(True), chat_body(False, "Say hello.")))
    for values in (direct, gateway, plain):
        values.sort()
    added = (percentile(gateway, 50) - percentile(direct, 50)) * MS
    bench.rows += [
        Row(scenario, "p50", percentile(direct, 50) * MS, percentile(gateway, 50) * MS, "ms", "python",
            note=f"added {added:.3f} ms per round; gateway without tools p50 {percentile(plain, 50) * MS:.3f} ms"),
        Row(scenario, "p99", percentile(direct, 99) * MS, percentile(gateway, 99) * MS, "ms", "python"),
    ]


async def _timed_post(session: aiohttp.ClientSession, url: str, body: bytes) -> float:
    started = time.perf_counter()
    async with session.post(url, data=body, headers={"Content-Type": "application/json"}) as response:
        await response.read()
        if response.status != 200:
            raise RuntimeError(f"{url}: HTTP {response.status}")
    return time.perf_counter() - started


async def _direct_round(session: aiohttp.ClientSession, bench: Bench) -> float:
    started = time.perf_counter()
    messages = [{"role": "user", "content": "bench: tool"}]
    url = bench.chat_url(False)
    async with session.post(url, json={"model": "bench-model", "messages": messages,
                                       "tools": [WEB_SEARCH_TOOL]}) as response:
        call = (await response.json())["choices"][0]["message"]["tool_calls"][0]
    query = json.loads(call["function"]["arguments"])["query"]
    async with session.get(f"{bench.fake.base_url}/search", params={"q": query, "format": "json"}) as response:
        results = await response.text()
    messages += [{"role": "assistant", "content": None, "tool_calls": [call]},
                 {"role": "tool", "tool_call_id": call["id"], "content": results}]
    async with session.post(url, json={"model": "bench-model", "messages": messages,
                                       "tools": [WEB_SEARCH_TOOL]}) as response:
        await response.read()
    return time.perf_counter() - started


async def responses_store(bench: Bench) -> None:
    scenario = "responses store=true"
    url = f"{bench.gateway.base_url}/v1/responses"
    body = json.dumps({"model": "bench-model", "input": "Say hello.", "store": True}).encode()
    async with aiohttp.ClientSession() as session, session.post(
            url, data=body, headers={"Content-Type": "application/json"}) as response:
        status = response.status
    if status == 404:
        message = "skipped: /v1/responses answers 404 (the Responses API is not on main yet)"
        bench.say(f"{scenario}: {message}")
        bench.rows.append(Row(scenario, "p50", None, None, "ms", "python", note=message))
        return
    direct_body = chat_body(stream=False)
    # c=64 with the Python generator too, so a machine without wrk still has all three levels
    for concurrency in (1, 16, 64):
        direct = await _measure(bench, bench.chat_url(False), direct_body, concurrency)
        gateway = await _measure(bench, url, body, concurrency)
        name = f"{scenario}, c={concurrency}"
        bench.rows += [
            Row(name, "req/s", direct.rps, gateway.rps, "req/s", "python", note=_errors(direct, gateway)),
            Row(name, "p50", direct.p50 * MS, gateway.p50 * MS, "ms", "python"),
            Row(name, "p99", direct.p99 * MS, gateway.p99 * MS, "ms", "python"),
            _cpu_row(name, direct, gateway),
        ]
    if bench.use_wrk:
        direct = await _measure(bench, bench.chat_url(False), direct_body, 64, generator="wrk")
        gateway = await _measure(bench, url, body, 64, generator="wrk")
        bench.rows.append(Row(f"{scenario}, c=64", "req/s", direct.rps, gateway.rps, "req/s", "wrk",
                              note=_errors(direct, gateway)))
    bench.rows[-1].note = (bench.rows[-1].note + "; direct = plain chat call to the fake").lstrip("; ")


async def memory(bench: Bench, idle_fresh: float) -> None:
    scenario = "memory (VmRSS)"
    bench.rows.append(Row(scenario, "idle, fresh", bench.fake.rss_mb(), idle_fresh, "MiB", "-",
                          "<= 50", idle_fresh <= 50, "direct column: the fake upstream's RSS"))
    idle = bench.gateway.rss_mb()
    bench.rows.append(Row(scenario, "idle, after load", None, idle, "MiB", "-", "<= 50", idle <= 50))
    body = chat_body(stream=True, text="bench: chunks=10 chunk_delay=0.5")
    n = bench.budget.open_streams
    direct = await _open_streams(bench, bench.chat_url(False), body, n, bench.fake)
    gateway = await _open_streams(bench, bench.chat_url(True), body, n, bench.gateway)
    await asyncio.sleep(2)
    after = bench.gateway.rss_mb()
    # The gateway keeps idle upstream connections for 30 s (keepalive_timeout) with their buffers.
    later = None
    if bench.budget.settle_seconds:
        await asyncio.sleep(bench.budget.settle_seconds)
        later = bench.gateway.rss_mb()
    note = f"{gateway['opened']}/{n} streams open at once, {gateway['errors']} error(s); " \
           f"direct: {direct['opened']}/{n}, {direct['errors']} error(s)"
    bench.rows += [
        Row(scenario, f"{n} open streams (peak)", direct["peak"], gateway["peak"], "MiB", "python",
            "<= 150", gateway["peak"] <= 150 and gateway["opened"] == n and not gateway["errors"], note),
        Row(scenario, "2 s after they closed", None, after, "MiB", "-", "near idle",
            after <= idle * 1.2 + 5, f"idle after load was {idle:.1f} MiB"),
    ]
    if later is not None:
        bench.rows.append(Row(scenario, f"{2 + bench.budget.settle_seconds:g} s after they closed", None, later,
                              "MiB", "-", "near idle", later <= idle * 1.2 + 5,
                              "after the upstream keep-alive (30 s) let the idle connections go"))
    # The same burst again: memory kept after the first is reused, so a bounded high-water mark
    # shows as no growth here, and a leak as a second step up.
    again = await _open_streams(bench, bench.chat_url(True), body, n, bench.gateway)
    await asyncio.sleep(2)
    second = bench.gateway.rss_mb()
    first = later if later is not None else after
    bench.rows.append(Row(scenario, "2 s after a second burst", None, second, "MiB", "-", "no growth",
                          second <= first + 3 and again["opened"] == n and not again["errors"],
                          f"{second - first:+.1f} MiB on the first burst's figure; peak {again['peak']:.1f} MiB, "
                          f"{again['opened']}/{n} open, {again['errors']} error(s)"))
    await _floor_burst(bench, body, n)


async def _floor_burst(bench: Bench, body: bytes, n: int) -> None:
    """The same burst through the bare floor relay (aiohttp's low-level server and client, the
    gateway's stack without its logic): what the stack itself keeps after one."""
    relay = await processes.start("floor relay (aiohttp)",
                                  ["-m", "bench.floor_proxy", "--upstream", bench.fake.base_url],
                                  processes.clean_env({}))
    try:
        await asyncio.sleep(0.5)
        idle = relay.rss_mb()
        burst = await _open_streams(bench, f"{relay.base_url}/v1/chat/completions", body, n, relay)
        await asyncio.sleep(2)
        after = relay.rss_mb()
    finally:
        await relay.stop()
    scenario = "memory (VmRSS), floor relay"
    bench.rows += [
        Row(scenario, "idle", None, idle, "MiB", "-"),
        Row(scenario, f"{n} open streams (peak)", None, burst["peak"], "MiB", "python",
            note=f"{burst['opened']}/{n} open, {burst['errors']} error(s)"),
        Row(scenario, "2 s after they closed", None, after, "MiB", "-", "near idle", after <= idle * 1.2 + 5,
            "the bare relay: what aiohttp's server, our client and CPython's allocator keep"),
    ]


async def _open_streams(bench: Bench, url: str, body: bytes, n: int, server: Process) -> dict[str, float]:
    """Hold `n` slow streams open at once; sample the server's RSS while they are open."""
    opened = errors = 0
    all_open = asyncio.Event()
    peak = server.rss_mb()

    async def one(session: aiohttp.ClientSession) -> None:
        nonlocal opened, errors
        counted = False
        try:
            async with session.post(url, data=body, headers={"Content-Type": "application/json"}) as response:
                tail = b""
                async for piece in response.content.iter_any():
                    tail = tail[-64:] + piece
                    if not counted and FIRST_CONTENT.search(tail):
                        counted = True
                        opened += 1
                        if opened == n:
                            all_open.set()
                if response.status != 200 or not tail.rstrip().endswith(b"data: [DONE]"):
                    raise RuntimeError(f"HTTP {response.status}")
        except (aiohttp.ClientError, RuntimeError, TimeoutError):
            errors += 1

    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=60)) as session:
        tasks = []
        for i in range(n):
            tasks.append(asyncio.ensure_future(one(session)))
            if i % 100 == 99:
                await asyncio.sleep(0.05)  # let the accept queue drain
        deadline = time.perf_counter() + 20
        while not all_open.is_set() and time.perf_counter() < deadline:
            peak = max(peak, server.rss_mb())
            await asyncio.sleep(0.1)
        peak = max(peak, server.rss_mb())
        await asyncio.wait_for(asyncio.gather(*tasks), timeout=60)
    bench.say(f"{url}: {opened}/{n} streams open at once, peak RSS {peak:.1f} MiB, {errors} error(s)")
    return {"opened": opened, "errors": errors, "peak": peak}


async def floor(bench: Bench) -> None:
    """The same figures through bench/floor_proxy.py (a bare aiohttp relay, no gateway logic), with
    aiohttp's client (the gateway's) and httpx's: what any Python relay costs on this machine.
    The 'gateway' column holds the relay's figure here."""
    chat, stream = chat_body(stream=False), chat_body(stream=True, text="bench: chunks=50")
    for client in ("aiohttp", "httpx"):
        relay = await processes.start(f"floor relay ({client})",
                                      ["-m", "bench.floor_proxy", "--upstream", bench.fake.base_url,
                                       "--client", client],
                                      processes.clean_env({}))
        scenario = f"floor relay, {client} client"
        try:
            as_gateway = Bench(bench.fake, relay, bench.budget, bench.use_wrk)
            url, direct_url = f"{relay.base_url}/v1/chat/completions", bench.chat_url(False)
            d1 = await _measure(as_gateway, direct_url, chat, 1)
            g1 = await _measure(as_gateway, url, chat, 1)
            added = (g1.p50 - d1.p50) * MS
            bench.rows += [Row(scenario, "chat c=1 p50", d1.p50 * MS, g1.p50 * MS, "ms", "python",
                               note=f"added {added:.3f} ms"), _cpu_row(scenario + ", chat c=1", d1, g1)]
            generator = "wrk" if bench.use_wrk else "python"
            d64 = await _measure(as_gateway, direct_url, chat, 64, generator=generator)
            g64 = await _measure(as_gateway, url, chat, 64, generator=generator)
            bench.rows += [Row(scenario, "chat c=64 req/s", d64.rps, g64.rps, "req/s", generator,
                               note=_errors(d64, g64)), _cpu_row(scenario + ", chat c=64", d64, g64)]
            s1 = await _measure(as_gateway, direct_url, stream, 1, stream=True)
            t1 = await _measure(as_gateway, url, stream, 1, stream=True)
            bench.rows.append(Row(scenario, "stream c=1 TTFB p50", s1.ttfb_p50 * MS, t1.ttfb_p50 * MS, "ms",
                                  "python", note=f"added {(t1.ttfb_p50 - s1.ttfb_p50) * MS:.3f} ms"))
            s64 = await _measure(as_gateway, direct_url, stream, 64, stream=True, generator=generator)
            t64 = await _measure(as_gateway, url, stream, 64, stream=True, generator=generator)
            bench.rows += [Row(scenario, "stream c=64 streams/s", s64.rps, t64.rps, "streams/s", generator,
                               note=_errors(s64, t64)), _cpu_row(scenario + ", stream c=64", s64, t64)]
        finally:
            await relay.stop()
