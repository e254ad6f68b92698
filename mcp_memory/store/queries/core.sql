-- name: insert_session
INSERT INTO sessions (session_id, project_id, agent_source, title, meta,
                      parent_session_id, fork_seq, parent_snapshot_id, last_seq)
VALUES (%(session_id)s, %(project_id)s, %(agent_source)s, %(title)s, %(meta)s,
        %(parent_session_id)s, %(fork_seq)s::bigint, %(parent_snapshot_id)s, coalesce(%(fork_seq)s::bigint, 0))
RETURNING *;

-- name: get_session
SELECT * FROM sessions WHERE session_id = %(session_id)s;

-- name: lock_session
-- The session row lock serialises appends to one session: seq = last_seq + 1 is then gap-free
-- and equal to commit order (DESIGN.md decision 1). The same statement returns the append_ids of
-- the batch that are already stored (one round trip). Rows committed by the transaction we waited
-- for are not in this statement's snapshot: the insert then hits UNIQUE (session_id, append_id)
-- and the core runs the append once more.
SELECT s.project_id, s.last_seq, m.append_id, m.seq, m.payload_hash
FROM sessions s
LEFT JOIN messages m ON m.session_id = s.session_id AND m.append_id = ANY(%(append_ids)b::text[])
WHERE s.session_id = %(session_id)s
FOR UPDATE OF s;

-- name: insert_message
INSERT INTO messages (session_id, seq, project_id, append_id, role, payload, payload_hash, created_at)
VALUES (%(session_id)s, %(seq)s, %(project_id)s, %(append_id)s, %(role)s, %(payload)s::jsonb, %(payload_hash)s,
        coalesce(%(created_at)s, now()));

-- name: insert_messages
-- Batches: INSERT … SELECT FROM unnest (COPY is refused under row-level security).
INSERT INTO messages (session_id, seq, project_id, append_id, role, payload, payload_hash, created_at)
SELECT %(session_id)s, m.seq, %(project_id)s, m.append_id, m.role, m.payload::jsonb, m.payload_hash,
       coalesce(m.created_at, now())
FROM unnest(%(seqs)b::bigint[], %(append_ids)b::text[], %(roles)b::text[], %(payloads)b::text[],
            %(hashes)b::bytea[], %(created)b::timestamptz[])
     AS m(seq, append_id, role, payload, payload_hash, created_at);

-- name: set_last_seq
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
