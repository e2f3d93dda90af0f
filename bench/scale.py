"""Flat as the data grows (issue 49): the gateway's per-request costs with 1k to 1M stored responses,
10 to 10k keys and 1 to 100 routes.

    python -m bench.scale store --sizes 1000 100000 1000000 --backend sqlite postgres --cache /work/cache/scale
    python -m bench.scale keys --sizes 10 1000 10000
    python -m bench.scale routes --sizes 1 10 100
    python -m bench.scale plan --cache /work/cache/scale      # EXPLAIN QUERY PLAN / EXPLAIN of the store's queries

`store`: a store holding N responses, filled by bulk SQL inserts (sqlite3's executemany in one
transaction; PostgreSQL's COPY) of realistic rows: chains of 10 turns of one owner (the single-user
profile's `default` key, with `max_stored_responses` above N so no count eviction hides the rows), each
row a short chat turn as the gateway stores it (~1.5 KB: the response object, the turn's two messages,
its input item). Then, through the store's own API (`SQLiteResponseStore`, `PostgresResponseStore`):
`get` (a random stored id, touched), `continue` (what a chained request does: `chain` of a chain's
last turn, then `put` of its next turn) and `evict` (a `put` with `max_bytes` just under the stored
bytes, so each put evicts the least recently used record under the byte bound). Medians of wall time
per operation (a put includes its commit: SQLite's fsync, a PostgreSQL round trip). A filled store is
kept in `--cache` and reused (the figures' operations change a few hundred of its rows); its build
time is printed when it is made. The PostgreSQL cluster is Debian's server in `--cache`-pg (started
for the run, stopped after; tests/support/postgres.py).

`keys`: `authenticate` (gateway/http/auth.py) of a random live key out of N in the ring (a second pass
over the same picks: each key's first request after a refresh also makes its usage entry), and the
ring's refresh (every 2 s in a running gateway: the keys read from a SQLite key store, the ring rebuilt).

`routes`: `RouteTable.find` (gateway/upstream/routes.py) of a random route out of N (`LLM_MODELS` with
N ids), and `/v1/models`' listing.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import random
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import orjson

from gateway.store.api import ResponseStore, StoredResponse
from gateway.store.owners import DEFAULT_OWNER

CHAIN = 10  # turns per chain in a filled store
OWNER = DEFAULT_OWNER
TEXT = ("The otter (Lutrinae) is a semiaquatic carnivorous mammal; thirteen extant species live in "
        "rivers, lakes and coasts. ")


def _turn(n: int, created: int) -> tuple[str, str, str, str, str | None]:
    """Row n's id, response, transcript, input items and parent id, as the gateway writes them."""
    rid = f"resp_{n:012d}"
    question = f"Question {n}: {TEXT}"
    answer = f"Answer {n}: {TEXT * 4}"
    response = {
        "id": rid, "object": "response", "created_at": created, "status": "completed", "model": "bench-model",
        "output": [{"type": "message", "id": f"msg_{n:012d}", "status": "completed", "role": "assistant",
                    "content": [{"type": "output_text", "text": answer, "annotations": []}]}],
        "parallel_tool_calls": True, "tool_choice": "auto", "tools": [], "text": {"format": {"type": "text"}},
        "usage": {"input_tokens": 64, "output_tokens": 128, "total_tokens": 192,
                  "input_tokens_details": {"cached_tokens": 0}, "output_tokens_details": {"reasoning_tokens": 0}},
        "previous_response_id": f"resp_{n - 1:012d}" if n % CHAIN else None,
    }
    transcript = [{"role": "user", "content": question}, {"role": "assistant", "content": answer}]
    items = [{"id": f"msg_in_{n:012d}", "type": "message", "role": "user",
              "content": [{"type": "input_text", "text": question}]}]
    return (rid, orjson.dumps(response).decode(), orjson.dumps(transcript).decode(), orjson.dumps(items).decode(),
            f"resp_{n - 1:012d}" if n % CHAIN else None)


def _rows(count: int) -> Iterator[tuple[Any, ...]]:
    """(id, created_at, last_access, conversation, response, transcript, input_items, parent_id, bytes,
    history_bytes, owner): the oldest turn least recently used."""
    created = int(time.time()) - count
    for n in range(count):
        rid, response, transcript, items, parent = _turn(n, created + n)
        yield (rid, created + n, n + 1, None, response, transcript, items, parent,
               len(response) + len(transcript) + len(items), len(transcript), OWNER)


def _next_record(n: int, parent: str) -> StoredResponse:
    rid, response, transcript, items, _ = _turn(n, int(time.time()))
    return StoredResponse(id=rid, created_at=int(time.time()), response=orjson.loads(response),
                          transcript=orjson.loads(transcript), input_items=orjson.loads(items),
                          parent_id=parent, owner=OWNER)


# ---- the stores -------------------------------------------------------------------------------------

async def sqlite_store(cache: Path, size: int, max_bytes: int | None) -> ResponseStore:
    from gateway.store.sqlite.store import SQLiteResponseStore

    path = cache / f"sqlite-{size}.db"
    if not path.exists():
        building = path.with_suffix(".building")
        for stale in cache.glob(building.name + "*"):
            stale.unlink()
        started = time.perf_counter()
        async with SQLiteResponseStore(building, 2 * size) as made:  # the schema, migrated
            del made
        with contextlib.closing(sqlite3.connect(building)) as db:
            db.execute("PRAGMA synchronous = OFF")
            with db:
                db.executemany(
                    "INSERT INTO responses (id, created_at, last_access, conversation, response, transcript,"
                    " input_items, parent_id, bytes, history_bytes, owner) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                    _rows(size))
            db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        building.rename(path)
        print(f"  sqlite {size:,}: built in {time.perf_counter() - started:.1f} s, "
              f"{path.stat().st_size / 2**20:,.0f} MiB", flush=True)
    store = SQLiteResponseStore(path, 2 * size, max_bytes=max_bytes)
    started = time.perf_counter()
    await store.open()
    if time.perf_counter() - started > 1:  # a file of an older schema version, migrated
        print(f"  sqlite {size:,}: opened in {time.perf_counter() - started:.1f} s (migrated)", flush=True)
    return store


class Postgres:
    """Debian's PostgreSQL in `cache`/pg, one database per size, kept between runs."""

    def __init__(self, cache: Path) -> None:
        self.cache = cache
        self.cluster: Any = None

    def start(self) -> None:
        import os
        import shutil

        from tests.support import postgres

        # beside the cache, not in it: the SQLite store makes its folder private (0700), and the
        # cluster runs as the `postgres` user when we are root
        directory = self.cache.with_name(self.cache.name + "-pg")
        bin_dir = postgres.server_binaries()
        if bin_dir is None:
            raise RuntimeError("no PostgreSQL server binaries (Debian's postgresql package)")
        if not (directory / "data").exists():
            directory.mkdir(parents=True, exist_ok=True)
            as_postgres = os.geteuid() == 0
            if as_postgres:
                shutil.chown(directory, "postgres", "postgres")
            self.cluster = postgres.Cluster(bin_dir, directory, postgres._free_port(), as_postgres)
            self.cluster._run("initdb", "-D", str(self.cluster.data), "-U", postgres.USER, "--auth=trust",
                              "-E", "UTF8", "--no-sync", "--no-instructions")
            with (self.cluster.data / "postgresql.conf").open("a") as conf:
                conf.write("shared_buffers = 128MB\n")
        else:
            self.cluster = postgres.Cluster(bin_dir, directory, postgres._free_port(), os.geteuid() == 0)
        self.cluster.start()

    def stop(self) -> None:
        if self.cluster is not None:
            self.cluster.stop()

    async def store(self, size: int, max_bytes: int | None) -> ResponseStore:
        from gateway.store.postgres.database import PostgresDatabase
        from gateway.store.postgres.store import PostgresResponseStore

        name = f"scale_{size}"
        url = self.cluster.url(name)
        if name not in self.cluster.psql("SELECT datname FROM pg_database").split():
            started = time.perf_counter()
            self.cluster.create_database(name)
            async with PostgresResponseStore(PostgresDatabase(url), 2 * size):
                pass  # the schema, migrated
            import asyncpg

            conn = await asyncpg.connect(url)
            try:
                # the usage triggers would write one change row per inserted row: off for the fill,
                # then the totals as the folded rows the store keeps
                await conn.execute("ALTER TABLE responses DISABLE TRIGGER USER")
                await conn.copy_records_to_table(
                    "responses", records=_rows(size),
                    columns=["id", "created_at", "last_access", "conversation", "response", "transcript",
                             "input_items", "parent_id", "bytes", "history_bytes", "owner"])
                await conn.execute("ALTER TABLE responses ENABLE TRIGGER USER")
                await conn.execute("DELETE FROM store_usage")
                await conn.execute("INSERT INTO store_usage SELECT coalesce(sum(bytes), 0) FROM responses")
                if await conn.fetchval("SELECT to_regclass('owner_usage') IS NOT NULL"):  # schema version 10
                    await conn.execute("DELETE FROM owner_usage")
                    await conn.execute("INSERT INTO owner_usage SELECT owner, count(*), sum(bytes) FROM responses"
                                       " GROUP BY owner")
                await conn.execute(f"SELECT setval('responses_access', {size + 1})")
                await conn.execute("VACUUM ANALYZE")
            finally:
                await conn.close()
            print(f"  postgres {size:,}: built in {time.perf_counter() - started:.1f} s", flush=True)
        store = PostgresResponseStore(PostgresDatabase(url), 2 * size, max_bytes=max_bytes)
        started = time.perf_counter()
        await store.open()
        if time.perf_counter() - started > 1:  # a database of an older schema version, migrated
            print(f"  postgres {size:,}: opened in {time.perf_counter() - started:.1f} s (migrated)", flush=True)
        return store


# ---- the measures -----------------------------------------------------------------------------------

async def timed(operation: Callable[[int], Awaitable[object]], count: int) -> float:
    """Median wall time of `operation(i)` for i in range(count), in ms."""
    times = []
    for i in range(count):
        started = time.perf_counter()
        await operation(i)
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1000


async def store_figures(open_store: Callable[[int | None], Awaitable[ResponseStore]], size: int,
                        ops: int) -> dict[str, float]:
    figures: dict[str, float] = {}
    rng = random.Random(size)
    store = await open_store(None)
    try:
        figures["get"] = await timed(lambda i: store.get(f"resp_{rng.randrange(size):012d}"), ops)
        # a chain's last turn continued: its own id space above the filled rows (fresh each run)
        base = size + CHAIN * 10_000 + rng.randrange(10**6) * 1000

        async def continue_chain(i: int) -> None:
            parent = f"resp_{(rng.randrange(size // CHAIN) + 1) * CHAIN - 1:012d}"
            chain = await store.chain(parent, max_bytes=1 << 20)
            assert chain is not None and len(chain.records) == CHAIN, "the filled chain was not read whole"
            await store.put(_next_record(base + i, parent))

        figures["continue"] = await timed(continue_chain, ops)
        total = await store.size()
    finally:
        await store.close()
    store = await open_store(total - 1)  # every put now evicts under the byte bound
    try:
        before = await store.count()
        base += ops

        async def evicting_put(i: int) -> None:
            await store.put(_next_record(base + i, f"resp_{rng.randrange(size):012d}"))

        figures["evict"] = await timed(evicting_put, max(ops // 4, 20))
        after = await store.count()
        assert after <= before, f"the byte bound evicted nothing ({before} -> {after})"
    finally:
        await store.close()
    return figures


async def run_store(args: argparse.Namespace) -> None:
    cache = Path(args.cache)
    cache.mkdir(parents=True, exist_ok=True)
    for backend in args.backend:
        postgres = Postgres(cache) if backend == "postgres" else None
        if postgres is not None:
            postgres.start()
        try:
            rows = []
            for size in args.sizes:
                async def opener(max_bytes: int | None, size: int = size,
                                 pg: Postgres | None = postgres) -> ResponseStore:
                    if pg is not None:
                        return await pg.store(size, max_bytes)
                    return await sqlite_store(cache, size, max_bytes)
                figures = await store_figures(opener, size, args.ops)
                rows.append((size, figures))
                print(f"  {backend} {size:>9,}: " + ", ".join(f"{k} {v:.3f} ms" for k, v in figures.items()),
                      flush=True)
            _table(f"{backend}: median ms per operation", rows)
        finally:
            if postgres is not None:
                postgres.stop()


def _table(title: str, rows: list[tuple[int, dict[str, float]]]) -> None:
    names = list(rows[0][1])
    print(f"\n{title}\n| size | " + " | ".join(names) + " |")
    print("|---|" + "---|" * len(names))
    for size, figures in rows:
        print(f"| {size:,} | " + " | ".join(f"{figures[n]:.3f}" for n in names) + " |")
    first, last = rows[0][1], rows[-1][1]
    print("| largest/smallest | " + " | ".join(f"{last[n] / first[n]:.2f}x" for n in names) + " |\n", flush=True)


async def run_keys(args: argparse.Namespace) -> None:
    from gateway.http.auth import authenticate
    from gateway.keys.ring import KeyRing
    from gateway.store.keys import key_hash
    from gateway.store.sqlite.keys import SQLiteKeyStore

    rows = []
    for size in args.sizes:
        with tempfile.TemporaryDirectory(prefix="agent-gateway-scale-") as folder:
            path = Path(folder) / "responses.db"
            keys = SQLiteKeyStore(path, "default")
            await keys.open()  # the schema
            now = int(time.time())
            presented = [f"sk-bench-{n:08d}-{'x' * 24}" for n in range(size)]
            with contextlib.closing(sqlite3.connect(path)) as db, db:
                db.executemany("INSERT INTO api_keys (profile, name, key_hash, created_at) VALUES (?, ?, ?, ?)",
                               [("default", f"key{n:05d}", key_hash(s), now) for n, s in enumerate(presented)])
            ring = KeyRing("default", None, keys)
            await ring.refresh()
            rng = random.Random(size)
            picks = [rng.choice(presented) for _ in range(20_000)]
            for secret in picks:  # each key's first request since a refresh makes its usage entry: not timed
                authenticate(ring, secret, False)
            started = time.perf_counter()
            for secret in picks:
                authenticate(ring, secret, False)
            auth_us = (time.perf_counter() - started) / len(picks) * 1e6
            refresh_ms = await timed(lambda i, ring=ring: ring.refresh(), 20)  # type: ignore[misc]
            await keys.close()
        rows.append((size, {"authenticate us": auth_us, "refresh ms": refresh_ms}))
        print(f"  {size:>6,} keys: authenticate {auth_us:.2f} us, refresh {refresh_ms:.2f} ms", flush=True)
    _table("keys", rows)


async def run_routes(args: argparse.Namespace) -> None:
    from gateway.config.settings import load_settings
    from gateway.upstream.client import UpstreamClient
    from gateway.upstream.routes import RouteTable

    rows = []
    for size in args.sizes:
        with tempfile.TemporaryDirectory(prefix="agent-gateway-scale-") as folder:
            ids = [f"model-{n:03d}" for n in range(size)]
            settings = load_settings(Path(folder), environ={"LLM_MODELS": ",".join(ids), "LLM_MODEL": ids[0]})
            client = UpstreamClient(settings.llm_base_url, api_key=None, model=None, connect_timeout=1,
                                    read_timeout=1)
            table = RouteTable(settings, client)
            rng = random.Random(size)
            picks = [rng.choice(ids) for _ in range(50_000)]
            started = time.perf_counter()
            for model in picks:
                await table.find(model)
            find_us = (time.perf_counter() - started) / len(picks) * 1e6
            started = time.perf_counter()
            for _ in range(200):
                table.listing(0)
            listing_us = (time.perf_counter() - started) / 200 * 1e6
        rows.append((size, {"find us": find_us, "listing us": listing_us}))
        print(f"  {size:>4} routes: find {find_us:.2f} us, listing {listing_us:.1f} us", flush=True)
    _table("routes (the listing is /v1/models: one card per route, linear by design)", rows)


def run_plan(args: argparse.Namespace) -> None:
    """SQLite's plan of each store query that names an owner, on the largest filled file."""
    from gateway.store.sqlite import space, store

    files = sorted(Path(args.cache).glob("sqlite-*.db"), key=lambda p: int(p.stem.split("-")[1]))
    if not files:
        raise SystemExit("no filled store in --cache: run `store` first")
    queries = {"over cap (each put)": (store._EVICT_RESPONSES, (OWNER, 10)),
               "oldest (byte bound)": (space._OLDEST, (OWNER, 64)),
               "owner sizes (byte bound)": (space._OWNER_SIZES, ("default/",)),
               "chain": (store._CHAIN, ("resp_000000000009", 1 << 20))}
    with contextlib.closing(sqlite3.connect(files[-1])) as db:
        for name, (sql, params) in queries.items():
            print(f"{name}:")
            for row in db.execute("EXPLAIN QUERY PLAN " + sql, params):
                print("   ", row[3])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=("store", "keys", "routes", "plan"))
    parser.add_argument("--sizes", type=int, nargs="*")
    parser.add_argument("--backend", nargs="*", default=["sqlite", "postgres"], choices=("sqlite", "postgres"))
    parser.add_argument("--cache", default=str(Path(tempfile.gettempdir()) / "agent-gateway-scale"),
                        help="where filled stores are kept and reused")
    parser.add_argument("--ops", type=int, default=200, help="operations timed per figure")
    args = parser.parse_args()
    defaults = {"store": [1000, 100_000, 1_000_000], "keys": [10, 1000, 10_000], "routes": [1, 10, 100]}
    args.sizes = args.sizes or defaults.get(args.what, [])
    if args.what == "plan":
        run_plan(args)
        return 0
    runner = {"store": run_store, "keys": run_keys, "routes": run_routes}[args.what]
    asyncio.run(runner(args))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
