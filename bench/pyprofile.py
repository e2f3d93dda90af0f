"""cProfile of `python -m gateway serve` over exactly N requests, and the difference of two profiles.

    python -m bench.pyprofile search --requests 1000 --out /tmp/search.prof
    python -m bench.pyprofile chat --requests 1000 --out /tmp/chat.prof [--src DIR]
    python -m bench.pyprofile --diff /tmp/search.prof /tmp/chat.prof --requests 1000
    python -m bench.pyprofile stream --requests 400 --text "bench: chunks=50 chunk_delay=0.002" --out /tmp/s.prof

The gateway runs as in bench/callgrind.py (the bench fake upstream, the fake SearXNG it serves,
`WEB_CACHE_TTL=0` for `search`, c=1), from `--src` when given, under a wrapper (`WRAPPER`) that
starts the profiler on SIGUSR1 (after a 200-request warm-up) and writes the profile on SIGUSR2 (after
the N requests), so start-up is not in it. The profiler's clock is the process's CPU time
(`time.process_time`, `--wall` for wall-clock), so a loaded machine stretches it less.

`--diff A B` prints, per request, the self time A spent more than B in each function (e.g. a tool round:
`search` minus `chat`) and the same summed by part (aiohttp, asyncio, the agent's web tools ...).
cProfile's own cost per Python call inflates call-heavy code: use it to rank, and callgrind's
instruction counts (bench/callgrind.py) for figures.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import pstats
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

# The gateway's wrapper, run with `python -c` (so the checkout's folder, the cwd, is the first on
# sys.path, and no folder of bench/ modules is): the profiler on at SIGUSR1, written out at SIGUSR2.
WRAPPER = """
import cProfile, os, runpy, signal, sys, time
profiler = cProfile.Profile() if os.environ.get("PROFILE_WALL") else cProfile.Profile(time.process_time)
signal.signal(signal.SIGUSR1, lambda *_: profiler.enable())
signal.signal(signal.SIGUSR2, lambda *_: (profiler.disable(), profiler.dump_stats(os.environ["PROFILE_OUT"])))
sys.argv = ["gateway", *sys.argv[1:]]
runpy.run_module("gateway", run_name="__main__")
"""


async def measure(args: argparse.Namespace) -> int:
    import aiohttp

    from bench import processes
    from bench.callgrind import free_port, send, wait_healthy
    from bench.scenarios import chat_body

    src = Path(args.src).resolve() if args.src else processes.REPO
    out = str(Path(args.out).resolve())
    fake = await processes.start("fake upstream", ["-m", "bench.fake_upstream", "--port", "0"], processes.clean_env({}))
    port = free_port()
    env = processes.clean_env({
        "AGENT_GATEWAY_HOME": tempfile.mkdtemp(prefix="agent-gateway-profile-"),
        "LLM_BASE_URL": f"{fake.base_url}/v1", "LLM_MODEL": "bench-model",
        "SEARXNG_URL": fake.base_url, "WEB_BACKEND": "searxng", "WEB_CACHE_TTL": "0",
        "API_SERVER_MAX_CONCURRENT_RUNS": "4096", "PYTHONPATH": str(src), "PROFILE_OUT": out,
        **({"PROFILE_WALL": "1"} if args.wall else {}),
        **dict(pair.split("=", 1) for pair in args.env),
    })
    key = None
    if args.key is not None:  # as bench/callgrind.py's --key
        key = subprocess.run([sys.executable, "-m", "gateway", "keys", "create", "bench", *args.key.split()], env=env,
                             cwd=src, capture_output=True, text=True, check=True).stdout.strip()
    gateway = subprocess.Popen([sys.executable, "-c", WRAPPER, "serve", "--port", str(port)],
                               env=env, cwd=src, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    text = args.text or {"stream": "bench: chunks=50", "search": "bench: tool"}.get(args.scenario, "Say hello.")
    body = chat_body(stream=args.scenario == "stream", text=text)
    try:
        async with aiohttp.ClientSession() as session:
            await wait_healthy(session, base)
            url = f"{base}/v1/chat/completions"
            await send(session, url, body, 200, 1, key)
            gateway.send_signal(signal.SIGUSR1)
            await asyncio.sleep(0.5)  # the handler runs when the gateway's main thread next runs Python
            await send(session, url, body, args.requests, 1, key)
            gateway.send_signal(signal.SIGUSR2)
            await asyncio.sleep(2)
    finally:
        gateway.send_signal(signal.SIGINT)
        gateway.wait(timeout=60)
        await fake.stop()
    print(f"{args.scenario}: {args.requests} requests profiled, src {src}: {out}")
    return 0


def part(filename: str) -> str:
    """The part of the process a function belongs to, for the summed view."""
    parts = (("aiohttp/", "aiohttp"), ("yarl/", "yarl"), ("multidict", "multidict"), ("/asyncio/", "asyncio"),
             ("gateway/agent/web/", "agent: web tools"), ("gateway/agent/sources", "agent: web tools"),
             ("gateway/agent/tool", "agent: tool calls"), ("gateway/agent/", "agent: loop, history, events"),
             ("providers/", "providers' kit"), ("plugins/", "provider plugins"), ("gateway/wire/", "gateway/wire"),
             ("gateway/upstream/", "gateway/upstream"), ("gateway/http/", "gateway/http"), ("gateway/", "gateway"),
             ("json", "json"), ("urllib", "urllib"))
    for needle, name in parts:
        if needle in filename:
            return name
    return "C functions and builtins" if filename == "~" else Path(filename).name


def diff(first: str, second: str, requests: int, top: int) -> int:
    a, b = pstats.Stats(first).stats, pstats.Stats(second).stats  # type: ignore[attr-defined]
    rows = []
    for key, value in a.items():
        other = b.get(key, (0, 0, 0.0, 0.0, {}))
        rows.append(((value[2] - other[2]) / requests * 1e6, (value[3] - other[3]) / requests * 1e6, key))
    total = sum(r[0] for r in rows) - sum(v[2] for k, v in b.items() if k not in a) / requests * 1e6
    print(f"self time per request, {first} minus {second}: {total:,.0f} us")
    for self_us, cumulative_us, (filename, line, name) in sorted(rows, reverse=True)[:top]:
        print(f"{self_us:8.1f} us self {cumulative_us:9.1f} us cumulative  {filename}:{line} {name}")
    parts: collections.Counter[str] = collections.Counter()
    for key, value in a.items():
        parts[part(key[0])] += value[2]
    for key, value in b.items():
        parts[part(key[0])] -= value[2]
    print("\nby part:")
    for name, seconds in parts.most_common():
        if total and abs(seconds / requests * 1e6) >= total * 0.005:
            print(f"{seconds / requests * 1e6 / total * 100:5.1f}%  {name}")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("scenario", nargs="?", choices=("chat", "stream", "search"),
                        help="a whole chat, a stream of 50 chunks, or a chat with a web_search round")
    parser.add_argument("--text", help="the user message instead of the scenario's (as bench/callgrind.py's)")
    parser.add_argument("--requests", type=int, default=1000)
    parser.add_argument("--src", help="a checkout to profile instead of this one")
    parser.add_argument("--out", default="gateway.prof")
    parser.add_argument("--key", metavar="OPTIONS", help="as bench/callgrind.py's --key")
    parser.add_argument("--env", nargs="*", default=[], metavar="NAME=VALUE",
                        help="extra gateway settings (e.g. API_SERVER_DATABASE_URL=...)")
    parser.add_argument("--wall", action="store_true", help="wall-clock time instead of the process's CPU time")
    parser.add_argument("--diff", nargs=2, metavar=("A", "B"), help="print A minus B per request")
    parser.add_argument("--top", type=int, default=40)
    args = parser.parse_args()
    if args.diff:
        return diff(args.diff[0], args.diff[1], args.requests, args.top)
    if args.scenario is None:
        parser.error("name a scenario (chat, stream, search) or --diff A B")
    return asyncio.run(measure(args))


if __name__ == "__main__":
    raise SystemExit(main())
