-- Retention to cold storage (README, "Partitions"): a month that retired is either kept as detached
-- tables or dropped once the git archive was verified to hold every message of its sessions
-- (archive/cold.py); `archive_commit` records the archive commit it was verified against. Such a
-- month comes back whole through mm_restore_month: kept tables are attached again; dropped ones
-- get empty partitions, which the caller fills from the archive in the same transaction, and the
-- month's sessions are marked for indexing and embedding again (their search and embedding rows
-- left with the month).

ALTER TABLE retired_months ADD COLUMN IF NOT EXISTS archive_commit text
    CHECK (archive_commit IS NULL OR archive_commit ~ '^[0-9a-f]{40,64}$');

CREATE OR REPLACE FUNCTION mm_restore_month(p_month date)
RETURNS TABLE(part text, attached boolean)
LANGUAGE plpgsql AS $$
DECLARE
    r retired_months;
    tbl text;
    name text;
    hi date := (p_month + interval '1 month')::date;
BEGIN
    SELECT * INTO r FROM retired_months WHERE part_month = p_month FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'month % has not retired', pg_catalog.to_char(p_month, 'YYYY-MM') USING ERRCODE = 'MM404';
    END IF;
    FOREACH tbl IN ARRAY coalesce(mm_partitioned_tables(), '{}') LOOP
        name := tbl || '_p' || pg_catalog.to_char(p_month, 'YYYYMM');
        IF mm_month_partition(tbl, p_month) IS NOT NULL THEN
            CONTINUE;
        END IF;
        IF NOT r.dropped AND pg_catalog.to_regclass(name) IS NOT NULL THEN
            -- the kept table: its rows are checked against the month's bounds as it attaches
            EXECUTE pg_catalog.format('ALTER TABLE %I ATTACH PARTITION %I FOR VALUES FROM (%L) TO (%L)',
                                      tbl, name, p_month, hi);
            part := name;
            attached := true;
        ELSE
            part := mm_add_month_partition(tbl, p_month);
            attached := false;
        END IF;
        RETURN NEXT;
    END LOOP;
    IF r.dropped THEN
        UPDATE search_progress p SET indexed_seq = coalesce(s.fork_seq, 0), updated_at = pg_catalog.now()
        FROM sessions s WHERE s.session_id = p.session_id AND s.part_month = p_month;
        IF pg_catalog.to_regclass('embedding_watermarks') IS NOT NULL THEN
            DELETE FROM embedding_watermarks w USING sessions s
            WHERE s.session_id = w.session_id AND s.part_month = p_month;
        END IF;
    END IF;
    DELETE FROM retired_months WHERE part_month = p_month;
END $$;

DO $$
BEGIN
    EXECUTE pg_catalog.format('ALTER FUNCTION mm_restore_month(date) SET search_path = pg_catalog, %I, pg_temp',
                              current_schema());
    -- the owner's work, as retiring is: no token runs DDL
    REVOKE ALL ON FUNCTION mm_restore_month(date) FROM PUBLIC;
    IF pg_catalog.to_regrole('mcp_memory_rw') IS NOT NULL THEN
        GRANT SELECT (archive_commit) ON retired_months TO mcp_memory_ro, mcp_memory_rw, mcp_memory_archiver;
    END IF;
END $$;
