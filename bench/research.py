"""Deep research's costs (issue 45): parallelism, the gateway's own CPU per run, peak RSS of 8 runs.

    nice -n 10 python -m bench.research [--runs 5] [--search-delay 0.5] [--model-latency 0.05] [--at-once 8]

One gateway of this checkout (`serve`, SQLite, a temporary home) on the tests' research corpus and
scripted model (tests/fakes/research_web.py, research_model.py) served from this process, so the
gateway's process does nothing but the gateway's work. Each run is one Responses API research run
(`agent-gateway-deep-research`, unstreamed, `background: false`) of the corpus's multi-hop question;
the web cache is off (`WEB_CACHE_TTL=0`), so every run searches and reads for itself.

- parallelism: each run's wall time against the sum of its searches' times (on the fake's clock,
  every search held `--search-delay` s); a ratio under 1 is searches overlapping;
- CPU: the gateway process's user+system CPU (/proc/<pid>/stat) over `--runs` runs one after
  another, per run and per page read (the run's `open_page` items);
- memory: the gateway's VmRSS before, and its peak (sampled every 20 ms) while `--at-once` runs go at
  once.
Figures go to bench/README.md ("Deep research").
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from typing import Any

import aiohttp

from bench import processes
from bench.research_eval import FAKE_KEY, FakeResearch, fake_services

MODEL = "agent-gateway-deep-research"


async def one_run(session: aiohttp.ClientSession, base_url: str, question: str) -> tuple[dict[str, Any], float]:
    started = time.perf_counter()
    async with session.post(base_url + "/v1/responses", headers={"Authorization": f"Bearer {FAKE_KEY}"},
                            json={"model": MODEL, "input": question}) as reply:
        body = await reply.json()
        assert reply.status == 200, body
    return body, time.perf_counter() - started


def opened(response: dict[str, Any]) -> int:
    return sum(1 for item in response.get("output") or [] if item.get("type") == "web_search_call"
               and (item.get("action") or {}).get("type") == "open_page")


async def parallelism_and_cpu(fakes: FakeResearch, gateway: processes.Process, session: aiohttp.ClientSession,
                              runs: int) -> None:
    question = fakes.web.corpus.question
    await one_run(session, gateway.base_url, question)  # warm-up: the store, the connections, the imports
    ratios, walls, searched, pages = [], [], [], []
    cpu_before = gateway.cpu_seconds()
    for _ in range(runs):
        fakes.web.searches.clear()
        response, wall = await one_run(session, gateway.base_url, question)
        assert response["status"] == "completed", response.get("status")
        walls.append(wall)
        searched.append(fakes.web.search_time())
        ratios.append(wall / searched[-1] if searched[-1] else float("nan"))
        pages.append(opened(response))
    cpu = gateway.cpu_seconds() - cpu_before
    print(f"runs {runs}: wall median {statistics.median(walls):.2f} s, sum of its searches median "
          f"{statistics.median(searched):.2f} s, wall/sum median {statistics.median(ratios):.2f} "
          f"(searches per run {len(fakes.web.searches)}, max in flight {fakes.web.max_in_flight})")
    per_page = cpu / max(1, sum(pages))
    print(f"gateway CPU: {cpu / runs * 1000:.0f} ms per run, {per_page * 1000:.1f} ms per page read "
          f"({sum(pages) / runs:.1f} pages per run)")


async def peak_rss(fakes: FakeResearch, gateway: processes.Process, session: aiohttp.ClientSession,
                   at_once: int) -> None:
    before = gateway.rss_mb()
    peak = before
    done = asyncio.Event()

    async def sample() -> None:
        nonlocal peak
        while not done.is_set():
            peak = max(peak, gateway.rss_mb())
            await asyncio.sleep(0.02)

    sampler = asyncio.ensure_future(sample())
    started = time.perf_counter()
    results = await asyncio.gather(*(one_run(session, gateway.base_url, fakes.web.corpus.question)
                                     for _ in range(at_once)))
    wall = time.perf_counter() - started
    done.set()
    await sampler
    statuses = sorted({r["status"] for r, _ in results})
    print(f"{at_once} runs at once: VmRSS {before:.1f} MiB before, peak {peak:.1f} MiB (+{peak - before:.1f}), "
          f"after {gateway.rss_mb():.1f} MiB; all done in {wall:.2f} s; statuses {statuses}")


async def main_async(args: argparse.Namespace) -> None:
    async with fake_services(args.search_delay, args.model_latency) as fakes:
        fakes.web.page_padding = args.page_chars
        with tempfile.TemporaryDirectory(prefix="agent-gateway-bench-research-") as home:
            env = processes.clean_env({"AGENT_GATEWAY_HOME": home, "API_SERVER_KEY": FAKE_KEY,
                                       "API_SERVER_MAX_CONCURRENT_RUNS": "64", **fakes.env,
                                       # every run searches and reads for itself (the same question each time)
                                       "WEB_CACHE_TTL": "0",
                                       **dict(kv.split("=", 1) for kv in args.env)})
            gateway = await processes.start("gateway", ["-m", "gateway", "serve", "--port", "0"], env)
            try:
                async with aiohttp.ClientSession() as session:
                    await parallelism_and_cpu(fakes, gateway, session, args.runs)
                    await peak_rss(fakes, gateway, session, args.at_once)
            finally:
                await gateway.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--search-delay", type=float, default=0.5, help="seconds each search takes")
    parser.add_argument("--model-latency", type=float, default=0.05, help="seconds each model call takes")
    parser.add_argument("--at-once", type=int, default=8)
    parser.add_argument("--page-chars", type=int, default=20_000,
                        help="characters of filler on every page (a page read keeps WEB_MAX_EXTRACT_CHARS)")
    parser.add_argument("--env", action="append", default=[], metavar="K=V", help="more gateway settings")
    asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    main()
