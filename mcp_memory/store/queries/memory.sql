-- name: decision_insert
-- Through the database (migration 0007): the session must be writable; a superseded decision is
-- marked in the same call.
SELECT * FROM mm_record_decision(%(session_id)s, %(decision_id)s, %(message_seq)s, %(decision_type)s, %(summary)s,
                                 %(status)s, %(rationale)s, %(alternatives)s, %(supersedes)s, %(metadata)s,
                                 %(visibility)s, %(tsv)s::tsvector);

-- name: decision_get
SELECT d.*, s.agent_source, s.title AS session_title FROM decisions d
JOIN sessions s ON s.session_id = d.session_id
WHERE d.decision_id = %(decision_id)s;

-- name: decision_update
-- Optimistic concurrency: the row changes only if nobody moved its version in between; a private
-- decision only by its author (mm_update_decision, migration 0007).
SELECT mm_update_decision(%(decision_id)s, %(expected_version)s, %(status)s, %(summary)s, %(rationale)s,
                          %(alternatives)s, %(metadata)s, %(tsv)s::tsvector) AS version;

-- name: decision_search
-- slot filters: the keyword match and the filters given, composed per call (memory_store.py, filters.py).
SELECT d.*, s.agent_source, s.title AS session_title,
       (SELECT coalesce(sum(w.weight * x.tf * 2.2 / (x.tf + 1.2)), 0)
        FROM (SELECT u.lexeme, coalesce(array_length(u.positions, 1), 1) AS tf FROM unnest(d.tsv) AS u) AS x
        JOIN unnest(%(terms)s::text[], %(weights)s::float8[]) AS w(term, weight) ON w.term = x.lexeme) AS score
FROM decisions d
JOIN sessions s ON s.session_id = d.session_id
WHERE {filters}
ORDER BY score DESC, d.created_at DESC, d.decision_id
LIMIT %(limit)s;

-- name: context_insert
-- A new revision (max + 1) under a per-key transaction lock (mm_set_context, migration 0007).
SELECT revision, created_at FROM mm_set_context(%(session_id)s, %(key)s, %(value)s);

-- name: context_current
SELECT DISTINCT ON (key) key, revision, value, created_at FROM session_context
WHERE session_id = %(session_id)s AND {key}
ORDER BY key, revision DESC;

-- name: context_history
SELECT key, revision, value, created_at FROM session_context
WHERE session_id = %(session_id)s AND key = %(key)s
ORDER BY revision;

-- name: agent_list
-- The agents of the sessions the caller reads (every agent for the owner; migration 0014).
SELECT name, description, created_at FROM mm_agents();

-- name: agent_describe
INSERT INTO agents (name, description) VALUES (%(name)s, %(description)s)
ON CONFLICT (name) DO UPDATE SET description = excluded.description
RETURNING name, description, created_at;

-- name: recall_latest_turns
-- Session start without a recorded decision (core/recall.py `digest`): the newest user and assistant
-- turns of the project's most recently written sessions, newest first.
SELECT m.session_id, m.seq, m.role, m.payload, m.created_at, s.title
FROM (SELECT session_id, title, part_month FROM sessions WHERE project_id = %(project_id)s
      ORDER BY updated_at DESC LIMIT %(sessions)s) s
JOIN messages m ON m.session_id = s.session_id AND m.part_month = s.part_month
WHERE m.role IN ('user', 'assistant')
ORDER BY m.created_at DESC, m.seq DESC
LIMIT %(cap)s;
