"""Schema v7's shared limits (store/postgres/limits.py): the sliding minute, the runs' slots and
the admission function. Apart from limits.py, which uses the database: the migrations import this."""

#: the first half of the key lock's pair (pg_advisory_xact_lock(int, int)): apart from the
#: single-number locks of postgres/database.py, which live in another space
KEY_LOCK_SPACE = 0x6167_7704

LIMIT_TABLES = (
    # the sliding minute: a row per admitted request of a key with rpm or tpm (`requests` 0: tokens
    # of a queued run counted when it ran)
    """CREATE TABLE IF NOT EXISTS key_admissions (
        id BIGSERIAL PRIMARY KEY,
        profile TEXT NOT NULL,
        name TEXT NOT NULL,
        at DOUBLE PRECISION NOT NULL,
        requests INTEGER NOT NULL,
        tokens BIGINT NOT NULL
    )""",
    "CREATE INDEX IF NOT EXISTS key_admissions_by_key ON key_admissions (profile, name, at)",
    """CREATE TABLE IF NOT EXISTS key_runs (
        run_id TEXT PRIMARY KEY,
        profile TEXT NOT NULL,
        name TEXT NOT NULL,
        replica TEXT NOT NULL,
        lease_until DOUBLE PRECISION NOT NULL
    )""",
    "CREATE INDEX IF NOT EXISTS key_runs_by_key ON key_runs (profile, name)",
    f"""CREATE OR REPLACE FUNCTION agent_gateway_admit(
        p_profile TEXT, p_name TEXT, p_rpm BIGINT, p_max_runs BIGINT, p_run_id TEXT, p_replica TEXT,
        p_lease DOUBLE PRECISION, p_force BOOLEAN, p_tpm BIGINT, p_budget BIGINT, p_period BIGINT, p_tokens BIGINT)
    RETURNS TABLE (o_refused TEXT, o_admission BIGINT, o_requests BIGINT, o_requests_reset DOUBLE PRECISION,
                   o_tokens BIGINT, o_tokens_reset DOUBLE PRECISION, o_budget BIGINT, o_runs BIGINT,
                   o_retry DOUBLE PRECISION)
    LANGUAGE plpgsql AS $$
    DECLARE
        now_ DOUBLE PRECISION;
        oldest DOUBLE PRECISION;
        oldest_tokens DOUBLE PRECISION;
    BEGIN
        -- counts, not records: a crash may lose the last moment's admissions, so the commit need not
        -- wait for the disk (the lock is held until it ends)
        PERFORM set_config('synchronous_commit', 'off', true);
        PERFORM pg_advisory_xact_lock({KEY_LOCK_SPACE}, hashtext(p_profile || '/' || p_name));
        now_ := extract(epoch FROM clock_timestamp());  -- after the wait: the lock holder's time
        o_requests := 0; o_tokens := 0; o_requests_reset := 0; o_tokens_reset := 0; o_budget := 0;
        o_runs := 0; o_retry := 1;
        IF p_rpm IS NOT NULL OR p_tpm IS NOT NULL THEN
            DELETE FROM key_admissions a WHERE a.profile = p_profile AND a.name = p_name AND a.at <= now_ - 60;
            SELECT count(*) FILTER (WHERE a.requests > 0), coalesce(sum(a.tokens), 0),
                   min(a.at) FILTER (WHERE a.requests > 0), min(a.at)
              INTO o_requests, o_tokens, oldest, oldest_tokens
              FROM key_admissions a WHERE a.profile = p_profile AND a.name = p_name;
            o_requests_reset := coalesce(oldest + 60 - now_, 0);
            o_tokens_reset := coalesce(oldest_tokens + 60 - now_, 0);
            IF p_rpm IS NOT NULL AND o_requests >= p_rpm THEN
                o_refused := 'requests';
                o_retry := o_requests_reset;
                RETURN NEXT;
                RETURN;
            END IF;
        END IF;
        IF p_max_runs IS NOT NULL THEN
            DELETE FROM key_runs r WHERE r.profile = p_profile AND r.name = p_name AND r.lease_until < now_;
            SELECT count(*) INTO o_runs FROM key_runs r WHERE r.profile = p_profile AND r.name = p_name;
            IF o_runs >= p_max_runs AND NOT p_force THEN
                o_refused := 'runs';
                RETURN NEXT;
                RETURN;
            END IF;
        END IF;
        IF p_budget IS NOT NULL THEN
            SELECT coalesce(max(b.tokens), 0) INTO o_budget FROM key_budgets b
              WHERE b.profile = p_profile AND b.name = p_name AND b.period_start = p_period;
            IF o_budget >= p_budget AND NOT p_force THEN
                o_refused := 'budget';
                RETURN NEXT;
                RETURN;
            END IF;
        END IF;
        IF p_tpm IS NOT NULL AND o_tokens >= p_tpm AND NOT p_force THEN
            o_refused := 'tokens';
            -- when enough of the minute's tokens have left it to be under the limit again
            SELECT w.at + 60 - now_ INTO o_retry FROM (SELECT a.at, sum(a.tokens) OVER (ORDER BY a.at, a.id) AS freed
              FROM key_admissions a WHERE a.profile = p_profile AND a.name = p_name) w
              WHERE o_tokens - w.freed < p_tpm ORDER BY w.at LIMIT 1;
            RETURN NEXT;
            RETURN;
        END IF;
        IF p_rpm IS NOT NULL OR p_tpm IS NOT NULL THEN
            INSERT INTO key_admissions (profile, name, at, requests, tokens)
              VALUES (p_profile, p_name, now_, CASE WHEN p_force THEN 0 ELSE 1 END, p_tokens)
              RETURNING key_admissions.id INTO o_admission;
            IF NOT p_force THEN
                o_requests := o_requests + 1;
            END IF;
            o_tokens := o_tokens + p_tokens;
            o_requests_reset := coalesce(oldest + 60 - now_, 60);
            o_tokens_reset := coalesce(oldest_tokens + 60 - now_, 60);
        END IF;
        IF p_max_runs IS NOT NULL THEN
            INSERT INTO key_runs (run_id, profile, name, replica, lease_until)
              VALUES (p_run_id, p_profile, p_name, p_replica, now_ + p_lease);
            o_runs := o_runs + 1;
        END IF;
        IF p_budget IS NOT NULL THEN
            INSERT INTO key_budgets AS b (profile, name, period_start, tokens)
              VALUES (p_profile, p_name, p_period, p_tokens)
              ON CONFLICT (profile, name, period_start) DO UPDATE SET tokens = b.tokens + excluded.tokens;
            o_budget := o_budget + p_tokens;
        END IF;
        RETURN NEXT;
    END $$""",
    # stored bytes: each key's exact sum as a replica last measured it (its start on the database's
    # clock), and the bytes of each write checked since (key_store_puts), dropped once a later
    # measure holds them
    """CREATE TABLE IF NOT EXISTS key_store_room (
        profile TEXT NOT NULL,
        name TEXT NOT NULL,
        measured BIGINT NOT NULL,
        measured_at DOUBLE PRECISION NOT NULL,
        PRIMARY KEY (profile, name)
    )""",
    """CREATE TABLE IF NOT EXISTS key_store_puts (
        id BIGSERIAL PRIMARY KEY,
        profile TEXT NOT NULL,
        name TEXT NOT NULL,
        at DOUBLE PRECISION NOT NULL,
        bytes BIGINT NOT NULL
    )""",
    "CREATE INDEX IF NOT EXISTS key_store_puts_by_key ON key_store_puts (profile, name, at)",
    f"""CREATE OR REPLACE FUNCTION agent_gateway_room(
        p_profile TEXT, p_name TEXT, p_added BIGINT, p_limit BIGINT, p_grace DOUBLE PRECISION)
    RETURNS BIGINT LANGUAGE plpgsql AS $$
    DECLARE
        base BIGINT;
        since DOUBLE PRECISION;
        pending BIGINT;
    BEGIN
        PERFORM pg_advisory_xact_lock({KEY_LOCK_SPACE}, hashtext(p_profile || '/' || p_name));
        SELECT s.measured, s.measured_at INTO base, since FROM key_store_room s
          WHERE s.profile = p_profile AND s.name = p_name;
        -- a write checked within p_grace before the measure may not have been in it: counted twice
        -- for that long rather than not at all
        SELECT coalesce(sum(w.bytes), 0) INTO pending FROM key_store_puts w
          WHERE w.profile = p_profile AND w.name = p_name AND w.at >= coalesce(since, 0) - p_grace;
        IF coalesce(base, 0) + pending + p_added > p_limit THEN
            RETURN coalesce(base, 0) + pending;
        END IF;
        INSERT INTO key_store_puts (profile, name, at, bytes)
          VALUES (p_profile, p_name, extract(epoch FROM clock_timestamp()), p_added);
        RETURN NULL;
    END $$""",
)
