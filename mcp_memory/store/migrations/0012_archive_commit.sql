-- The archive commit of each exported snapshot, recorded by the archiver when it marks the job
-- done, so that readers without the git repository (the review pages) can name it.
ALTER TABLE export_jobs ADD COLUMN commit_sha text
    CHECK (commit_sha IS NULL OR commit_sha ~ '^[0-9a-f]{40}([0-9a-f]{24})?$');

CREATE FUNCTION mm_archive_mark_done(p_job_ids bigint[], p_commits text[]) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    n integer;
BEGIN
    PERFORM mm_require_archive_leader();
    IF coalesce(array_length(p_job_ids, 1), 0) <> coalesce(array_length(p_commits, 1), 0) THEN
        RAISE EXCEPTION 'one commit per job: % jobs, % commits', coalesce(array_length(p_job_ids, 1), 0),
            coalesce(array_length(p_commits, 1), 0) USING ERRCODE = 'MM400';
    END IF;
    UPDATE export_jobs j
    SET status = 'done', locked_by = NULL, lease_until = NULL, last_error = NULL, finished_at = now(),
        commit_sha = nullif(c.sha, '')
    FROM unnest(p_job_ids, p_commits) AS c(job_id, sha)
    WHERE j.job_id = c.job_id AND j.status = 'running' AND mm_may_read(j.project_id);
    GET DIAGNOSTICS n = ROW_COUNT;
    RETURN n;
END $$;

REVOKE ALL ON FUNCTION mm_archive_mark_done(bigint[], text[]) FROM PUBLIC;
DO $$
BEGIN
    EXECUTE format('ALTER FUNCTION mm_archive_mark_done(bigint[], text[]) SECURITY DEFINER SET search_path = %I, pg_temp',
                   current_schema());
    IF to_regrole('mcp_memory_archiver') IS NOT NULL THEN
        GRANT EXECUTE ON FUNCTION mm_archive_mark_done(bigint[], text[]) TO mcp_memory_archiver;
    END IF;
END $$;
