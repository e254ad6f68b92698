-- The archive carries on after a point-in-time restore (install/README.md, "Backup and point-in-time
-- restore"), with no job surgery.
--
-- A restore to an earlier moment puts the snapshot id sequence back, while the git archive keeps the
-- `snapshot-<id>` tags of the snapshots made after that moment. Until now an admin had to move the
-- sequence past the archive's highest tag by hand, and a snapshot made before that step got an id
-- whose tag names another snapshot: its job failed with a conflict on every attempt, held back the
-- session's later snapshots while it waited, and `archive retry --failed` could not help.
--
-- Only the archiver sees both sides (the tags and the database), so it fixes both, on its lease:
--  * mm_archive_snapshot_floor(top): when it takes the lease, the sequence moves past the archive's
--    highest tag (only forward; a no-op when it already is);
--  * mm_archive_renumber_snapshot(id, top): a snapshot not exported yet whose id the archive holds
--    for another snapshot gets the next free id past `top` (its meta records `renumbered_from`), and
--    its job is pending again at once. Forks made from it and relay records follow it. A snapshot
--    already exported (job done) is never renumbered.

CREATE FUNCTION mm_archive_snapshot_floor(p_top bigint) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    seq text := pg_catalog.pg_get_serial_sequence('snapshots', 'snapshot_id');
    floor bigint;
    handed bigint;
BEGIN
    PERFORM mm_require_archive_leader();
    IF p_top IS NULL OR p_top < 0 OR p_top > 9007199254740991 THEN  -- 2^53 - 1: ids stay exact in JSON
        RAISE EXCEPTION 'the archive''s highest snapshot id must be between 0 and 2^53 - 1' USING ERRCODE = 'MM400';
    END IF;
    -- serialised with other floor moves and with renumbering (one archiver holds the lease anyway)
    PERFORM pg_catalog.pg_advisory_xact_lock(pg_catalog.hashtext('mm_archive_snapshot_floor'));
    floor := greatest(p_top, (SELECT coalesce(pg_catalog.max(n.snapshot_id), 0) FROM snapshots n));
    -- the highest id handed out so far (last_value counts only once is_called)
    EXECUTE pg_catalog.format('SELECT CASE WHEN is_called THEN last_value ELSE last_value - 1 END FROM %s',
                              seq::regclass) INTO handed;
    IF floor > handed THEN
        PERFORM pg_catalog.setval(seq, floor);
        RETURN floor;
    END IF;
    RETURN NULL;  -- already past the archive
END $$;

CREATE FUNCTION mm_archive_renumber_snapshot(p_snapshot_id bigint, p_top bigint) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    old snapshots;
    job export_jobs;
    new_id bigint;
BEGIN
    PERFORM mm_require_archive_leader();
    SELECT * INTO old FROM snapshots n WHERE n.snapshot_id = p_snapshot_id FOR UPDATE;
    SELECT * INTO job FROM export_jobs j WHERE j.snapshot_id = p_snapshot_id FOR UPDATE;
    IF old.snapshot_id IS NULL OR job.job_id IS NULL OR NOT mm_may_read(old.project_id) THEN
        RAISE EXCEPTION 'snapshot % has no export job this archiver works', p_snapshot_id USING ERRCODE = 'MM404';
    END IF;
    IF job.status = 'done' THEN
        RAISE EXCEPTION 'snapshot % is exported already: it keeps its id', p_snapshot_id USING ERRCODE = 'MM409';
    END IF;
    IF p_top IS NULL OR p_top < p_snapshot_id THEN
        RAISE EXCEPTION 'snapshot % is above the archive''s highest tag %: its id is free there', p_snapshot_id, p_top
            USING ERRCODE = 'MM400';
    END IF;
    PERFORM mm_archive_snapshot_floor(p_top);
    new_id := pg_catalog.nextval(pg_catalog.pg_get_serial_sequence('snapshots', 'snapshot_id'));
    INSERT INTO snapshots (snapshot_id, session_id, project_id, up_to_seq, commit_msg, meta, created_by, created_at)
    VALUES (new_id, old.session_id, old.project_id, old.up_to_seq, old.commit_msg,
            old.meta || pg_catalog.jsonb_build_object('renumbered_from', old.snapshot_id), old.created_by,
            old.created_at);
    -- the insert trigger took the session's count of memory changes now; the snapshot's is the old one
    UPDATE snapshots SET memory_changes = old.memory_changes WHERE snapshot_id = new_id;
    UPDATE export_jobs
    SET snapshot_id = new_id, status = 'pending', attempts = 0, run_after = pg_catalog.now(), finished_at = NULL,
        locked_by = NULL, lease_until = NULL,
        last_error = pg_catalog.format('renumbered from snapshot %s, whose id the archive holds for another snapshot '
                                       '(the database was restored to an earlier point)', old.snapshot_id)
    WHERE job_id = job.job_id;
    UPDATE sessions SET parent_snapshot_id = new_id WHERE parent_snapshot_id = old.snapshot_id;
    UPDATE relay_exports SET snapshot_id = new_id WHERE snapshot_id = old.snapshot_id;
    DELETE FROM snapshots WHERE snapshot_id = old.snapshot_id;
    RETURN new_id;
END $$;

DO $$
BEGIN
    REVOKE ALL ON FUNCTION mm_archive_snapshot_floor(bigint), mm_archive_renumber_snapshot(bigint, bigint) FROM PUBLIC;
    EXECUTE pg_catalog.format('ALTER FUNCTION mm_archive_snapshot_floor(bigint) SET search_path = pg_catalog, %I, pg_temp',
                              current_schema());
    EXECUTE pg_catalog.format('ALTER FUNCTION mm_archive_renumber_snapshot(bigint, bigint) SET search_path = pg_catalog, '
                              '%I, pg_temp', current_schema());
    ALTER FUNCTION mm_archive_snapshot_floor(bigint) SECURITY DEFINER;
    ALTER FUNCTION mm_archive_renumber_snapshot(bigint, bigint) SECURITY DEFINER;
    IF pg_catalog.to_regrole('mcp_memory_archiver') IS NOT NULL THEN
        GRANT EXECUTE ON FUNCTION mm_archive_snapshot_floor(bigint), mm_archive_renumber_snapshot(bigint, bigint)
            TO mcp_memory_archiver;
    END IF;
END $$;
