-- name: search_index_message
INSERT INTO message_search (session_id, seq, project_id, role, created_at, doc_len, tsv)
VALUES (%(session_id)s, %(seq)s, %(project_id)s, %(role)s, coalesce(%(created_at)s, now()), %(doc_len)s,
        %(tsv)s::tsvector);

-- name: search_index_messages
-- Batches: INSERT … SELECT FROM unnest (COPY is refused under row-level security).
INSERT INTO message_search (session_id, seq, project_id, role, created_at, doc_len, tsv)
SELECT %(session_id)s, m.seq, %(project_id)s, m.role, coalesce(m.created_at, now()), m.doc_len, m.tsv::tsvector
FROM unnest(%(seqs)b::bigint[], %(roles)b::text[], %(created)b::timestamptz[], %(doc_lens)b::integer[],
            %(tsvs)b::text[]) AS m(seq, role, created_at, doc_len, tsv);

-- name: search_add_term_stats
-- Sorted, so that two transactions lock shared rows in the same order (no deadlock).
INSERT INTO search_term_stats AS s (project_id, term, shard, df)
SELECT %(project_id)s, t.term, %(shard)s, t.df
FROM unnest(%(terms)b::text[], %(dfs)b::bigint[]) AS t(term, df)
ORDER BY t.term
ON CONFLICT (term, project_id, shard) DO UPDATE SET df = s.df + excluded.df;

-- name: search_add_doc_stats
INSERT INTO search_doc_stats AS s (project_id, shard, docs, total_len)
VALUES (%(project_id)s, %(shard)s, %(docs)s, %(total_len)s)
ON CONFLICT (project_id, shard) DO UPDATE SET docs = s.docs + excluded.docs, total_len = s.total_len + excluded.total_len;

-- name: search_term_df
SELECT term, sum(df)::bigint AS df FROM search_term_stats
WHERE term = ANY(%(terms)b::text[]) AND (%(project_id)s::text IS NULL OR project_id = %(project_id)s)
GROUP BY term;

-- name: search_doc_totals
SELECT coalesce(sum(docs), 0)::bigint AS docs, coalesce(sum(total_len), 0)::bigint AS total_len
FROM search_doc_stats WHERE %(project_id)s::text IS NULL OR project_id = %(project_id)s;

-- name: search_candidates
-- Stage 1 picks at most %(pool)s candidates with the GIN index and the filters; stage 2 scores
-- them by BM25 over the query's terms (weights = query weight × idf, computed by the core).
WITH candidates AS (
    SELECT m.session_id, m.seq, m.created_at, m.doc_len, m.tsv
    FROM message_search m
    WHERE m.tsv @@ %(match)s::tsquery
      AND (%(project_id)s::text IS NULL OR m.project_id = %(project_id)s)
      AND (%(role)s::text IS NULL OR m.role = %(role)s)
      AND (%(since)s::timestamptz IS NULL OR m.created_at >= %(since)s)
      AND (%(until)s::timestamptz IS NULL OR m.created_at < %(until)s)
      AND (%(agent_source)s::text IS NULL
           OR m.session_id IN (SELECT session_id FROM sessions WHERE agent_source = %(agent_source)s))
      AND (%(seg_sessions)s::text[] IS NULL OR (m.session_id = ANY(%(seg_sessions)s::text[]) AND EXISTS (
            SELECT 1 FROM unnest(%(seg_sessions)s::text[], %(seg_lower)s::bigint[], %(seg_upper)s::bigint[])
                          AS g(sid, lo, hi)
            WHERE g.sid = m.session_id AND m.seq > g.lo AND m.seq <= g.hi)))
    ORDER BY ts_rank(m.tsv, %(match)s::tsquery) DESC, m.created_at DESC, m.session_id, m.seq
    LIMIT %(pool)s
)
SELECT c.session_id, c.seq, c.created_at,
       (SELECT coalesce(sum(w.weight * x.tf * (%(k1)s::float8 + 1)
                            / (x.tf + %(k1)s::float8 * (1 - %(b)s::float8 + %(b)s::float8 * c.doc_len / %(avg_len)s::float8))), 0)
        FROM (SELECT u.lexeme, coalesce(array_length(u.positions, 1), 1) AS tf FROM unnest(c.tsv) AS u) AS x
        JOIN unnest(%(terms)b::text[], %(weights)s::float8[]) AS w(term, weight) ON w.term = x.lexeme) AS score
FROM candidates c;

-- name: search_hits
-- The rows to show, with the same filters (a neighbour of a hit must pass them too) and the
-- required phrases / exclusions (%(required)s).
SELECT m.session_id, m.seq, m.role, m.payload, m.created_at, s.title, s.agent_source, s.project_id
FROM unnest(%(sessions)s::text[], %(seqs)b::bigint[]) AS k(session_id, seq)
JOIN message_search ms ON ms.session_id = k.session_id AND ms.seq = k.seq
JOIN messages m ON m.session_id = k.session_id AND m.seq = k.seq
JOIN sessions s ON s.session_id = m.session_id
WHERE (%(required)s::tsquery IS NULL OR ms.tsv @@ %(required)s::tsquery)
  AND (%(project_id)s::text IS NULL OR ms.project_id = %(project_id)s)
  AND (%(role)s::text IS NULL OR ms.role = %(role)s)
  AND (%(since)s::timestamptz IS NULL OR ms.created_at >= %(since)s)
  AND (%(until)s::timestamptz IS NULL OR ms.created_at < %(until)s)
  AND (%(agent_source)s::text IS NULL OR s.agent_source = %(agent_source)s)
  AND (%(seg_sessions)s::text[] IS NULL OR EXISTS (
        SELECT 1 FROM unnest(%(seg_sessions)s::text[], %(seg_lower)s::bigint[], %(seg_upper)s::bigint[])
                      AS g(sid, lo, hi)
        WHERE g.sid = ms.session_id AND ms.seq > g.lo AND ms.seq <= g.hi));

-- name: search_index_lock
-- One indexer per session at a time (two would index the same messages twice). A transaction-level
-- advisory lock, so that an append to the session never waits for an indexing pass.
SELECT pg_advisory_xact_lock(1836084589, hashtext(%(session_id)s));

-- name: search_watermark
-- What is indexed of the session, and what is stored: a session without a progress row (restored
-- from an archive) starts at its fork point.
SELECT s.project_id, s.last_seq, coalesce(p.indexed_seq, s.fork_seq, 0) AS indexed_seq
FROM sessions s LEFT JOIN search_progress p ON p.session_id = s.session_id
WHERE s.session_id = %(session_id)s;

-- name: search_unindexed_messages
SELECT seq, role, payload, created_at FROM messages
WHERE session_id = %(session_id)s AND seq > %(after_seq)s AND seq <= %(up_to_seq)s
ORDER BY seq
LIMIT %(limit)s;

-- name: search_set_watermark
INSERT INTO search_progress AS p (session_id, project_id, indexed_seq, stored_seq)
VALUES (%(session_id)s, %(project_id)s, %(indexed_seq)s, %(stored_seq)s)
ON CONFLICT (session_id) DO UPDATE
SET indexed_seq = greatest(p.indexed_seq, excluded.indexed_seq),
    stored_seq = greatest(p.stored_seq, excluded.stored_seq), updated_at = now();

-- name: search_forget_session
-- `reindex --full`, one session under its indexing lock: its index rows go, their counts leave the
-- BM25 statistics, and the watermark returns to the fork point.
WITH gone AS (
    DELETE FROM message_search WHERE session_id = %(session_id)s RETURNING project_id, doc_len, tsv
), terms AS (
    SELECT g.project_id, u.lexeme AS term, count(*) AS df FROM gone g, unnest(g.tsv) AS u GROUP BY 1, 2
), term_stats AS (
    UPDATE search_term_stats s SET df = s.df - t.df FROM terms t
    WHERE s.term = t.term AND s.project_id = t.project_id AND s.shard = %(shard)s
), doc_stats AS (
    UPDATE search_doc_stats d SET docs = d.docs - x.docs, total_len = d.total_len - x.total_len
    FROM (SELECT project_id, count(*) AS docs, sum(doc_len) AS total_len FROM gone GROUP BY project_id) AS x
    WHERE d.project_id = x.project_id AND d.shard = %(shard)s
)
UPDATE search_progress p SET indexed_seq = coalesce(s.fork_seq, 0), updated_at = now()
FROM sessions s WHERE s.session_id = p.session_id AND p.session_id = %(session_id)s;

-- name: search_all_sessions
SELECT session_id FROM sessions
WHERE (%(project_id)s::text IS NULL OR project_id = %(project_id)s) AND session_id > %(after)s
ORDER BY session_id
LIMIT %(limit)s;

-- name: search_pending_sessions
-- Sessions with stored messages the index does not have yet (the partial index keeps this cheap).
SELECT session_id FROM search_progress
WHERE stored_seq > indexed_seq AND (%(project_id)s::text IS NULL OR project_id = %(project_id)s)
ORDER BY updated_at, session_id
LIMIT %(limit)s;

-- name: search_untracked_sessions
-- For `reindex`: every session whose index is behind, progress row or not (a full scan of sessions).
SELECT s.session_id FROM sessions s LEFT JOIN search_progress p ON p.session_id = s.session_id
WHERE s.last_seq > coalesce(p.indexed_seq, s.fork_seq, 0)
  AND (%(project_id)s::text IS NULL OR s.project_id = %(project_id)s)
ORDER BY s.session_id
LIMIT %(limit)s;

-- name: search_backlog
SELECT count(*) AS sessions, coalesce(sum(stored_seq - indexed_seq), 0)::bigint AS messages
FROM search_progress
WHERE stored_seq > indexed_seq AND (%(project_id)s::text IS NULL OR project_id = %(project_id)s);

-- name: synonym_groups
SELECT group_id, array_agg(term ORDER BY term) AS terms FROM synonyms GROUP BY group_id ORDER BY group_id;

-- name: synonym_find
SELECT term, group_id FROM synonyms WHERE term = ANY(%(terms)b::text[]) FOR UPDATE;

-- name: synonym_new_group
SELECT nextval('synonym_groups');

-- name: synonym_merge
-- Every given term, and every term of the groups they were in, join one group.
UPDATE synonyms SET group_id = %(group_id)s WHERE group_id = ANY(%(groups)s::bigint[]);

-- name: synonym_insert
INSERT INTO synonyms (term, group_id) SELECT t, %(group_id)s FROM unnest(%(terms)b::text[]) AS t
ON CONFLICT (term) DO UPDATE SET group_id = excluded.group_id;

-- name: synonym_remove
DELETE FROM synonyms WHERE term = ANY(%(terms)b::text[]) RETURNING term;
