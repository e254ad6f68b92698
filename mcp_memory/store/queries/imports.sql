-- name: insert_session_if_absent
-- Imported sessions have ids derived from (project, agent, native id): importing again finds the
-- session instead of creating a second one.
SELECT session_id FROM mm_create_session(%(session_id)s, %(project_id)s, %(agent_source)s, %(title)s, %(meta)s,
                                         true);
