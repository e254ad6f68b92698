-- Echoes of mcp-memory's own tools (mcp_memory/scaffolding.py): an agent's calls of search,
-- recall or read_session and their results stay in its session as they were, but search and recall
-- leave them out unless asked (include_echoes). The indexer decides which turns are echoes; the
-- index row says so.
--
-- mm_index_messages gains the per-row flag as a ninth argument. The eight-argument form stays for
-- hosts that run the previous version during an upgrade (their rows are indexed as not echoes; a
-- `reindex --full` after the upgrade marks them).

ALTER TABLE message_search ADD COLUMN echo boolean NOT NULL DEFAULT false;

CREATE FUNCTION mm_index_messages(p_session_id text, p_seqs bigint[], p_doc_lens integer[], p_tsvs text[],
                                  p_terms text[], p_dfs bigint[], p_shard smallint, p_indexed_seq bigint,
                                  p_echoes boolean[])
RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    s sessions;
    mark bigint;
    n integer := coalesce(pg_catalog.cardinality(p_seqs), 0);
BEGIN
    SELECT * INTO s FROM sessions WHERE session_id = p_session_id;
    IF NOT FOUND OR NOT mm_may_read(s.project_id) THEN
        RAISE EXCEPTION 'session % does not exist', p_session_id USING ERRCODE = 'MM404';
    END IF;
    PERFORM mm_require_write(s.project_id);
    IF p_shard < 0 OR p_shard >= 64 OR pg_catalog.cardinality(p_doc_lens) <> n OR pg_catalog.cardinality(p_tsvs) <> n
       OR coalesce(pg_catalog.cardinality(p_terms), 0) <> coalesce(pg_catalog.cardinality(p_dfs), 0)
       OR (p_echoes IS NOT NULL AND pg_catalog.cardinality(p_echoes) <> n) THEN
        RAISE EXCEPTION 'index rows do not line up' USING ERRCODE = 'MM400';
    END IF;
    SELECT coalesce(p.indexed_seq, s.fork_seq, 0) INTO mark
    FROM (SELECT 1) AS one LEFT JOIN search_progress p ON p.session_id = p_session_id;
    IF p_indexed_seq < mark OR p_indexed_seq > s.last_seq
       OR EXISTS (SELECT 1 FROM pg_catalog.unnest(p_seqs) AS x(seq) WHERE x.seq <= mark OR x.seq > p_indexed_seq) THEN
        RAISE EXCEPTION 'index rows of session % must lie in (%, %]', p_session_id, mark, s.last_seq
            USING ERRCODE = 'MM400';
    END IF;
    INSERT INTO message_search (session_id, seq, project_id, role, created_at, doc_len, tsv, echo)
    SELECT p_session_id, m.seq, s.project_id, m.role, m.created_at, greatest(x.doc_len, 0), x.tsv::tsvector,
           coalesce(x.echo, false)
    FROM ROWS FROM (pg_catalog.unnest(p_seqs), pg_catalog.unnest(p_doc_lens), pg_catalog.unnest(p_tsvs),
                    pg_catalog.unnest(coalesce(p_echoes, '{}'::boolean[]))) AS x(seq, doc_len, tsv, echo)
    JOIN messages m ON m.session_id = p_session_id AND m.seq = x.seq;
    IF n > 0 THEN
        INSERT INTO search_term_stats AS t (project_id, term, shard, df)
        SELECT s.project_id, x.term, p_shard, least(x.df, n)
        FROM ROWS FROM (pg_catalog.unnest(p_terms), pg_catalog.unnest(p_dfs)) AS x(term, df)
        WHERE x.df > 0
        ORDER BY x.term
        ON CONFLICT (term, project_id, shard) DO UPDATE SET df = t.df + excluded.df;
        INSERT INTO search_doc_stats AS d (project_id, shard, docs, total_len)
        SELECT s.project_id, p_shard, n, coalesce(pg_catalog.sum(greatest(l, 0)), 0) FROM pg_catalog.unnest(p_doc_lens) AS l
        ON CONFLICT (project_id, shard) DO UPDATE SET docs = d.docs + excluded.docs,
                                                      total_len = d.total_len + excluded.total_len;
    END IF;
    INSERT INTO search_progress AS p (session_id, project_id, indexed_seq, stored_seq)
    VALUES (p_session_id, s.project_id, p_indexed_seq, s.last_seq)
    ON CONFLICT (session_id) DO UPDATE
    SET indexed_seq = greatest(p.indexed_seq, excluded.indexed_seq),
        stored_seq = greatest(p.stored_seq, excluded.stored_seq), updated_at = pg_catalog.now();
END $$;

CREATE OR REPLACE FUNCTION mm_index_messages(p_session_id text, p_seqs bigint[], p_doc_lens integer[], p_tsvs text[],
                                             p_terms text[], p_dfs bigint[], p_shard smallint, p_indexed_seq bigint)
RETURNS void
LANGUAGE sql AS $$
    SELECT mm_index_messages(p_session_id, p_seqs, p_doc_lens, p_tsvs, p_terms, p_dfs, p_shard, p_indexed_seq,
                             NULL::boolean[])
$$;

DO $$
DECLARE
    f regprocedure;
BEGIN
    FOR f IN
        SELECT p.oid::regprocedure FROM pg_catalog.pg_proc p
        WHERE p.pronamespace = current_schema()::regnamespace AND p.proname = 'mm_index_messages'
    LOOP
        -- CREATE OR REPLACE resets SECURITY DEFINER; each form is named again
        EXECUTE format('ALTER FUNCTION %s SECURITY DEFINER', f);
        EXECUTE format('REVOKE ALL ON FUNCTION %s FROM PUBLIC', f);
        EXECUTE format('ALTER FUNCTION %s SET search_path = pg_catalog, %I, pg_temp', f, current_schema());
        IF to_regrole('mcp_memory_rw') IS NOT NULL THEN
            EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO mcp_memory_rw, mcp_memory_archiver, mcp_memory_ro', f);
        END IF;
    END LOOP;
END $$;
