-- What hosts report of themselves, for /metrics (install/README.md, Monitoring): a capture hook that
-- cannot reach the database keeps what it read in a local spool (spool.py), which only the host can
-- see. After each capture run that reached the database the host reports how many spool files it
-- still holds and since when; /metrics shows the numbers (mm_host_metrics, no names), the owner reads
-- host_reports to see which host.
--
-- Written only through mm_report_host (owner's rights): a writing token reports for its own role,
-- at most 16 host names per role (the oldest report gives way), a row changes only when the numbers
-- do or every 5 minutes, so a hook running on every turn costs a read.

CREATE TABLE host_reports (
    role_name         text NOT NULL,
    host              text NOT NULL CHECK (host ~ '^[A-Za-z0-9][A-Za-z0-9._@:-]{0,199}$'),
    spool_files       integer NOT NULL CHECK (spool_files BETWEEN 0 AND 1000000),
    oldest_spooled_at timestamptz,
    reported_at       timestamptz NOT NULL DEFAULT pg_catalog.now(),
    PRIMARY KEY (role_name, host)
);
ALTER TABLE host_reports ENABLE ROW LEVEL SECURITY;

CREATE FUNCTION mm_report_host(p_host text, p_spool_files integer, p_oldest_spooled_at timestamptz)
RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    who text := mm_caller();
    writer boolean := EXISTS (SELECT 1 FROM access_tokens t WHERE t.role_name = who AND NOT t.read_only);
BEGIN
    IF NOT writer AND NOT mm_is_owner(who) THEN
        RAISE EXCEPTION 'role % may not report a host (a writing token reports its own)', who USING ERRCODE = 'MM403';
    END IF;
    IF p_host IS NULL OR p_host !~ '^[A-Za-z0-9][A-Za-z0-9._@:-]{0,199}$' THEN
        RAISE EXCEPTION 'host: 1 to 200 letters, digits or ._@:- starting with a letter or digit'
            USING ERRCODE = 'MM400';
    END IF;
    IF p_spool_files IS NULL OR p_spool_files NOT BETWEEN 0 AND 1000000 THEN
        RAISE EXCEPTION 'spool_files: a count from 0 to 1000000' USING ERRCODE = 'MM400';
    END IF;
    IF p_oldest_spooled_at > pg_catalog.now() + interval '1 day'
       OR p_oldest_spooled_at < pg_catalog.now() - interval '10 years' THEN
        RAISE EXCEPTION 'oldest_spooled_at: a time within the last 10 years' USING ERRCODE = 'MM400';
    END IF;
    IF NOT EXISTS (SELECT 1 FROM host_reports r WHERE r.role_name = who AND r.host = p_host)
       AND (SELECT pg_catalog.count(*) FROM host_reports r WHERE r.role_name = who) >= 16 THEN
        DELETE FROM host_reports r WHERE r.role_name = who AND r.host =
            (SELECT o.host FROM host_reports o WHERE o.role_name = who ORDER BY o.reported_at LIMIT 1);
    END IF;
    INSERT INTO host_reports AS r (role_name, host, spool_files, oldest_spooled_at)
    VALUES (who, p_host, p_spool_files, CASE WHEN p_spool_files > 0 THEN p_oldest_spooled_at END)
    ON CONFLICT (role_name, host) DO UPDATE
        SET spool_files = excluded.spool_files, oldest_spooled_at = excluded.oldest_spooled_at,
            reported_at = pg_catalog.now()
        WHERE r.spool_files IS DISTINCT FROM excluded.spool_files
           OR r.oldest_spooled_at IS DISTINCT FROM excluded.oldest_spooled_at
           OR r.reported_at < pg_catalog.now() - interval '5 minutes';
END $$;

-- The numbers of /metrics, of the reports newer than p_within_seconds: hosts that reported, hosts
-- holding spool files, the files in all, the age of the oldest spooled file and of the oldest report.
-- The owner, the serve-http gateway and archivers see every host; another token its own reports.
CREATE FUNCTION mm_host_metrics(p_within_seconds float8)
RETURNS TABLE (hosts bigint, hosts_with_spool bigint, spool_files bigint, oldest_spool_seconds float8,
               oldest_report_seconds float8)
LANGUAGE sql STABLE AS $$
    WITH me AS (
        SELECT mm_caller() AS who
    ), everything AS (
        SELECT mm_is_owner(me.who)
               OR EXISTS (SELECT 1 FROM access_tokens t WHERE t.role_name = me.who AND t.archiver)
               OR (pg_catalog.to_regrole('mcp_memory_gateway') IS NOT NULL
                   AND pg_catalog.pg_has_role(me.who::name, 'mcp_memory_gateway'::name, 'MEMBER'::text)) AS yes
        FROM me
    )
    SELECT pg_catalog.count(*), pg_catalog.count(*) FILTER (WHERE r.spool_files > 0),
           coalesce(pg_catalog.sum(r.spool_files), 0)::bigint,
           coalesce(EXTRACT(epoch FROM pg_catalog.now() - pg_catalog.min(r.oldest_spooled_at))::float8, 0),
           coalesce(EXTRACT(epoch FROM pg_catalog.now() - pg_catalog.min(r.reported_at))::float8, 0)
    FROM host_reports r, me, everything
    WHERE (everything.yes OR r.role_name = me.who)
      AND r.reported_at >= pg_catalog.now() - pg_catalog.make_interval(secs => greatest(p_within_seconds, 0))
$$;

DO $$
DECLARE
    f regprocedure;
BEGIN
    FOR f IN
        SELECT p.oid::regprocedure FROM pg_catalog.pg_proc p
        WHERE p.pronamespace = current_schema()::regnamespace
          AND p.proname IN ('mm_report_host', 'mm_host_metrics')
    LOOP
        EXECUTE format('REVOKE ALL ON FUNCTION %s FROM PUBLIC', f);
        EXECUTE format('ALTER FUNCTION %s SET search_path = pg_catalog, %I, pg_temp', f, current_schema());
        EXECUTE format('ALTER FUNCTION %s SECURITY DEFINER', f);
    END LOOP;
    REVOKE ALL ON host_reports FROM PUBLIC;
    IF to_regrole('mcp_memory_rw') IS NULL THEN
        RETURN;
    END IF;
    GRANT EXECUTE ON FUNCTION mm_report_host(text, integer, timestamptz) TO mcp_memory_rw;
    GRANT EXECUTE ON FUNCTION mm_host_metrics(float8) TO mcp_memory_ro, mcp_memory_rw, mcp_memory_archiver;
    IF to_regrole('mcp_memory_gateway') IS NOT NULL THEN
        GRANT EXECUTE ON FUNCTION mm_host_metrics(float8) TO mcp_memory_gateway;
    END IF;
END $$;
