"""The SQLite backend's schema, as ordered migration steps: step n takes a file from version n-1
to n, in place, and a fresh file runs them all. A later version adds its step at the end.

Version 3 (per-turn records, byte sizes): a response keeps its own turn and its parent's id
(`parent_id`); every row keeps its size (`bytes`: its JSON columns' length, which is their byte
length, the JSON being ASCII) and triggers keep the sum in `store_usage`, so the byte bound is one
read; `history_bytes` is the size of a turn's messages (what `chain` spends its budget on), and a
covering index lets a conversation's tail be measured without reading its items. A version-2 row
keeps its whole transcript and gets no parent: it reads as the start of its chain.

Version 4 (owners): responses and conversation objects carry their owner (store/owners.py), named
conversations are kept under the owner-scoped name, and the keys and their usage have tables
(store/keys.py); rows already there belong to the migrating profile's `default` key.

Version 5 (background runs, store/runs.py): `background_runs` (a run's status, holder, lease,
cancel mark, request and last event number; times in seconds since the epoch on this host's clock)
and `background_events` (its SSE frames by sequence number, dropped with their run by a trigger).
Partial indexes cover what `claim` (queued, oldest first), `expire` (running, by lease) and
`purge_finished` (ended, by end time) scan.

Version 6 (issue 42): a background run's events count in `store_usage` (triggers on their frames'
length) and a response deleted or evicted takes its run and events with it.

Version 7 (issue 46): a key's `tpm`, `token_budget` and `budget_period`, and `key_budgets`, the
tokens each key used per budget period.

Version 8 (issue 46): each key's access (`models`, `mcp`: JSON lists, null for all; `web`) and
`admin` flag, the `requests` and `mcp_calls` counters, and `key_usage_days` (store/keys.py).

Version 9 (issue 47): uploaded files (`files`, store/sqlite/files.py) with their cached text; their
bytes count in `store_usage` like a response's.

Version 10 (issue 49, flat as the data grows): `owner_usage` keeps each owner's stored responses
and their bytes (triggers on `responses`, as `store_usage` keeps the total), so the count bound of a
put and the byte bound's per-owner sizes read one row per owner instead of counting or summing the
owner's rows; an (owner, last_access, id) index on responses and conversation objects hands the
byte bound an owner's least recently used in order, without sorting all of its rows (bench/scale.py
measured a put at 100k stored responses 5x, and an evicting put 40x, slower than at 1k before it).
It replaces the (owner, bytes) index, whose sums `owner_usage` now keeps. `key_changes` holds a
version per profile that the key table's triggers bump, so the key ring's refresh every 2 s reads
one row, not every key, when none changed.

Space: the file uses `auto_vacuum = INCREMENTAL` (a new file from its first page; an older one is
switched by a VACUUM once, when it is opened by this version), so the store can hand freed pages
back to the file system (`PRAGMA incremental_vacuum`, sqlite.py) and the file shrinks.
"""

from __future__ import annotations

import logging
from pathlib import Path

import aiosqlite

from gateway.store.api import SchemaVersionError
from gateway.store.keys import KEY_TABLES, KEY_TABLES_7, KEY_USAGE_DAYS

log = logging.getLogger("agent_gateway.store")

SCHEMA_VERSION = 10

_USAGE_TRIGGERS = tuple(
    f"""CREATE TRIGGER IF NOT EXISTS {table}_usage_{event.split()[0].lower()} AFTER {event} ON {table}
    BEGIN UPDATE store_usage SET bytes = bytes {change}; END"""
    for table in ("responses", "conversation_objects", "conversation_items")
    for event, change in (("INSERT", "+ new.bytes"), ("DELETE", "- old.bytes"),
                          ("UPDATE OF bytes", "- old.bytes + new.bytes"))
)

STEPS: dict[int, tuple[str, ...]] = {
    1: (
        """CREATE TABLE IF NOT EXISTS responses (
            id TEXT PRIMARY KEY,
            created_at INTEGER NOT NULL,
            last_access INTEGER NOT NULL,
            conversation TEXT,
            response TEXT NOT NULL,
            transcript TEXT NOT NULL,
            input_items TEXT NOT NULL
        )""",
        "CREATE INDEX IF NOT EXISTS responses_by_last_access ON responses (last_access)",
        """CREATE TABLE IF NOT EXISTS conversations (
            name TEXT PRIMARY KEY,
            response_id TEXT NOT NULL
        )""",
        "CREATE INDEX IF NOT EXISTS conversations_by_response ON conversations (response_id)",
        # A name whose head is deleted or evicted starts fresh. A trigger rather than a statement per
        # delete: an eviction or a delete is then one statement, so one hand-over to aiosqlite's thread.
        """CREATE TRIGGER IF NOT EXISTS responses_end_their_conversations AFTER DELETE ON responses
        BEGIN DELETE FROM conversations WHERE response_id = old.id; END""",
    ),
    # the Conversations API's objects (sqlite/conversations.py)
    2: (
        """CREATE TABLE IF NOT EXISTS conversation_objects (
            id TEXT PRIMARY KEY,
            created_at INTEGER NOT NULL,
            metadata TEXT NOT NULL
        )""",
        """CREATE TABLE IF NOT EXISTS conversation_items (
            conversation_id TEXT NOT NULL,
            position INTEGER NOT NULL,
            id TEXT NOT NULL,
            item TEXT NOT NULL,
            model TEXT,
            PRIMARY KEY (conversation_id, id)
        )""",
        "CREATE UNIQUE INDEX IF NOT EXISTS conversation_items_in_order"
        " ON conversation_items (conversation_id, position)",
        # a trigger rather than a foreign key: SQLite enforces those only with a per-connection pragma
        """CREATE TRIGGER IF NOT EXISTS conversations_take_their_items AFTER DELETE ON conversation_objects
        BEGIN DELETE FROM conversation_items WHERE conversation_id = old.id; END""",
    ),
    # per-turn records and byte sizes (the module docstring)
    3: (
        "ALTER TABLE responses ADD COLUMN parent_id TEXT",
        "ALTER TABLE responses ADD COLUMN bytes INTEGER NOT NULL DEFAULT 0",
        "ALTER TABLE responses ADD COLUMN history_bytes INTEGER NOT NULL DEFAULT 0",
        "UPDATE responses SET bytes = length(response) + length(transcript) + length(input_items),"
        " history_bytes = length(transcript)",
        "ALTER TABLE conversation_objects ADD COLUMN last_access INTEGER NOT NULL DEFAULT 0",
        "ALTER TABLE conversation_objects ADD COLUMN bytes INTEGER NOT NULL DEFAULT 0",
        "UPDATE conversation_objects SET last_access = created_at * 1000000, bytes = length(metadata)",
        "ALTER TABLE conversation_items ADD COLUMN bytes INTEGER NOT NULL DEFAULT 0",
        "UPDATE conversation_items SET bytes = length(item) + coalesce(length(model), 0)",
        "CREATE INDEX IF NOT EXISTS conversation_items_sizes ON conversation_items (conversation_id, position, bytes)",
        "CREATE INDEX IF NOT EXISTS conversation_objects_by_last_access ON conversation_objects (last_access, id)",
        "CREATE TABLE IF NOT EXISTS store_usage (bytes INTEGER NOT NULL)",
        "INSERT INTO store_usage SELECT (SELECT coalesce(sum(bytes), 0) FROM responses)"
        " + (SELECT coalesce(sum(bytes), 0) FROM conversation_objects)"
        " + (SELECT coalesce(sum(bytes), 0) FROM conversation_items)",
        *_USAGE_TRIGGERS,
    ),
    # Owners and keys (store/owners.py, store/keys.py). `?` is the owner of the rows already there
    # (the migrating profile's `default` key): a store made before owners was one user's.
    4: (
        "ALTER TABLE responses ADD COLUMN owner TEXT NOT NULL DEFAULT ''",
        "UPDATE responses SET owner = ?",
        "UPDATE responses SET conversation = owner || ':' || conversation WHERE conversation IS NOT NULL",
        "UPDATE conversations SET name = ? || ':' || name",
        "ALTER TABLE conversation_objects ADD COLUMN owner TEXT NOT NULL DEFAULT ''",
        "UPDATE conversation_objects SET owner = ?",
        "CREATE INDEX IF NOT EXISTS responses_by_owner ON responses (owner, bytes)",
        "CREATE INDEX IF NOT EXISTS conversation_objects_by_owner ON conversation_objects (owner)",
        *KEY_TABLES,
    ),
    # background runs (store/sqlite/runs.py)
    5: (
        """CREATE TABLE IF NOT EXISTS background_runs (
            response_id TEXT PRIMARY KEY,
            owner TEXT NOT NULL,
            status TEXT NOT NULL CHECK (status IN
                ('queued', 'in_progress', 'completed', 'incomplete', 'failed', 'cancelled')),
            replica TEXT NOT NULL DEFAULT '',
            lease_until REAL,
            cancel_requested INTEGER NOT NULL DEFAULT 0,
            request BLOB NOT NULL,
            created_at REAL NOT NULL,
            ended_at REAL,
            last_seq INTEGER NOT NULL DEFAULT -1
        )""",
        "CREATE INDEX IF NOT EXISTS background_runs_queued ON background_runs (created_at) WHERE status = 'queued'",
        "CREATE INDEX IF NOT EXISTS background_runs_leased ON background_runs (lease_until)"
        " WHERE status = 'in_progress'",
        "CREATE INDEX IF NOT EXISTS background_runs_ended ON background_runs (ended_at) WHERE ended_at IS NOT NULL",
        """CREATE TABLE IF NOT EXISTS background_events (
            response_id TEXT NOT NULL,
            seq INTEGER NOT NULL,
            frame BLOB NOT NULL,
            PRIMARY KEY (response_id, seq)
        ) WITHOUT ROWID""",
        """CREATE TRIGGER IF NOT EXISTS background_runs_take_their_events AFTER DELETE ON background_runs
        BEGIN DELETE FROM background_events WHERE response_id = old.response_id; END""",
    ),
    # A background run's events count in the store's bytes and go with their response (deleted or
    # evicted): they are what a key stored as much as the response is (issue 42).
    6: (
        """CREATE TRIGGER IF NOT EXISTS background_events_usage_insert AFTER INSERT ON background_events
        BEGIN UPDATE store_usage SET bytes = bytes + length(new.frame); END""",
        """CREATE TRIGGER IF NOT EXISTS background_events_usage_delete AFTER DELETE ON background_events
        BEGIN UPDATE store_usage SET bytes = bytes - length(old.frame); END""",
        "UPDATE store_usage SET bytes = bytes + (SELECT coalesce(sum(length(frame)), 0) FROM background_events)",
        """CREATE TRIGGER IF NOT EXISTS responses_take_their_runs AFTER DELETE ON responses
        BEGIN DELETE FROM background_runs WHERE response_id = old.id; END""",
    ),
    # Token limits on keys (tpm, a budget per period) and the budgets' counters (issue 46). One
    # process counts the rest of its limits in memory, exactly (keys/limits.py); PostgreSQL's
    # version 7 adds the tables replicas share.
    7: KEY_TABLES_7,
    # Per-key access and admins, two more counters, usage by day (issue 46; store/keys.py)
    8: (
        "ALTER TABLE api_keys ADD COLUMN admin INTEGER NOT NULL DEFAULT 0",
        "ALTER TABLE api_keys ADD COLUMN models TEXT",
        "ALTER TABLE api_keys ADD COLUMN mcp TEXT",
        "ALTER TABLE api_keys ADD COLUMN web INTEGER NOT NULL DEFAULT 1",
        "ALTER TABLE key_usage ADD COLUMN requests BIGINT NOT NULL DEFAULT 0",
        "ALTER TABLE key_usage ADD COLUMN mcp_calls BIGINT NOT NULL DEFAULT 0",
        *KEY_USAGE_DAYS,
    ),
    # Uploaded files (store/sqlite/files.py, the Files API): the bytes last (a read of the metadata or
    # the cached text stops before them); `bytes` is what the file counts in the store's size, its
    # owner's stored bytes and the byte bound (store/files.py `stored_bytes`), kept by the usage triggers.
    9: (
        """CREATE TABLE IF NOT EXISTS files (
            id TEXT PRIMARY KEY,
            owner TEXT NOT NULL,
            created_at INTEGER NOT NULL,
            last_access INTEGER NOT NULL,
            seq INTEGER NOT NULL,
            filename TEXT NOT NULL,
            purpose TEXT NOT NULL,
            media_type TEXT NOT NULL,
            size INTEGER NOT NULL,
            bytes INTEGER NOT NULL,
            text TEXT,
            note TEXT,
            data BLOB NOT NULL
        )""",
        "CREATE INDEX IF NOT EXISTS files_by_owner ON files (owner, seq)",
        "CREATE INDEX IF NOT EXISTS files_by_last_access ON files (owner, last_access, id)",
        *(f"""CREATE TRIGGER IF NOT EXISTS files_usage_{event.split()[0].lower()} AFTER {event} ON files
        BEGIN UPDATE store_usage SET bytes = bytes {change}; END"""
          for event, change in (("INSERT", "+ new.bytes"), ("DELETE", "- old.bytes"),
                                ("UPDATE OF bytes", "- old.bytes + new.bytes"))),
    ),
    # Each owner's responses and bytes in one row, and owners' least recently used in index order
    # (the module docstring): what a put's bounds read stays the same size however many rows are stored.
    10: (
        """CREATE TABLE IF NOT EXISTS owner_usage (
            owner TEXT PRIMARY KEY,
            responses INTEGER NOT NULL,
            bytes INTEGER NOT NULL
        ) WITHOUT ROWID""",
        "INSERT INTO owner_usage SELECT owner, count(*), coalesce(sum(bytes), 0) FROM responses GROUP BY owner",
        """CREATE TRIGGER IF NOT EXISTS responses_owner_usage_insert AFTER INSERT ON responses
        BEGIN INSERT INTO owner_usage VALUES (new.owner, 1, new.bytes) ON CONFLICT (owner)
        DO UPDATE SET responses = responses + 1, bytes = bytes + excluded.bytes; END""",
        """CREATE TRIGGER IF NOT EXISTS responses_owner_usage_delete AFTER DELETE ON responses
        BEGIN UPDATE owner_usage SET responses = responses - 1, bytes = bytes - old.bytes
        WHERE owner = old.owner; END""",
        # a record keeps its owner (the upsert's WHERE), so only its size can change
        """CREATE TRIGGER IF NOT EXISTS responses_owner_usage_update AFTER UPDATE OF bytes ON responses
        BEGIN UPDATE owner_usage SET bytes = bytes - old.bytes + new.bytes WHERE owner = new.owner; END""",
        "CREATE INDEX IF NOT EXISTS responses_by_owner_access ON responses (owner, last_access, id)",
        "CREATE INDEX IF NOT EXISTS conversation_objects_by_owner_access"
        " ON conversation_objects (owner, last_access, id)",
        "DROP INDEX IF EXISTS responses_by_owner",
        # a profile's keys' version: the key ring reads its keys only when it moved (keys/ring.py)
        """CREATE TABLE IF NOT EXISTS key_changes (
            profile TEXT PRIMARY KEY,
            version INTEGER NOT NULL
        ) WITHOUT ROWID""",
        *(f"""CREATE TRIGGER IF NOT EXISTS api_keys_changed_{event.lower()} AFTER {event} ON api_keys
        BEGIN INSERT INTO key_changes VALUES ({row}.profile, 1) ON CONFLICT (profile)
        DO UPDATE SET version = version + 1; END"""
          for event, row in (("INSERT", "new"), ("UPDATE", "new"), ("DELETE", "old"))),
    ),
}


async def migrate(writer: aiosqlite.Connection, path: Path, legacy_owner: str) -> None:
    """Brings the file to SCHEMA_VERSION, step by step, in one write transaction (BEGIN IMMEDIATE:
    two processes opening one file migrate one at a time). Raises SchemaVersionError for a file of
    a newer version, sqlite3.Error for a fault."""
    # (a fresh file got `auto_vacuum = INCREMENTAL` before its first page, when it was opened;
    # an older one takes the VACUUM below)
    await writer.execute("BEGIN IMMEDIATE")
    try:
        await writer.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
        found = list(await writer.execute_fetchall("SELECT max(version) FROM schema_version"))
        current = int(found[0][0]) if found and found[0][0] is not None else 0
        if current > SCHEMA_VERSION:
            raise SchemaVersionError(
                f"the response store at {path} has schema version {current}, newer than "
                f"version {SCHEMA_VERSION} that this gateway knows: upgrade the gateway")
        for version in range(current + 1, SCHEMA_VERSION + 1):
            for statement in STEPS[version]:
                await writer.execute(statement, (legacy_owner,) if "?" in statement else ())
        if current < SCHEMA_VERSION:
            await writer.execute("DELETE FROM schema_version")
            await writer.execute("INSERT INTO schema_version (version) VALUES (?)", (SCHEMA_VERSION,))
        await writer.commit()
    except BaseException:
        await writer.rollback()
        raise
    mode = list(await writer.execute_fetchall("PRAGMA auto_vacuum"))
    if int(mode[0][0]) != 2:  # a file made before version 3: switched once, which rewrites it
        log.info("the response store at %s is being compacted once (VACUUM) to reclaim space from now on", path)
        await writer.executescript("PRAGMA auto_vacuum = INCREMENTAL; VACUUM;")
