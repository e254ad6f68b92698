-- name: cold_month_sessions
-- The sessions whose rows sit in a month's partitions (archive/cold.py).
SELECT session_id, project_id, coalesce(fork_seq, 0) AS fork_seq, last_seq
FROM sessions WHERE part_month = %(month)s ORDER BY session_id;

-- name: cold_month_sessions_locked
-- The same, locked against appends (mm_append locks the session row FOR UPDATE) until the
-- retirement commits.
SELECT session_id, project_id, coalesce(fork_seq, 0) AS fork_seq, last_seq
FROM sessions WHERE part_month = %(month)s ORDER BY session_id FOR SHARE;

-- name: cold_record_commit
UPDATE retired_months SET archive_commit = %(commit)s WHERE part_month = %(month)s;

-- name: cold_retired_month
SELECT dropped, archive_commit FROM retired_months WHERE part_month = %(month)s;

-- name: cold_restore_month
SELECT part, attached FROM mm_restore_month(%(month)s);
