-- name: session_insert
-- Writes go through the database's functions (migration 0007), which check the caller's project.
SELECT * FROM mm_create_session(%(session_id)s, %(project_id)s, %(agent_source)s, %(title)s, %(meta)s);

-- name: session_get
SELECT * FROM sessions WHERE session_id = %(session_id)s;

-- name: session_lock
-- The session row lock serialises appends to one session: seq = last_seq + 1 is then gap-free
-- and equal to commit order (README, design note 1). The same statement returns the append_ids of
-- the batch that are already stored (one round trip). Rows committed by the transaction we waited
-- for are not in this statement's snapshot: the insert then hits UNIQUE (session_id, append_id)
-- and the core runs the append once more.
-- part_month: the session's month (migration 0021), on each new row; retired: its month has left.
SELECT s.project_id, s.last_seq, now(), m.append_id, m.seq, m.payload_hash, s.part_month,
       EXISTS (SELECT 1 FROM retired_months r WHERE r.part_month = s.part_month) AS retired
FROM sessions s
LEFT JOIN messages m ON m.session_id = s.session_id
                    AND m.part_month = mm_session_month(%(session_id)s)  -- one partition, also in a generic plan
                    AND m.append_id = ANY(%(append_ids)b::text[])
WHERE s.session_id = %(session_id)s
FOR UPDATE OF s;

-- name: messages_append
-- One or more messages: seq = last_seq + 1 … under the session row lock, the duplicate/conflict
-- check of each append_id and the hash check, in the database (mm_append, migration 0007).
SELECT seq, duplicate FROM mm_append(%(session_id)s, %(append_ids)b::text[], %(roles)b::text[],
                                     %(payloads)b::text[], %(hashes)b::bytea[], %(created)b::timestamptz[]);



-- name: messages_copy
-- Big batches of an owner (the embedded default), where row-level security does not apply.
COPY messages (session_id, seq, project_id, append_id, role, payload, payload_hash, created_at, part_month)
FROM STDIN (FORMAT BINARY);

-- name: session_set_last_seq
-- The search watermark row learns the new last_seq in the same transaction: the stored messages
-- are now the indexer's work (README, design note 6).
WITH progress AS (
    UPDATE search_progress SET stored_seq = %(last_seq)s WHERE session_id = %(session_id)s
)
UPDATE sessions SET last_seq = %(last_seq)s, updated_at = now() WHERE session_id = %(session_id)s;

-- name: session_lineage
-- The session and its ancestors, each with the seq range of its own messages that belong to the
-- history of the requested session: (fork_seq, upper]; with the month partition that holds them
-- (migration 0021) and whether that month has retired from the hot tables.
WITH RECURSIVE chain AS (
    SELECT session_id, parent_session_id, fork_seq, NULL::bigint AS upper, 0 AS depth, part_month
    FROM sessions WHERE session_id = %(session_id)s
    UNION ALL
    SELECT p.session_id, p.parent_session_id, p.fork_seq, c.fork_seq, c.depth + 1, p.part_month
    FROM sessions p JOIN chain c ON p.session_id = c.parent_session_id
)
SELECT session_id, coalesce(fork_seq, 0) AS lower, upper, part_month,
       EXISTS (SELECT 1 FROM retired_months r WHERE r.part_month = chain.part_month) AS retired
FROM chain ORDER BY depth;

-- name: messages_read_range
-- part_month: only the session's own partition is read (migration 0021)
SELECT session_id, seq, append_id, role, payload, created_at FROM messages
WHERE session_id = %(session_id)s AND part_month = %(part_month)s AND seq > %(after_seq)s AND seq <= %(upper)s
ORDER BY seq LIMIT %(limit)s;

-- name: snapshot_insert
-- The pointer, its export job and the archiver's NOTIFY in one call (mm_snapshot, migration 0007).
SELECT * FROM mm_snapshot(%(session_id)s, %(commit_msg)s, %(meta)s);



-- name: snapshot_list
SELECT * FROM snapshots WHERE session_id = %(session_id)s ORDER BY snapshot_id;

-- name: snapshot_get
SELECT * FROM snapshots WHERE snapshot_id = %(snapshot_id)s;

-- name: session_list
-- slot filters: project, agent and the page's cursor when given (core_store.py, filters.py).
SELECT * FROM sessions
WHERE {filters}
ORDER BY created_at DESC, session_id DESC
LIMIT %(limit)s;

-- name: session_update_meta
SELECT * FROM mm_update_session_meta(%(session_id)s, %(set)s, %(remove)s::text[], %(title_given)s, %(title)s,
                                     %(agent_given)s, %(agent_source)s);

-- name: session_fork
-- Lineage from the snapshot itself; the caller must read it and write its project (mm_fork).
SELECT * FROM mm_fork(%(snapshot_id)s, %(session_id)s, %(agent_source)s, %(title)s, %(meta)s);

-- name: messages_listen
-- Woken by the trigger of migrations 0011/0014 when any session's last_seq moves (payload: the
-- session's channel key, messages_channel_key).
LISTEN mcp_memory_append;

-- name: messages_channel_key
SELECT mm_append_channel_key(%(session_id)s);
