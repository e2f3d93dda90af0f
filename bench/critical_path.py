"""Python opcodes on the latency path of a non-streamed chat call at c=1: an A/B that needs no quiet host.

    python -m bench.critical_path [--requests 300] [--src /tmp/old] [--pause 0]

Starts the bench fake upstream, then the gateway (from `--src`, default this checkout) under a
`sys.settrace` opcode counter; after a warm-up, counts the Python opcodes the gateway runs per
request in three stretches, marked by aiohttp's own calls: from the request's bytes in
(`web_protocol` data_received) to the upstream request out (`http_writer` _writelines), from the
upstream reply in (`client_proto` data_received) to our reply out (the second _writelines), and
from the reply out to the next request in (work done after the reply, e.g. the access line). The
first two are what a client waits for (with the upstream's time between them); medians printed.
Requests are paced (`--pause`, PAUSE by default), so that work deferred past a reply is counted as
such; `--pause 0` is a client that sends its next request as soon as it has the reply (an SDK's
next call, a benchmark at c=1): the third stretch is then what that request waits for before the
gateway reads it.
C code (the HTTP parser, orjson) is not counted: `python -m bench.callgrind` counts everything.
"""

from __future__ import annotations

import argparse
import asyncio
import pickle
import runpy
import signal
import statistics
import subprocess
import sys
import tempfile
import types
from pathlib import Path
from typing import Any

import aiohttp

from bench import processes
from bench.callgrind import free_port, send, wait_healthy
from bench.scenarios import chat_body

#: (file name, function) -> mark: S request in, W bytes out, C upstream bytes in
MARKS = {("web_protocol.py", "data_received"): "S", ("client_proto.py", "data_received"): "C",
         ("http_writer.py", "_writelines"): "W"}
PAUSE = 0.005  # seconds between requests
STRETCHES = ("request in -> upstream request out", "upstream reply in -> reply out", "reply out -> next request in")


def trace_child(out: str, argv: list[str]) -> None:
    """Runs `python -m <argv>` counting opcodes; SIGUSR1 starts the count, SIGUSR2 writes the marks to `out`."""
    count = 0
    marks: list[tuple[str, int]] = []

    def local(frame: types.FrameType, event: str, arg: Any) -> Any:
        nonlocal count
        if event == "opcode":
            count += 1
        return local

    def on_call(frame: types.FrameType, event: str, arg: Any) -> Any:
        if event != "call":
            return None
        code = frame.f_code
        mark = MARKS.get((code.co_filename.rsplit("/", 1)[-1], code.co_name))
        if mark is not None:
            marks.append((mark, count))
        frame.f_trace_opcodes = True
        return local

    def start(signum: int, frame: Any) -> None:
        marks.clear()
        sys.settrace(on_call)

    def dump(signum: int, frame: Any) -> None:
        sys.settrace(None)
        Path(out).write_bytes(pickle.dumps(marks))

    signal.signal(signal.SIGUSR1, start)
    signal.signal(signal.SIGUSR2, dump)
    sys.argv = argv
    runpy.run_module(argv[0], run_name="__main__", alter_sys=True)


def stretches(marks: list[tuple[str, int]]) -> list[list[int]]:
    """Per request (request in, upstream request out, upstream reply in, reply out, next request in):
    the opcodes of each stretch. A mark may repeat (a body read in two pieces): the first counts."""
    collapsed: list[tuple[str, int]] = []
    for mark, count in marks:
        if not collapsed or collapsed[-1][0] != mark:
            collapsed.append((mark, count))
    out: list[list[int]] = [[], [], []]
    kinds = "".join(mark for mark, _ in collapsed)
    at = kinds.find("SWCW")
    while at >= 0 and at + 4 < len(kinds) and kinds[at + 4] == "S":
        request_in, upstream_out, upstream_in, reply_out, next_in = (collapsed[at + i][1] for i in range(5))
        out[0].append(upstream_out - request_in)
        out[1].append(reply_out - upstream_in)
        out[2].append(next_in - reply_out)
        at = kinds.find("SWCW", at + 4)
    return out


async def measure(args: argparse.Namespace) -> int:
    src = Path(args.src).resolve() if args.src else processes.REPO
    out = str(Path(tempfile.mkdtemp(prefix="critical-path-")) / "marks.pickle")
    fake = await processes.start("fake upstream", ["-m", "bench.fake_upstream", "--port", "0"], processes.clean_env({}))
    port = free_port()
    env = processes.clean_env({
        "AGENT_GATEWAY_HOME": tempfile.mkdtemp(prefix="agent-gateway-critical-path-"),
        "LLM_BASE_URL": f"{fake.base_url}/v1", "LLM_MODEL": "bench-model",
        "SEARXNG_URL": fake.base_url, "WEB_BACKEND": "searxng",
        "API_SERVER_MAX_CONCURRENT_RUNS": "4096",
        "PYTHONPATH": str(src),
    })
    # this file as a script (the tracer from this checkout), the gateway from `src`
    gateway = subprocess.Popen(
        [sys.executable, __file__, "--trace-child", out, "gateway", "serve", "--port", str(port)],
        env=env, cwd=src, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    body = chat_body(stream=False, text="Say hello.")
    try:
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:
            await wait_healthy(session, base)
            url = f"{base}/v1/chat/completions"
            await send(session, url, body, 100, 1)
            gateway.send_signal(signal.SIGUSR1)
            await asyncio.sleep(0.3)
            for _ in range(args.requests):
                await send(session, url, body, 1, 1)
                # a pause, so that what the gateway does after a reply ends before the next request
                # arrives instead of landing in its first stretch (how far it does depends on timing)
                if args.pause > 0:
                    await asyncio.sleep(args.pause)
            gateway.send_signal(signal.SIGUSR2)
            while not Path(out).exists():
                await asyncio.sleep(0.1)
    finally:
        gateway.send_signal(signal.SIGINT)
        gateway.wait(timeout=60)
        await fake.stop()
    per_stretch = stretches(pickle.loads(Path(out).read_bytes()))
    print(f"chat, c=1, {len(per_stretch[0])} requests, src {src}: Python opcodes per request (median)")
    for name, values in zip(STRETCHES, per_stretch, strict=True):
        print(f"  {name:38s} {statistics.median(values):7,.0f}")
    critical = statistics.median(per_stretch[0]) + statistics.median(per_stretch[1])
    print(f"  {'critical path (the first two)':38s} {critical:7,.0f}")
    return 0


def main() -> int:
    if len(sys.argv) > 2 and sys.argv[1] == "--trace-child":
        trace_child(sys.argv[2], sys.argv[3:])
        return 0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--src", help="a checkout to measure instead of this one (A/B)")
    parser.add_argument("--pause", type=float, default=PAUSE,
                        help=f"seconds between a reply and the next request (default {PAUSE}; 0: at once)")
    return asyncio.run(measure(parser.parse_args()))


if __name__ == "__main__":
    raise SystemExit(main())
