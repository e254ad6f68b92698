-- Writes only through functions (README.md, Design decision 7). A token is a working psql login,
-- so row-level security on INSERT/UPDATE is not enough: it checks a row's own project_id, never
-- that the row's session belongs to that project, that seq is the session's next one, that the
-- payload hash matches the payload, or that history stays immutable. From this migration on, the
-- token roles (mcp_memory_rw, mcp_memory_ro, mcp_memory_archiver and their members) keep SELECT
-- under row-level security and write only by calling the SECURITY DEFINER functions below, which
-- enforce those rules. The server calls the same functions whatever role it runs as; only a batch
-- of an owner (embedded default, the role that migrated the schema) may still use COPY.
--
-- Errors raised here carry SQLSTATEs the store maps to the package's errors: MM400 invalid,
-- MM403 forbidden (and 42501), MM404 not found, MM409 conflict.

-- 1. Who calls. Inside a SECURITY DEFINER function current_user is the owner; the caller is the
--    role set with SET ROLE (a shared REST pool switches role per transaction), else the login role.
--    A login can SET ROLE only to roles it is a member of, so it cannot pose as another token.
CREATE FUNCTION mm_caller() RETURNS text
LANGUAGE sql STABLE AS $$
    SELECT CASE WHEN current_setting('role') = 'none' THEN session_user::text ELSE current_setting('role') END
$$;

-- The schema owner (a member of the role owning `sessions`) and superusers are not limited.
CREATE FUNCTION mm_is_owner(who text) RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT coalesce((SELECT rolsuper FROM pg_roles WHERE rolname = who), false)
        OR pg_has_role(who, (SELECT relowner FROM pg_class WHERE oid = 'sessions'::regclass), 'MEMBER')
$$;

-- Raise unless the caller may write `project`. Returns true for an owner (its payload hashes are
-- trusted), false for a token.
CREATE FUNCTION mm_require_write(project text) RETURNS boolean
LANGUAGE plpgsql STABLE AS $$
DECLARE
    who text := mm_caller();
    token access_tokens;
BEGIN
    SELECT * INTO token FROM access_tokens WHERE role_name = who;
    IF NOT FOUND THEN
        IF mm_is_owner(who) THEN
            RETURN true;
        END IF;
        RAISE EXCEPTION 'role % may not write (not a token role)', who USING ERRCODE = 'MM403';
    END IF;
    IF token.read_only THEN
        RAISE EXCEPTION 'token % is read-only', who USING ERRCODE = 'MM403';
    END IF;
    IF NOT EXISTS (SELECT 1 FROM access_token_projects p
                   WHERE p.role_name = who AND (p.project_id = project OR p.project_id = '*')) THEN
        RAISE EXCEPTION 'token % may not write project %', who, project USING ERRCODE = 'MM403';
    END IF;
    RETURN false;
END $$;

-- True when the caller may read `project` (any token scope, or an owner).
CREATE FUNCTION mm_may_read(project text) RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT mm_is_owner(mm_caller()) OR EXISTS (
        SELECT 1 FROM access_token_projects p
        WHERE p.role_name = mm_caller() AND (p.project_id = project OR p.project_id = '*'))
$$;

-- The session row, locked, after checking the caller may write its project.
CREATE FUNCTION mm_writable_session(sid text) RETURNS sessions
LANGUAGE plpgsql AS $$
DECLARE
    s sessions;
BEGIN
    SELECT * INTO s FROM sessions WHERE session_id = sid FOR UPDATE;
    IF NOT FOUND OR NOT mm_may_read(s.project_id) THEN
        RAISE EXCEPTION 'session % does not exist', sid USING ERRCODE = 'MM404';
    END IF;
    PERFORM mm_require_write(s.project_id);
    RETURN s;
END $$;

-- 2. The payload hash: sha256 over canonical JSON (keys sorted by code point, no spaces, UTF-8),
--    the same bytes mcp_memory.core.messages.canonical_json produces. Computed here for tokens, so
--    a stored hash always matches its payload.
SET check_function_bodies = off;  -- the function calls itself
CREATE FUNCTION mm_canonical_json(j jsonb) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT CASE jsonb_typeof(j)
        WHEN 'object' THEN '{' || coalesce((SELECT string_agg(to_jsonb(e.key)::text || ':' || mm_canonical_json(e.value),
                                                              ',' ORDER BY e.key COLLATE "C")
                                            FROM jsonb_each(j) AS e), '') || '}'
        WHEN 'array' THEN '[' || coalesce((SELECT string_agg(mm_canonical_json(a.value), ',' ORDER BY a.n)
                                           FROM jsonb_array_elements(j) WITH ORDINALITY AS a(value, n)), '') || ']'
        ELSE j::text
    END
$$;
RESET check_function_bodies;

CREATE FUNCTION mm_payload_hash(payload jsonb) RETURNS bytea
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT sha256(convert_to(mm_canonical_json(payload), 'UTF8'))
$$;

-- 3. Sessions.
CREATE FUNCTION mm_create_session(p_session_id text, p_project_id text, p_agent_source text, p_title text,
                                  p_meta jsonb, p_if_absent boolean DEFAULT false) RETURNS SETOF sessions
LANGUAGE plpgsql AS $$
DECLARE
    s sessions;
BEGIN
    PERFORM mm_require_write(p_project_id);
    INSERT INTO sessions (session_id, project_id, agent_source, title, meta, created_by)
    VALUES (p_session_id, p_project_id, p_agent_source, p_title, coalesce(p_meta, '{}'), mm_caller())
    ON CONFLICT (session_id) DO NOTHING
    RETURNING * INTO s;
    IF NOT FOUND THEN
        IF p_if_absent THEN
            RETURN;
        END IF;
        RAISE EXCEPTION 'session % already exists', p_session_id USING ERRCODE = 'MM409';
    END IF;
    INSERT INTO search_progress (session_id, project_id, indexed_seq, stored_seq)
    VALUES (s.session_id, s.project_id, 0, 0);
    RETURN NEXT s;
END $$;

-- A fork: a new session in the parent's project whose history is the parent's up to the snapshot.
-- Lineage comes from the snapshot, never from the caller.
CREATE FUNCTION mm_fork(p_snapshot_id bigint, p_session_id text, p_agent_source text, p_title text,
                        p_meta jsonb) RETURNS SETOF sessions
LANGUAGE plpgsql AS $$
DECLARE
    snap snapshots;
    s sessions;
BEGIN
    SELECT * INTO snap FROM snapshots WHERE snapshot_id = p_snapshot_id;
    IF NOT FOUND OR NOT mm_may_read(snap.project_id) THEN
        RAISE EXCEPTION 'snapshot % does not exist', p_snapshot_id USING ERRCODE = 'MM404';
    END IF;
    PERFORM mm_require_write(snap.project_id);
    INSERT INTO sessions (session_id, project_id, agent_source, title, meta, parent_session_id, fork_seq,
                          parent_snapshot_id, last_seq, created_by)
    SELECT p_session_id, p.project_id, p_agent_source, p_title, coalesce(p_meta, '{}'), p.session_id,
           snap.up_to_seq, snap.snapshot_id, snap.up_to_seq, mm_caller()
    FROM sessions p WHERE p.session_id = snap.session_id
    RETURNING * INTO s;
    INSERT INTO search_progress (session_id, project_id, indexed_seq, stored_seq)
    VALUES (s.session_id, s.project_id, s.last_seq, s.last_seq);
    RETURN NEXT s;
END $$;

-- Meta merge: keys in p_set replace stored ones, p_remove are dropped; title and agent_source only
-- when given. Project and lineage never change.
CREATE FUNCTION mm_update_session_meta(p_session_id text, p_set jsonb, p_remove text[], p_title_given boolean,
                                       p_title text, p_agent_given boolean, p_agent_source text)
RETURNS SETOF sessions
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM mm_writable_session(p_session_id);
    RETURN QUERY
    UPDATE sessions
    SET meta = (meta - coalesce(p_remove, '{}')) || coalesce(p_set, '{}'),
        title = CASE WHEN p_title_given THEN p_title ELSE title END,
        agent_source = CASE WHEN p_agent_given THEN p_agent_source ELSE agent_source END,
        updated_at = now()
    WHERE session_id = p_session_id
    RETURNING *;
END $$;

-- 4. Messages: seq = last_seq + 1 under the session row lock, the hash from the payload (an owner's
--    precomputed hash is trusted), an append_id seen before is a duplicate if its hash matches and a
--    conflict otherwise. Rows are never updated or deleted.
CREATE FUNCTION mm_append(p_session_id text, p_append_ids text[], p_roles text[], p_payloads text[],
                          p_hashes bytea[], p_created timestamptz[])
RETURNS TABLE (seq bigint, duplicate boolean)
LANGUAGE plpgsql AS $$
DECLARE
    s sessions := mm_writable_session(p_session_id);
    trusted boolean := mm_require_write(s.project_id);
    who text := mm_caller();
    n integer := coalesce(cardinality(p_append_ids), 0);
    last bigint := s.last_seq;
    payload jsonb;
    digest bytea;
    stored_seq bigint;
    stored_hash bytea;
BEGIN
    IF n = 0 OR cardinality(p_roles) <> n OR cardinality(p_payloads) <> n
       OR (p_hashes IS NOT NULL AND cardinality(p_hashes) <> n)
       OR (p_created IS NOT NULL AND cardinality(p_created) <> n) THEN
        RAISE EXCEPTION 'append needs one append_id, role and payload per message' USING ERRCODE = 'MM400';
    END IF;
    FOR i IN 1..n LOOP
        payload := p_payloads[i]::jsonb;
        IF jsonb_typeof(payload) IS DISTINCT FROM 'object' THEN
            RAISE EXCEPTION 'messages[%] payload must be a JSON object', i - 1 USING ERRCODE = 'MM400';
        END IF;
        digest := CASE WHEN trusted AND p_hashes[i] IS NOT NULL THEN p_hashes[i] ELSE mm_payload_hash(payload) END;
        SELECT m.seq, m.payload_hash INTO stored_seq, stored_hash
        FROM messages m WHERE m.session_id = p_session_id AND m.append_id = p_append_ids[i];
        IF FOUND THEN
            IF stored_hash <> digest THEN
                RAISE EXCEPTION 'append_id % was already used with a different payload (seq %)', p_append_ids[i],
                    stored_seq USING ERRCODE = 'MM409';
            END IF;
            seq := stored_seq;
            duplicate := true;
        ELSE
            last := last + 1;
            INSERT INTO messages (session_id, seq, project_id, append_id, role, payload, payload_hash, created_at,
                                  written_by)
            VALUES (p_session_id, last, s.project_id, p_append_ids[i], p_roles[i], payload, digest,
                    coalesce(p_created[i], now()), who);
            seq := last;
            duplicate := false;
        END IF;
        RETURN NEXT;
    END LOOP;
    IF last <> s.last_seq THEN
        UPDATE sessions SET last_seq = last, updated_at = now() WHERE session_id = p_session_id;
        UPDATE search_progress SET stored_seq = last WHERE session_id = p_session_id;
    END IF;
END $$;

-- 5. Snapshots: the pointer at the session's last seq, its export job and the archiver's wake-up,
--    in one transaction. Never updated.
CREATE FUNCTION mm_snapshot(p_session_id text, p_commit_msg text, p_meta jsonb) RETURNS SETOF snapshots
LANGUAGE plpgsql AS $$
DECLARE
    s sessions := mm_writable_session(p_session_id);
    snap snapshots;
    job bigint;
BEGIN
    INSERT INTO snapshots (session_id, project_id, up_to_seq, commit_msg, meta, created_by)
    VALUES (s.session_id, s.project_id, s.last_seq, coalesce(p_commit_msg, ''), coalesce(p_meta, '{}'), mm_caller())
    RETURNING * INTO snap;
    INSERT INTO export_jobs (snapshot_id, session_id, project_id)
    VALUES (snap.snapshot_id, snap.session_id, snap.project_id)
    RETURNING job_id INTO job;
    PERFORM pg_notify('mcp_memory_export', json_build_object('job_id', job, 'snapshot_id', snap.snapshot_id)::text);
    RETURN NEXT snap;
END $$;

-- 6. Decisions: recorded in a writable session; changed only by the versioned update (and by a
--    superseding record); a private decision only by its author.
CREATE FUNCTION mm_record_decision(p_session_id text, p_decision_id text, p_message_seq bigint,
                                   p_decision_type text, p_summary text, p_status text, p_rationale text,
                                   p_alternatives jsonb, p_supersedes text, p_metadata jsonb, p_visibility text,
                                   p_tsv tsvector) RETURNS SETOF decisions
LANGUAGE plpgsql AS $$
DECLARE
    s sessions := mm_writable_session(p_session_id);
    old decisions;
BEGIN
    IF p_message_seq IS NOT NULL AND p_message_seq > s.last_seq THEN
        RAISE EXCEPTION 'message_seq % is beyond the session''s last seq (%)', p_message_seq, s.last_seq
            USING ERRCODE = 'MM400';
    END IF;
    IF p_supersedes IS NOT NULL THEN
        SELECT * INTO old FROM decisions WHERE decision_id = p_supersedes FOR UPDATE;
        IF NOT FOUND OR NOT mm_may_read(old.project_id)
           OR (old.visibility = 'private' AND old.created_by <> mm_caller() AND NOT mm_is_owner(mm_caller())) THEN
            RAISE EXCEPTION 'decision % does not exist', p_supersedes USING ERRCODE = 'MM404';
        END IF;
        IF old.project_id <> s.project_id THEN
            RAISE EXCEPTION 'decision % belongs to another project (%)', p_supersedes, old.project_id
                USING ERRCODE = 'MM400';
        END IF;
        IF old.superseded_by IS NOT NULL THEN
            RAISE EXCEPTION 'decision % was already superseded by %', p_supersedes, old.superseded_by
                USING ERRCODE = 'MM409';
        END IF;
        UPDATE decisions SET status = 'superseded', superseded_by = p_decision_id, version = version + 1,
                             updated_at = now()
        WHERE decision_id = p_supersedes;
    END IF;
    RETURN QUERY
    INSERT INTO decisions (session_id, decision_id, project_id, message_seq, decision_type, summary, status,
                           rationale, alternatives, supersedes, metadata, visibility, tsv, created_by)
    VALUES (p_session_id, p_decision_id, s.project_id, p_message_seq, p_decision_type, p_summary,
            coalesce(p_status, 'accepted'), p_rationale, coalesce(p_alternatives, '[]'), p_supersedes,
            coalesce(p_metadata, '{}'), coalesce(p_visibility, 'team'), coalesce(p_tsv, ''::tsvector), mm_caller())
    RETURNING *;
END $$;

CREATE FUNCTION mm_update_decision(p_decision_id text, p_expected_version integer, p_status text, p_summary text,
                                   p_rationale text, p_alternatives jsonb, p_metadata jsonb, p_tsv tsvector)
RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    d decisions;
    who text := mm_caller();
BEGIN
    SELECT * INTO d FROM decisions WHERE decision_id = p_decision_id FOR UPDATE;
    IF NOT FOUND OR NOT mm_may_read(d.project_id)
       OR (d.visibility = 'private' AND d.created_by <> who AND NOT mm_is_owner(who)) THEN
        RAISE EXCEPTION 'decision % does not exist', p_decision_id USING ERRCODE = 'MM404';
    END IF;
    PERFORM mm_require_write(d.project_id);
    IF d.version <> p_expected_version THEN
        RAISE EXCEPTION 'decision % is at version %, not %: read it again (search_decisions) and decide whether '
            'your change still applies', p_decision_id, d.version, p_expected_version USING ERRCODE = 'MM409';
    END IF;
    UPDATE decisions
    SET status = p_status, summary = p_summary, rationale = p_rationale, alternatives = p_alternatives,
        metadata = p_metadata, tsv = p_tsv, version = version + 1, updated_at = now()
    WHERE decision_id = p_decision_id
    RETURNING version INTO d.version;
    RETURN d.version;
END $$;

-- 7. Context: every set adds a revision (revision = max + 1 under a per-key transaction lock).
CREATE FUNCTION mm_set_context(p_session_id text, p_key text, p_value jsonb)
RETURNS TABLE (revision integer, created_at timestamptz)
LANGUAGE plpgsql AS $$
DECLARE
    s sessions;
BEGIN
    SELECT * INTO s FROM sessions WHERE session_id = p_session_id;
    IF NOT FOUND OR NOT mm_may_read(s.project_id) THEN
        RAISE EXCEPTION 'session % does not exist', p_session_id USING ERRCODE = 'MM404';
    END IF;
    PERFORM mm_require_write(s.project_id);
    PERFORM pg_advisory_xact_lock(hashtextextended(p_session_id || ':' || p_key, 0));
    RETURN QUERY
    INSERT INTO session_context AS c (session_id, key, revision, project_id, value, created_by)
    VALUES (p_session_id, p_key,
            coalesce((SELECT max(x.revision) FROM session_context x
                      WHERE x.session_id = p_session_id AND x.key = p_key), 0) + 1,
            s.project_id, p_value, mm_caller())
    RETURNING c.revision, c.created_at;
END $$;

-- 8. The search index of one session (core/indexer.py): rows for stored messages just past the
--    watermark, with role and time taken from the messages themselves, and the project's BM25
--    statistics. The caller computes the tokens; it can only affect its own project's ranking.
CREATE FUNCTION mm_index_messages(p_session_id text, p_seqs bigint[], p_doc_lens integer[], p_tsvs text[],
                                  p_terms text[], p_dfs bigint[], p_shard smallint, p_indexed_seq bigint)
RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    s sessions;
    mark bigint;
    n integer := coalesce(cardinality(p_seqs), 0);
BEGIN
    SELECT * INTO s FROM sessions WHERE session_id = p_session_id;
    IF NOT FOUND OR NOT mm_may_read(s.project_id) THEN
        RAISE EXCEPTION 'session % does not exist', p_session_id USING ERRCODE = 'MM404';
    END IF;
    PERFORM mm_require_write(s.project_id);
    IF p_shard < 0 OR p_shard >= 64 OR cardinality(p_doc_lens) <> n OR cardinality(p_tsvs) <> n
       OR coalesce(cardinality(p_terms), 0) <> coalesce(cardinality(p_dfs), 0) THEN
        RAISE EXCEPTION 'index rows do not line up' USING ERRCODE = 'MM400';
    END IF;
    SELECT coalesce(p.indexed_seq, s.fork_seq, 0) INTO mark
    FROM (SELECT 1) AS one LEFT JOIN search_progress p ON p.session_id = p_session_id;
    IF p_indexed_seq < mark OR p_indexed_seq > s.last_seq
       OR EXISTS (SELECT 1 FROM unnest(p_seqs) AS x(seq) WHERE x.seq <= mark OR x.seq > p_indexed_seq) THEN
        RAISE EXCEPTION 'index rows of session % must lie in (%, %]', p_session_id, mark, s.last_seq
            USING ERRCODE = 'MM400';
    END IF;
    INSERT INTO message_search (session_id, seq, project_id, role, created_at, doc_len, tsv)
    SELECT p_session_id, m.seq, s.project_id, m.role, m.created_at, greatest(x.doc_len, 0), x.tsv::tsvector
    FROM unnest(p_seqs, p_doc_lens, p_tsvs) AS x(seq, doc_len, tsv)
    JOIN messages m ON m.session_id = p_session_id AND m.seq = x.seq;
    IF n > 0 THEN
        INSERT INTO search_term_stats AS t (project_id, term, shard, df)
        SELECT s.project_id, x.term, p_shard, least(x.df, n)
        FROM unnest(p_terms, p_dfs) AS x(term, df)
        WHERE x.df > 0
        ORDER BY x.term
        ON CONFLICT (term, project_id, shard) DO UPDATE SET df = t.df + excluded.df;
        INSERT INTO search_doc_stats AS d (project_id, shard, docs, total_len)
        SELECT s.project_id, p_shard, n, coalesce(sum(greatest(l, 0)), 0) FROM unnest(p_doc_lens) AS l
        ON CONFLICT (project_id, shard) DO UPDATE SET docs = d.docs + excluded.docs,
                                                      total_len = d.total_len + excluded.total_len;
    END IF;
    INSERT INTO search_progress AS p (session_id, project_id, indexed_seq, stored_seq)
    VALUES (p_session_id, s.project_id, p_indexed_seq, s.last_seq)
    ON CONFLICT (session_id) DO UPDATE
    SET indexed_seq = greatest(p.indexed_seq, excluded.indexed_seq),
        stored_seq = greatest(p.stored_seq, excluded.stored_seq), updated_at = now();
END $$;

-- `reindex --full`, one session: its index rows go, their counts leave the statistics, and the
-- watermark returns to the fork point.
CREATE FUNCTION mm_forget_session_index(p_session_id text, p_shard smallint) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    s sessions;
BEGIN
    SELECT * INTO s FROM sessions WHERE session_id = p_session_id;
    IF NOT FOUND OR NOT mm_may_read(s.project_id) THEN
        RAISE EXCEPTION 'session % does not exist', p_session_id USING ERRCODE = 'MM404';
    END IF;
    PERFORM mm_require_write(s.project_id);
    WITH gone AS (
        DELETE FROM message_search WHERE session_id = p_session_id RETURNING project_id, doc_len, tsv
    ), terms AS (
        SELECT g.project_id, u.lexeme AS term, count(*) AS df FROM gone g, unnest(g.tsv) AS u GROUP BY 1, 2
    ), term_stats AS (
        UPDATE search_term_stats t SET df = t.df - x.df FROM terms x
        WHERE t.term = x.term AND t.project_id = x.project_id AND t.shard = p_shard
    ), doc_stats AS (
        UPDATE search_doc_stats d SET docs = d.docs - x.docs, total_len = d.total_len - x.total_len
        FROM (SELECT project_id, count(*) AS docs, sum(doc_len) AS total_len FROM gone GROUP BY project_id) AS x
        WHERE d.project_id = x.project_id AND d.shard = p_shard
    )
    INSERT INTO search_progress AS p (session_id, project_id, indexed_seq, stored_seq)
    VALUES (p_session_id, s.project_id, coalesce(s.fork_seq, 0), s.last_seq)
    ON CONFLICT (session_id) DO UPDATE SET indexed_seq = excluded.indexed_seq, stored_seq = excluded.stored_seq,
                                           updated_at = now();
END $$;

-- 9. Embeddings. The well-known models are registered here with their dimension, so no host can
--    claim a default model's name with a wrong one; a token may add at most 16 models in all.
INSERT INTO embedding_models (model, dim) VALUES
    ('use-multilingual-v3', 512),
    ('all-MiniLM-L6-v2', 384),
    ('multilingual-e5-small-q4', 384)
ON CONFLICT (model) DO NOTHING;

CREATE FUNCTION mm_register_embedding_model(p_model text, p_dim integer) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    known integer;
BEGIN
    SELECT dim INTO known FROM embedding_models WHERE model = p_model;
    IF NOT FOUND THEN
        IF NOT mm_is_owner(mm_caller()) AND (SELECT count(*) FROM embedding_models) >= 16 THEN
            RAISE EXCEPTION 'too many embedding models registered; the database owner adds more' USING ERRCODE = 'MM403';
        END IF;
        IF NOT mm_is_owner(mm_caller()) AND NOT EXISTS (
            SELECT 1 FROM access_tokens WHERE role_name = mm_caller() AND NOT read_only) THEN
            RAISE EXCEPTION 'role % may not register embedding models', mm_caller() USING ERRCODE = 'MM403';
        END IF;
        INSERT INTO embedding_models (model, dim) VALUES (p_model, p_dim) ON CONFLICT (model) DO NOTHING;
        SELECT dim INTO known FROM embedding_models WHERE model = p_model;
    END IF;
    PERFORM mm_embedding_index(p_model, known);
    RETURN known;
END $$;

-- Vectors arrive as pgvector text; only messages of the session, only the registered dimension.
CREATE FUNCTION mm_store_embeddings(p_session_id text, p_model text, p_seqs bigint[], p_kinds text[],
                                    p_vectors text[], p_done_seq bigint) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    s sessions;
    dim integer;
BEGIN
    SELECT * INTO s FROM sessions WHERE session_id = p_session_id;
    IF NOT FOUND OR NOT mm_may_read(s.project_id) THEN
        RAISE EXCEPTION 'session % does not exist', p_session_id USING ERRCODE = 'MM404';
    END IF;
    PERFORM mm_require_write(s.project_id);
    SELECT m.dim INTO dim FROM embedding_models m WHERE m.model = p_model;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'embedding model % is not registered', p_model USING ERRCODE = 'MM400';
    END IF;
    IF p_done_seq > s.last_seq THEN
        RAISE EXCEPTION 'done_seq % is beyond the session''s last seq (%)', p_done_seq, s.last_seq USING ERRCODE = 'MM400';
    END IF;
    IF coalesce(cardinality(p_seqs), 0) > 0 THEN
        EXECUTE format($q$
            INSERT INTO message_embeddings (session_id, seq, model, kind, project_id, embedding)
            SELECT $1, e.seq, $2, e.kind, $3, e.embedding::vector(%s)::vector
            FROM unnest($4::bigint[], $5::text[], $6::text[]) AS e(seq, kind, embedding)
            WHERE EXISTS (SELECT 1 FROM messages m WHERE m.session_id = $1 AND m.seq = e.seq)
            ON CONFLICT (session_id, seq, model, kind) DO NOTHING$q$, dim)
        USING p_session_id, p_model, s.project_id, p_seqs, p_kinds, p_vectors;
    END IF;
    INSERT INTO embedding_watermarks AS w (model, session_id, project_id, done_seq)
    VALUES (p_model, p_session_id, s.project_id, p_done_seq)
    ON CONFLICT (session_id, model)
    DO UPDATE SET done_seq = greatest(w.done_seq, excluded.done_seq), updated_at = now();
END $$;

-- 10. The host column came from the client's application_name: anyone could write any host there.
ALTER TABLE messages DROP COLUMN IF EXISTS written_host;

-- 11. Tables shared by all projects (synonyms, agents, embedding_models) are the owner's.
--     Every later table gets SELECT only (mm_grant_table no longer grants writes).
CREATE OR REPLACE FUNCTION mm_grant_table(tbl regclass, deletable boolean DEFAULT true, protect text[] DEFAULT '{}',
                                          frozen text[] DEFAULT '{}') RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    IF to_regrole('mcp_memory_rw') IS NULL THEN
        RETURN;
    END IF;
    EXECUTE format('GRANT SELECT ON %s TO mcp_memory_ro, mcp_memory_rw, mcp_memory_archiver', tbl);
    EXECUTE format('REVOKE INSERT, UPDATE, DELETE, TRUNCATE ON %s FROM mcp_memory_ro, mcp_memory_rw', tbl);
END $$;

-- 12. Every function runs as its owner with a fixed search_path; callers get EXECUTE on the API
--     only. PostgreSQL grants EXECUTE to PUBLIC by default: taken back from every function here.
DO $$
DECLARE
    f regprocedure;
    api constant text[] := ARRAY['mm_create_session', 'mm_fork', 'mm_update_session_meta', 'mm_append',
                                 'mm_snapshot', 'mm_record_decision', 'mm_update_decision', 'mm_set_context',
                                 'mm_index_messages', 'mm_forget_session_index', 'mm_register_embedding_model',
                                 'mm_store_embeddings'];
    definer constant text[] := api || ARRAY['mm_embedding_index'];
BEGIN
    FOR f IN
        SELECT p.oid::regprocedure FROM pg_proc p
        WHERE p.pronamespace = current_schema()::regnamespace
          AND (p.proname LIKE 'mm\_%' OR p.proname = 'mcp_memory_register_agent')
    LOOP
        EXECUTE format('REVOKE ALL ON FUNCTION %s FROM PUBLIC', f);
        IF split_part(f::text, '(', 1) = ANY (definer) THEN
            EXECUTE format('ALTER FUNCTION %s SECURITY DEFINER SET search_path = %I, pg_temp', f, current_schema());
        ELSE
            EXECUTE format('ALTER FUNCTION %s SET search_path = %I, pg_temp', f, current_schema());
        END IF;
    END LOOP;
    IF to_regrole('mcp_memory_rw') IS NULL THEN
        RETURN;
    END IF;
    -- helpers the policies call as the querying role
    EXECUTE 'GRANT EXECUTE ON FUNCTION mm_token_projects(boolean), mm_session_in_scope(text, boolean), '
            'mm_canonical_json(jsonb), mm_payload_hash(jsonb), mm_caller() '
            'TO mcp_memory_ro, mcp_memory_rw, mcp_memory_archiver';
    FOR f IN
        SELECT p.oid::regprocedure FROM pg_proc p
        WHERE p.pronamespace = current_schema()::regnamespace AND p.proname = ANY (api)
    LOOP
        EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO mcp_memory_rw, mcp_memory_archiver, mcp_memory_ro', f);
    END LOOP;
    EXECUTE 'REVOKE EXECUTE ON FUNCTION mm_embedding_index(text, integer) FROM mcp_memory_rw';
    EXECUTE format('REVOKE INSERT, UPDATE, DELETE, TRUNCATE ON ALL TABLES IN SCHEMA %I '
                   'FROM mcp_memory_rw, mcp_memory_ro, mcp_memory_archiver', current_schema());
    EXECUTE format('REVOKE USAGE ON ALL SEQUENCES IN SCHEMA %I '
                   'FROM mcp_memory_rw, mcp_memory_ro, mcp_memory_archiver', current_schema());
    -- the archiver's claim on export jobs (row-level security limits it to its projects)
    GRANT UPDATE (status, attempts, last_error, locked_by, lease_until, run_after, finished_at)
        ON export_jobs TO mcp_memory_archiver;
END $$;
