"""What scripts/container_smoke.py and container_smoke_replicas.py share: podman, HTTP, waiting."""

from __future__ import annotations

import json
import os
import re
import secrets
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
IMAGE = "localhost/agent-gateway:latest"
BASE = "docker.io/library/python:3.12-slim"
PROJECT = "agsmoke"
KEY = "smoke-" + secrets.token_hex(16)
LB = "http://127.0.0.1:8643"  # docker-compose.yml publishes nginx there


class SmokeFailure(Exception):
    pass


def check(condition: bool, what: str) -> None:
    if not condition:
        raise SmokeFailure(what)
    print(f"  ok: {what}", flush=True)


def podman(*args: str, check_rc: bool = True, quiet: bool = False) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(["podman", *args], capture_output=True, text=True)
    if check_rc and done.returncode != 0:
        raise SmokeFailure(f"podman {' '.join(args)} -> {done.returncode}: {done.stderr.strip()[-800:]}")
    if not quiet and done.stderr.strip() and done.returncode != 0:
        print(done.stderr.strip()[-400:], file=sys.stderr)
    return done


def compose(workdir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    command = [os.environ["PODMAN_COMPOSE"], "-p", PROJECT, "--profile", "replicas", *args]
    done = subprocess.run(command, cwd=workdir, capture_output=True, text=True)
    if done.returncode != 0:
        raise SmokeFailure(f"podman-compose {' '.join(args)} -> {done.returncode}: {done.stderr.strip()[-1500:]}")
    return done


def http(method: str, url: str, body: Any = None, key: str | None = KEY,
         timeout: float = 30) -> tuple[int, dict[str, Any]]:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, method=method)
    if data is not None:
        request.add_header("Content-Type", "application/json")
    if key:
        request.add_header("Authorization", f"Bearer {key}")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as reply:
            status, raw = reply.status, reply.read()
    except urllib.error.HTTPError as error:
        status, raw = error.code, error.read()
    except OSError as error:  # refused, reset, timed out: no HTTP status at all
        return 0, {"error": repr(error)}
    try:
        return status, json.loads(raw) if raw else {}
    except ValueError:
        return status, {"raw": raw.decode(errors="replace")[:300]}


def wait_for(what: str, probe: Callable[[], bool], timeout: float = 90) -> float:
    """Seconds until probe() is true (polled every 0.1 s); SmokeFailure past the timeout."""
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        try:
            if probe():
                return time.monotonic() - start
        except OSError:
            pass
        time.sleep(0.1)
    raise SmokeFailure(f"{what}: not within {timeout:.0f} s")


def answers(url: str) -> Callable[[], bool]:
    """A probe for wait_for: url answers 200 (no key)."""
    return lambda: http("GET", url, key=None)[0] == 200


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def chat(base: str, text: str, timeout: float = 60) -> tuple[int, dict[str, Any]]:
    return http("POST", f"{base}/v1/chat/completions",
                {"model": "agent-gateway", "messages": [{"role": "user", "content": text}]}, timeout=timeout)


@contextmanager
def fake_upstream() -> Iterator[str]:
    """bench/fake_upstream.py on 127.0.0.1: the model and SearXNG's JSON search in one process."""
    process = subprocess.Popen([sys.executable, "-m", "bench.fake_upstream", "--port", "0"], cwd=REPO,
                               stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        match = re.search(r"http://127\.0\.0\.1:\d+", line)
        if not match:
            raise SmokeFailure(f"the fake upstream did not start: {line!r}")
        yield match.group(0)
    finally:
        process.terminate()
        process.wait(timeout=10)
