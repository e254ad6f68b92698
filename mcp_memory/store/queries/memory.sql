-- name: decision_insert
INSERT INTO decisions (session_id, decision_id, project_id, message_seq, decision_type, summary, status,
                       rationale, alternatives, supersedes, metadata, visibility, tsv)
VALUES (%(session_id)s, %(decision_id)s, %(project_id)s, %(message_seq)s, %(decision_type)s, %(summary)s,
        %(status)s, %(rationale)s, %(alternatives)s, %(supersedes)s, %(metadata)s, %(visibility)s,
        %(tsv)s::tsvector)
RETURNING *;

-- name: decision_lock
SELECT d.*, s.agent_source, s.title AS session_title FROM decisions d
JOIN sessions s ON s.session_id = d.session_id
WHERE d.decision_id = %(decision_id)s FOR UPDATE OF d;

-- name: decision_get
SELECT d.*, s.agent_source, s.title AS session_title FROM decisions d
JOIN sessions s ON s.session_id = d.session_id
WHERE d.decision_id = %(decision_id)s;

-- name: decision_supersede
UPDATE decisions SET status = 'superseded', superseded_by = %(superseded_by)s, version = version + 1,
                     updated_at = now()
WHERE decision_id = %(decision_id)s
RETURNING version;

-- name: decision_update
-- Optimistic concurrency: the row changes only if nobody moved its version in between.
UPDATE decisions
SET status = %(status)s, summary = %(summary)s, rationale = %(rationale)s, alternatives = %(alternatives)s,
    metadata = %(metadata)s, tsv = %(tsv)s::tsvector, version = version + 1, updated_at = now()
WHERE decision_id = %(decision_id)s AND version = %(expected_version)s
RETURNING version;

-- name: decision_search
SELECT d.*, s.agent_source, s.title AS session_title,
       (SELECT coalesce(sum(w.weight * x.tf * 2.2 / (x.tf + 1.2)), 0)
        FROM (SELECT u.lexeme, coalesce(array_length(u.positions, 1), 1) AS tf FROM unnest(d.tsv) AS u) AS x
        JOIN unnest(%(terms)s::text[], %(weights)s::float8[]) AS w(term, weight) ON w.term = x.lexeme) AS score
FROM decisions d
JOIN sessions s ON s.session_id = d.session_id
WHERE (%(match)s::tsquery IS NULL AND %(like)s::text IS NULL
       OR d.tsv @@ %(match)s::tsquery
       OR d.summary ILIKE %(like)s ESCAPE '\' OR d.rationale ILIKE %(like)s ESCAPE '\')
  AND (%(exclude)s::tsquery IS NULL OR NOT d.tsv @@ %(exclude)s::tsquery)
  AND (%(status)s::text[] IS NULL OR d.status = ANY(%(status)s::text[]))
  AND (%(decision_type)s::text IS NULL OR d.decision_type = %(decision_type)s)
  AND (%(project_id)s::text IS NULL OR d.project_id = %(project_id)s)
  AND (%(agent_source)s::text IS NULL OR s.agent_source = %(agent_source)s)
  AND (%(session_id)s::text IS NULL OR d.session_id = %(session_id)s)
  AND (%(since)s::timestamptz IS NULL OR d.created_at >= %(since)s)
  AND (%(until)s::timestamptz IS NULL OR d.created_at < %(until)s)
ORDER BY score DESC, d.created_at DESC, d.decision_id
LIMIT %(limit)s;

-- name: context_lock
-- Serialises set_context on one key (a hash collision only makes two keys wait for each other) (revision = max + 1) without touching the session row,
-- which appends lock; transaction-scoped, so it is safe behind PgBouncer.
SELECT pg_advisory_xact_lock(hashtextextended(%(session_id)s || ':' || %(key)s, 0));

-- name: context_insert
INSERT INTO session_context (session_id, key, revision, project_id, value)
SELECT s.session_id, %(key)s,
       coalesce((SELECT max(revision) FROM session_context c
                 WHERE c.session_id = s.session_id AND c.key = %(key)s), 0) + 1,
       s.project_id, %(value)s
FROM sessions s WHERE s.session_id = %(session_id)s
RETURNING revision, created_at;

-- name: context_current
SELECT DISTINCT ON (key) key, revision, value, created_at FROM session_context
WHERE session_id = %(session_id)s AND (%(key)s::text IS NULL OR key = %(key)s)
ORDER BY key, revision DESC;

-- name: context_history
SELECT key, revision, value, created_at FROM session_context
WHERE session_id = %(session_id)s AND key = %(key)s
ORDER BY revision;

-- name: agents_list
SELECT name, description, created_at FROM agents ORDER BY name;

-- name: agent_describe
INSERT INTO agents (name, description) VALUES (%(name)s, %(description)s)
ON CONFLICT (name) DO UPDATE SET description = excluded.description
RETURNING name, description, created_at;
