-- name: session_insert_if_absent
-- Imported sessions have ids derived from (project, agent, native id): importing again finds the
-- session instead of creating a second one.
SELECT session_id FROM mm_create_session(%(session_id)s, %(project_id)s, %(agent_source)s, %(title)s, %(meta)s,
                                         true);

-- name: relay_record
-- The snapshot at the exported seq and the record of which native session it became (0010_relays.sql).
SELECT project_id, agent, native_id, snapshot_id, session_id, carried
FROM mm_record_relay(%(session_id)s, %(agent)s, %(native_id)s, %(carried)s::text[]);

-- name: relay_find
-- The relays this role can see for a native session, newest first, with the snapshot's seq.
SELECT r.project_id, r.agent, r.native_id, r.snapshot_id, r.session_id, r.carried, n.up_to_seq
FROM relay_exports r JOIN snapshots n ON n.snapshot_id = r.snapshot_id
WHERE r.agent = %(agent)s AND r.native_id = %(native_id)s
ORDER BY r.created_at DESC;
