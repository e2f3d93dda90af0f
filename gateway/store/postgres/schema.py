"""The PostgreSQL backend's schema, as ordered migration steps (applied by database.py under
MIGRATION_LOCK): step n takes a database from version n-1 to n, in place, and a new database runs
them all. Each step means what SQLite's step of the same number means (store/sqlite/schema.py). A
step's `$1` is the owner of rows made before owners (version 4).
"""

from __future__ import annotations

from gateway.store.keys import KEY_TABLES, KEY_TABLES_7, KEY_USAGE_DAYS
from gateway.store.postgres.limit_tables import LIMIT_TABLES

#: The schema this gateway writes. Each step migrates from the version before it; a database at a
#: higher version than this was written by a newer gateway, which this one refuses to run against.
SCHEMA_VERSION = 10
MIGRATIONS: dict[int, tuple[str, ...]] = {
    1: (
        # last_access: a cluster-wide sequence, so replicas agree on "least recently used"
        "CREATE SEQUENCE IF NOT EXISTS responses_access",
        """CREATE TABLE IF NOT EXISTS responses (
            id TEXT PRIMARY KEY,
            created_at BIGINT NOT NULL,
            last_access BIGINT NOT NULL,
            conversation TEXT,
            response TEXT NOT NULL,
            transcript TEXT NOT NULL,
            input_items TEXT NOT NULL
        )""",
        "CREATE INDEX IF NOT EXISTS responses_by_last_access ON responses (last_access, id)",
        # a name whose head is deleted or evicted starts fresh: the cascade ends it
        """CREATE TABLE IF NOT EXISTS conversations (
            name TEXT PRIMARY KEY,
            response_id TEXT NOT NULL REFERENCES responses (id) ON DELETE CASCADE
        )""",
        "CREATE INDEX IF NOT EXISTS conversations_by_response ON conversations (response_id)",
        """CREATE TABLE IF NOT EXISTS idempotency (
            key TEXT PRIMARY KEY,
            fingerprint TEXT NOT NULL,
            status INTEGER,
            body BYTEA,
            headers TEXT,
            expires_at TIMESTAMPTZ NOT NULL
        )""",
        "CREATE INDEX IF NOT EXISTS idempotency_by_expiry ON idempotency (expires_at)",
    ),
    # the Conversations API's objects (store/postgres/conversations.py); not LRU-bounded, and apart from
    # `responses`: deleting a conversation keeps the responses made in it
    2: (
        """CREATE TABLE IF NOT EXISTS conversation_objects (
            id TEXT PRIMARY KEY,
            created_at BIGINT NOT NULL,
            metadata TEXT NOT NULL
        )""",
        """CREATE TABLE IF NOT EXISTS conversation_items (
            conversation_id TEXT NOT NULL REFERENCES conversation_objects (id) ON DELETE CASCADE,
            position BIGINT NOT NULL,
            id TEXT NOT NULL,
            item TEXT NOT NULL,
            model TEXT,
            PRIMARY KEY (conversation_id, id)
        )""",
        "CREATE UNIQUE INDEX IF NOT EXISTS conversation_items_by_position"
        " ON conversation_items (conversation_id, position)",
    ),
    # Per-turn records and byte sizes, as SQLite's version 3 (store/sqlite/schema.py): a response
    # keeps its own turn and its parent's id; each row its size (`bytes`, octets of its JSON
    # columns). `store_usage` holds size changes, one row each, written by a trigger, whose sum is
    # the store's size: inserts only, so writers never wait on one hot counter row (which would
    # tie every append to every put); the writer holding WRITE_LOCK folds them into one row. A
    # version-2 row keeps its whole transcript and no parent: the start of its chain. Space freed
    # by deletes and evictions is reclaimed by PostgreSQL's autovacuum, for reuse by new rows.
    3: (
        "ALTER TABLE responses ADD COLUMN IF NOT EXISTS parent_id TEXT",
        "ALTER TABLE responses ADD COLUMN IF NOT EXISTS bytes BIGINT NOT NULL DEFAULT 0",
        "ALTER TABLE responses ADD COLUMN IF NOT EXISTS history_bytes BIGINT NOT NULL DEFAULT 0",
        "UPDATE responses SET bytes = octet_length(response) + octet_length(transcript)"
        " + octet_length(input_items), history_bytes = octet_length(transcript)",
        "ALTER TABLE conversation_objects ADD COLUMN IF NOT EXISTS last_access BIGINT NOT NULL DEFAULT 0",
        "ALTER TABLE conversation_objects ADD COLUMN IF NOT EXISTS bytes BIGINT NOT NULL DEFAULT 0",
        "UPDATE conversation_objects SET last_access = nextval('responses_access'), bytes = octet_length(metadata)",
        "ALTER TABLE conversation_items ADD COLUMN IF NOT EXISTS bytes BIGINT NOT NULL DEFAULT 0",
        "UPDATE conversation_items SET bytes = octet_length(item) + coalesce(octet_length(model), 0)",
        "CREATE INDEX IF NOT EXISTS conversation_items_sizes ON conversation_items (conversation_id, position)"
        " INCLUDE (bytes)",
        "CREATE INDEX IF NOT EXISTS conversation_objects_by_last_access ON conversation_objects (last_access, id)",
        "CREATE TABLE IF NOT EXISTS store_usage (bytes BIGINT NOT NULL)",
        "INSERT INTO store_usage SELECT (SELECT coalesce(sum(bytes), 0) FROM responses)"
        " + (SELECT coalesce(sum(bytes), 0) FROM conversation_objects)"
        " + (SELECT coalesce(sum(bytes), 0) FROM conversation_items)",
        """CREATE OR REPLACE FUNCTION agent_gateway_store_usage() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            IF TG_OP = 'INSERT' THEN
                INSERT INTO store_usage VALUES (NEW.bytes);
            ELSIF TG_OP = 'DELETE' THEN
                INSERT INTO store_usage VALUES (-OLD.bytes);
            ELSIF NEW.bytes <> OLD.bytes THEN
                INSERT INTO store_usage VALUES (NEW.bytes - OLD.bytes);
            END IF;
            RETURN NULL;
        END $$""",
        *(f"CREATE TRIGGER {table}_usage AFTER INSERT OR UPDATE OR DELETE ON {table}"
          " FOR EACH ROW EXECUTE FUNCTION agent_gateway_store_usage()"
          for table in ("responses", "conversation_objects", "conversation_items")),
    ),
    # Owners and keys, as SQLite's version 4 (store/sqlite/schema.py). $1 is the owner of the rows
    # already there: the `default` key of the profile that migrates first (before owners, profiles
    # sharing one database shared everything, so no row can be told apart).
    4: (
        "ALTER TABLE responses ADD COLUMN IF NOT EXISTS owner TEXT NOT NULL DEFAULT ''",
        "UPDATE responses SET owner = $1::text",
        "UPDATE responses SET conversation = owner || ':' || conversation WHERE conversation IS NOT NULL",
        "UPDATE conversations SET name = $1::text || ':' || name",
        "ALTER TABLE conversation_objects ADD COLUMN IF NOT EXISTS owner TEXT NOT NULL DEFAULT ''",
        "UPDATE conversation_objects SET owner = $1::text",
        "CREATE INDEX IF NOT EXISTS responses_by_owner ON responses (owner) INCLUDE (bytes)",
        "CREATE INDEX IF NOT EXISTS conversation_objects_by_owner ON conversation_objects (owner)",
        *KEY_TABLES,
    ),
    # Background runs (store/postgres/runs.py), as SQLite's version 5: times on the database's clock
    # (timestamptz, clock_timestamp()), so replicas whose clocks disagree agree on every lease;
    # a run's events go with it (the cascade).
    5: (
        """CREATE TABLE IF NOT EXISTS background_runs (
            response_id TEXT PRIMARY KEY,
            owner TEXT NOT NULL,
            status TEXT NOT NULL CHECK (status IN
                ('queued', 'in_progress', 'completed', 'incomplete', 'failed', 'cancelled')),
            replica TEXT NOT NULL DEFAULT '',
            lease_until TIMESTAMPTZ,
            cancel_requested BOOLEAN NOT NULL DEFAULT false,
            request BYTEA NOT NULL,
            created_at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp(),
            ended_at TIMESTAMPTZ,
            last_seq BIGINT NOT NULL DEFAULT -1
        )""",
        "CREATE INDEX IF NOT EXISTS background_runs_queued ON background_runs (created_at, response_id)"
        " WHERE status = 'queued'",
        "CREATE INDEX IF NOT EXISTS background_runs_leased ON background_runs (lease_until)"
        " WHERE status = 'in_progress'",
        "CREATE INDEX IF NOT EXISTS background_runs_ended ON background_runs (ended_at) WHERE ended_at IS NOT NULL",
        """CREATE TABLE IF NOT EXISTS background_events (
            response_id TEXT NOT NULL REFERENCES background_runs (response_id) ON DELETE CASCADE,
            seq BIGINT NOT NULL,
            frame BYTEA NOT NULL,
            PRIMARY KEY (response_id, seq)
        )""",
    ),
    # As SQLite's version 6: a run's events count in the store's bytes (a generated size column, so
    # the size trigger of version 3 serves them too), and a response deleted or evicted takes its run
    # and events with it.
    6: (
        "ALTER TABLE background_events ADD COLUMN IF NOT EXISTS bytes BIGINT"
        " GENERATED ALWAYS AS (octet_length(frame)) STORED",
        "INSERT INTO store_usage SELECT coalesce(sum(bytes), 0) FROM background_events",
        "CREATE TRIGGER background_events_usage AFTER INSERT OR UPDATE OR DELETE ON background_events"
        " FOR EACH ROW EXECUTE FUNCTION agent_gateway_store_usage()",
        """CREATE OR REPLACE FUNCTION agent_gateway_response_runs() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            DELETE FROM background_runs WHERE response_id = OLD.id;
            RETURN NULL;
        END $$""",
        "CREATE TRIGGER responses_take_their_runs AFTER DELETE ON responses"
        " FOR EACH ROW EXECUTE FUNCTION agent_gateway_response_runs()",
    ),
    # Token limits on keys and the budgets' counters, as SQLite's version 7 (store/keys.py); the
    # limits every replica shares: the sliding minute, the runs' slots and one admission function
    # (store/postgres/limits.py).
    7: (*KEY_TABLES_7, *LIMIT_TABLES),
    # As SQLite's version 8: per-key access and admins, two more counters, usage by day (issue 46)
    8: (
        "ALTER TABLE api_keys ADD COLUMN IF NOT EXISTS admin BOOLEAN NOT NULL DEFAULT false",
        "ALTER TABLE api_keys ADD COLUMN IF NOT EXISTS models TEXT",
        "ALTER TABLE api_keys ADD COLUMN IF NOT EXISTS mcp TEXT",
        "ALTER TABLE api_keys ADD COLUMN IF NOT EXISTS web BOOLEAN NOT NULL DEFAULT true",
        "ALTER TABLE key_usage ADD COLUMN IF NOT EXISTS requests BIGINT NOT NULL DEFAULT 0",
        "ALTER TABLE key_usage ADD COLUMN IF NOT EXISTS mcp_calls BIGINT NOT NULL DEFAULT 0",
        *KEY_USAGE_DAYS,
    ),
    # Uploaded files, as SQLite's version 9 (store/postgres/files.py): `bytes` counted by the size
    # trigger of version 3; the data kept out of line uncompressed (EXTERNAL: uploads are mostly PDFs
    # and images, already compressed, so trying again costs CPU for nothing).
    9: (
        """CREATE TABLE IF NOT EXISTS files (
            id TEXT PRIMARY KEY,
            owner TEXT NOT NULL,
            created_at BIGINT NOT NULL,
            last_access BIGINT NOT NULL,
            seq BIGINT NOT NULL,
            filename TEXT NOT NULL,
            purpose TEXT NOT NULL,
            media_type TEXT NOT NULL,
            size BIGINT NOT NULL,
            bytes BIGINT NOT NULL,
            text TEXT,
            note TEXT,
            data BYTEA NOT NULL
        )""",
        "ALTER TABLE files ALTER COLUMN data SET STORAGE EXTERNAL",
        "CREATE INDEX IF NOT EXISTS files_by_owner ON files (owner, seq)",
        "CREATE INDEX IF NOT EXISTS files_by_last_access ON files (owner, last_access, id) INCLUDE (bytes)",
        "CREATE TRIGGER files_usage AFTER INSERT OR UPDATE OR DELETE ON files"
        " FOR EACH ROW EXECUTE FUNCTION agent_gateway_store_usage()",
    ),
    # As SQLite's version 10 (store/sqlite/schema.py: owner_usage, the (owner, last_access, id) index,
    # key_changes). As `store_usage`, `owner_usage` holds changes, one row each (inserts only: no
    # writer waits on an owner's row), folded to one row per owner by the writer holding WRITE_LOCK.
    10: (
        """CREATE TABLE IF NOT EXISTS owner_usage (
            owner TEXT NOT NULL,
            responses BIGINT NOT NULL,
            bytes BIGINT NOT NULL
        )""",
        "CREATE INDEX IF NOT EXISTS owner_usage_by_owner ON owner_usage (owner)",
        "INSERT INTO owner_usage SELECT owner, count(*), coalesce(sum(bytes), 0) FROM responses GROUP BY owner",
        """CREATE OR REPLACE FUNCTION agent_gateway_owner_usage() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            IF TG_OP = 'INSERT' THEN
                INSERT INTO owner_usage VALUES (NEW.owner, 1, NEW.bytes);
            ELSIF TG_OP = 'DELETE' THEN
                INSERT INTO owner_usage VALUES (OLD.owner, -1, -OLD.bytes);
            ELSIF NEW.bytes <> OLD.bytes THEN
                INSERT INTO owner_usage VALUES (NEW.owner, 0, NEW.bytes - OLD.bytes);
            END IF;
            RETURN NULL;
        END $$""",
        # a record keeps its owner (the upsert's WHERE), so only its size can change
        "CREATE TRIGGER responses_owner_usage AFTER INSERT OR DELETE OR UPDATE OF bytes ON responses"
        " FOR EACH ROW EXECUTE FUNCTION agent_gateway_owner_usage()",
        "CREATE INDEX IF NOT EXISTS responses_by_owner_access ON responses (owner, last_access, id)",
        "CREATE INDEX IF NOT EXISTS conversation_objects_by_owner_access"
        " ON conversation_objects (owner, last_access, id)",
        "DROP INDEX IF EXISTS responses_by_owner",
        "CREATE TABLE IF NOT EXISTS key_changes (profile TEXT PRIMARY KEY, version BIGINT NOT NULL)",
        """CREATE OR REPLACE FUNCTION agent_gateway_key_changes() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            INSERT INTO key_changes VALUES (CASE WHEN TG_OP = 'DELETE' THEN OLD.profile ELSE NEW.profile END, 1)
            ON CONFLICT (profile) DO UPDATE SET version = key_changes.version + 1;
            RETURN NULL;
        END $$""",
        "CREATE TRIGGER api_keys_changed AFTER INSERT OR UPDATE OR DELETE ON api_keys"
        " FOR EACH ROW EXECUTE FUNCTION agent_gateway_key_changes()",
    ),
}
