-- The archive as the disaster-recovery copy (README, Git archive and restore): decisions (every
-- version) and context revisions reach git with the sessions, and the archiver snapshots by itself
-- what nobody snapshotted. Three parts:
--
-- 1. decision_versions: every version of every decision as it was written (a decision row is
--    updated in place, so its earlier versions exist nowhere else). Kept by a trigger; read only by
--    archivers (and the owner), in the projects they read, private decisions included: the archive
--    is a copy of everything.
-- 2. sessions.memory_changes: a counter bumped by every change the archive must carry besides
--    messages (meta, title or agent, a decision version, a context revision), and the value each
--    snapshot saw (snapshots.memory_changes). The session row is locked by each bump and by
--    mm_snapshot, so "changed since the last snapshot" is exact, whatever the commit order.
-- 3. mm_auto_snapshot: the archiver's policy, run by the lease holder: a snapshot of every session it
--    reads that changed since its last snapshot and is idle (or has many unsnapshotted messages).
-- 4. The queue exports a session's snapshots in order, even when one of them is retried.
-- 5. mm_archive_metrics: the numbers of /metrics.

-- 1. Every version of a decision ------------------------------------------------------------------

CREATE TABLE decision_versions (
    session_id  text NOT NULL,
    decision_id text NOT NULL,
    version     integer NOT NULL,
    project_id  text NOT NULL,
    row         jsonb NOT NULL,
    recorded_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (session_id, decision_id, version)
);

ALTER TABLE sessions ADD COLUMN memory_changes bigint NOT NULL DEFAULT 0;
ALTER TABLE snapshots ADD COLUMN memory_changes bigint;

CREATE FUNCTION mm_bump_memory(p_session_id text) RETURNS void
LANGUAGE sql AS $$
    UPDATE sessions SET memory_changes = memory_changes + 1 WHERE session_id = p_session_id
$$;

CREATE FUNCTION mm_record_decision_version() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE' AND (pg_catalog.to_jsonb(OLD) - 'tsv'::text) = (pg_catalog.to_jsonb(NEW) - 'tsv'::text) THEN
        RETURN NULL;  -- only the search vector changed (a reindex): no new version, nothing to archive
    END IF;
    INSERT INTO decision_versions (session_id, decision_id, version, project_id, row)
    VALUES (NEW.session_id, NEW.decision_id, NEW.version, NEW.project_id, pg_catalog.to_jsonb(NEW) - 'tsv'::text)
    ON CONFLICT (session_id, decision_id, version) DO UPDATE SET row = excluded.row, recorded_at = excluded.recorded_at;
    PERFORM mm_bump_memory(NEW.session_id);
    RETURN NULL;
END $$;
CREATE TRIGGER decisions_versions AFTER INSERT OR UPDATE ON decisions
    FOR EACH ROW EXECUTE FUNCTION mm_record_decision_version();

CREATE FUNCTION mm_context_changed() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM mm_bump_memory(NEW.session_id);
    RETURN NULL;
END $$;
CREATE TRIGGER session_context_changed AFTER INSERT ON session_context
    FOR EACH ROW EXECUTE FUNCTION mm_context_changed();

CREATE FUNCTION mm_session_meta_changed() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.meta IS DISTINCT FROM OLD.meta OR NEW.title IS DISTINCT FROM OLD.title
       OR NEW.agent_source IS DISTINCT FROM OLD.agent_source THEN
        NEW.memory_changes := OLD.memory_changes + 1;
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER sessions_meta_changed BEFORE UPDATE ON sessions
    FOR EACH ROW EXECUTE FUNCTION mm_session_meta_changed();

-- What the session had when the snapshot was taken (mm_snapshot holds the session row).
CREATE FUNCTION mm_snapshot_memory() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    NEW.memory_changes := (SELECT s.memory_changes FROM sessions s WHERE s.session_id = NEW.session_id);
    RETURN NEW;
END $$;
CREATE TRIGGER snapshots_memory BEFORE INSERT ON snapshots
    FOR EACH ROW EXECUTE FUNCTION mm_snapshot_memory();

-- The decisions of today: their current version (earlier ones were not kept before this migration).
INSERT INTO decision_versions (session_id, decision_id, version, project_id, row)
SELECT d.session_id, d.decision_id, d.version, d.project_id, pg_catalog.to_jsonb(d) - 'tsv'::text FROM decisions d;
-- Snapshots taken before carried no decisions or context: a session that has some is changed since
-- (its next automatic snapshot archives them); one without is not (no snapshot wave after upgrading).
UPDATE snapshots SET memory_changes = 0;
UPDATE sessions s SET memory_changes = 1
WHERE EXISTS (SELECT 1 FROM decisions d WHERE d.session_id = s.session_id)
   OR EXISTS (SELECT 1 FROM session_context c WHERE c.session_id = s.session_id);

-- 2. Who reads the versions: archivers (the only group granted SELECT below) and the owner, in their
--    projects, private decisions included (the decisions table's own policy hides those).

ALTER TABLE decision_versions ENABLE ROW LEVEL SECURITY;
CREATE POLICY mm_read ON decision_versions FOR SELECT
    USING (project_id = ANY ((SELECT mm_token_projects(false))::text[])
           OR '*' = ANY ((SELECT mm_token_projects(false))::text[]));

-- 3. The automatic snapshot policy ---------------------------------------------------------------------

-- Snapshot (up to `p_limit`) sessions the caller reads that changed since their last snapshot (or
-- have none) and are idle for `p_idle_seconds`, or hold `p_every_messages` messages beyond their last
-- snapshot (0 or NULL: that rule is off). Only the lease holder runs it, so two archivers never
-- snapshot the same change twice. Returns the snapshots made; their export jobs are queued.
CREATE FUNCTION mm_auto_snapshot(p_idle_seconds float8, p_every_messages bigint, p_limit integer)
RETURNS TABLE (snapshot_id bigint, session_id text, up_to_seq bigint)
LANGUAGE plpgsql AS $$
DECLARE
    s sessions;
    snap snapshots;
    made integer := 0;
BEGIN
    PERFORM mm_require_archive_leader();
    IF p_limit IS NULL OR p_limit < 1 OR p_limit > 10000 THEN
        RAISE EXCEPTION 'limit must be between 1 and 10000' USING ERRCODE = 'MM400';
    END IF;
    FOR s IN
        SELECT x.* FROM sessions x
        LEFT JOIN LATERAL (SELECT n.up_to_seq, n.memory_changes FROM snapshots n
                           WHERE n.session_id = x.session_id ORDER BY n.snapshot_id DESC LIMIT 1) last ON true
        WHERE mm_may_read(x.project_id)
          AND (last.up_to_seq IS NULL OR x.last_seq > last.up_to_seq
               OR x.memory_changes > coalesce(last.memory_changes, -1))
          AND ((p_idle_seconds IS NOT NULL AND x.updated_at <= pg_catalog.now()
                                                               - pg_catalog.make_interval(secs => p_idle_seconds))
               OR (coalesce(p_every_messages, 0) > 0
                   AND x.last_seq - coalesce(last.up_to_seq, x.fork_seq, 0) >= p_every_messages))
        ORDER BY x.updated_at
        LIMIT p_limit
        FOR UPDATE OF x SKIP LOCKED
    LOOP
        INSERT INTO snapshots AS n (session_id, project_id, up_to_seq, commit_msg, meta, created_by)
        VALUES (s.session_id, s.project_id, s.last_seq, 'automatic snapshot', '{"auto": true}'::jsonb, mm_caller())
        RETURNING * INTO snap;
        INSERT INTO export_jobs (snapshot_id, session_id, project_id)
        VALUES (snap.snapshot_id, snap.session_id, snap.project_id);
        snapshot_id := snap.snapshot_id;
        session_id := snap.session_id;
        up_to_seq := snap.up_to_seq;
        made := made + 1;
        RETURN NEXT;
    END LOOP;
    IF made > 0 THEN
        PERFORM pg_catalog.pg_notify('mcp_memory_export'::text, ''::text);
    END IF;
END $$;

-- 4. A session's snapshots are exported in order --------------------------------------------------------

-- A job waits while an earlier job of its session waits for its retry (or is held by a live lease):
-- exporting snapshot N+1 first would put N+1's lines under N's tag once N is retried. An earlier
-- job that failed for good does not hold the later ones back (its retry builds N's exact tree).
CREATE OR REPLACE FUNCTION mm_archive_claim(p_worker text, p_lease float8, p_limit integer,
                                            p_due_before timestamptz)
RETURNS TABLE (job_id bigint, snapshot_id bigint, session_id text, attempts integer)
LANGUAGE plpgsql AS $$
DECLARE
    due timestamptz := least(pg_catalog.now(), p_due_before);
BEGIN
    PERFORM mm_require_archive_leader();
    IF p_limit IS NULL OR p_limit < 1 OR p_limit > 10000 THEN
        RAISE EXCEPTION 'limit must be between 1 and 10000' USING ERRCODE = 'MM400';
    END IF;
    RETURN QUERY
    WITH next AS (
        SELECT j.job_id FROM export_jobs j
        WHERE ((j.status = 'pending' AND j.run_after <= due)
               OR (j.status = 'running' AND j.lease_until < pg_catalog.now()))
          AND mm_may_read(j.project_id)
          AND NOT EXISTS (SELECT 1 FROM export_jobs e
                          WHERE e.session_id = j.session_id AND e.snapshot_id < j.snapshot_id
                            AND ((e.status = 'pending' AND e.run_after > due)
                                 OR (e.status = 'running' AND e.lease_until >= pg_catalog.now())))
        ORDER BY j.snapshot_id
        LIMIT p_limit
        FOR UPDATE SKIP LOCKED
    )
    UPDATE export_jobs j
    SET status = 'running', locked_by = pg_catalog."left"(p_worker, 200),
        lease_until = pg_catalog.now() + pg_catalog.make_interval(secs => greatest(p_lease, 1::float8))
    FROM next
    WHERE j.job_id = next.job_id
    RETURNING j.job_id, j.snapshot_id, j.session_id, j.attempts;
END $$;

-- Claimed jobs handed back untouched (no attempt counted): the later snapshots of a session whose
-- earlier snapshot just failed in the same batch; they follow it once it is exported.
CREATE FUNCTION mm_archive_unclaim(p_job_ids bigint[]) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    n integer;
BEGIN
    PERFORM mm_require_archive_leader();
    UPDATE export_jobs SET status = 'pending', locked_by = NULL, lease_until = NULL
    WHERE job_id = ANY (p_job_ids) AND status = 'running' AND mm_may_read(project_id);
    GET DIAGNOSTICS n = ROW_COUNT;
    RETURN n;
END $$;

-- 5. What /metrics shows of the archive: numbers only, no ids. The owner and the serve-http gateway
--    (which reads no table) see every project; an archiver sees its own.
CREATE FUNCTION mm_archive_metrics()
RETURNS TABLE (pending bigint, running bigint, done bigint, failed bigint, oldest_pending_seconds float8,
               unarchived_sessions bigint, unarchived_messages bigint, unarchived_oldest_seconds float8)
LANGUAGE plpgsql STABLE AS $$
DECLARE
    who text := mm_caller();
    everything boolean := mm_is_owner(who)
        OR (pg_catalog.to_regrole('mcp_memory_gateway') IS NOT NULL
            AND pg_catalog.pg_has_role(who::name, 'mcp_memory_gateway'::name, 'MEMBER'::text));
BEGIN
    SELECT pg_catalog.count(*) FILTER (WHERE j.status = 'pending'), pg_catalog.count(*) FILTER (WHERE j.status = 'running'),
           pg_catalog.count(*) FILTER (WHERE j.status = 'done'), pg_catalog.count(*) FILTER (WHERE j.status = 'failed'),
           coalesce(pg_catalog.max(EXTRACT(epoch FROM pg_catalog.now() - j.created_at)::float8)
                    FILTER (WHERE j.status IN ('pending', 'running')), 0)
      INTO pending, running, done, failed, oldest_pending_seconds
      FROM export_jobs j WHERE everything OR mm_may_read(j.project_id);
    SELECT pg_catalog.count(*), coalesce(pg_catalog.sum(greatest(x.last_seq - x.archived, 0)), 0)::bigint,
           coalesce(EXTRACT(epoch FROM pg_catalog.now() - pg_catalog.min(x.updated_at))::float8, 0)
      INTO unarchived_sessions, unarchived_messages, unarchived_oldest_seconds
      FROM (SELECT s.last_seq, s.updated_at, s.memory_changes,
                   coalesce(d.up_to_seq, s.fork_seq, 0) AS archived, d.memory_changes AS archived_changes,
                   d.up_to_seq IS NULL AS never
            FROM sessions s
            LEFT JOIN LATERAL (SELECT n.up_to_seq, n.memory_changes FROM snapshots n
                               JOIN export_jobs j ON j.snapshot_id = n.snapshot_id AND j.status = 'done'
                               WHERE n.session_id = s.session_id ORDER BY n.snapshot_id DESC LIMIT 1) d ON true
            WHERE everything OR mm_may_read(s.project_id)) x
     WHERE x.never OR x.last_seq > x.archived OR x.memory_changes > coalesce(x.archived_changes, -1);
    RETURN NEXT;
END $$;

DO $$
DECLARE
    f regprocedure;
BEGIN
    FOR f IN
        SELECT p.oid::regprocedure FROM pg_catalog.pg_proc p
        WHERE p.pronamespace = current_schema()::regnamespace
          AND p.proname IN ('mm_bump_memory', 'mm_record_decision_version', 'mm_context_changed',
                            'mm_session_meta_changed', 'mm_snapshot_memory', 'mm_auto_snapshot',
                            'mm_archive_claim', 'mm_archive_unclaim', 'mm_archive_metrics')
    LOOP
        EXECUTE format('REVOKE ALL ON FUNCTION %s FROM PUBLIC', f);
        EXECUTE format('ALTER FUNCTION %s SET search_path = pg_catalog, %I, pg_temp', f, current_schema());
    END LOOP;
    ALTER FUNCTION mm_auto_snapshot(float8, bigint, integer) SECURITY DEFINER;
    ALTER FUNCTION mm_archive_claim(text, float8, integer, timestamptz) SECURITY DEFINER;
    ALTER FUNCTION mm_archive_unclaim(bigint[]) SECURITY DEFINER;
    ALTER FUNCTION mm_archive_metrics() SECURITY DEFINER;
    REVOKE ALL ON decision_versions FROM PUBLIC;
    IF to_regrole('mcp_memory_archiver') IS NULL THEN
        RETURN;
    END IF;
    GRANT SELECT ON decision_versions TO mcp_memory_archiver;
    GRANT EXECUTE ON FUNCTION mm_auto_snapshot(float8, bigint, integer), mm_archive_unclaim(bigint[]),
        mm_archive_claim(text, float8, integer, timestamptz), mm_archive_metrics() TO mcp_memory_archiver;
    GRANT EXECUTE ON FUNCTION mm_archive_metrics() TO mcp_memory_ro, mcp_memory_rw;
    IF to_regrole('mcp_memory_gateway') IS NOT NULL THEN
        GRANT EXECUTE ON FUNCTION mm_archive_metrics() TO mcp_memory_gateway;
    END IF;
END $$;
