"""Gateway overhead against a direct call: `python -m bench.run [--quick] [--json FILE]`.

Starts the fake upstream (bench/fake_upstream.py) and `python -m gateway serve` on a temporary
AGENT_GATEWAY_HOME with LLM_BASE_URL pointing at the fake, runs every scenario direct to the fake
and through the gateway, and prints one table with the ratio gateway/direct. Loopback only.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import platform
import shutil
import subprocess
import sys
import tempfile
from dataclasses import asdict
from pathlib import Path
from typing import Any

import aiohttp

from bench import metrics_overhead, paced_streams, processes, scenarios, wrk
from bench.scenarios import Bench, Budget, Row

SCENARIOS = ("chat", "conversation", "stream", "paced", "tool", "responses", "memory", "floor", "metrics")


def machine() -> dict[str, str]:
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor())
    wrk_version = ""
    if wrk.available():
        wrk_version = subprocess.run(["wrk", "-v"], capture_output=True, text=True).stdout.splitlines()[0]
    return {"nproc": str(os.cpu_count()), "cpu": cpu, "python": platform.python_version(),
            "aiohttp": aiohttp.__version__, "kernel": platform.release(), "wrk": wrk_version or "not installed"}


def _fmt(value: float | None, unit: str) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if unit == "ms":
        return f"{value:.3f}"
    if unit == "us":
        return f"{value:,.0f}"
    if unit == "MiB":
        return f"{value:.1f}"
    return f"{value:,.0f}"


def table(rows: list[Row]) -> str:
    header = ("scenario", "metric", "direct", "gateway", "unit", "ratio g/d", "gen", "target", "met", "note")
    lines = [header]
    for row in rows:
        ratio = f"{row.ratio:.2f}" if row.ratio is not None and not math.isnan(row.ratio) else "-"
        met = "" if row.met is None else ("yes" if row.met else "NO")
        lines.append((row.scenario, row.metric, _fmt(row.direct, row.unit), _fmt(row.gateway, row.unit),
                      row.unit, ratio, row.generator, row.target, met, row.note))
    widths = [max(len(line[i]) for line in lines) for i in range(len(header) - 1)]
    out = []
    for n, line in enumerate(lines):
        out.append("| " + " | ".join(cell.ljust(widths[i]) for i, cell in enumerate(line[:-1]))
                   + " | " + line[-1] + " |")
        if n == 0:
            out.append("|" + "|".join("-" * (w + 2) for w in widths) + "|---|")
    return "\n".join(out)


async def main_async(args: argparse.Namespace) -> int:
    home = Path(tempfile.mkdtemp(prefix="agent-gateway-bench-"))
    fake = gateway = None
    cluster: Any = None
    try:
        fake = await processes.start("fake upstream", ["-m", "bench.fake_upstream", "--port", "0"],
                                     processes.clean_env({}))
        env = processes.clean_env({
            "AGENT_GATEWAY_HOME": str(home),
            "LLM_BASE_URL": f"{fake.base_url}/v1",
            "LLM_MODEL": "bench-model",
            "SEARXNG_URL": fake.base_url,
            "WEB_BACKEND": "searxng",
            # The default (32) would answer 429 at c=64 and to the 1,000 open streams.
            "API_SERVER_MAX_CONCURRENT_RUNS": "4096",
        })
        if args.postgres:  # the store on a throwaway PostgreSQL cluster instead of SQLite
            from tests.support.postgres import start_cluster

            cluster = start_cluster()
            env["API_SERVER_DATABASE_URL"] = cluster.url()
        src = Path(args.src).resolve() if args.src else processes.REPO
        env["PYTHONPATH"] = str(src)  # the gateway under test, e.g. an older commit for an A/B run
        gateway = await processes.start("gateway", ["-m", args.gateway_module, "serve", "--port", "0"], env, cwd=src)
        await asyncio.sleep(0.5)
        idle_fresh = gateway.rss_mb()
        print(f"fake upstream {fake.base_url} (pid {fake.pid}), gateway {gateway.base_url} (pid {gateway.pid}), "
              f"gateway idle RSS {idle_fresh:.1f} MiB", flush=True)
        use_wrk = wrk.available() and not args.no_wrk
        if not use_wrk:
            print("wrk not used: throughput figures come from the Python generator and may measure it, "
                  "not the gateway", flush=True)
        bench = Bench(fake, gateway, Budget.of(args.quick), use_wrk)
        selected = [s for s in SCENARIOS if not args.only or s in args.only]
        for name in selected:
            print(f"[{name}]", flush=True)
            if name == "chat":
                await scenarios.non_streaming(bench)
            elif name == "conversation":
                await scenarios.conversation(bench)
            elif name == "stream":
                await scenarios.streaming(bench)
            elif name == "paced":
                await paced_streams.paced_streams(bench)
            elif name == "tool":
                await scenarios.tool_round_trip(bench)
            elif name == "responses":
                await scenarios.responses_store(bench)
            elif name == "memory":
                await scenarios.memory(bench, idle_fresh)
            elif name == "floor":
                await scenarios.floor(bench)
            elif name == "metrics":  # a second gateway, the same but for API_SERVER_METRICS=false
                off = await processes.start("gateway (metrics off)", ["-m", "gateway", "serve", "--port", "0"],
                                            {**env, "API_SERVER_METRICS": "false"}, cwd=src)
                try:
                    await metrics_overhead.metrics_overhead(bench, off)
                finally:
                    await off.stop()
        info = machine()
        print()
        print("machine: " + ", ".join(f"{k} {v}" for k, v in info.items()))
        print(table(bench.rows))
        if args.json:
            Path(args.json).write_text(json.dumps({"machine": info, "quick": args.quick,
                                                   "rows": [asdict(r) | {"ratio": r.ratio} for r in bench.rows],
                                                   "log": bench.log}, indent=2))
        return 0
    finally:
        for process in (gateway, fake):
            if process is not None:
                await process.stop()
        if cluster is not None:
            cluster.destroy()
        shutil.rmtree(home, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="short runs (about a minute in all)")
    parser.add_argument("--postgres", action="store_true",
                        help="store on a throwaway PostgreSQL cluster (Debian's server binaries)")
    parser.add_argument("--no-wrk", action="store_true", help="use only the Python load generator")
    parser.add_argument("--only", nargs="+", choices=SCENARIOS, help="run only these scenarios")
    parser.add_argument("--src", metavar="DIR",
                        help="run the gateway from this checkout (e.g. `git archive COMMIT | tar -x -C DIR`)")
    parser.add_argument("--json", metavar="FILE", help="also write the rows and machine details as JSON")
    parser.add_argument("--gateway-module", default="gateway",
                        help="the module run as the gateway (bench.reqwest_gateway: pyreqwest as the upstream client)")
    sys.exit(asyncio.run(main_async(parser.parse_args())))


if __name__ == "__main__":
    main()
