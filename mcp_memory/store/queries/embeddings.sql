-- name: embed_table_exists
SELECT to_regclass('message_embeddings') IS NOT NULL AS present;

-- name: embed_model_get
SELECT model, dim FROM embedding_models WHERE model = %(model)s;

-- name: embed_model_add
-- Records the model (first use creates its HNSW index); returns the dimension on record
-- (mm_register_embedding_model, migration 0007: well-known models are pre-registered).
SELECT mm_register_embedding_model(%(model)s, %(dim)s) AS dim;

-- name: embed_pending_sessions
-- The queue: sessions with messages past the model's watermark, oldest work first.
SELECT s.session_id, s.project_id, s.last_seq, coalesce(w.done_seq, 0) AS done_seq
FROM sessions s
LEFT JOIN embedding_watermarks w ON w.session_id = s.session_id AND w.model = %(model)s
WHERE s.last_seq > coalesce(w.done_seq, 0)
  AND {project}
ORDER BY coalesce(w.updated_at, s.created_at), s.session_id
LIMIT %(limit)s;

-- name: embed_session_messages
-- The next messages of one session after the watermark.
SELECT m.seq, m.payload
FROM messages m
WHERE m.session_id = %(session_id)s AND m.seq > %(after_seq)s AND m.seq <= %(up_to_seq)s
  AND m.part_month = mm_session_month(%(session_id)s)  -- one partition (migration 0027)
ORDER BY m.seq
LIMIT %(limit)s;

-- name: embed_store
-- Vectors of one session's messages and the model's watermark (mm_store_embeddings).
SELECT mm_store_embeddings(%(session_id)s, %(model)s, %(seqs)s::bigint[], %(kinds)s::text[], %(vectors)s::text[],
                           %(done_seq)s);

-- name: embed_counts
SELECT (SELECT count(*) FROM message_embeddings e
        WHERE e.model = %(model)s AND {project_e}) AS vectors,
       (SELECT coalesce(sum(s.last_seq - coalesce(w.done_seq, 0)), 0)::bigint FROM sessions s
        LEFT JOIN embedding_watermarks w ON w.session_id = s.session_id AND w.model = %(model)s
        WHERE {project_s}) AS pending;

-- name: embed_any
SELECT EXISTS (SELECT 1 FROM message_embeddings e
               WHERE e.model = %(model)s AND {project}) AS present;

-- name: embed_nearest
-- Nearest messages to the query vector for one model (slot dim is the model's dimension, a literal so
-- that the partial HNSW index on embedding::vector(dim) applies). Filters as in search_candidates,
-- composed per call (embedding_store.py);
-- only message vectors count (a 'window' row that a token holder stores is never ranked).
-- cjk: most of the message's index terms are CJK (the parameter cjk matches a term that starts with
-- a CJK character); a message not indexed yet counts as not CJK.
SELECT e.session_id, e.seq, e.distance,
       (SELECT pg_catalog.count(*) FILTER (WHERE u.lexeme ~ %(cjk)s) * 2 > pg_catalog.count(*)
        FROM message_search m, pg_catalog.unnest(m.tsv) AS u
        WHERE m.session_id = e.session_id AND m.part_month = e.part_month AND m.seq = e.seq) AS cjk
FROM (
    SELECT x.session_id, x.seq, x.part_month, x.embedding::vector({dim}) <=> %(query)s::vector({dim}) AS distance
    FROM message_embeddings x
    WHERE x.model = %(model)s AND x.kind = 'message' AND {filters}
    ORDER BY x.embedding::vector({dim}) <=> %(query)s::vector({dim})
    LIMIT %(pool)s
) AS e
ORDER BY e.distance, e.session_id, e.seq;
