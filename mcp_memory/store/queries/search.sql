-- name: search_index_pass
-- An indexing pass of one session through the database (mm_index_messages, migration 0007): the
-- rows, the BM25 statistics and the watermark. Role and time come from the stored messages; `echoes`
-- marks the rows that echo mcp-memory's own tools (migration 0017).
SELECT mm_index_messages(%(session_id)s, %(seqs)b::bigint[], %(doc_lens)b::integer[], %(tsvs)b::text[],
                         %(terms)b::text[], %(dfs)b::bigint[], %(shard)s::smallint, %(indexed_seq)s,
                         %(echoes)b::boolean[]);

-- name: search_term_df
-- slot project: the project filter when given (filters.py: no catch-all, the planner sees the value).
SELECT term, sum(df)::bigint AS df FROM search_term_stats
WHERE term = ANY(%(terms)b::text[]) AND {project}
GROUP BY term;

-- name: search_doc_totals
SELECT coalesce(sum(docs), 0)::bigint AS docs, coalesce(sum(total_len), 0)::bigint AS total_len
FROM search_doc_stats WHERE {project};

-- name: search_candidates
-- The candidates of one search and their BM25 scores: mm_search_candidates (migration 0030) scans
-- message_search with the GIN index and the given filters (NULL: not given) in the caller's scope,
-- at most %(pool)s rows, the best by ts_rank or, when `newest` (the statistics say the terms match
-- more rows than search_store.NEWEST_ABOVE: a common word), the newest matches (README, "Growth").
SELECT session_id, seq, created_at, score
FROM mm_search_candidates(%(match)s::tsquery, %(terms)b::text[], %(weights)s::float8[], %(avg_len)s::float8,
                          %(k1)s::float8, %(b)s::float8, %(pool)s::integer, %(newest)s::boolean, %(echoes)s::boolean,
                          %(project_id)s::text, %(role)s::text, %(since)s::timestamptz, %(until)s::timestamptz,
                          %(agent_source)s::text, %(seg_sessions)s::text[], %(seg_lower)s::bigint[],
                          %(seg_upper)s::bigint[]);

-- name: search_hits
-- The rows to show, with the same filters (a neighbour of a hit must pass them too) and the
-- required phrases / exclusions, composed per call (slot scope).
SELECT m.session_id, m.seq, m.role, m.payload, m.created_at, s.title, s.agent_source, s.project_id
FROM unnest(%(sessions)s::text[], %(seqs)b::bigint[]) AS k(session_id, seq)
JOIN sessions s ON s.session_id = k.session_id
JOIN message_search ms ON ms.session_id = k.session_id AND ms.seq = k.seq AND ms.part_month = s.part_month
JOIN messages m ON m.session_id = k.session_id AND m.seq = k.seq AND m.part_month = s.part_month
WHERE {scope};

-- name: search_index_lock
-- One indexer per session at a time (two would index the same messages twice): the session's row
-- of search_claims, locked until the transaction ends (migration 0014). Not the session row, so
-- that an append to the session never waits for an indexing pass; not an advisory lock, which any
-- token could take first.
SELECT mm_index_claim(%(session_id)s);

-- name: search_watermark
-- What is indexed of the session, and what is stored: a session without a progress row (restored
-- from an archive) starts at its fork point.
SELECT s.project_id, s.last_seq, coalesce(p.indexed_seq, s.fork_seq, 0) AS indexed_seq
FROM sessions s LEFT JOIN search_progress p ON p.session_id = s.session_id
WHERE s.session_id = %(session_id)s;

-- name: search_unindexed_messages
SELECT seq, role, payload, created_at FROM messages
WHERE session_id = %(session_id)s AND seq > %(after_seq)s AND seq <= %(up_to_seq)s
  AND part_month = mm_session_month(%(session_id)s)  -- one partition (migration 0027)
ORDER BY seq
LIMIT %(limit)s;

-- name: search_earlier_calls
-- The function names of earlier tool calls of the session that these ids name: a tool result
-- indexed in a later pass than its call (echoes of mcp-memory's tools, core/indexer.py). Only the
-- EARLIER_CALLS messages before the pass are looked at.
SELECT c.value->>'id' AS id, c.value->'function'->>'name' AS name
FROM messages m
CROSS JOIN LATERAL jsonb_array_elements(CASE WHEN jsonb_typeof(m.payload->'tool_calls') = 'array'
                                             THEN m.payload->'tool_calls' ELSE '[]'::jsonb END) AS c(value)
WHERE m.session_id = %(session_id)s AND m.seq <= %(before_seq)s AND m.seq > %(before_seq)s - %(lookback)s
  AND m.part_month = mm_session_month(%(session_id)s)  -- one partition (migration 0027)
  AND m.role = 'assistant' AND c.value->>'id' = ANY(%(ids)s::text[]);

-- name: search_forget_session
-- `reindex --full`, one session under its indexing lock: its index rows go, their counts leave the
-- BM25 statistics, and the watermark returns to the fork point (mm_forget_session_index).
SELECT mm_forget_session_index(%(session_id)s, %(shard)s::smallint);

-- name: search_all_sessions
SELECT session_id FROM sessions
WHERE {project} AND session_id > %(after)s
ORDER BY session_id
LIMIT %(limit)s;

-- name: search_pending_sessions
-- Sessions with stored messages the index does not have yet (the partial index keeps this cheap).
SELECT session_id FROM search_progress
WHERE stored_seq > indexed_seq AND {project}
ORDER BY updated_at, session_id
LIMIT %(limit)s;

-- name: search_untracked_sessions
-- For `reindex`: every session whose index is behind, progress row or not (a full scan of sessions).
SELECT s.session_id FROM sessions s LEFT JOIN search_progress p ON p.session_id = s.session_id
WHERE s.last_seq > coalesce(p.indexed_seq, s.fork_seq, 0)
  AND {project}
ORDER BY s.session_id
LIMIT %(limit)s;

-- name: search_backlog
SELECT count(*) AS sessions, coalesce(sum(stored_seq - indexed_seq), 0)::bigint AS messages
FROM search_progress
WHERE stored_seq > indexed_seq AND {project};

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
