"""The benchmark's processes: started and stopped by the helper the tests use
(`tests/support/gateway_process.py`; bench imports from tests, never the reverse), plus what a benchmark
reads of them: VmRSS and CPU time from `/proc/<pid>/status` and `/proc/<pid>/stat`."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from tests.support.gateway_process import REPO, ServerProcess, clean_env, start_server

__all__ = ["REPO", "Process", "clean_env", "cpu_seconds", "rss_mb", "start"]


class Process(ServerProcess):
    def rss_mb(self) -> float:
        return rss_mb(self.pid)

    def cpu_seconds(self) -> float:
        return cpu_seconds(self.pid)


def rss_mb(pid: int) -> float:
    """VmRSS of `pid` in MiB, from /proc/<pid>/status."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for pid {pid}")


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of `pid` so far, from /proc/<pid>/stat (fields 14 and 15)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def start(name: str, args: list[str], env: Mapping[str, str], timeout: float = 20,
                cwd: Path = REPO) -> Process:
    """Run `python <args>` in `cwd`, wait for its `listening on http://...` line, and keep its
    output drained (nobody reads a benchmarked server's log)."""
    process = await start_server(args, env=env, process_type=Process, name=name, cwd=cwd, timeout=timeout)
    process.keep_draining()
    return process
