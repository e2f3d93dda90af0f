"""`wrk` (C, event-driven) as the load generator when the Python one would saturate first.

It runs for a fixed time (`-d`), so it is bounded like every other loop here. Needs the Debian
package `wrk` (`apt-get install wrk`); `available()` says whether it is on PATH.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import tempfile
from pathlib import Path

from bench.loadgen import LoadResult

SCRIPT = Path(__file__).with_name("post.lua")


def available() -> bool:
    return shutil.which("wrk") is not None


async def run_wrk(url: str, body: bytes, *, concurrency: int, seconds: float, threads: int = 1) -> LoadResult:
    """POST `body` to `url` over `concurrency` keep-alive connections for `seconds`."""
    with tempfile.NamedTemporaryFile("wb", suffix=".json", delete=False) as handle:
        handle.write(body)
        body_path = handle.name
    try:
        proc = await asyncio.create_subprocess_exec(
            "wrk", f"-t{max(1, min(threads, concurrency))}", f"-c{concurrency}", f"-d{max(1, round(seconds))}s",
            "--timeout", "10s", "-s", str(SCRIPT), url,
            env={**os.environ, "BENCH_BODY": body_path},
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        out, err = await asyncio.wait_for(proc.communicate(), timeout=seconds + 30)
    finally:
        os.unlink(body_path)
    line = next((x for x in out.decode().splitlines() if x.startswith("BENCH_JSON ")), None)
    if proc.returncode != 0 or line is None:
        raise RuntimeError(f"wrk failed ({proc.returncode}): {err.decode()[-500:] or out.decode()[-500:]}")
    data = json.loads(line.removeprefix("BENCH_JSON "))
    errors = data["connect"] + data["read"] + data["write"] + data["status"] + data["timeout"]
    result = LoadResult("wrk", concurrency, ok=data["requests"] - data["status"], errors=errors,
                        elapsed=data["duration_us"] / 1e6,
                        fixed_p50=data["p50_us"] / 1e6, fixed_p99=data["p99_us"] / 1e6)
    if errors:
        result.error_samples.append(
            f"connect {data['connect']}, read {data['read']}, write {data['write']}, "
            f"non-2xx {data['status']}, timeout {data['timeout']}")
    return result
