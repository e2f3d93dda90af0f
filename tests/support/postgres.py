"""A throwaway PostgreSQL cluster for tests and bench/: Debian's server binaries, `initdb` and
`pg_ctl` on a temporary directory, loopback only, a free port, trust authentication for one
password user (the password is still sent, so the gateway's masking is exercised).

PostgreSQL refuses to run as root; as root the cluster runs as the `postgres` system user (the
Debian package creates it), in a directory that user owns.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

USER = "gateway"
PASSWORD = "s3cret-pg-password"  # a test secret: tests check it never reaches a log


def server_binaries() -> Path | None:
    """The newest installed PostgreSQL server's bin directory, or None."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"),
                   key=lambda p: int(Path(p).parent.parent.name) if Path(p).parent.parent.name.isdigit() else 0)
    return Path(found[-1]).parent if found else None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Cluster:
    bin_dir: Path
    directory: Path
    port: int
    _as_postgres: bool = field(default=False)

    @property
    def data(self) -> Path:
        return self.directory / "data"

    def url(self, database: str = "postgres", *, password: str = PASSWORD) -> str:
        return f"postgresql://{USER}:{password}@127.0.0.1:{self.port}/{database}"

    def _run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        command = [str(self.bin_dir / args[0]), *args[1:]]
        if self._as_postgres:
            command = ["runuser", "-u", "postgres", "--", *command]
        return subprocess.run(command, check=check, capture_output=True, text=True, timeout=120)

    def start(self) -> None:
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.directory / "log"), "-w", "-t", "60",
                  "-o", f"-p {self.port} -k {self.directory} -c listen_addresses=127.0.0.1", "start")

    def start_if_stopped(self) -> None:
        if not self._running():
            self.start()

    def _running(self) -> bool:
        return self._run("pg_ctl", "-D", str(self.data), "status", check=False).returncode == 0

    def stop(self, mode: str = "fast") -> None:
        """Stopped when this returns. A fast stop ends with a checkpoint, which on a loaded machine can
        outlast pg_ctl's wait: it then returns with the server still shutting down, `start_if_stopped`
        sees it alive and starts nothing, and the server is gone a moment later. Such a stop goes on
        as an immediate one (no checkpoint)."""
        done = self._run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "-t", "30", "stop", check=False)
        if done.returncode != 0 and mode != "immediate" and self._running():
            self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "-t", "60", "stop", check=False)

    def psql(self, sql: str, database: str = "postgres") -> str:
        done = self._run("psql", "-h", "127.0.0.1", "-p", str(self.port), "-U", USER, "-d", database,
                         "-tAc", sql)
        return done.stdout

    def create_database(self, name: str) -> str:
        self.psql(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def destroy(self) -> None:
        self.stop("immediate")
        shutil.rmtree(self.directory, ignore_errors=True)


def start_cluster() -> Cluster:
    """initdb + pg_ctl start; raises RuntimeError when the binaries are missing."""
    bin_dir = server_binaries()
    if bin_dir is None:
        raise RuntimeError("PostgreSQL server binaries not found under /usr/lib/postgresql/*/bin")
    as_postgres = os.geteuid() == 0
    directory = Path(tempfile.mkdtemp(prefix="gateway-pg-"))
    if as_postgres:
        shutil.chown(directory, "postgres", "postgres")
    cluster = Cluster(bin_dir, directory, _free_port(), as_postgres)
    cluster._run("initdb", "-D", str(cluster.data), "-U", USER, "--auth=trust", "-E", "UTF8",
                 "--no-sync", "--no-instructions")
    with (cluster.data / "postgresql.conf").open("a") as conf:
        # a test cluster: many short-lived pools from many tests
        conf.write("max_connections = 200\nshared_buffers = 32MB\n")
    cluster.start()
    return cluster
