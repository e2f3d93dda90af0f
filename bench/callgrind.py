"""Instructions per request of `python -m gateway serve` under callgrind: an A/B that needs no quiet host.

    python -m bench.callgrind --requests 300 --concurrency 1 chat
    python -m bench.callgrind --requests 400 --concurrency 64 stream --src /tmp/old
    python -m bench.callgrind --requests 300 chat --env API_SERVER_METRICS=false
    python -m bench.callgrind --requests 200 search --python /tmp/prod-venv/bin/python
    python -m bench.callgrind --requests 300 stream --text "bench: chunks=2"   # a stream's fixed cost
    python -m bench.callgrind --requests 100 stream --text "bench: chunks=50 chunk_delay=0.005"

`--text` replaces the scenario's user message (a fake upstream directive, bench/fake_upstream.py):
streams of 2 and 50 chunks give the cost per frame by difference; `chunk_delay` writes each frame
on its own (one read, one agent step and one client write each, as a model's paced stream).

`search` is one web_search tool round per request: the fake upstream asks for a `web_search` call,
the gateway queries the fake SearXNG (bench/fake_search.py, served by the same fake process) over
its provider kit (providers/http.py, aiohttp), then the fake answers; the result cache is off
(`WEB_CACHE_TTL=0`) so every request makes one provider call (at c=1 only: identical searches in
flight together share one call, and the run stops when the search count is not the request
count). `--python` runs the gateway with
another interpreter, e.g. a venv made with `pip install -e .` only (the production install, which
has no test extras: issue 33's sniffio finding only shows there).

Starts the bench fake upstream, then the gateway (from `--src`, default this checkout) under
`valgrind --tool=callgrind`; sends a warm-up (connections opened, caches filled), zeroes the counters
(`callgrind_control -z`), sends exactly `--requests` requests over `--concurrency` keep-alive
connections, dumps (`callgrind_control -d`) and prints the instructions per request. The dump stays in
`--out` for `callgrind_annotate --inclusive=yes <dump>` (e.g. `gc_collect_main` for the cyclic GC's share).
The load generator runs outside valgrind, so only the gateway's own instructions are counted.
"""

from __future__ import annotations

import argparse
import asyncio
import glob
import re
import signal
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import aiohttp

from bench import processes
from bench.scenarios import chat_body

START_TIMEOUT = 900.0  # seconds: imports (and a PostgreSQL store's migration) run ~50x slower under valgrind


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def wait_healthy(session: aiohttp.ClientSession, base: str) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + START_TIMEOUT
    while loop.time() < deadline:
        try:
            async with session.get(f"{base}/health") as response:
                if response.status == 200:
                    return
        except aiohttp.ClientError:
            pass
        await asyncio.sleep(0.5)
    raise RuntimeError(f"the gateway under callgrind did not answer /health within {START_TIMEOUT:.0f} s")


async def send(session: aiohttp.ClientSession, url: str, body: bytes, count: int, concurrency: int,
               key: str | None = None) -> None:
    left = count
    headers = {"Content-Type": "application/json"}
    if key is not None:
        headers["Authorization"] = f"Bearer {key}"

    async def worker() -> None:
        nonlocal left
        while left > 0:
            left -= 1
            async with session.post(url, data=body, headers=headers) as response:
                data = await response.read()
                if response.status != 200:
                    raise RuntimeError(f"HTTP {response.status}: {data[:200]!r}")

    await asyncio.gather(*(worker() for _ in range(concurrency)))


async def searches(session: aiohttp.ClientSession, fake_base: str) -> int:
    """The fake SearXNG's search count so far (the fake upstream's /_bench/stats)."""
    async with session.get(f"{fake_base}/_bench/stats") as response:
        return int((await response.json())["searches"])


def total_instructions(dump: str) -> int:
    text = Path(dump).read_text(errors="replace")
    found = re.search(r"^(?:summary|totals): (\d+)", text, re.M)
    if found is None:
        raise RuntimeError(f"no instruction total in {dump}")
    return int(found.group(1))


async def measure(args: argparse.Namespace) -> int:
    src = Path(args.src).resolve() if args.src else processes.REPO
    folder = Path(args.out or tempfile.mkdtemp(prefix="callgrind-"))
    folder.mkdir(parents=True, exist_ok=True)
    out = str(folder / "cg.out")
    for stale in glob.glob(out + ".*"):  # an earlier run's dumps in the same folder
        Path(stale).unlink()
    fake = await processes.start("fake upstream", ["-m", "bench.fake_upstream", "--port", "0"], processes.clean_env({}))
    port = free_port()
    env = processes.clean_env({
        "AGENT_GATEWAY_HOME": tempfile.mkdtemp(prefix="agent-gateway-callgrind-"),
        "LLM_BASE_URL": f"{fake.base_url}/v1", "LLM_MODEL": "bench-model",
        "SEARXNG_URL": fake.base_url, "WEB_BACKEND": "searxng",
        "API_SERVER_MAX_CONCURRENT_RUNS": "4096", "PYTHONPATH": str(src),
        **dict(pair.split("=", 1) for pair in args.env),
    })
    key = None
    if args.key is not None:  # a key made in the store first: `--key ""` unlimited, `--key "--rpm 100000"` limited
        made = subprocess.run([args.python or sys.executable, "-m", "gateway", "keys", "create", "bench",
                               *args.key.split()], env=env, cwd=src, capture_output=True, text=True, check=True)
        key = made.stdout.strip()
    if args.scenario == "search":
        env["WEB_CACHE_TTL"] = "0"  # every request makes its provider call, none is answered from the cache
    gateway = subprocess.Popen(
        ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
         args.python or sys.executable, "-m", args.gateway_module, "serve", "--port", str(port)],
        env=env, cwd=src, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    stream = args.scenario == "stream"
    text = args.text or {"stream": "bench: chunks=50", "search": "bench: tool"}.get(args.scenario, "Say hello.")
    body = chat_body(stream=stream, text=text)
    try:
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:
            await wait_healthy(session, base)
            url = f"{base}/v1/chat/completions"
            await send(session, url, body, max(2 * args.concurrency, 100), args.concurrency, key)
            subprocess.run(["callgrind_control", "-z", str(gateway.pid)], capture_output=True, check=True)
            searches_before = await searches(session, fake.base_url)
            await send(session, url, body, args.requests, args.concurrency, key)
            subprocess.run(["callgrind_control", "-d", str(gateway.pid)], capture_output=True, check=True)
            searched = await searches(session, fake.base_url) - searches_before
            if args.scenario == "search" and searched != args.requests:
                raise RuntimeError(f"{searched} searches for {args.requests} requests: identical searches in flight "
                                   "at once share one provider call (gateway/agent/web/cache.py), use --concurrency 1")
    finally:
        gateway.send_signal(signal.SIGINT)
        try:
            gateway.wait(timeout=120)
        except subprocess.TimeoutExpired:  # still starting under valgrind (it handles signals late): killed
            gateway.kill()
            gateway.wait()
        finally:
            await fake.stop()
    dump = sorted(glob.glob(out + ".*"))[0]  # the first dump: the one callgrind_control -d asked for
    per_request = total_instructions(dump) / args.requests
    print(f"{args.scenario}, c={args.concurrency}, {args.requests} requests, src {src}: "
          f"{per_request / 1000:,.0f}k instructions per request (dump {dump})")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("scenario", choices=("chat", "stream", "search"),
                        help="whole chat, a stream of 50 chunks, or a chat with one web_search round")
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--concurrency", type=int, default=1)
    parser.add_argument("--src", help="a checkout to measure instead of this one (A/B)")
    parser.add_argument("--python", help="the interpreter to run the gateway with (default: this one)")
    parser.add_argument("--gateway-module", default="gateway",
                        help="the module run as the gateway (bench.reqwest_gateway: pyreqwest as the upstream client)")
    parser.add_argument("--env", nargs="*", default=[], metavar="NAME=VALUE", help="extra gateway settings")
    parser.add_argument("--key", metavar="OPTIONS", help="requests send a key made with `keys create bench OPTIONS` "
                        "(\"\": an unlimited key; default: keyless)")
    parser.add_argument("--text", help="the user message instead of the scenario's (a fake upstream directive)")
    parser.add_argument("--out", help="folder for the callgrind dump (default: a new temp folder)")
    return asyncio.run(measure(parser.parse_args()))


if __name__ == "__main__":
    raise SystemExit(main())
