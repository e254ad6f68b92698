-- The database lends a token nothing beyond its projects (README, design note 7, "What a token can
-- and cannot do"). Five changes:
--
-- 1. Functions that run as the owner trust nothing on their path. PostgreSQL resolves a call in
--    every schema of search_path and prefers the closest argument-type match wherever it lives, so
--    a function a token creates in a writable schema can capture a call and run as the owner. Only
--    the owner may create in this schema (mm_secure_schema, re-run by every `db migrate`), every
--    function of ours runs with pg_catalog first, and the calls whose argument types were inexact
--    are written with exact types and qualified.
-- 2. Coordination a token cannot take: advisory locks belong to anybody who names the key, so the
--    archiver's single writer is a lease row (archive_leader) written only through owner functions,
--    the search indexer claims a row (search_claims), and a context key is serialised by its unique
--    key, not by a lock.
-- 3. The write functions validate what they store: size, time range, role, and a payload hash that
--    the archiver recomputes identically whatever way the numbers were written.
-- 4. Nothing cross-project on the notification channels; the agent list and the embedding-model
--    registry are scoped or the owner's.
-- 5. A gateway group for `serve-http`: its logins can SET ROLE to token roles and do nothing else.

-- 1. The schema: only its owner creates in it --------------------------------------------------------

-- Run by the migrating owner (every `db migrate`). Takes CREATE back from PUBLIC and from the
-- token groups, refuses to go on while anybody else may still create here, and drops functions,
-- procedures and operators that a token role created in this schema.
CREATE FUNCTION mm_secure_schema() RETURNS text[]
LANGUAGE plpgsql AS $$
DECLARE
    nsp oid := (SELECT c.relnamespace FROM pg_catalog.pg_class c WHERE c.oid = 'sessions'::regclass);
    nsp_name text := (SELECT n.nspname FROM pg_catalog.pg_namespace n WHERE n.oid = nsp);
    owner_oid oid := (SELECT c.relowner FROM pg_catalog.pg_class c WHERE c.oid = 'sessions'::regclass);
    dropped text[] := '{}';
    creators text;
    obj record;
BEGIN
    BEGIN
        EXECUTE pg_catalog.format('REVOKE CREATE ON SCHEMA %I FROM PUBLIC', nsp_name);
        IF pg_catalog.to_regrole('mcp_memory_rw') IS NOT NULL THEN
            EXECUTE pg_catalog.format('REVOKE CREATE ON SCHEMA %I FROM mcp_memory_rw, mcp_memory_ro, '
                                      'mcp_memory_archiver', nsp_name);
        END IF;
    EXCEPTION WHEN insufficient_privilege THEN
        NULL;  -- not the schema's owner: the check below says what is left
    END;
    -- anybody but the owner (and superusers) who may still create here
    SELECT pg_catalog.string_agg(DISTINCT CASE WHEN a.grantee = 0 THEN 'PUBLIC'
                                               ELSE pg_catalog.quote_ident(r.rolname::text) END, ', ')
      INTO creators
      FROM pg_catalog.pg_namespace n, pg_catalog.aclexplode(n.nspacl) AS a
      LEFT JOIN pg_catalog.pg_roles r ON r.oid = a.grantee
     WHERE n.oid = nsp AND a.privilege_type = 'CREATE' AND a.grantee <> n.nspowner
       AND a.grantee <> owner_oid AND NOT coalesce(r.rolsuper, false)
       AND (a.grantee = 0 OR NOT pg_catalog.pg_has_role(owner_oid, a.grantee, 'MEMBER'));
    IF creators IS NOT NULL THEN
        RAISE EXCEPTION 'schema % lets % create objects: a token could then capture calls of functions that run '
            'as the owner. As the schema''s owner or a superuser run: REVOKE CREATE ON SCHEMA % FROM %; '
            'GRANT CREATE ON SCHEMA % TO %; then migrate again', nsp_name, creators,
            pg_catalog.quote_ident(nsp_name), creators, pg_catalog.quote_ident(nsp_name),
            pg_catalog.quote_ident((SELECT rolname FROM pg_catalog.pg_roles WHERE oid = owner_oid)::text)
            USING ERRCODE = 'MM403';
    END IF;
    -- what a token role created here while it could (functions, procedures, operators)
    FOR obj IN
        SELECT 'FUNCTION' AS kind, p.oid::regprocedure::text AS name, p.prokind
        FROM pg_catalog.pg_proc p
        WHERE p.pronamespace = nsp AND p.proowner <> owner_oid
          AND EXISTS (SELECT 1 FROM access_tokens t WHERE t.role_name = (SELECT rolname FROM pg_catalog.pg_roles
                                                                          WHERE oid = p.proowner))
        UNION ALL
        SELECT 'OPERATOR', o.oid::regoperator::text, 'o'
        FROM pg_catalog.pg_operator o
        WHERE o.oprnamespace = nsp AND o.oprowner <> owner_oid
          AND EXISTS (SELECT 1 FROM access_tokens t WHERE t.role_name = (SELECT rolname FROM pg_catalog.pg_roles
                                                                          WHERE oid = o.oprowner))
    LOOP
        EXECUTE pg_catalog.format('DROP %s IF EXISTS %s CASCADE',
                                  CASE WHEN obj.prokind = 'p' THEN 'PROCEDURE' WHEN obj.prokind = 'a' THEN 'AGGREGATE'
                                       ELSE obj.kind END, obj.name);
        dropped := dropped || (obj.kind || ' ' || obj.name);
    END LOOP;
    RETURN dropped;
END $$;
REVOKE ALL ON FUNCTION mm_secure_schema() FROM PUBLIC;

-- 2. Exact types, qualified built-ins -----------------------------------------------------------------

-- Every call of a built-in function in the bodies of our functions, written pg_catalog."name"(…):
-- a qualified call is resolved in pg_catalog only, whatever another schema holds. Run by the
-- migrating owner after each migration (store/migrate.py), so later functions are covered too;
-- returns the functions it rewrote. Special-syntax names (position, substring, overlay, trim,
-- extract …) are left alone: none of our functions calls them.
CREATE FUNCTION mm_qualify_builtins() RETURNS text[]
LANGUAGE plpgsql AS $$
DECLARE
    nsp oid := (SELECT c.relnamespace FROM pg_catalog.pg_class c WHERE c.oid = 'sessions'::regclass);
    f record;
    names text;
    def text;
    changed text;
    rewritten text[] := '{}';
BEGIN
    FOR f IN
        SELECT p.oid, p.oid::regprocedure::text AS name FROM pg_catalog.pg_proc p
        WHERE p.pronamespace = nsp AND p.prokind = 'f' AND (p.proname LIKE 'mm\_%' OR p.proname LIKE 'mcp\_memory\_%')
    LOOP
        SELECT pg_catalog.string_agg(DISTINCT m[1], '|') INTO names
        FROM pg_catalog.regexp_matches(pg_catalog.pg_get_functiondef(f.oid), '(?<![.\w"])([a-z_][a-z0-9_]*)\s*\(', 'g') AS m
        WHERE EXISTS (SELECT 1 FROM pg_catalog.pg_proc b
                      WHERE b.pronamespace = 'pg_catalog'::regnamespace AND b.proname = m[1])
          AND m[1] NOT IN ('unnest', 'position', 'substring', 'overlay', 'trim', 'extract', 'normalize', 'overlaps',
                           'char', 'varchar', 'numeric', 'timestamp', 'interval', 'time', 'bit', 'float8',
                           'int4', 'int8', 'text', 'bool', 'name', 'date', 'timestamptz', 'timetz', 'json', 'jsonb');
        def := pg_catalog.pg_get_functiondef(f.oid);
        changed := def;
        IF names IS NOT NULL THEN
            changed := pg_catalog.regexp_replace(changed, '(?<![.\w"])(' || names || ')\s*\(', 'pg_catalog."\1"(', 'g');
        END IF;
        -- unnest of one array; with several arrays it is FROM-clause syntax that only the bare name
        -- has: those calls are written ROWS FROM (pg_catalog.unnest(a), pg_catalog.unnest(b)) by hand
        changed := pg_catalog.regexp_replace(changed, '(?<![.\w"])unnest\s*\(\s*([\w.$]+(\[\])?(::[\w.]+(\[\])?)?)\s*\)',
                                             'pg_catalog."unnest"(\1)', 'g');
        IF changed <> def THEN
            EXECUTE changed;
            rewritten := rewritten || f.name;
        END IF;
    END LOOP;
    RETURN rewritten;
END $$;
REVOKE ALL ON FUNCTION mm_qualify_builtins() FROM PUBLIC;

CREATE OR REPLACE FUNCTION mm_is_owner(who text) RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT coalesce((SELECT r.rolsuper FROM pg_catalog.pg_roles r WHERE r.rolname = who::name), false)
        OR coalesce(pg_catalog.pg_has_role(who::name, (SELECT c.relowner FROM pg_catalog.pg_class c
                                                       WHERE c.oid = 'sessions'::regclass), 'MEMBER'::text), false)
$$;

-- The payload hash's canonical JSON. Numbers are written as the Python core writes the number it
-- reads back (the archiver re-hashes what it reads): an integer as its digits, a number with a
-- fraction as the shortest decimal that reads back as the same double, at least one digit after
-- the point below 1e16 ("1.50" → "1.5", "1.0" stays, "0.1000000000000000055511" → "0.1"), so a
-- payload written as text by hand hashes the same here and in the archiver.
CREATE FUNCTION mm_canonical_number(n jsonb) RETURNS text
LANGUAGE plpgsql IMMUTABLE STRICT AS $$
DECLARE
    t text := n::text;
    x float8;
    r text;
BEGIN
    IF pg_catalog.strpos(t, '.') = 0 THEN
        RETURN t;  -- PostgreSQL prints every number plainly: no '.' means an integer
    END IF;
    BEGIN
        x := t::float8;
    EXCEPTION WHEN numeric_value_out_of_range THEN
        RAISE EXCEPTION 'payload number % is outside the range of a double', pg_catalog."left"(t, 40)
            USING ERRCODE = 'MM400';
    END;
    r := (x::text)::numeric::text;  -- shortest round-trip digits (extra_float_digits = 1), plain
    IF pg_catalog.strpos(r, '.') = 0 AND pg_catalog.abs(x) < 1e16::float8 THEN
        r := r || '.0';
    END IF;
    IF r ~ '^-0(\.0+)?$' THEN
        r := pg_catalog.ltrim(r, '-');
    END IF;
    RETURN r;
END $$;
ALTER FUNCTION mm_canonical_number(jsonb) SET extra_float_digits = 1;

SET check_function_bodies = off;  -- the function calls itself
CREATE OR REPLACE FUNCTION mm_canonical_json(j jsonb) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT CASE pg_catalog.jsonb_typeof(j)
        WHEN 'object' THEN '{' || coalesce((SELECT pg_catalog.string_agg(
                                                       pg_catalog.to_jsonb(e.key::text)::text || ':' || mm_canonical_json(e.value),
                                                       ',' ORDER BY e.key COLLATE "C")
                                            FROM pg_catalog.jsonb_each(j) AS e), '') || '}'
        WHEN 'array' THEN '[' || coalesce((SELECT pg_catalog.string_agg(mm_canonical_json(a.value), ',' ORDER BY a.n)
                                           FROM pg_catalog.jsonb_array_elements(j) WITH ORDINALITY AS a(value, n)), '') || ']'
        WHEN 'number' THEN mm_canonical_number(j)
        ELSE j::text
    END
$$;
RESET check_function_bodies;

CREATE OR REPLACE FUNCTION mm_payload_hash(payload jsonb) RETURNS bytea
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT pg_catalog.sha256(pg_catalog.convert_to(mm_canonical_json(payload), 'UTF8'::name))
$$;

-- Context: a revision is max + 1; two writers of the same key meet on its unique key and the loser
-- tries again (no lock a token could take first).
CREATE OR REPLACE FUNCTION mm_set_context(p_session_id text, p_key text, p_value jsonb)
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
    FOR attempt IN 1..20 LOOP
        BEGIN
            RETURN QUERY
            INSERT INTO session_context AS c (session_id, key, revision, project_id, value, created_by)
            VALUES (p_session_id, p_key,
                    coalesce((SELECT pg_catalog.max(x.revision) FROM session_context x
                              WHERE x.session_id = p_session_id AND x.key = p_key), 0) + 1,
                    s.project_id, p_value, mm_caller())
            RETURNING c.revision, c.created_at;
            RETURN;
        EXCEPTION WHEN unique_violation THEN
            NULL;  -- another writer took this revision: read max again
        END;
    END LOOP;
    RAISE EXCEPTION 'context key % of session % is being written by others; try again', p_key, p_session_id
        USING ERRCODE = 'MM409';
END $$;

CREATE OR REPLACE FUNCTION mm_embedding_index(model_name text, dim integer) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    index_name text := 'message_embeddings_hnsw_' || pg_catalog."left"(pg_catalog.md5(model_name), 12) || '_'
                       || dim::text;
BEGIN
    IF pg_catalog.to_regclass('message_embeddings'::text) IS NULL THEN
        RETURN NULL;
    END IF;
    EXECUTE 'CREATE INDEX IF NOT EXISTS ' || pg_catalog.quote_ident(index_name)
            || ' ON message_embeddings USING hnsw ((embedding::vector(' || dim::text || '))'
            || ' vector_cosine_ops) WHERE model = ' || pg_catalog.quote_literal(model_name);
    RETURN index_name;
END $$;

-- Calls of unnest over several arrays, as ROWS FROM of qualified unnests (mm_qualify_builtins).
CREATE OR REPLACE FUNCTION mm_archive_mark_done(p_job_ids bigint[], p_commits text[]) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    n integer;
BEGIN
    PERFORM mm_require_archive_leader();
    IF coalesce(pg_catalog.array_length(p_job_ids, 1), 0) <> coalesce(pg_catalog.array_length(p_commits, 1), 0) THEN
        RAISE EXCEPTION 'one commit per job: % jobs, % commits', coalesce(pg_catalog.array_length(p_job_ids, 1), 0),
            coalesce(pg_catalog.array_length(p_commits, 1), 0) USING ERRCODE = 'MM400';
    END IF;
    UPDATE export_jobs j
    SET status = 'done', locked_by = NULL, lease_until = NULL, last_error = NULL, finished_at = pg_catalog.now(),
        commit_sha = nullif(c.sha, '')
    FROM ROWS FROM (pg_catalog.unnest(p_job_ids), pg_catalog.unnest(p_commits)) AS c(job_id, sha)
    WHERE j.job_id = c.job_id AND j.status = 'running' AND mm_may_read(j.project_id);
    GET DIAGNOSTICS n = ROW_COUNT;
    RETURN n;
END $$;

CREATE OR REPLACE FUNCTION mm_index_messages(p_session_id text, p_seqs bigint[], p_doc_lens integer[], p_tsvs text[],
                                             p_terms text[], p_dfs bigint[], p_shard smallint, p_indexed_seq bigint)
RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    s sessions;
    mark bigint;
    n integer := coalesce(pg_catalog.cardinality(p_seqs), 0);
BEGIN
    SELECT * INTO s FROM sessions WHERE session_id = p_session_id;
    IF NOT FOUND OR NOT mm_may_read(s.project_id) THEN
        RAISE EXCEPTION 'session % does not exist', p_session_id USING ERRCODE = 'MM404';
    END IF;
    PERFORM mm_require_write(s.project_id);
    IF p_shard < 0 OR p_shard >= 64 OR pg_catalog.cardinality(p_doc_lens) <> n OR pg_catalog.cardinality(p_tsvs) <> n
       OR coalesce(pg_catalog.cardinality(p_terms), 0) <> coalesce(pg_catalog.cardinality(p_dfs), 0) THEN
        RAISE EXCEPTION 'index rows do not line up' USING ERRCODE = 'MM400';
    END IF;
    SELECT coalesce(p.indexed_seq, s.fork_seq, 0) INTO mark
    FROM (SELECT 1) AS one LEFT JOIN search_progress p ON p.session_id = p_session_id;
    IF p_indexed_seq < mark OR p_indexed_seq > s.last_seq
       OR EXISTS (SELECT 1 FROM pg_catalog.unnest(p_seqs) AS x(seq) WHERE x.seq <= mark OR x.seq > p_indexed_seq) THEN
        RAISE EXCEPTION 'index rows of session % must lie in (%, %]', p_session_id, mark, s.last_seq
            USING ERRCODE = 'MM400';
    END IF;
    INSERT INTO message_search (session_id, seq, project_id, role, created_at, doc_len, tsv)
    SELECT p_session_id, m.seq, s.project_id, m.role, m.created_at, greatest(x.doc_len, 0), x.tsv::tsvector
    FROM ROWS FROM (pg_catalog.unnest(p_seqs), pg_catalog.unnest(p_doc_lens), pg_catalog.unnest(p_tsvs))
         AS x(seq, doc_len, tsv)
    JOIN messages m ON m.session_id = p_session_id AND m.seq = x.seq;
    IF n > 0 THEN
        INSERT INTO search_term_stats AS t (project_id, term, shard, df)
        SELECT s.project_id, x.term, p_shard, least(x.df, n)
        FROM ROWS FROM (pg_catalog.unnest(p_terms), pg_catalog.unnest(p_dfs)) AS x(term, df)
        WHERE x.df > 0
        ORDER BY x.term
        ON CONFLICT (term, project_id, shard) DO UPDATE SET df = t.df + excluded.df;
        INSERT INTO search_doc_stats AS d (project_id, shard, docs, total_len)
        SELECT s.project_id, p_shard, n, coalesce(pg_catalog.sum(greatest(l, 0)), 0) FROM pg_catalog.unnest(p_doc_lens) AS l
        ON CONFLICT (project_id, shard) DO UPDATE SET docs = d.docs + excluded.docs,
                                                      total_len = d.total_len + excluded.total_len;
    END IF;
    INSERT INTO search_progress AS p (session_id, project_id, indexed_seq, stored_seq)
    VALUES (p_session_id, s.project_id, p_indexed_seq, s.last_seq)
    ON CONFLICT (session_id) DO UPDATE
    SET indexed_seq = greatest(p.indexed_seq, excluded.indexed_seq),
        stored_seq = greatest(p.stored_seq, excluded.stored_seq), updated_at = pg_catalog.now();
END $$;

CREATE OR REPLACE FUNCTION mm_store_embeddings(p_session_id text, p_model text, p_seqs bigint[], p_kinds text[],
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
    IF coalesce(pg_catalog.cardinality(p_seqs), 0) > 0 THEN
        EXECUTE 'INSERT INTO message_embeddings (session_id, seq, model, kind, project_id, embedding)'
                ' SELECT $1, e.seq, $2, e.kind, $3, e.embedding::vector(' || dim::text || ')::vector'
                ' FROM ROWS FROM (pg_catalog.unnest($4::bigint[]), pg_catalog.unnest($5::text[]),'
                ' pg_catalog.unnest($6::text[])) AS e(seq, kind, embedding)'
                ' WHERE EXISTS (SELECT 1 FROM messages m WHERE m.session_id = $1 AND m.seq = e.seq)'
                ' ON CONFLICT (session_id, seq, model, kind) DO NOTHING'
        USING p_session_id, p_model, s.project_id, p_seqs, p_kinds, p_vectors;
    END IF;
    INSERT INTO embedding_watermarks AS w (model, session_id, project_id, done_seq)
    VALUES (p_model, p_session_id, s.project_id, p_done_seq)
    ON CONFLICT (session_id, model)
    DO UPDATE SET done_seq = greatest(w.done_seq, excluded.done_seq), updated_at = pg_catalog.now();
END $$;

-- 3. The write functions validate what they store -----------------------------------------------------

-- The limits a token's raw write must meet: the client's defaults (README, limits).
CREATE FUNCTION mm_check_message(i integer, p_role text, p_payload text, p_created timestamptz) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    payload jsonb;
BEGIN
    IF p_payload IS NULL OR pg_catalog.octet_length(p_payload) > 1048576 THEN
        RAISE EXCEPTION 'messages[%] payload is % bytes; at most 1048576 (1 MiB)', i - 1,
            coalesce(pg_catalog.octet_length(p_payload), 0) USING ERRCODE = 'MM400';
    END IF;
    payload := p_payload::jsonb;
    IF pg_catalog.jsonb_typeof(payload) IS DISTINCT FROM 'object' THEN
        RAISE EXCEPTION 'messages[%] payload must be a JSON object', i - 1 USING ERRCODE = 'MM400';
    END IF;
    IF p_role IS NULL OR p_role NOT IN ('system', 'user', 'assistant', 'tool') THEN
        RAISE EXCEPTION 'messages[%] role must be system, user, assistant or tool', i - 1 USING ERRCODE = 'MM400';
    END IF;
    IF payload ? 'role' AND (payload -> 'role') IS DISTINCT FROM pg_catalog.to_jsonb(p_role) THEN
        RAISE EXCEPTION 'messages[%] payload role % differs from the row role %', i - 1, payload -> 'role', p_role
            USING ERRCODE = 'MM400';
    END IF;
    IF p_created IS NOT NULL AND NOT (p_created >= '1970-01-01 00:00:00+00'::timestamptz
                                      AND p_created < '10000-01-01 00:00:00+00'::timestamptz) THEN
        RAISE EXCEPTION 'messages[%] created_at % is outside 1970-01-01 … 9999-12-31', i - 1, p_created
            USING ERRCODE = 'MM400';
    END IF;
    RETURN payload;
END $$;

CREATE OR REPLACE FUNCTION mm_append(p_session_id text, p_append_ids text[], p_roles text[], p_payloads text[],
                                     p_hashes bytea[], p_created timestamptz[])
RETURNS TABLE (seq bigint, duplicate boolean)
LANGUAGE plpgsql AS $$
DECLARE
    s sessions := mm_writable_session(p_session_id);
    trusted boolean := mm_require_write(s.project_id);
    who text := mm_caller();
    n integer := coalesce(pg_catalog.cardinality(p_append_ids), 0);
    last bigint := s.last_seq;
    payload jsonb;
    digest bytea;
    stored_seq bigint;
    stored_hash bytea;
BEGIN
    IF n = 0 OR pg_catalog.cardinality(p_roles) <> n OR pg_catalog.cardinality(p_payloads) <> n
       OR (p_hashes IS NOT NULL AND pg_catalog.cardinality(p_hashes) <> n)
       OR (p_created IS NOT NULL AND pg_catalog.cardinality(p_created) <> n) THEN
        RAISE EXCEPTION 'append needs one append_id, role and payload per message' USING ERRCODE = 'MM400';
    END IF;
    FOR i IN 1..n LOOP
        IF p_append_ids[i] IS NULL OR p_append_ids[i] = '' OR pg_catalog.length(p_append_ids[i]) > 200 THEN
            RAISE EXCEPTION 'messages[%] append_id must be 1 to 200 characters', i - 1 USING ERRCODE = 'MM400';
        END IF;
        payload := mm_check_message(i, p_roles[i], p_payloads[i], p_created[i]);
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
                    coalesce(p_created[i], pg_catalog.now()), who);
            seq := last;
            duplicate := false;
        END IF;
        RETURN NEXT;
    END LOOP;
    IF last <> s.last_seq THEN
        UPDATE sessions SET last_seq = last, updated_at = pg_catalog.now() WHERE session_id = p_session_id;
        UPDATE search_progress SET stored_seq = last WHERE session_id = p_session_id;
    END IF;
END $$;

-- Session meta and titles: bounded too (the client's limits).
CREATE FUNCTION mm_check_session_fields(p_agent_source text, p_title text, p_meta jsonb) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    IF pg_catalog.length(p_agent_source) > 200 THEN
        RAISE EXCEPTION 'agent_source must be at most 200 characters' USING ERRCODE = 'MM400';
    END IF;
    IF pg_catalog.length(p_title) > 10000 THEN
        RAISE EXCEPTION 'title must be at most 10000 characters' USING ERRCODE = 'MM400';
    END IF;
    IF p_meta IS NOT NULL AND pg_catalog.octet_length(p_meta::text) > 262144 THEN
        RAISE EXCEPTION 'meta is % bytes; at most 262144', pg_catalog.octet_length(p_meta::text) USING ERRCODE = 'MM400';
    END IF;
END $$;

CREATE OR REPLACE FUNCTION mm_create_session(p_session_id text, p_project_id text, p_agent_source text, p_title text,
                                             p_meta jsonb, p_if_absent boolean DEFAULT false) RETURNS SETOF sessions
LANGUAGE plpgsql AS $$
DECLARE
    s sessions;
BEGIN
    PERFORM mm_require_write(p_project_id);
    PERFORM mm_check_session_fields(p_agent_source, p_title, p_meta);
    IF p_session_id IS NULL OR pg_catalog.length(p_session_id) NOT BETWEEN 1 AND 200 THEN
        RAISE EXCEPTION 'session_id must be 1 to 200 characters' USING ERRCODE = 'MM400';
    END IF;
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

CREATE OR REPLACE FUNCTION mm_update_session_meta(p_session_id text, p_set jsonb, p_remove text[],
                                                  p_title_given boolean, p_title text, p_agent_given boolean,
                                                  p_agent_source text)
RETURNS SETOF sessions
LANGUAGE plpgsql AS $$
DECLARE
    s sessions := mm_writable_session(p_session_id);
    merged jsonb := (s.meta - coalesce(p_remove, '{}'::text[])) || coalesce(p_set, '{}'::jsonb);
BEGIN
    PERFORM mm_check_session_fields(CASE WHEN p_agent_given THEN p_agent_source END,
                                    CASE WHEN p_title_given THEN p_title END, merged);
    RETURN QUERY
    UPDATE sessions
    SET meta = merged,
        title = CASE WHEN p_title_given THEN p_title ELSE title END,
        agent_source = CASE WHEN p_agent_given THEN p_agent_source ELSE agent_source END,
        updated_at = pg_catalog.now()
    WHERE session_id = p_session_id
    RETURNING *;
END $$;

-- 4. Coordination rows only the owner's functions write -----------------------------------------------

-- The archiver's single writer: one row naming the backend that holds the lease. A holder whose
-- backend is gone (or whose lease ran out without renewal) is replaced by the next archiver that
-- asks. Standbys are recorded as they ask, so `archive status` can show them.
CREATE TABLE archive_leader (
    id          boolean PRIMARY KEY DEFAULT true CHECK (id),
    worker      text NOT NULL,
    role_name   text NOT NULL,
    pid         integer NOT NULL,
    since       timestamptz NOT NULL DEFAULT now(),
    lease_until timestamptz NOT NULL
);
CREATE TABLE archive_nodes (
    worker     text PRIMARY KEY,
    role_name  text NOT NULL,
    pid        integer NOT NULL,
    client     text,
    last_seen  timestamptz NOT NULL DEFAULT now()
);

-- True when this connection is (now) the leader. Only an archiver or the owner may ask.
CREATE FUNCTION mm_archive_acquire(p_worker text, p_lease float8) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
    l archive_leader;
    me integer := pg_catalog.pg_backend_pid();
    who text := mm_caller();
    lease interval := pg_catalog.make_interval(secs => greatest(coalesce(p_lease, 30::float8), 1::float8));
BEGIN
    PERFORM mm_require_archiver();
    INSERT INTO archive_nodes AS n (worker, role_name, pid, client, last_seen)
    VALUES (pg_catalog."left"(p_worker, 200), who, me, pg_catalog.current_setting('application_name'), pg_catalog.now())
    ON CONFLICT (worker) DO UPDATE SET role_name = excluded.role_name, pid = excluded.pid, client = excluded.client,
                                       last_seen = excluded.last_seen;
    DELETE FROM archive_nodes WHERE last_seen < pg_catalog.now() - interval '1 day';
    INSERT INTO archive_leader (worker, role_name, pid, lease_until)
    VALUES (pg_catalog."left"(p_worker, 200), who, me, pg_catalog.now() + lease)
    ON CONFLICT (id) DO NOTHING;
    SELECT * INTO l FROM archive_leader WHERE id FOR UPDATE;
    IF l.pid = me AND l.role_name = who THEN
        UPDATE archive_leader SET lease_until = pg_catalog.now() + lease, worker = pg_catalog."left"(p_worker, 200)
        WHERE id;
        RETURN true;
    END IF;
    IF l.lease_until < pg_catalog.now()
       OR NOT EXISTS (SELECT 1 FROM pg_catalog.pg_stat_activity a
                      WHERE a.pid = l.pid AND a.datname = pg_catalog.current_database()
                        AND a.usename = l.role_name::name) THEN
        UPDATE archive_leader SET worker = pg_catalog."left"(p_worker, 200), role_name = who, pid = me,
                                  since = pg_catalog.now(), lease_until = pg_catalog.now() + lease
        WHERE id;
        RETURN true;
    END IF;
    RETURN false;
END $$;

-- The leader gives the lease up (a clean stop): the standby takes over at its next try.
CREATE FUNCTION mm_archive_release() RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM mm_require_archiver();
    DELETE FROM archive_leader WHERE id AND pid = pg_catalog.pg_backend_pid() AND role_name = mm_caller();
    RETURN FOUND;
END $$;

CREATE OR REPLACE FUNCTION mm_require_archive_leader() RETURNS void
LANGUAGE plpgsql STABLE AS $$
BEGIN
    PERFORM mm_require_archiver();
    IF NOT EXISTS (SELECT 1 FROM archive_leader l
                   WHERE l.id AND l.pid = pg_catalog.pg_backend_pid() AND l.role_name = mm_caller()
                     AND l.lease_until >= pg_catalog.now()) THEN
        RAISE EXCEPTION 'this connection does not hold the archiver lease: only the active archiver works the queue'
            USING ERRCODE = 'MM409';
    END IF;
END $$;

-- Who holds the lease and which archivers asked lately (`archive status`, for every role: worker
-- names and roles of archivers only, nothing of any project).
CREATE FUNCTION mm_archive_nodes()
RETURNS TABLE (worker text, role_name text, pid integer, client text, last_seen timestamptz, leader boolean,
               alive boolean, since timestamptz, lease_until timestamptz)
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN QUERY
    SELECT n.worker, n.role_name, n.pid, n.client, n.last_seen,
           (l.pid = n.pid AND l.role_name = n.role_name AND l.worker = n.worker) IS TRUE,
           EXISTS (SELECT 1 FROM pg_catalog.pg_stat_activity a
                   WHERE a.pid = n.pid AND a.datname = pg_catalog.current_database()
                     AND a.usename = n.role_name::name),
           l.since, l.lease_until
    FROM archive_nodes n LEFT JOIN archive_leader l ON l.id
    ORDER BY 6 DESC, n.last_seen DESC;
END $$;

-- The search indexer of one session claims its row for the transaction (one indexer per session).
CREATE TABLE search_claims (
    session_id text PRIMARY KEY
);
ALTER TABLE search_claims ENABLE ROW LEVEL SECURITY;  -- no policy: nobody but the owner sees a row
CREATE FUNCTION mm_index_claim(p_session_id text) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
    project text;
BEGIN
    SELECT s.project_id INTO project FROM sessions s WHERE s.session_id = p_session_id;
    IF NOT FOUND OR NOT mm_may_read(project) THEN
        RETURN false;
    END IF;
    PERFORM mm_require_write(project);
    INSERT INTO search_claims (session_id) VALUES (p_session_id) ON CONFLICT (session_id) DO NOTHING;
    PERFORM 1 FROM search_claims WHERE session_id = p_session_id FOR UPDATE;
    RETURN true;
END $$;

-- Migrations: `db migrate` holds this row for its whole run (an owner-only table: no token can lock it).
CREATE TABLE migration_lock (
    id boolean PRIMARY KEY DEFAULT true CHECK (id)
);
INSERT INTO migration_lock DEFAULT VALUES;

-- 5. Notifications: nothing another project can use ---------------------------------------------------

-- A random key only the owner reads: the append channel carries sha256(key || session id), which
-- nobody can compute for a session without asking mm_append_channel_key, which answers only for
-- the sessions the caller reads. The export channel carries nothing: the archiver claims its jobs.
CREATE TABLE notify_key (
    id  boolean PRIMARY KEY DEFAULT true CHECK (id),
    key bytea NOT NULL
);
INSERT INTO notify_key (key)
SELECT pg_catalog.sha256(pg_catalog.convert_to(pg_catalog.gen_random_uuid()::text || pg_catalog.clock_timestamp()::text
                                               || pg_catalog.random()::text || pg_catalog.gen_random_uuid()::text,
                                               'UTF8'));

CREATE OR REPLACE FUNCTION mm_notify_append() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_catalog.pg_notify('mcp_memory_append'::text, pg_catalog.encode(pg_catalog.sha256(
        (SELECT k.key FROM notify_key k WHERE k.id) || pg_catalog.convert_to(NEW.session_id, 'UTF8')), 'hex'));
    RETURN NULL;
END $$;

CREATE FUNCTION mm_append_channel_key(p_session_id text) RETURNS text
LANGUAGE plpgsql STABLE AS $$
DECLARE
    project text;
BEGIN
    SELECT s.project_id INTO project FROM sessions s WHERE s.session_id = p_session_id;
    IF NOT FOUND OR NOT mm_may_read(project) THEN
        RAISE EXCEPTION 'session % does not exist', p_session_id USING ERRCODE = 'MM404';
    END IF;
    RETURN pg_catalog.encode(pg_catalog.sha256((SELECT k.key FROM notify_key k WHERE k.id)
                                               || pg_catalog.convert_to(p_session_id, 'UTF8')), 'hex');
END $$;

CREATE OR REPLACE FUNCTION mm_snapshot(p_session_id text, p_commit_msg text, p_meta jsonb) RETURNS SETOF snapshots
LANGUAGE plpgsql AS $$
DECLARE
    s sessions := mm_writable_session(p_session_id);
    snap snapshots;
BEGIN
    IF pg_catalog.length(p_commit_msg) > 10000 THEN
        RAISE EXCEPTION 'commit_msg must be at most 10000 characters' USING ERRCODE = 'MM400';
    END IF;
    IF p_meta IS NOT NULL AND pg_catalog.octet_length(p_meta::text) > 262144 THEN
        RAISE EXCEPTION 'meta is % bytes; at most 262144', pg_catalog.octet_length(p_meta::text) USING ERRCODE = 'MM400';
    END IF;
    INSERT INTO snapshots (session_id, project_id, up_to_seq, commit_msg, meta, created_by)
    VALUES (s.session_id, s.project_id, s.last_seq, coalesce(p_commit_msg, ''), coalesce(p_meta, '{}'), mm_caller())
    RETURNING * INTO snap;
    INSERT INTO export_jobs (snapshot_id, session_id, project_id)
    VALUES (snap.snapshot_id, snap.session_id, snap.project_id);
    PERFORM pg_catalog.pg_notify('mcp_memory_export'::text, ''::text);
    RETURN NEXT snap;
END $$;

-- The agent list: the agents of the sessions the caller reads (a token no longer sees the agent
-- names of other projects); descriptions stay the owner's.
CREATE FUNCTION mm_agents() RETURNS TABLE (name text, description text, created_at timestamptz)
LANGUAGE sql STABLE AS $$
    SELECT a.name, a.description, a.created_at FROM agents a
    WHERE mm_is_owner(mm_caller())
       OR EXISTS (SELECT 1 FROM sessions s JOIN access_token_projects p
                    ON p.role_name = mm_caller() AND (p.project_id = s.project_id OR p.project_id = '*')
                  WHERE s.agent_source = a.name)
    ORDER BY a.name
$$;

-- Embedding models: only the owner registers a new one; a token uses the registered ones.
CREATE OR REPLACE FUNCTION mm_register_embedding_model(p_model text, p_dim integer) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    known integer;
BEGIN
    SELECT m.dim INTO known FROM embedding_models m WHERE m.model = p_model;
    IF NOT FOUND THEN
        IF NOT mm_is_owner(mm_caller()) THEN
            RAISE EXCEPTION 'embedding model % is not registered; the database owner registers it once '
                '(mcp-memory embed --model % with the owner DSN)', p_model, p_model USING ERRCODE = 'MM403';
        END IF;
        INSERT INTO embedding_models (model, dim) VALUES (p_model, p_dim) ON CONFLICT (model) DO NOTHING;
        SELECT m.dim INTO known FROM embedding_models m WHERE m.model = p_model;
    END IF;
    PERFORM mm_embedding_index(p_model, known);
    RETURN known;
END $$;

-- Token rotation (`token rotate NAME`): each rotation is a new role of the same token name, so old
-- and new both log in until the old one's VALID UNTIL (the grace period). NULL: the role's own name.
ALTER TABLE access_tokens ADD COLUMN token_name text;

-- 6. The gateway: logins that serve-http uses to act as token roles -----------------------------------

DO $$
BEGIN
    IF pg_catalog.to_regrole('mcp_memory_gateway') IS NULL THEN
        BEGIN
            CREATE ROLE mcp_memory_gateway NOLOGIN NOINHERIT;
        EXCEPTION
            WHEN insufficient_privilege THEN
                RAISE NOTICE 'mcp-memory: cannot create role mcp_memory_gateway (needs CREATEROLE)';
            WHEN duplicate_object OR unique_violation THEN
                NULL;
        END;
    END IF;
END $$;

-- The REST check of a bearer token, for a gateway that reads no table: true when the role is a
-- token that may log in and the digest is its token's.
CREATE FUNCTION mm_check_token(p_role text, p_digest bytea) RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT EXISTS (
        SELECT 1 FROM access_tokens t JOIN pg_catalog.pg_roles r ON r.rolname = t.role_name::name
        WHERE t.role_name = p_role AND t.token_sha256 = p_digest AND r.rolcanlogin
          AND (r.rolvaliduntil IS NULL OR r.rolvaliduntil > pg_catalog.now()))
$$;

-- What a gateway (or any login) may know without reading a table: the schema version and whether
-- any token exists.
CREATE FUNCTION mm_schema_version() RETURNS integer
LANGUAGE sql STABLE AS $$
    SELECT coalesce(pg_catalog.max(version), 0) FROM schema_migrations
$$;
CREATE FUNCTION mm_token_count() RETURNS bigint
LANGUAGE sql STABLE AS $$
    SELECT pg_catalog.count(*) FROM access_tokens
$$;

-- 7. Every function of ours: pg_catalog first, then this schema, pg_temp last; the new API granted --

DO $$
DECLARE
    f regprocedure;
    -- CREATE OR REPLACE resets SECURITY DEFINER: the replaced API functions are named again here
    definer constant text[] := ARRAY['mm_archive_acquire', 'mm_archive_release', 'mm_archive_nodes',
                                     'mm_index_claim', 'mm_append_channel_key', 'mm_agents', 'mm_check_token',
                                     'mm_schema_version', 'mm_token_count', 'mm_set_context', 'mm_embedding_index',
                                     'mm_append', 'mm_create_session', 'mm_update_session_meta',
                                     'mm_require_archive_leader', 'mm_snapshot', 'mm_register_embedding_model',
                                     'mm_archive_mark_done', 'mm_index_messages', 'mm_store_embeddings'];
BEGIN
    FOR f IN
        SELECT p.oid::regprocedure FROM pg_catalog.pg_proc p
        WHERE p.pronamespace = current_schema()::regnamespace
          AND (p.proname LIKE 'mm\_%' OR p.proname = 'mcp_memory_register_agent')
    LOOP
        IF split_part(f::text, '(', 1) = ANY (definer) THEN
            EXECUTE format('ALTER FUNCTION %s SECURITY DEFINER', f);
        END IF;
        IF split_part(f::text, '(', 1) <> ALL (ARRAY['mm_secure_schema', 'mm_qualify_builtins']) THEN
            EXECUTE format('REVOKE ALL ON FUNCTION %s FROM PUBLIC', f);
        END IF;
        EXECUTE format('ALTER FUNCTION %s SET search_path = pg_catalog, %I, pg_temp', f, current_schema());
    END LOOP;
    REVOKE ALL ON archive_leader, archive_nodes, search_claims, migration_lock, notify_key FROM PUBLIC;
    IF to_regrole('mcp_memory_rw') IS NULL THEN
        RETURN;
    END IF;
    GRANT EXECUTE ON FUNCTION mm_canonical_number(jsonb) TO mcp_memory_ro, mcp_memory_rw, mcp_memory_archiver;
    GRANT EXECUTE ON FUNCTION mm_archive_acquire(text, float8), mm_archive_release() TO mcp_memory_archiver;
    GRANT EXECUTE ON FUNCTION mm_archive_nodes() TO mcp_memory_ro, mcp_memory_rw, mcp_memory_archiver;
    GRANT EXECUTE ON FUNCTION mm_index_claim(text) TO mcp_memory_rw;
    GRANT EXECUTE ON FUNCTION mm_append_channel_key(text), mm_agents(), mm_schema_version()
        TO mcp_memory_ro, mcp_memory_rw, mcp_memory_archiver;
    -- the agents table itself: the owner's (a token reads its agents through mm_agents)
    REVOKE ALL ON agents FROM mcp_memory_ro, mcp_memory_rw, mcp_memory_archiver;
    IF to_regrole('mcp_memory_gateway') IS NOT NULL THEN
        GRANT EXECUTE ON FUNCTION mm_check_token(text, bytea), mm_schema_version(), mm_token_count()
            TO mcp_memory_gateway;
    END IF;
END $$;

-- 8. Token roles: limits on what one role may hold (token create sets them for new tokens; README,
--    token limits), and the gateway may act as each. Needs CREATEROLE (or ADMIN on the roles):
--    without it, each role is named in a notice and keeps working as before.
DO $$
DECLARE
    r text;
BEGIN
    FOR r IN SELECT t.role_name FROM access_tokens t JOIN pg_catalog.pg_roles x ON x.rolname = t.role_name::name LOOP
        BEGIN
            EXECUTE format('ALTER ROLE %I CONNECTION LIMIT 20', r);
            EXECUTE format('ALTER ROLE %I SET statement_timeout = %L', r, '10min');
            EXECUTE format('ALTER ROLE %I SET idle_in_transaction_session_timeout = %L', r, '60s');
            EXECUTE format('ALTER ROLE %I SET lock_timeout = %L', r, '60s');
            IF to_regrole('mcp_memory_gateway') IS NOT NULL THEN
                EXECUTE format('GRANT %I TO mcp_memory_gateway', r);
            END IF;
        EXCEPTION WHEN insufficient_privilege THEN
            RAISE NOTICE 'mcp-memory: cannot set the limits of token role % (needs CREATEROLE)', r;
        END;
    END LOOP;
END $$;

-- 9. Qualify the built-in calls of every function as it now stands (each later `db migrate` too).
SELECT mm_qualify_builtins();
