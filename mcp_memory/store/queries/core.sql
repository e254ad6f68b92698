-- name: insert_session
-- With its search watermark: a fork's own messages start after the fork point.
WITH s AS (
    INSERT INTO sessions (session_id, project_id, agent_source, title, meta,
                          parent_session_id, fork_seq, parent_snapshot_id, last_seq)
    VALUES (%(session_id)s, %(project_id)s, %(agent_source)s, %(title)s, %(meta)s,
            %(parent_session_id)s, %(fork_seq)s::bigint, %(parent_snapshot_id)s, coalesce(%(fork_seq)s::bigint, 0))
    RETURNING *
), progress AS (
    INSERT INTO search_progress (session_id, project_id, indexed_seq, stored_seq)
    SELECT session_id, project_id, last_seq, last_seq FROM s
)
SELECT * FROM s;

-- name: get_session
SELECT * FROM sessions WHERE session_id = %(session_id)s;

-- name: lock_session
-- The session row lock serialises appends to one session: seq = last_seq + 1 is then gap-free
-- and equal to commit order (DESIGN.md decision 1). The same statement returns the append_ids of
-- the batch that are already stored (one round trip). Rows committed by the transaction we waited
-- for are not in this statement's snapshot: the insert then hits UNIQUE (session_id, append_id)
-- and the core runs the append once more.
SELECT s.project_id, s.last_seq, now(), m.append_id, m.seq, m.payload_hash
FROM sessions s
LEFT JOIN messages m ON m.session_id = s.session_id AND m.append_id = ANY(%(append_ids)b::text[])
WHERE s.session_id = %(session_id)s
FOR UPDATE OF s;

-- name: append_one
-- One message in one statement, sent together with COMMIT (one round trip): lock the session row,
-- look for the append_id, insert at last_seq + 1 unless it is stored, move last_seq and the search
-- watermark's stored_seq. A row committed by the transaction we waited for is not in this
-- statement's snapshot: the insert then hits UNIQUE (session_id, append_id), as in lock_session.
WITH s AS (
    SELECT project_id, last_seq FROM sessions WHERE session_id = %(session_id)s FOR UPDATE
), dup AS (
    SELECT seq, payload_hash FROM messages WHERE session_id = %(session_id)s AND append_id = %(append_id)s
), ins AS (
    INSERT INTO messages (session_id, seq, project_id, append_id, role, payload, payload_hash, created_at)
    SELECT %(session_id)s, s.last_seq + 1, s.project_id, %(append_id)s, %(role)s, %(payload)s::jsonb,
           %(payload_hash)s, coalesce(%(created_at)s, now())
    FROM s WHERE NOT EXISTS (SELECT 1 FROM dup)
    RETURNING seq
), moved AS (
    UPDATE sessions SET last_seq = ins.seq, updated_at = now() FROM ins WHERE session_id = %(session_id)s
), progress AS (
    UPDATE search_progress SET stored_seq = ins.seq FROM ins WHERE session_id = %(session_id)s
)
SELECT (SELECT project_id FROM s) AS project_id, (SELECT seq FROM ins) AS seq,
       (SELECT seq FROM dup) AS stored_seq, (SELECT payload_hash FROM dup) AS stored_hash;

-- name: insert_message
INSERT INTO messages (session_id, seq, project_id, append_id, role, payload, payload_hash, created_at)
VALUES (%(session_id)s, %(seq)s, %(project_id)s, %(append_id)s, %(role)s, %(payload)s::jsonb, %(payload_hash)s,
        coalesce(%(created_at)s, now()));

-- name: insert_messages
-- Batches under row-level security (which refuses COPY): INSERT … SELECT FROM unnest.
INSERT INTO messages (session_id, seq, project_id, append_id, role, payload, payload_hash, created_at)
SELECT %(session_id)s, m.seq, %(project_id)s, m.append_id, m.role, m.payload::jsonb, m.payload_hash,
       coalesce(m.created_at, now())
FROM unnest(%(seqs)b::bigint[], %(append_ids)b::text[], %(roles)b::text[], %(payloads)b::text[],
            %(hashes)b::bytea[], %(created)b::timestamptz[])
     AS m(seq, append_id, role, payload, payload_hash, created_at);

-- name: copy_messages
-- Batches, where row-level security does not apply (the embedded default, an owner role).
COPY messages (session_id, seq, project_id, append_id, role, payload, payload_hash, created_at)
FROM STDIN (FORMAT BINARY);

-- name: set_last_seq
-- The search watermark row learns the new last_seq in the same transaction: the stored messages
-- are now the indexer's work (DESIGN.md decision 6).
WITH progress AS (
    UPDATE search_progress SET stored_seq = %(last_seq)s WHERE session_id = %(session_id)s
)
UPDATE sessions SET last_seq = %(last_seq)s, updated_at = now() WHERE session_id = %(session_id)s;

-- name: lineage
-- The session and its ancestors, each with the seq range of its own messages that belong to the
-- history of the requested session: (fork_seq, upper].
WITH RECURSIVE chain AS (
    SELECT session_id, parent_session_id, fork_seq, NULL::bigint AS upper, 0 AS depth
    FROM sessions WHERE session_id = %(session_id)s
    UNION ALL
    SELECT p.session_id, p.parent_session_id, p.fork_seq, c.fork_seq, c.depth + 1
    FROM sessions p JOIN chain c ON p.session_id = c.parent_session_id
)
SELECT session_id, coalesce(fork_seq, 0) AS lower, upper FROM chain ORDER BY depth;

-- name: read_range
SELECT session_id, seq, append_id, role, payload, created_at FROM messages
WHERE session_id = %(session_id)s AND seq > %(after_seq)s AND seq <= %(upper)s
ORDER BY seq LIMIT %(limit)s;

-- name: insert_snapshot
INSERT INTO snapshots (session_id, project_id, up_to_seq, commit_msg, meta)
SELECT session_id, project_id, last_seq, %(commit_msg)s, %(meta)s
FROM sessions WHERE session_id = %(session_id)s
RETURNING *;

-- name: insert_export_job
INSERT INTO export_jobs (snapshot_id, session_id, project_id)
VALUES (%(snapshot_id)s, %(session_id)s, %(project_id)s)
RETURNING job_id;

-- name: notify_export
SELECT pg_notify('mcp_memory_export', %(payload)s);

-- name: list_snapshots
SELECT * FROM snapshots WHERE session_id = %(session_id)s ORDER BY snapshot_id;

-- name: get_snapshot
SELECT * FROM snapshots WHERE snapshot_id = %(snapshot_id)s;

-- name: list_sessions
SELECT * FROM sessions
WHERE (%(project_id)s::text IS NULL OR project_id = %(project_id)s)
  AND (%(agent_source)s::text IS NULL OR agent_source = %(agent_source)s)
  AND (%(cursor_at)s::timestamptz IS NULL OR (created_at, session_id) < (%(cursor_at)s, %(cursor_id)s))
ORDER BY created_at DESC, session_id DESC
LIMIT %(limit)s;

-- name: update_session_meta
UPDATE sessions
SET meta = (meta - %(remove)s::text[]) || %(set)s,
    title = CASE WHEN %(title_given)s THEN %(title)s ELSE title END,
    agent_source = CASE WHEN %(agent_given)s THEN %(agent_source)s ELSE agent_source END,
    updated_at = now()
WHERE session_id = %(session_id)s
RETURNING *;
