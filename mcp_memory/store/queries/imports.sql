-- name: insert_session_if_absent
-- Imported sessions have ids derived from (project, agent, native id): importing again finds the
-- session instead of creating a second one.
INSERT INTO sessions (session_id, project_id, agent_source, title, meta)
VALUES (%(session_id)s, %(project_id)s, %(agent_source)s, %(title)s, %(meta)s)
ON CONFLICT (session_id) DO NOTHING;
