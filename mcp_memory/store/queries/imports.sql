-- name: insert_session_if_absent
-- Imported sessions have ids derived from (project, agent, native id): importing again finds the
-- session instead of creating a second one.
WITH s AS (
    INSERT INTO sessions (session_id, project_id, agent_source, title, meta)
    VALUES (%(session_id)s, %(project_id)s, %(agent_source)s, %(title)s, %(meta)s)
    ON CONFLICT (session_id) DO NOTHING
    RETURNING session_id, project_id
)
INSERT INTO search_progress (session_id, project_id, indexed_seq, stored_seq)
SELECT session_id, project_id, 0, 0 FROM s;
