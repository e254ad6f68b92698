-- name: ui_sessions
-- The review list (mcp_memory/ui): newest activity first, with the filters of the sessions page.
-- Row-level security limits it to the token's projects. Last activity: the time of the session's
-- last own message (imports keep the agent's times), else when the row last changed.
WITH owners AS (  -- the database owner's logins (as mm_is_owner, which token roles may not call)
    SELECT r.rolname::text AS rolname FROM pg_catalog.pg_roles r
    WHERE r.rolsuper OR pg_catalog.pg_has_role(r.oid, (SELECT c.relowner FROM pg_catalog.pg_class c
                                                       WHERE c.oid = 'sessions'::regclass), 'MEMBER')
)
SELECT s.session_id, s.project_id, s.agent_source, s.title, s.last_seq, s.fork_seq, s.parent_session_id,
       s.created_by, p.title AS parent_title,
       -- the writer's host: a token's name (`token create --name`, one per host); for the database
       -- owner's own writes, the machine name recorded in meta.host, else the one the caller knows
       -- (owner_host: on the embedded default, which only local processes reach, this machine)
       CASE WHEN s.created_by IN (SELECT rolname FROM owners) THEN coalesce(nullif(s.meta ->> 'host', ''), %(owner_host)s::text, s.created_by) ELSE s.created_by END AS host,
       -- a relay when the lineage was recorded by an import of an exported session (a later fork of
       -- that session copies its meta: it is a plain fork)
       CASE WHEN s.meta -> 'relayed_from' ->> 'session_id' = s.parent_session_id
            THEN s.meta -> 'relayed_from' END AS relayed_from,
       p.agent_source AS parent_agent, coalesce(last.created_at, s.updated_at) AS last_at
FROM sessions s
LEFT JOIN sessions p ON p.session_id = s.parent_session_id
LEFT JOIN LATERAL (SELECT m.created_at FROM messages m
                   WHERE m.session_id = s.session_id AND m.part_month = s.part_month  -- its own rows' month
                     AND m.seq = s.last_seq) last ON true
WHERE {filters}  -- the filters given (ui_store.py, filters.py)
ORDER BY last_at DESC, s.session_id DESC
LIMIT %(limit)s OFFSET %(offset)s;

-- name: ui_facets
-- The values offered by the filters of the sessions page (what the token can see).
WITH owners AS (  -- the database owner's logins (as mm_is_owner, which token roles may not call)
    SELECT r.rolname::text AS rolname FROM pg_catalog.pg_roles r
    WHERE r.rolsuper OR pg_catalog.pg_has_role(r.oid, (SELECT c.relowner FROM pg_catalog.pg_class c
                                                       WHERE c.oid = 'sessions'::regclass), 'MEMBER')
)
SELECT 'project' AS facet, project_id AS value FROM sessions GROUP BY project_id
UNION ALL
SELECT 'agent', agent_source FROM sessions WHERE agent_source IS NOT NULL GROUP BY agent_source
UNION ALL
SELECT 'host', CASE WHEN w.created_by IN (SELECT rolname FROM owners) THEN coalesce(nullif(w.meta_host, ''), %(owner_host)s::text, w.created_by) ELSE w.created_by END
FROM (SELECT created_by, meta ->> 'host' AS meta_host FROM sessions GROUP BY 1, 2) w GROUP BY 2
ORDER BY 1, 2
LIMIT 600;

-- name: ui_hops
-- For each session asked about: its own title and agent, its parent's title, and how many readable
-- ancestors it has (0 for a root), so that every hop of a relay or fork gets a title of its own.
WITH RECURSIVE up AS (
    SELECT s.session_id AS id, s.parent_session_id AS next, 0 AS depth
    FROM sessions s WHERE s.session_id = ANY(%(ids)s::text[])
    UNION ALL
    SELECT u.id, p.parent_session_id, u.depth + 1
    FROM up u JOIN sessions p ON p.session_id = u.next
    WHERE u.depth < 200
)
SELECT s.session_id, s.title, s.agent_source, p.title AS parent_title, d.depth
FROM (SELECT id, max(depth) AS depth FROM up GROUP BY id) d
JOIN sessions s ON s.session_id = d.id
LEFT JOIN sessions p ON p.session_id = s.parent_session_id;

-- name: ui_lineage_root
-- The oldest ancestor of a session that the token can read.
WITH RECURSIVE up AS (
    SELECT session_id, parent_session_id, 0 AS depth FROM sessions WHERE session_id = %(session_id)s
    UNION ALL
    SELECT p.session_id, p.parent_session_id, u.depth + 1
    FROM sessions p JOIN up u ON p.session_id = u.parent_session_id
    WHERE u.depth < 200
)
SELECT session_id FROM up ORDER BY depth DESC LIMIT 1;

-- name: ui_lineage_tree
-- Every fork and relay below the root (depth first order), capped for the graph.
WITH RECURSIVE down AS (
    SELECT session_id, parent_session_id, 0 AS depth, ARRAY[created_at::text, session_id] AS path
    FROM sessions WHERE session_id = %(root)s
    UNION ALL
    SELECT c.session_id, c.parent_session_id, d.depth + 1, d.path || ARRAY[c.created_at::text, c.session_id]
    FROM sessions c JOIN down d ON c.parent_session_id = d.session_id
    WHERE d.depth < 50
)
SELECT s.session_id, s.parent_session_id, s.project_id, s.agent_source, s.title, s.fork_seq, s.last_seq,
       s.created_at, d.depth,
       CASE WHEN s.meta -> 'relayed_from' ->> 'session_id' = s.parent_session_id
            THEN s.meta -> 'relayed_from' END AS relayed_from
FROM down d JOIN sessions s ON s.session_id = d.session_id
ORDER BY d.path
LIMIT %(limit)s;

-- name: ui_snapshots
-- A session's snapshots with their archive state: the archiver tags each exported snapshot
-- `snapshot-<id>` (mcp_memory/archive/export.py).
SELECT n.snapshot_id, n.up_to_seq, n.commit_msg, n.created_at, j.status AS job_status, j.finished_at,
       j.last_error, j.commit_sha
FROM snapshots n
LEFT JOIN export_jobs j ON j.snapshot_id = n.snapshot_id
WHERE n.session_id = %(session_id)s
ORDER BY n.snapshot_id;

-- name: ui_queue
SELECT status, count(*) AS jobs FROM export_jobs GROUP BY status ORDER BY status;

-- name: ui_oldest_pending
SELECT min(created_at) AS created_at FROM export_jobs WHERE status IN ('pending', 'running');

-- name: ui_failed_jobs
SELECT job_id, snapshot_id, session_id, project_id, attempts, last_error, finished_at
FROM export_jobs WHERE status = 'failed' OR last_error IS NOT NULL
ORDER BY job_id DESC LIMIT 50;

-- name: ui_search_backlog
SELECT count(*) FILTER (WHERE stored_seq > indexed_seq) AS sessions,
       coalesce(sum(greatest(stored_seq - indexed_seq, 0)), 0) AS messages
FROM search_progress;

-- name: ui_schema_version
SELECT coalesce(max(version), 0) AS version FROM schema_migrations;
