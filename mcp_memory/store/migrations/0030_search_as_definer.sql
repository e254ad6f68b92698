-- A token's full-text search uses the GIN index, as the owner's does.
--
-- Row-level security puts its policy (the caller's projects) below every other condition of a
-- query: a condition whose operator is not LEAKPROOF may not be evaluated before it, so it may not
-- be an index condition either. `tsv @@ tsquery` is not LEAKPROOF (only a superuser can mark a
-- function so, and ts_match_vq is not), so under RLS the planner reads every row of the caller's
-- scope and filters it: a token's rare word cost 2.7 s at 1M rows where the owner's cost 36 ms,
-- growing with the corpus. The candidate scan of search (store/queries/search.sql before this
-- migration) therefore runs here, in a SECURITY DEFINER function, which is not subject to the
-- policy, and applies the very rule of the policy (mm_enable_project_rls, migration 0026) itself,
-- as a plain condition the planner may order freely:
--     project_id IS NULL OR project_id = ANY(the caller's projects), every row for '*' or the owner.
-- Which caller: mm_caller() and mm_token_projects(false), the functions the policies call, so a
-- login, a proven gateway transaction, an owner acting as a token and a stranger get exactly the
-- rows a direct SELECT would give them (tests/integration/security/test_search_scope.py compares the
-- two for each). The hits themselves (search_hits) are still read under RLS, by their keys.
--
-- The statement is built by mm_search_candidates_query from constant fragments and the list of
-- filters given (values are parameters: $1 … $16), so each combination is planned with the
-- values known (EXECUTE plans each call), as the statement composed in Python was; the builder is a
-- function of its own so that tests can plan the statement it makes.

CREATE FUNCTION mm_search_candidates_query(p_scoped boolean, p_newest boolean, p_echoes boolean,
                                           p_project boolean, p_role boolean, p_since boolean,
                                           p_until boolean, p_agent boolean, p_segments integer)
RETURNS text
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    conds text[] := ARRAY['m.tsv @@ $1'];
    months text;
BEGIN
    IF p_scoped THEN
        conds := conds || '(m.project_id IS NULL OR m.project_id = ANY($16))'::text;
    END IF;
    IF NOT p_echoes THEN
        conds := conds || 'NOT m.echo'::text;
    END IF;
    IF p_project THEN
        conds := conds || 'm.project_id = $8'::text;
    END IF;
    IF p_role THEN
        conds := conds || 'm.role = $9'::text;
    END IF;
    IF p_since THEN
        conds := conds || 'm.created_at >= $10'::text;
    END IF;
    IF p_until THEN
        conds := conds || 'm.created_at < $11'::text;
    END IF;
    IF p_agent THEN
        conds := conds || 'm.session_id IN (SELECT s.session_id FROM sessions s WHERE s.agent_source = $12)'::text;
    END IF;
    IF p_segments IS NOT NULL THEN
        conds := conds || ('m.session_id = ANY($13) AND EXISTS (SELECT 1 FROM unnest($13, $14, $15)'
                           ' AS g(sid, lo, hi) WHERE g.sid = m.session_id AND m.seq > g.lo AND m.seq <= g.hi)')::text;
        -- the lineage's months named one by one (search_store.segment_months: an ARRAY of STABLE
        -- calls is evaluated at executor start, which removes the other month partitions)
        IF p_segments BETWEEN 1 AND 64 THEN
            SELECT pg_catalog.string_agg(pg_catalog.format('mm_session_month(($13)[%s])', i), ', ' ORDER BY i)
            INTO months FROM pg_catalog.generate_series(1, p_segments) AS i;
            conds := conds || ('m.part_month = ANY(ARRAY[' || months || '])')::text;
        END IF;
    END IF;
    -- stage 1: at most $7 candidates by the GIN index and the filters (the best by ts_rank, or the
    -- newest for a common word: search_store.NEWEST_ABOVE); stage 2: BM25 over the query's terms
    -- ($2, weights $3), setweight + ts_filter keeping only the query's lexemes of each vector
    RETURN 'WITH candidates AS ('
        || ' SELECT m.session_id, m.seq, m.created_at, m.doc_len, m.tsv FROM message_search m'
        || ' WHERE ' || pg_catalog.array_to_string(conds, ' AND ')
        || CASE WHEN p_newest THEN ' ORDER BY m.created_at DESC'
                ELSE ' ORDER BY ts_rank(m.tsv, $1) DESC, m.created_at DESC, m.session_id, m.seq' END
        || ' LIMIT $7)'
        || ' SELECT c.session_id, c.seq, c.created_at,'
        || ' (SELECT coalesce(sum(w.weight * x.tf * ($5 + 1)'
        || '   / (x.tf + $5 * (1 - $6 + $6 * c.doc_len / $4))), 0)::float8'
        || '  FROM (SELECT u.lexeme, coalesce(pg_catalog.array_length(u.positions, 1), 1) AS tf'
        || '        FROM pg_catalog.unnest(ts_filter(setweight(c.tsv, ''A'', $2), ''{a}'')) AS u) AS x'
        || '  JOIN unnest($2, $3) AS w(term, weight) ON w.term = x.lexeme) AS score'
        || ' FROM candidates c';
END $$;

CREATE FUNCTION mm_search_candidates(p_match tsquery, p_terms text[], p_weights double precision[],
                                     p_avg_len double precision, p_k1 double precision, p_b double precision,
                                     p_pool integer, p_newest boolean, p_echoes boolean,
                                     p_project text, p_role text, p_since timestamptz, p_until timestamptz,
                                     p_agent text, p_seg_sessions text[], p_seg_lower bigint[], p_seg_upper bigint[])
RETURNS TABLE(session_id text, seq bigint, created_at timestamptz, score double precision)
LANGUAGE plpgsql STABLE SECURITY DEFINER AS $$
DECLARE
    -- the policy's rule: NULL = every row (the owner, a '*' token)
    scope text[] := CASE WHEN mm_is_owner(mm_caller()) THEN NULL ELSE mm_token_projects(false) END;
BEGIN
    IF scope IS NOT NULL AND '*' = ANY(scope) THEN
        scope := NULL;
    END IF;
    IF p_pool IS NULL OR p_pool < 1 OR p_pool > 100000 THEN
        RAISE EXCEPTION 'pool must be between 1 and 100000, not %', p_pool USING ERRCODE = '22023';
    END IF;
    RETURN QUERY EXECUTE mm_search_candidates_query(
            scope IS NOT NULL, coalesce(p_newest, false), coalesce(p_echoes, false), p_project IS NOT NULL,
            p_role IS NOT NULL, p_since IS NOT NULL, p_until IS NOT NULL, p_agent IS NOT NULL,
            CASE WHEN p_seg_sessions IS NULL THEN NULL ELSE coalesce(pg_catalog.cardinality(p_seg_sessions), 0) END)
        USING p_match, p_terms, p_weights, p_avg_len, p_k1, p_b, p_pool, p_project, p_role, p_since, p_until,
              p_agent, p_seg_sessions, p_seg_lower, p_seg_upper, scope;
END $$;

DO $$
DECLARE
    f text;
BEGIN
    FOREACH f IN ARRAY ARRAY['mm_search_candidates_query(boolean, boolean, boolean, boolean, boolean, boolean, '
                             'boolean, boolean, integer)',
                             'mm_search_candidates(tsquery, text[], double precision[], double precision, '
                             'double precision, double precision, integer, boolean, boolean, text, text, '
                             'timestamptz, timestamptz, text, text[], bigint[], bigint[])'] LOOP
        EXECUTE pg_catalog.format('ALTER FUNCTION %s SET search_path = pg_catalog, %I, pg_temp', f, current_schema());
        EXECUTE pg_catalog.format('REVOKE ALL ON FUNCTION %s FROM PUBLIC', f);
        -- those who may read message_search (mm_grant_table); the gateway group inherits them
        IF pg_catalog.to_regrole('mcp_memory_rw') IS NOT NULL THEN
            EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION %s TO mcp_memory_ro, mcp_memory_rw, mcp_memory_archiver',
                                      f);
        END IF;
    END LOOP;
END $$;
