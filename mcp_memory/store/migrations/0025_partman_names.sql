-- Month partitions under pg_partman's names (README, "Partitions": pg_partman).
--
-- pg_partman 4.x names a monthly partition <table>_pYYYY_MM and adopts a partition set only when the
-- months already there carry those names (otherwise it creates its own month beside ours, and the two
-- overlap). The months are named that way on every server, whether or not pg_partman is installed, so
-- a database can be handed to pg_partman at any time (mcp-memory db partitions --partman) and the
-- months it makes, ours (mm_add_month_partition) and restored ones (mm_restore_month) are one set.
-- Partitions made by pg_partman come without row-level security; mm_harden_partitions gives every
-- partition of the tables that grow the same protection as ours (RLS on, no privileges but the
-- owner's), and `db partitions` runs it after pg_partman's maintenance.
-- Renaming is a catalog change: the migration holds each partition's lock for milliseconds.

CREATE OR REPLACE FUNCTION mm_month_partition_name(tbl text, m date) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
    SELECT tbl || '_p' || pg_catalog.to_char(m, 'YYYY_MM')
$$;

-- 1. The attached months, and the kept tables of retired months (mm_restore_month finds them by name).
DO $$
DECLARE
    x record;
    r record;
BEGIN
    FOR x IN
        SELECT c.oid::regclass AS part, c.relname, t.name AS tbl
        FROM pg_catalog.unnest(coalesce(mm_partitioned_tables(), '{}')) AS t(name)
        JOIN pg_catalog.pg_inherits i ON i.inhparent = pg_catalog.to_regclass(t.name)
        JOIN pg_catalog.pg_class c ON c.oid = i.inhrelid
        WHERE c.relname ~ '_p[0-9]{6}$'
    LOOP
        EXECUTE pg_catalog.format('ALTER TABLE %s RENAME TO %I', x.part,
                                  mm_month_partition_name(x.tbl, pg_catalog.to_date(pg_catalog.right(x.relname, 6), 'YYYYMM')));
    END LOOP;
    FOR r IN SELECT part_month, detached FROM retired_months WHERE NOT dropped LOOP
        UPDATE retired_months SET detached = (
            SELECT pg_catalog.array_agg(CASE WHEN pg_catalog.to_regclass(d) IS NOT NULL AND d ~ '_p[0-9]{6}$'
                                             THEN pg_catalog.regexp_replace(d, '_p([0-9]{4})([0-9]{2})$', '_p\1_\2')
                                             ELSE d END ORDER BY o)
            FROM pg_catalog.unnest(r.detached) WITH ORDINALITY AS u(d, o))
        WHERE part_month = r.part_month;
        FOR x IN SELECT d FROM pg_catalog.unnest(r.detached) AS u(d)
                 WHERE d ~ '_p[0-9]{6}$' AND pg_catalog.to_regclass(d) IS NOT NULL LOOP
            EXECUTE pg_catalog.format('ALTER TABLE %s RENAME TO %I', x.d,
                                      pg_catalog.regexp_replace(pg_catalog.split_part(x.d, '.', -1),
                                                                '_p([0-9]{4})([0-9]{2})$', '_p\1_\2'));
        END LOOP;
    END LOOP;
END $$;

-- 2. Every partition of the tables that grow as ours are: row-level security on (a partition read
--    directly shows no rows but to its owner), no privilege for any other role (PUBLIC included);
--    reached only through the parent, whose grants and policies apply. The partitions it changed.
CREATE OR REPLACE FUNCTION mm_harden_partitions() RETURNS text[]
LANGUAGE plpgsql AS $$
DECLARE
    x record;
    g record;
    done text[] := '{}';
BEGIN
    FOR x IN
        SELECT c.oid::regclass AS part, c.relrowsecurity, c.relowner
        FROM pg_catalog.unnest(coalesce(mm_partitioned_tables(), '{}')) AS t(name)
        JOIN pg_catalog.pg_inherits i ON i.inhparent = pg_catalog.to_regclass(t.name)
        JOIN pg_catalog.pg_class c ON c.oid = i.inhrelid
        ORDER BY 1
    LOOP
        IF NOT x.relrowsecurity THEN
            EXECUTE pg_catalog.format('ALTER TABLE %s ENABLE ROW LEVEL SECURITY', x.part);
            done := done || x.part::text;
        END IF;
        FOR g IN
            SELECT DISTINCT a.grantee FROM pg_catalog.pg_class c, pg_catalog.aclexplode(c.relacl) AS a
            WHERE c.oid = x.part AND a.grantee <> x.relowner
        LOOP
            EXECUTE pg_catalog.format('REVOKE ALL ON %s FROM %s', x.part,
                                      CASE WHEN g.grantee = 0 THEN 'PUBLIC' ELSE g.grantee::regrole::text END);
            IF NOT x.part::text = ANY (done) THEN
                done := done || x.part::text;
            END IF;
        END LOOP;
    END LOOP;
    RETURN done;
END $$;

-- 3. Our months under those names.
CREATE OR REPLACE FUNCTION mm_add_month_partition(tbl text, m date) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    -- in the parent's schema (the function's search_path starts with pg_catalog)
    nsp text := (SELECT n.nspname FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
                 WHERE c.oid = pg_catalog.to_regclass(tbl));
    name text := pg_catalog.format('%I.%I', nsp, mm_month_partition_name(tbl, m));
    hi date := (m + interval '1 month')::date;
    spill boolean;
BEGIN
    EXECUTE pg_catalog.format('SELECT EXISTS (SELECT 1 FROM %I WHERE part_month >= %L AND part_month < %L)',
                              tbl || '_default', m, hi) INTO spill;
    IF spill THEN
        EXECUTE pg_catalog.format('CREATE TABLE %s (LIKE %s INCLUDING DEFAULTS INCLUDING CONSTRAINTS)', name, tbl);
        EXECUTE pg_catalog.format('WITH moved AS (DELETE FROM %I WHERE part_month >= %L AND part_month < %L RETURNING *)'
                                  ' INSERT INTO %s SELECT * FROM moved', tbl || '_default', m, hi, name);
        EXECUTE pg_catalog.format('ALTER TABLE %I ATTACH PARTITION %s FOR VALUES FROM (%L) TO (%L)', tbl, name, m, hi);
    ELSE
        EXECUTE pg_catalog.format('CREATE TABLE %s PARTITION OF %I FOR VALUES FROM (%L) TO (%L)', name, tbl, m, hi);
    END IF;
    -- reached only through the parent (whose grants and policies apply); direct access is refused
    EXECUTE pg_catalog.format('ALTER TABLE %s ENABLE ROW LEVEL SECURITY', name);
    EXECUTE pg_catalog.format('REVOKE ALL ON %s FROM PUBLIC', name);
    RETURN name;
END $$;

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
        name := mm_month_partition_name(tbl, p_month);
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
DECLARE
    f regprocedure;
BEGIN
    FOR f IN
        SELECT p.oid::regprocedure FROM pg_catalog.pg_proc p
        WHERE p.pronamespace = current_schema()::regnamespace
          AND p.proname IN ('mm_month_partition_name', 'mm_harden_partitions', 'mm_add_month_partition',
                            'mm_restore_month')
    LOOP
        EXECUTE pg_catalog.format('ALTER FUNCTION %s SET search_path = pg_catalog, %I, pg_temp', f, current_schema());
    END LOOP;
    -- partition upkeep is the owner's: no token runs DDL
    REVOKE ALL ON FUNCTION mm_month_partition_name(text, date), mm_harden_partitions() FROM PUBLIC;
END $$;

SELECT mm_harden_partitions();
