"""A cached web_search round trip against an uncached one, through the real tool and provider.

The `web_search` tool (gateway/agent/web/tools.py) with the bundled SearXNG provider talks to the
fake SearXNG of bench/fake_search.py, run as a subprocess on 127.0.0.1 so its CPU is not ours.
`uncached` asks a new query every call (each one is a provider call over loopback HTTP);
`cached` repeats one query (each one is answered from the result cache). `--delay` adds that many
milliseconds to every fake answer, to stand for a real provider's latency.

    python -m bench.web_cache                 # 500 calls each, the fake answering at once
    python -m bench.web_cache --delay 150     # a provider taking 150 ms

Figures: per-call p50 and mean in microseconds, and uncached/cached as a ratio.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from gateway.agent.web.tools import WebSearchTool
from gateway.config.settings import Settings
from providers.registry import ProviderRegistry


def start_fake(delay_ms: int) -> tuple[subprocess.Popen[str], str]:
    code = (
        "import asyncio, bench.fake_search as f\n"
        "orig = f.handle_search\n"
        f"async def slow(request):\n    await asyncio.sleep({delay_ms / 1000!r})\n    return await orig(request)\n"
        "f.handle_search = slow\n"
        "f.main()\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code, "--port", "0"], stdout=subprocess.PIPE, text=True,
                            cwd=Path(__file__).resolve().parent.parent)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    return proc, line.strip().rsplit(" ", 1)[-1]


async def measure(tool: WebSearchTool, queries: list[str]) -> list[float]:
    timings = []
    for query in queries:
        started = time.perf_counter()
        await tool.run({"query": query})
        timings.append((time.perf_counter() - started) * 1e6)
    return timings


async def run(calls: int, delay_ms: int) -> None:
    from plugins.web.searxng.provider import SearxngProvider

    proc, url = start_fake(delay_ms)
    try:
        with tempfile.TemporaryDirectory() as home:
            settings = Settings(home=Path(home), profile=None, env={"SEARXNG_URL": url}, web_cache_ttl=3600,
                                web_search_fallback=())
            registry = ProviderRegistry()
            registry.add(SearxngProvider(settings.env))
            tool = WebSearchTool(registry, settings)
            await measure(tool, [f"warm {i}" for i in range(20)])  # open the pooled connection
            uncached = await measure(tool, [f"query {i}" for i in range(calls)])
            await tool.run({"query": "the same query"})
            cached = await measure(tool, ["the same query"] * calls)
            await registry.aclose()
    finally:
        proc.terminate()
        proc.wait()
    rows = [("uncached", uncached), ("cached", cached)]
    print(f"web_search round trip, {calls} calls each, fake delay {delay_ms} ms")
    for name, values in rows:
        print(f"  {name:<9} p50 {statistics.median(values):9.0f} us   mean {statistics.fmean(values):9.0f} us")
    ratio = statistics.median(uncached) / statistics.median(cached)
    print(f"  uncached/cached (p50): {ratio:.1f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=500)
    parser.add_argument("--delay", type=int, default=0, help="milliseconds the fake waits before answering")
    args = parser.parse_args()
    asyncio.run(run(args.calls, args.delay))


if __name__ == "__main__":
    main()
