-- Every statement of the git archiver (mcp_memory/archive): queue, leader lock, export reads,
-- status, verify and restore.

-- name: archive_try_lock
-- The single writer's lease (migration 0014), held by this direct connection's backend: taken when
-- free or when its holder's backend is gone, renewed by the holder. Only the owner's functions
-- write it, so no token can take it.
SELECT mm_archive_acquire(%(worker)s, %(lease)s::float8);

-- name: archive_unlock
SELECT mm_archive_release();

-- name: archive_now
SELECT now();

-- name: archive_listen
LISTEN mcp_memory_export;

-- name: archive_notify
SELECT pg_notify('mcp_memory_export', %(payload)s);

-- name: archive_nodes
-- The archivers that asked for the lease in the last day: the leader first, then the standbys.
SELECT worker, role_name, pid, client, last_seen, leader, alive, since, lease_until FROM mm_archive_nodes();

-- name: archive_claim_jobs
-- Due pending jobs, and running jobs whose lease ran out (their archiver died), in snapshot order so
-- that a session's snapshots are committed in the order they were taken. `due_before` (--once: the
-- start of the run) keeps a job that failed during this run for the next run. The queue functions
-- refuse a connection that does not hold the archiver lock (0008_archiver.sql).
SELECT job_id, snapshot_id, session_id, attempts
FROM mm_archive_claim(%(worker)s, %(lease)s::float8, %(limit)s::integer, %(due_before)s::timestamptz);

-- name: archive_heartbeat
SELECT mm_archive_heartbeat(%(worker)s, %(lease)s::float8);

-- name: archive_release_running
-- On taking the lock: no other archiver can be working, so every running job is stale.
SELECT mm_archive_release_running();

-- name: archive_mark_done
-- with the archive commit of each job (migration 0012), so readers without the repository can name it
SELECT mm_archive_mark_done(%(job_ids)s::bigint[], %(commits)s::text[]);

-- name: archive_mark_attempt_failed
SELECT mm_archive_mark_failed(%(job_id)s::bigint, %(error)s, %(give_up)s, %(delay)s::float8) AS status;

-- name: archive_next_due
-- The next pending job due, or the next running job whose lease runs out (left by a dead or stuck
-- archiver or push): the lease holder wakes then and claims it again, without waiting for a poll.
SELECT extract(epoch FROM min(CASE WHEN status = 'pending' THEN run_after
                                  ELSE greatest(lease_until, now() + interval '1 second') END) - now())
FROM export_jobs WHERE status = 'pending' OR (status = 'running' AND lease_until IS NOT NULL);

-- name: archive_get_job
SELECT job_id, snapshot_id, session_id, status, attempts, last_error FROM export_jobs WHERE job_id = %(job_id)s;

-- name: archive_requeue
SELECT mm_archive_requeue(%(job_id)s::bigint);

-- name: archive_status_counts
SELECT status, count(*) AS jobs FROM export_jobs GROUP BY status;

-- name: archive_oldest_pending
SELECT job_id, snapshot_id, session_id, created_at, run_after, attempts, last_error,
       extract(epoch FROM now() - created_at) AS age_seconds
FROM export_jobs WHERE status IN ('pending', 'running') ORDER BY created_at, job_id LIMIT 1;

-- name: archive_failed_jobs
SELECT job_id, snapshot_id, session_id, attempts, last_error, finished_at
FROM export_jobs WHERE status = 'failed' ORDER BY job_id LIMIT %(limit)s;

-- name: archive_export_snapshot
-- The snapshot, its session and lineage, read in the export's one REPEATABLE READ transaction.
SELECT n.snapshot_id, n.session_id, n.project_id, n.up_to_seq, n.commit_msg, n.meta AS snapshot_meta,
       n.created_by AS snapshot_created_by, n.created_at AS snapshot_created_at,
       s.agent_source, s.title, s.meta, s.parent_session_id, s.fork_seq, s.parent_snapshot_id,
       s.created_by, s.created_at
FROM snapshots n JOIN sessions s ON s.session_id = n.session_id
WHERE n.snapshot_id = %(snapshot_id)s;

-- name: archive_done_watermarks
-- Per session: the highest snapshot watermark whose export is done (what the archive must hold).
SELECT n.session_id, max(n.up_to_seq) AS up_to_seq, array_agg(n.snapshot_id ORDER BY n.snapshot_id) AS snapshot_ids
FROM export_jobs j JOIN snapshots n ON n.snapshot_id = j.snapshot_id
WHERE j.status = 'done'
GROUP BY n.session_id;

-- name: archive_sessions_lineage
SELECT session_id, parent_session_id, fork_seq, parent_snapshot_id
FROM sessions WHERE session_id = ANY(%(session_ids)s);

-- name: archive_snapshot_seqs
SELECT snapshot_id, session_id, up_to_seq FROM snapshots;

-- name: archive_db_digests
-- count, last seq and sha256 of the concatenated payload hashes of each session's own rows up to a seq.
SELECT w.session_id, count(m.seq) AS messages, coalesce(max(m.seq), 0) AS last_seq,
       sha256(coalesce(string_agg(m.payload_hash, ''::bytea ORDER BY m.seq), ''::bytea)) AS digest
FROM unnest(%(session_ids)s::text[], %(up_to)s::bigint[]) AS w(session_id, up_to)
LEFT JOIN messages m ON m.session_id = w.session_id AND m.seq <= w.up_to
GROUP BY w.session_id;

-- name: restore_has_sessions
SELECT EXISTS (SELECT 1 FROM sessions);

-- name: restore_insert_session
INSERT INTO sessions (session_id, project_id, agent_source, title, meta, last_seq,
                      parent_session_id, fork_seq, created_by, created_at)
VALUES (%(session_id)s, %(project_id)s, %(agent_source)s, %(title)s, %(meta)s, 0,
        %(parent_session_id)s, %(fork_seq)s, coalesce(%(created_by)s, current_user), %(created_at)s)
ON CONFLICT (session_id) DO NOTHING;

-- name: restore_temp_messages
-- written_by nullable here: a line of an older archive has no author (the owner restoring stands in)
CREATE TEMP TABLE restore_messages ON COMMIT DROP AS
SELECT session_id, seq, project_id, append_id, role, payload, payload_hash, created_at,
       NULL::text AS written_by FROM messages WITH NO DATA;

-- name: restore_clear_temp
TRUNCATE restore_messages;

-- name: restore_copy_messages
COPY restore_messages (session_id, seq, project_id, append_id, role, payload, payload_hash, created_at, written_by)
FROM STDIN;

-- name: restore_insert_messages
-- part_month: the month of the restored session row (migration 0021)
INSERT INTO messages (session_id, seq, project_id, append_id, role, payload, payload_hash, created_at, written_by,
                      part_month)
SELECT r.session_id, r.seq, r.project_id, r.append_id, r.role, r.payload, r.payload_hash, r.created_at,
       coalesce(r.written_by, current_user), s.part_month
FROM restore_messages r JOIN sessions s ON s.session_id = r.session_id
ON CONFLICT DO NOTHING;

-- name: restore_insert_snapshot
INSERT INTO snapshots (snapshot_id, session_id, project_id, up_to_seq, commit_msg, meta, created_by, created_at)
VALUES (%(snapshot_id)s, %(session_id)s, %(project_id)s, %(up_to_seq)s, %(commit_msg)s, %(meta)s,
        coalesce(%(created_by)s, current_user), %(created_at)s)
ON CONFLICT (snapshot_id) DO NOTHING;

-- name: restore_set_parent_snapshot
UPDATE sessions SET parent_snapshot_id = %(parent_snapshot_id)s
WHERE session_id = %(session_id)s AND parent_snapshot_id IS NULL
  AND EXISTS (SELECT 1 FROM snapshots WHERE snapshot_id = %(parent_snapshot_id)s);

-- name: restore_set_last_seq
-- last_seq: the highest seq the history reaches (own rows, the fork point, the snapshots).
UPDATE sessions s
SET last_seq = greatest(s.last_seq, coalesce(s.fork_seq, 0),
                        coalesce((SELECT max(seq) FROM messages m WHERE m.session_id = s.session_id), 0),
                        coalesce((SELECT max(up_to_seq) FROM snapshots n WHERE n.session_id = s.session_id), 0)),
    updated_at = now()
WHERE s.session_id = ANY(%(session_ids)s);

-- name: restore_current_role
SELECT current_user;

-- name: restore_mark_archived
-- A restored snapshot came from the archive: its export is done (archive status and /metrics then
-- count nothing of it as waiting). A snapshot that already has a job (restore --force) keeps it.
INSERT INTO export_jobs (snapshot_id, session_id, project_id, status, finished_at, last_error)
SELECT n.snapshot_id, n.session_id, n.project_id, 'done', now(), NULL
FROM snapshots n
WHERE n.snapshot_id = ANY(%(snapshot_ids)s)
  AND NOT EXISTS (SELECT 1 FROM export_jobs j WHERE j.snapshot_id = n.snapshot_id);

-- name: restore_reset_identity
-- Snapshots keep their ids: move the identity past them so new snapshots never reuse a tag name.
SELECT setval(pg_get_serial_sequence('snapshots', 'snapshot_id'),
              coalesce((SELECT max(snapshot_id) FROM snapshots), 1),
              (SELECT max(snapshot_id) FROM snapshots) IS NOT NULL);

-- name: archive_auto_snapshot
-- The automatic snapshot policy (migration 0016), run on the lease holder's connection.
SELECT snapshot_id, session_id, up_to_seq
FROM mm_auto_snapshot(%(idle_seconds)s::float8, %(every_messages)s::bigint, %(limit)s::integer);

-- name: archive_export_decisions
-- Every version of the session's decisions (migration 0016), as each version was written.
SELECT row FROM decision_versions WHERE session_id = %(session_id)s ORDER BY decision_id, version;

-- name: archive_export_context
-- Every revision of the session's context keys.
SELECT to_jsonb(c) AS row FROM session_context c WHERE c.session_id = %(session_id)s ORDER BY c.key, c.revision;

-- name: archive_all_decisions
SELECT session_id, row FROM decision_versions WHERE session_id = ANY(%(session_ids)s);

-- name: archive_all_context
SELECT c.session_id, to_jsonb(c) AS row FROM session_context c WHERE c.session_id = ANY(%(session_ids)s);

-- name: restore_insert_decision
-- The first archived version of a decision; the versions trigger records it again in decision_versions.
INSERT INTO decisions (session_id, decision_id, project_id, message_seq, decision_type, summary, status, rationale,
                       alternatives, supersedes, superseded_by, metadata, visibility, version, tsv, created_by,
                       created_at, updated_at)
SELECT %(session_id)s, r.decision_id, %(project_id)s, r.message_seq, r.decision_type, r.summary, r.status,
       r.rationale, coalesce(r.alternatives, '[]'), r.supersedes, r.superseded_by, coalesce(r.metadata, '{}'),
       coalesce(r.visibility, 'team'), r.version, %(tsv)s::tsvector, coalesce(r.created_by, current_user),
       coalesce(r.created_at, now()), coalesce(r.updated_at, r.created_at, now())
FROM jsonb_populate_record(NULL::decisions, %(row)s) AS r
ON CONFLICT DO NOTHING;

-- name: restore_update_decision
-- A later version: applied only over an earlier one (restore --force never goes back).
UPDATE decisions d
SET message_seq = r.message_seq, decision_type = r.decision_type, summary = r.summary, status = r.status,
    rationale = r.rationale, alternatives = coalesce(r.alternatives, '[]'), supersedes = r.supersedes,
    superseded_by = r.superseded_by, metadata = coalesce(r.metadata, '{}'), visibility = coalesce(r.visibility, 'team'),
    version = r.version, tsv = %(tsv)s::tsvector, updated_at = coalesce(r.updated_at, now())
FROM jsonb_populate_record(NULL::decisions, %(row)s) AS r
WHERE d.session_id = %(session_id)s AND d.decision_id = r.decision_id AND d.version < r.version;

-- name: restore_insert_context
INSERT INTO session_context (session_id, key, revision, project_id, value, created_by, created_at)
SELECT %(session_id)s, r.key, r.revision, %(project_id)s, r.value, coalesce(r.created_by, current_user),
       coalesce(r.created_at, now())
FROM jsonb_populate_record(NULL::session_context, %(row)s) AS r
ON CONFLICT DO NOTHING;

-- name: archive_unclaim
SELECT mm_archive_unclaim(%(job_ids)s::bigint[]);

-- name: archive_export_page
-- One page of the session's own rows after a seq, up to the snapshot (export reads in pages).
SELECT seq, append_id, payload, payload_hash, created_at, octet_length(payload::text), written_by FROM messages
WHERE session_id = %(session_id)s AND seq > %(after_seq)s AND seq <= %(up_to_seq)s
  AND part_month = mm_session_month(%(session_id)s)  -- one partition (migration 0027)
ORDER BY seq
LIMIT %(limit)s;

-- name: archive_metrics
SELECT pending, running, done, failed, oldest_pending_seconds, unarchived_sessions, unarchived_messages,
       unarchived_oldest_seconds
FROM mm_archive_metrics();

-- name: archive_snapshot_floor
-- After a point-in-time restore: snapshot ids move past the archive's highest tag (migration 0033).
SELECT mm_archive_snapshot_floor(%(top)s::bigint);

-- name: archive_renumber_snapshot
SELECT mm_archive_renumber_snapshot(%(snapshot_id)s::bigint, %(top)s::bigint);
