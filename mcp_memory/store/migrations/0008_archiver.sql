-- The export queue through functions, for the single writer only (README.md, Design decision 7).
-- Until now an archiver token could UPDATE export_jobs directly, from any connection: a standby
-- that had not taken the single-writer lock could still claim jobs. From here on the queue moves
-- only through the functions below, and the ones that claim, renew or finish jobs run only on the
-- connection that holds the archiver's advisory lock (key 0x6D6D6172, "mmar"): whoever does not
-- hold it claims nothing and finishes nothing, whatever it sends.

-- Who may work the queue: an owner, or an archiver token (jobs of the projects it reads).
CREATE FUNCTION mm_require_archiver() RETURNS void
LANGUAGE plpgsql STABLE AS $$
DECLARE
    who text := mm_caller();
BEGIN
    IF mm_is_owner(who) OR EXISTS (SELECT 1 FROM access_tokens WHERE role_name = who AND archiver) THEN
        RETURN;
    END IF;
    RAISE EXCEPTION 'role % is not an archiver', who USING ERRCODE = 'MM403';
END $$;

-- Raise unless this very connection holds the archiver's single-writer lock.
CREATE FUNCTION mm_require_archive_leader() RETURNS void
LANGUAGE plpgsql STABLE AS $$
BEGIN
    PERFORM mm_require_archiver();
    IF NOT EXISTS (SELECT 1 FROM pg_locks
                   WHERE locktype = 'advisory' AND granted AND pid = pg_backend_pid()
                     AND classid = 0 AND objid = 1835884914 AND objsubid = 1
                     AND database = (SELECT oid FROM pg_database WHERE datname = current_database())) THEN
        RAISE EXCEPTION 'this connection does not hold the archiver lock: only the active archiver works the queue'
            USING ERRCODE = 'MM409';
    END IF;
END $$;

CREATE FUNCTION mm_archive_claim(p_worker text, p_lease float8, p_limit integer, p_due_before timestamptz)
RETURNS TABLE (job_id bigint, snapshot_id bigint, session_id text, attempts integer)
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM mm_require_archive_leader();
    IF p_limit IS NULL OR p_limit < 1 OR p_limit > 10000 THEN
        RAISE EXCEPTION 'limit must be between 1 and 10000' USING ERRCODE = 'MM400';
    END IF;
    RETURN QUERY
    WITH next AS (
        SELECT j.job_id FROM export_jobs j
        WHERE ((j.status = 'pending' AND j.run_after <= least(now(), p_due_before))
               OR (j.status = 'running' AND j.lease_until < now()))
          AND mm_may_read(j.project_id)
        ORDER BY j.snapshot_id
        LIMIT p_limit
        FOR UPDATE SKIP LOCKED
    )
    UPDATE export_jobs j
    SET status = 'running', locked_by = left(p_worker, 200),
        lease_until = now() + make_interval(secs => greatest(p_lease, 1))
    FROM next
    WHERE j.job_id = next.job_id
    RETURNING j.job_id, j.snapshot_id, j.session_id, j.attempts;
END $$;

CREATE FUNCTION mm_archive_heartbeat(p_worker text, p_lease float8) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    n integer;
BEGIN
    PERFORM mm_require_archive_leader();
    UPDATE export_jobs SET lease_until = now() + make_interval(secs => greatest(p_lease, 1))
    WHERE locked_by = p_worker AND status = 'running' AND mm_may_read(project_id);
    GET DIAGNOSTICS n = ROW_COUNT;
    RETURN n;
END $$;

-- On taking the lock: no other archiver can be working, so every running job is stale.
CREATE FUNCTION mm_archive_release_running() RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    n integer;
BEGIN
    PERFORM mm_require_archive_leader();
    UPDATE export_jobs SET status = 'pending', locked_by = NULL, lease_until = NULL
    WHERE status = 'running' AND mm_may_read(project_id);
    GET DIAGNOSTICS n = ROW_COUNT;
    RETURN n;
END $$;

CREATE FUNCTION mm_archive_mark_done(p_job_ids bigint[]) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    n integer;
BEGIN
    PERFORM mm_require_archive_leader();
    UPDATE export_jobs
    SET status = 'done', locked_by = NULL, lease_until = NULL, last_error = NULL, finished_at = now()
    WHERE job_id = ANY (p_job_ids) AND status = 'running' AND mm_may_read(project_id);
    GET DIAGNOSTICS n = ROW_COUNT;
    RETURN n;
END $$;

CREATE FUNCTION mm_archive_mark_failed(p_job_id bigint, p_error text, p_give_up boolean, p_delay float8)
RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    result text;
BEGIN
    PERFORM mm_require_archive_leader();
    UPDATE export_jobs
    SET attempts = attempts + 1,
        last_error = left(p_error, 2000),
        status = CASE WHEN p_give_up THEN 'failed' ELSE 'pending' END,
        finished_at = CASE WHEN p_give_up THEN now() END,
        run_after = now() + make_interval(secs => greatest(coalesce(p_delay, 0), 0)),
        locked_by = NULL, lease_until = NULL
    WHERE job_id = p_job_id AND status = 'running' AND mm_may_read(project_id)
    RETURNING status INTO result;
    RETURN result;
END $$;

-- `archive requeue`: an operator's command, not the daemon's; pending or failed jobs only, so it
-- never takes a job from the active archiver.
CREATE FUNCTION mm_archive_requeue(p_job_id bigint) RETURNS SETOF bigint
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM mm_require_archiver();
    RETURN QUERY
    UPDATE export_jobs
    SET status = 'pending', attempts = 0, last_error = NULL, run_after = now(), finished_at = NULL,
        locked_by = NULL, lease_until = NULL
    WHERE (job_id = p_job_id OR (p_job_id IS NULL AND status = 'failed'))
      AND status IN ('pending', 'failed') AND mm_may_read(project_id)
    RETURNING job_id;
END $$;

DO $$
DECLARE
    f regprocedure;
BEGIN
    FOR f IN
        SELECT p.oid::regprocedure FROM pg_proc p
        WHERE p.pronamespace = current_schema()::regnamespace
          AND (p.proname LIKE 'mm\_archive\_%' OR p.proname IN ('mm_require_archiver', 'mm_require_archive_leader'))
    LOOP
        EXECUTE format('REVOKE ALL ON FUNCTION %s FROM PUBLIC', f);
        EXECUTE format('ALTER FUNCTION %s SECURITY DEFINER SET search_path = %I, pg_temp', f, current_schema());
    END LOOP;
    IF to_regrole('mcp_memory_archiver') IS NULL THEN
        RETURN;
    END IF;
    FOR f IN
        SELECT p.oid::regprocedure FROM pg_proc p
        WHERE p.pronamespace = current_schema()::regnamespace AND p.proname LIKE 'mm\_archive\_%'
    LOOP
        EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO mcp_memory_archiver', f);
    END LOOP;
    REVOKE UPDATE ON export_jobs FROM mcp_memory_archiver;
    DROP POLICY IF EXISTS mm_archive ON export_jobs;
END $$;
