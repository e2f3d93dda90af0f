"""The container checks of scripts/container_smoke (which installs podman and the stand-in images).

Builds the Dockerfile unchanged and runs what a user runs: one container (host networking, the
bench's fake model and SearXNG on 127.0.0.1), then docker-compose.yml's `replicas` profile with
podman-compose (its own network; the fake runs there as the `searxng` service). Prints the image's
size and start time (bench/README.md). Any failed check ends the run with exit status 1.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
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


def container_address(name: str) -> str:
    networks = json.loads(podman("inspect", "--format", "{{json .NetworkSettings.Networks}}", name).stdout)
    return next(iter(networks.values()))["IPAddress"]


def upstreams_since(since: str) -> list[str]:
    """The replica address of each request nginx logged since `since` (its log format has upstream=)."""
    logs = podman("logs", "--since", since, f"{PROJECT}_load-balancer_1").stdout
    return re.findall(r"upstream=([\d.]+):8642", logs)


def anonymous_volumes() -> list[str]:
    names = podman("volume", "ls", "--format", "{{.Name}}").stdout.split()
    return [name for name in names if re.fullmatch(r"[0-9a-f]{64}", name)]


def through_lb(count: int) -> list[int]:
    return [chat(LB, f"hello {i}")[0] for i in range(count)]


def replica_get(replica: str, path: str) -> int:
    code = ("import sys, urllib.request, urllib.error\n"
            f"r = urllib.request.Request('http://127.0.0.1:8642{path}', headers={{'Authorization': 'Bearer {KEY}'}})\n"
            "try: print(urllib.request.urlopen(r, timeout=10).status)\n"
            "except urllib.error.HTTPError as e: print(e.code)\n")
    return int(podman("exec", f"{PROJECT}_{replica}_1", "python", "-c", code).stdout.strip() or 0)


def wait_healthy(replica: str, timeout: float = 120) -> float:
    name = f"{PROJECT}_{replica}_1"
    return wait_for(f"{replica} healthy",
                    lambda: podman("healthcheck", "run", name, check_rc=False, quiet=True).returncode == 0, timeout)


def replicas() -> None:
    print("\n-- docker-compose.yml, profile replicas (podman-compose)", flush=True)
    workdir = Path(tempfile.mkdtemp(prefix="agsmoke-compose-"))
    try:
        shutil.copy(REPO / "docker-compose.yml", workdir)
        shutil.copytree(REPO / "deploy", workdir / "deploy")
        # The fake model and SearXNG: the bench's fake, built on the image just built
        context = Path(os.environ["STANDIN_CONTEXT"])
        shutil.copytree(REPO / "bench", context / "bench", dirs_exist_ok=True,
                        ignore=shutil.ignore_patterns("__pycache__"))
        podman("build", "--quiet", "--network", "none", "-t", "docker.io/searxng/searxng:latest",
               "-f", str(context / "searxng.Containerfile"), str(context))
        # podman < 5.3 has no host-gateway: README, "Docker" (HOST_GATEWAY)
        host_ip = "10.88.0.1"
        (workdir / ".env").write_text(
            f"API_SERVER_KEY={KEY}\nPOSTGRES_PASSWORD=smoke-{secrets.token_hex(8)}\n"
            f"SEARXNG_SECRET={secrets.token_hex(16)}\nLLM_BASE_URL=http://searxng:8080/v1\n"
            f"HOST_GATEWAY={host_ip}\n")
        compose(workdir, "down", "-v")
        anonymous_before = set(anonymous_volumes())
        start = time.monotonic()
        compose(workdir, "up", "-d", "--no-build", "load-balancer")
        # A client that does not wait: requests through nginx while the replicas start (podman-compose
        # on podman < 4.6 starts nginx at once). Refused connections then must not mark the replicas
        # down for later requests.
        starting = threading.Event()
        early: list[int] = []

        def early_client() -> None:
            while not starting.is_set():
                early.append(chat(LB, "early", timeout=10)[0])
                time.sleep(0.2)

        client = threading.Thread(target=early_client)
        client.start()
        try:
            for replica in ("gateway-a", "gateway-b"):
                wait_healthy(replica)
        finally:
            starting.set()
            client.join(20)
        print(f"  both replicas ready {time.monotonic() - start:.1f} s after up; requests sent while they "
              f"started got {sorted(set(early))}", flush=True)
        hosts = podman("exec", f"{PROJECT}_gateway-a_1", "cat", "/etc/hosts").stdout
        check(re.search(rf"^{re.escape(host_ip)}\s.*host\.docker\.internal", hosts, re.M) is not None,
              "extra_hosts maps host.docker.internal (HOST_GATEWAY, podman < 5.3)")
        for replica in ("gateway-a", "gateway-b"):
            volumes = podman("inspect", "--format", "{{range .Mounts}}{{.Name}} {{end}}",
                             f"{PROJECT}_{replica}_1").stdout.split()
            check(volumes == [f"{PROJECT}_{replica}-data"] and not set(volumes) & set(anonymous_volumes()),
                  f"{replica}'s only volume is its named one, not an anonymous one ({volumes})")

        since = str(int(time.time()))
        statuses = through_lb(20)
        check(statuses == [200] * 20, f"no 502 once ready: 20 chats through nginx answer 200 ({set(statuses)})")
        addresses = {replica: container_address(f"{PROJECT}_{replica}_1") for replica in ("gateway-a", "gateway-b")}
        spread = set(upstreams_since(since))
        check(spread == set(addresses.values()), f"nginx spread them over both replicas ({spread})")

        status, stored = http("POST", f"{LB}/v1/responses", {"model": "agent-gateway", "input": "shared"})
        check(status == 200, "a response stored through nginx")
        for replica in ("gateway-a", "gateway-b"):
            check(replica_get(replica, f"/v1/responses/{stored['id']}") == 200, f"{replica} reads it (PostgreSQL)")

        print("  PostgreSQL stopped: what needs the store gets 503, which must not take a replica out", flush=True)
        podman("stop", "-t", "10", f"{PROJECT}_postgres_1")
        # Three, so that each replica answers 503 at least twice: nginx's former `max_fails=1` default
        # with `proxy_next_upstream ... http_503` then marked both down for 10 s.
        reads = [http("GET", f"{LB}/v1/responses/{stored['id']}")[0] for _ in range(3)]
        check(reads == [503] * 3, f"reads of a stored response answer 503 through nginx ({reads})")
        statuses = through_lb(6)
        check(statuses == [200] * 6, f"chats right after it still answer 200: both replicas in rotation ({statuses})")
        podman("start", f"{PROJECT}_postgres_1")
        for replica in ("gateway-a", "gateway-b"):
            wait_healthy(replica)

        print("  gateway-a stopped, its address taken, gateway-a started again (a new address)", flush=True)
        podman("stop", "-t", "20", f"{PROJECT}_gateway-a_1")
        statuses = through_lb(6)
        check(statuses == [200] * 6, f"with gateway-a down, nginx sends everything to gateway-b ({set(statuses)})")
        # As on a busy Docker network: another container gets the stopped replica's address, so the
        # replica comes back on a new one (nginx itself is not touched).
        network = next(iter(json.loads(podman("inspect", "--format", "{{json .NetworkSettings.Networks}}",
                                              f"{PROJECT}_gateway-a_1").stdout)))
        podman("run", "-d", "--name", f"{PROJECT}-squatter", "--network", network, "--ip", addresses["gateway-a"],
               BASE, "sleep", "600")
        podman("start", f"{PROJECT}_gateway-a_1")
        wait_healthy("gateway-a")
        new_address = container_address(f"{PROJECT}_gateway-a_1")
        check(new_address != addresses["gateway-a"], "gateway-a is back on a new address")
        print(f"  gateway-a: {addresses['gateway-a']} before, {new_address} now", flush=True)
        time.sleep(2.5)  # nginx's resolver caches an answer for valid=2s
        since = str(int(time.time()))
        statuses = through_lb(20)
        served = upstreams_since(since)
        check(statuses == [200] * 20, "20 chats through nginx answer 200 after the restart")
        check(new_address in served, f"the restarted gateway-a gets traffic again ({served.count(new_address)}/20)")
        podman("rm", "-f", f"{PROJECT}-squatter", quiet=True)
        compose(workdir, "down", "-v")
        # the searxng stand-in inherits the gateway image's VOLUME /data
        for name in set(anonymous_volumes()) - anonymous_before:
            podman("volume", "rm", "-f", name, quiet=True)
    except BaseException:
        podman("rm", "-f", f"{PROJECT}-squatter", check_rc=False, quiet=True)
        for service in ("load-balancer", "gateway-a", "gateway-b", "postgres"):
            logs = podman("logs", "--tail", "15", f"{PROJECT}_{service}_1", check_rc=False, quiet=True)
            print(f"--- {service}:\n{logs.stdout}{logs.stderr}", file=sys.stderr)
        compose(workdir, "down", "-v")
        raise
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


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
