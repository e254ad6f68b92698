-- Per-session statements read the session's own month partition only, in a generic plan too.
--
-- The month tables (migration 0021) prune by part_month. A statement that names the session's
-- month through a subquery (`part_month = (SELECT part_month FROM sessions …)`) prunes only while it
-- runs: in a generic plan (a prepared statement, a pooler's cached plan, plan_cache_mode =
-- force_generic_plan) every month partition stays in the plan, is opened and locked at executor
-- start, and the cost of each append, indexing pass and read grows with the months kept. A STABLE
-- function of a parameter is evaluated at executor start instead, where partitions are removed
-- before they are opened ("Subplans Removed" in EXPLAIN). The store's per-session statements
-- (store/queries/*.sql) name the month with mm_session_month below; the write functions name it
-- with their session row's column, a plpgsql variable (a parameter of each statement).

-- 1. The month partition that holds a session's own rows; NULL for a session the caller may not
--    read (row-level security on sessions applies: SECURITY INVOKER), which then reads nothing.
CREATE OR REPLACE FUNCTION mm_session_month(p_session_id text) RETURNS date
LANGUAGE sql STABLE AS $$
    SELECT s.part_month FROM sessions s WHERE s.session_id = p_session_id
$$;

-- 2. `reindex --full` of one session: its index rows from its own partition only.
CREATE OR REPLACE FUNCTION mm_forget_session_index(p_session_id text, p_shard smallint) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    s sessions;
BEGIN
    SELECT * INTO s FROM sessions WHERE session_id = p_session_id;
    IF NOT FOUND OR NOT mm_may_read(s.project_id) THEN
        RAISE EXCEPTION 'session % does not exist', p_session_id USING ERRCODE = 'MM404';
    END IF;
    PERFORM mm_require_write(s.project_id);
    WITH gone AS (
        DELETE FROM message_search WHERE session_id = p_session_id AND part_month = s.part_month
        RETURNING project_id, doc_len, tsv
    ), terms AS (
        SELECT g.project_id, u.lexeme AS term, pg_catalog.count(*) AS df
        FROM gone g, pg_catalog.unnest(g.tsv) AS u GROUP BY 1, 2
    ), term_stats AS (
        UPDATE search_term_stats t SET df = t.df - x.df FROM terms x
        WHERE t.term = x.term AND t.project_id = x.project_id AND t.shard = p_shard
    ), doc_stats AS (
        UPDATE search_doc_stats d SET docs = d.docs - x.docs, total_len = d.total_len - x.total_len
        FROM (SELECT project_id, pg_catalog.count(*) AS docs, pg_catalog.sum(doc_len) AS total_len
              FROM gone GROUP BY project_id) AS x
        WHERE d.project_id = x.project_id AND d.shard = p_shard
    )
    INSERT INTO search_progress AS p (session_id, project_id, indexed_seq, stored_seq)
    VALUES (p_session_id, s.project_id, coalesce(s.fork_seq, 0), s.last_seq)
    ON CONFLICT (session_id) DO UPDATE SET indexed_seq = excluded.indexed_seq, stored_seq = excluded.stored_seq,
                                           updated_at = pg_catalog.now();
END $$;

-- 3. As the functions of earlier migrations: pg_catalog first, then this schema, pg_temp last;
--    CREATE OR REPLACE reset SECURITY DEFINER of mm_forget_session_index (its grants stay).
DO $$
BEGIN
    EXECUTE pg_catalog.format('ALTER FUNCTION mm_session_month(text) SET search_path = pg_catalog, %I, pg_temp',
                              current_schema());
    EXECUTE pg_catalog.format('ALTER FUNCTION mm_forget_session_index(text, smallint) '
                              'SECURITY DEFINER SET search_path = pg_catalog, %I, pg_temp', current_schema());
    REVOKE ALL ON FUNCTION mm_session_month(text) FROM PUBLIC;
    IF pg_catalog.to_regrole('mcp_memory_rw') IS NOT NULL THEN
        GRANT EXECUTE ON FUNCTION mm_session_month(text) TO mcp_memory_ro, mcp_memory_rw, mcp_memory_archiver;
    END IF;
END $$;
