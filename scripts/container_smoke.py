"""The container checks of scripts/container_smoke (which installs podman and the stand-in images).

Builds the Dockerfile unchanged and runs what a user runs: one container (host networking, the
bench's fake model and SearXNG on 127.0.0.1), then docker-compose.yml's `replicas` profile with
podman-compose (its own network; the fake runs there as the `searxng` service). Prints the image's
size and start time (bench/README.md). Any failed check ends the run with exit status 1.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any

from container_smoke_replicas import replicas
from container_smoke_support import (
    BASE,
    IMAGE,
    KEY,
    PROJECT,
    REPO,
    SmokeFailure,
    answers,
    chat,
    check,
    fake_upstream,
    free_port,
    http,
    podman,
    wait_for,
)


def build_image() -> None:
    print("\n-- build the Dockerfile (podman build --format docker: OCI would drop HEALTHCHECK)", flush=True)
    start = time.monotonic()
    done = subprocess.run(["podman", "build", "--format", "docker", "--network", "host", "-t", IMAGE, "."],
                          cwd=REPO, capture_output=True, text=True)
    if done.returncode != 0:
        print(done.stdout[-4000:], done.stderr[-2000:], file=sys.stderr)
        raise SmokeFailure("the Dockerfile does not build")
    check("deprecat" not in (done.stdout + done.stderr).lower(), "the build prints no deprecation warning")
    print(f"  built in {time.monotonic() - start:.1f} s", flush=True)
    health = json.loads(podman("image", "inspect", "--format", "{{json .HealthCheck}}", IMAGE).stdout or "null")
    check(bool(health) and "/health/ready" in " ".join(health.get("Test", [])),
          "the image's HEALTHCHECK probes /health/ready")
    listing = podman("run", "--rm", "--network", "none", "--user", "0", "--entrypoint", "sh", IMAGE, "-c",
                     "ls -A /app; find / -xdev \\( -name 'agent_gateway*' -o -path '*/gateway/http' "
                     "\\) -not -path '/proc/*'").stdout.split()
    check(bool(listing) and all(path.startswith("/usr/local/lib/") for path in listing),
          f"one copy of the code, in site-packages: no source tree, build/ or egg-info ({listing})")


def single_container(upstream: str) -> dict[str, float]:
    print("\n-- one container (host network, the fakes on 127.0.0.1)", flush=True)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    volume = f"{PROJECT}-data"
    podman("volume", "rm", "-f", volume, quiet=True)
    env = ["-e", f"API_SERVER_PORT={port}", "-e", f"API_SERVER_KEY={KEY}",
           # host networking: the loopback only, not every interface of this machine
           "-e", "API_SERVER_HOST=127.0.0.1",
           "-e", f"LLM_BASE_URL={upstream}/v1", "-e", f"SEARXNG_URL={upstream}",
           "-e", "WEB_SEARCH_BACKEND=searxng", "-e", "WEB_SEARCH_FALLBACK=none"]

    def run(name: str, *extra: str) -> float:
        podman("rm", "-f", name, quiet=True)
        start = time.monotonic()
        podman("run", "-d", "--name", name, "--network", "host", *env, *extra, IMAGE)
        wait_for(f"{name} answers /health", answers(f"{base}/health"))
        return time.monotonic() - start

    starts = [run(f"{PROJECT}-one", "-v", f"{volume}:/data")]
    check(True, f"/health answers 200 ({starts[0]:.2f} s after podman run)")
    status, body = http("GET", f"{base}/v1/models", key=None)
    check(status == 401 and "error" in body, "401 in OpenAI's envelope without the key")
    uid = podman("exec", f"{PROJECT}-one", "id", "-u").stdout.strip()
    check(uid not in ("", "0"), f"the gateway runs as uid {uid}, not root")
    before = http("GET", f"{upstream}/_bench/stats", key=None)[1]
    status, body = chat(base, "bench: tool")
    after = http("GET", f"{upstream}/_bench/stats", key=None)[1]
    check(status == 200 and body["choices"][0]["message"]["content"], "a chat that searches answers 200")
    check(after["searches"] > before["searches"], "the agent searched the (fake) SearXNG")
    check(podman("healthcheck", "run", f"{PROJECT}-one", check_rc=False).returncode == 0, "HEALTHCHECK: healthy")

    status, stored = http("POST", f"{base}/v1/responses", {"model": "agent-gateway", "input": "remember me"})
    check(status == 200 and stored.get("id", "").startswith("resp_"), "a response is stored")

    print("  SIGTERM with a request in flight", flush=True)
    result: dict[str, Any] = {}
    requests_before = http("GET", f"{upstream}/_bench/stats", key=None)[1]["requests"]
    def slow_request() -> None:
        result["reply"] = chat(base, "bench: delay=3")

    slow = threading.Thread(target=slow_request)
    slow.start()
    wait_for("the slow request reaches the model",
             lambda: http("GET", f"{upstream}/_bench/stats", key=None)[1]["requests"] > requests_before, 10)
    podman("stop", "-t", "20", f"{PROJECT}-one")
    slow.join(30)
    check(result.get("reply", (0,))[0] == 200, "the request in flight finished with 200 after SIGTERM")
    exit_code = podman("inspect", "--format", "{{.State.ExitCode}}", f"{PROJECT}-one").stdout.strip()
    check(exit_code == "0", f"the container exited 0 (got {exit_code})")

    starts.append(run(f"{PROJECT}-two", "-v", f"{volume}:/data"))
    status, again = http("GET", f"{base}/v1/responses/{stored['id']}")
    check(status == 200 and again.get("id") == stored["id"], "a new container on the volume reads the stored response")
    podman("rm", "-f", f"{PROJECT}-one", f"{PROJECT}-two", quiet=True)

    starts.append(run(f"{PROJECT}-ro", "-v", f"{volume}:/data:ro"))
    status, _ = http("GET", f"{base}/health/ready", key=None)
    check(status == 503, f"/health/ready answers 503 on a read-only volume (got {status})")
    check(podman("healthcheck", "run", f"{PROJECT}-ro", check_rc=False, quiet=True).returncode != 0,
          "the image's HEALTHCHECK command fails")

    def unhealthy() -> bool:  # podman here runs no health timer (no systemd): run the checks by hand
        podman("healthcheck", "run", f"{PROJECT}-ro", check_rc=False, quiet=True)
        time.sleep(0.9)
        return podman("inspect", "--format", "{{.State.Health.Status}}", f"{PROJECT}-ro").stdout.strip() == "unhealthy"

    # failures in the image's --start-period=10s do not count, then --retries=3 of them
    waited = wait_for("the container reported unhealthy", unhealthy, 40)
    check(True, f"the container is reported unhealthy ({waited:.0f} s after start)")
    podman("rm", "-f", f"{PROJECT}-ro", quiet=True)
    podman("volume", "rm", "-f", volume, quiet=True)
    return {"container_start_s": sorted(starts)[1], "direct_start_s": direct_start(upstream)}


def direct_start(upstream: str) -> float:
    """The same start outside a container (this Python, a fresh home): the median of 3 runs."""
    times = []
    for _ in range(3):
        port = free_port()
        with tempfile.TemporaryDirectory() as home:
            env = {**os.environ, "AGENT_GATEWAY_HOME": home, "API_SERVER_HOST": "127.0.0.1",
                   "API_SERVER_PORT": str(port), "API_SERVER_KEY": KEY, "LLM_BASE_URL": f"{upstream}/v1"}
            start = time.monotonic()
            process = subprocess.Popen([sys.executable, "-m", "gateway", "serve"], cwd=REPO, env=env,
                                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            try:
                wait_for("the gateway answers /health", answers(f"http://127.0.0.1:{port}/health"), 30)
                times.append(time.monotonic() - start)
            finally:
                process.terminate()
                process.wait(timeout=20)
    return sorted(times)[1]


def main() -> int:
    try:
        build_image()
        with fake_upstream() as upstream:
            figures = single_container(upstream)
        replicas()
    except SmokeFailure as failure:
        print(f"container smoke: FAILED: {failure}", file=sys.stderr)
        return 1
    except Exception:  # a bug here, or something the checks did not foresee: fail, never pass
        import traceback
        traceback.print_exc()
        print("container smoke: FAILED (see the traceback)", file=sys.stderr)
        return 1
    size = int(podman("image", "inspect", "--format", "{{.Size}}", IMAGE).stdout)
    base = int(podman("image", "inspect", "--format", "{{.Size}}", BASE).stdout)
    container, direct = figures["container_start_s"], figures["direct_start_s"]
    print(f"\nimage {size / 1e6:.0f} MB, {(size - base) / 1e6:.0f} MB over {BASE}; /health answered "
          f"{container:.2f} s after podman run (median of 3), {direct:.2f} s after starting the same "
          f"gateway directly ({container / direct:.2f}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
