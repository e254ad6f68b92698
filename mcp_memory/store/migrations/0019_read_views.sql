-- Read-only SQL for agents (README, "query_memory"): one SELECT over the views of schema mm_read,
-- run by mm_read.query as the role mcp_memory_reader.
--
-- Why a function owned by its own role, and not the caller's role with SET ROLE: a SELECT can call
-- set_config('role', …), and a login may become every role it is a member of. The server's login
-- (the owner, often a superuser, or a serve-http gateway, a member of every token role) could then
-- be borrowed by a query. Inside a SECURITY DEFINER function PostgreSQL refuses to change `role`
-- and `session_authorization`, whatever the SQL does (nested calls included), so the query runs in
-- mm_read.query, SECURITY DEFINER owned by mcp_memory_reader: NOLOGIN, member of nothing, with
-- SELECT on the views of mm_read and nothing else of this database (no table, no write function;
-- no superuser-only function such as pg_read_file). The transaction is READ ONLY besides.
--
-- Whose rows: the views run as their owner and keep only the rows the caller may read, the same
-- rule as row-level security (migration 0004) for the caller named as the write functions name it
-- (mm_caller: the role set with SET ROLE, else the login): a token's projects (and public
-- decisions; private ones only to their author), every project for the owner. security_barrier:
-- a condition of the query never runs on a row before the view's own filter has kept it.

-- 1. The reader role (cluster-wide, like the group roles of 0004; needs CREATEROLE).
DO $$
BEGIN
    IF pg_catalog.to_regrole('mcp_memory_reader') IS NULL THEN
        BEGIN
            CREATE ROLE mcp_memory_reader NOLOGIN NOINHERIT;
        EXCEPTION
            WHEN insufficient_privilege THEN
                RAISE NOTICE 'mcp-memory: cannot create role mcp_memory_reader (needs CREATEROLE); query_memory is unavailable';
            WHEN duplicate_object OR unique_violation THEN
                NULL;
        END;
    END IF;
END $$;

CREATE SCHEMA mm_read;
REVOKE ALL ON SCHEMA mm_read FROM PUBLIC;

-- 2. The caller's readable projects: '*' for an owner or an all-projects token. Runs as the owner
--    (it reads the scope table); the caller is mm_caller(), which a query cannot change (above).
CREATE FUNCTION mm_read_scope() RETURNS text[]
LANGUAGE sql STABLE SECURITY DEFINER AS $$
    SELECT CASE WHEN mm_is_owner(mm_caller()) THEN ARRAY['*']
                ELSE coalesce((SELECT array_agg(p.project_id) FROM access_token_projects p
                               WHERE p.role_name = mm_caller()), '{}') END
$$;

CREATE FUNCTION mm_read_caller() RETURNS text
LANGUAGE sql STABLE SECURITY DEFINER AS $$
    SELECT mm_caller()
$$;

DO $$
BEGIN
    EXECUTE pg_catalog.format('ALTER FUNCTION mm_read_scope() SET search_path = pg_catalog, %I, pg_temp',
                              current_schema());
    EXECUTE pg_catalog.format('ALTER FUNCTION mm_read_caller() SET search_path = pg_catalog, %I, pg_temp',
                              current_schema());
END $$;
REVOKE ALL ON FUNCTION mm_read_scope(), mm_read_caller() FROM PUBLIC;

-- 3. The views: readable columns only (no payload hashes, no native records, no audit host).
CREATE VIEW mm_read.sessions WITH (security_barrier = true) AS
SELECT s.session_id, s.project_id, s.agent_source, s.title, s.meta - 'native' AS meta,
       s.last_seq AS message_count, s.parent_session_id, s.fork_seq, s.parent_snapshot_id,
       s.created_by, s.created_at, s.updated_at
FROM sessions s
WHERE s.project_id = ANY ((SELECT mm_read_scope())::text[]) OR '*' = ANY ((SELECT mm_read_scope())::text[]);

-- text: the message's words (a string content, else its text parts joined by new lines)
CREATE VIEW mm_read.messages WITH (security_barrier = true) AS
SELECT m.session_id, m.seq, m.project_id, m.role,
       CASE pg_catalog.jsonb_typeof(m.payload -> 'content')
           WHEN 'string' THEN m.payload ->> 'content'
           WHEN 'array' THEN (SELECT pg_catalog.string_agg(p.value ->> 'text', E'\n' ORDER BY p.n)
                              FROM pg_catalog.jsonb_array_elements(m.payload -> 'content') WITH ORDINALITY AS p(value, n)
                              WHERE pg_catalog.jsonb_typeof(p.value) = 'object' AND p.value ? 'text')
       END AS text,
       m.payload -> 'tool_calls' AS tool_calls, m.payload ->> 'tool_call_id' AS tool_call_id,
       m.payload #>> '{thinking,content}' AS thinking,
       m.payload #>> '{metadata,scaffold}' AS scaffold,
       m.payload #>> '{metadata,agent_source}' AS agent_source,
       m.payload #>> '{metadata,model}' AS model,
       m.append_id, m.created_at, m.received_at, m.written_by
FROM messages m
WHERE m.project_id = ANY ((SELECT mm_read_scope())::text[]) OR '*' = ANY ((SELECT mm_read_scope())::text[]);

CREATE VIEW mm_read.decisions WITH (security_barrier = true) AS
SELECT d.decision_id, d.session_id, d.project_id, d.message_seq, d.decision_type, d.summary, d.status,
       d.rationale, d.alternatives, d.supersedes, d.superseded_by, d.metadata, d.visibility, d.version,
       d.created_by, d.created_at, d.updated_at
FROM decisions d
WHERE '*' = ANY ((SELECT mm_read_scope())::text[])
   OR d.visibility = 'public'
   OR (d.project_id = ANY ((SELECT mm_read_scope())::text[])
       AND (d.visibility <> 'private' OR d.created_by = (SELECT mm_read_caller())));

-- every revision of every key; `current` marks the newest of its key
CREATE VIEW mm_read.context WITH (security_barrier = true) AS
SELECT c.session_id, c.project_id, c.key, c.revision, c.value,
       c.revision = pg_catalog.max(c.revision) OVER (PARTITION BY c.session_id, c.key) AS current,
       c.created_by, c.created_at
FROM session_context c
WHERE c.project_id = ANY ((SELECT mm_read_scope())::text[]) OR '*' = ANY ((SELECT mm_read_scope())::text[]);

CREATE VIEW mm_read.snapshots WITH (security_barrier = true) AS
SELECT n.snapshot_id, n.session_id, n.project_id, n.up_to_seq, n.commit_msg, n.created_by, n.created_at
FROM snapshots n
WHERE n.project_id = ANY ((SELECT mm_read_scope())::text[]) OR '*' = ANY ((SELECT mm_read_scope())::text[]);

-- 4. The query: one statement, opened as the cursor mm_read_query (the client reads its column
--    names and types with a Describe, which runs nothing), at most p_rows rows fetched plus one to
--    tell that there were more, a cell longer than p_cell_chars cut and marked, and the rows
--    stopped once they pass p_max_chars. Returns {"rows": [[…], …], "more": bool, "cut": n}.
CREATE FUNCTION mm_read.query(p_sql text, p_rows integer, p_cell_chars integer, p_max_chars integer) RETURNS json
LANGUAGE plpgsql VOLATILE SECURITY DEFINER AS $$
DECLARE
    c refcursor := 'mm_read_query';
    r record;
    cells json;
    cut_here integer;
    out_rows json[] := '{}';
    total bigint := 0;
    cut bigint := 0;
    more boolean := false;
BEGIN
    OPEN c NO SCROLL FOR EXECUTE p_sql;
    LOOP
        FETCH c INTO r;
        EXIT WHEN NOT FOUND;
        IF pg_catalog.cardinality(out_rows) >= p_rows OR total >= p_max_chars THEN
            more := true;
            EXIT;
        END IF;
        SELECT coalesce(pg_catalog.json_agg(
                   CASE WHEN pg_catalog.length(e.value::text) <= p_cell_chars THEN e.value
                        WHEN pg_catalog.json_typeof(e.value) = 'string'
                        THEN pg_catalog.to_json(pg_catalog."left"(e.value #>> '{}', p_cell_chars)
                                                || pg_catalog.format('…[cut: %s chars]', pg_catalog.length(e.value #>> '{}')))
                        ELSE pg_catalog.to_json(pg_catalog."left"(e.value::text, p_cell_chars)
                                                || pg_catalog.format('…[cut: %s chars of JSON]', pg_catalog.length(e.value::text)))
                   END ORDER BY e.n), '[]'::json),
               pg_catalog.count(*) FILTER (WHERE pg_catalog.length(e.value::text) > p_cell_chars)::integer
          INTO cells, cut_here
          FROM pg_catalog.json_each(pg_catalog.to_json(r)) WITH ORDINALITY AS e(key, value, n);
        out_rows := out_rows || cells;
        total := total + pg_catalog.length(cells::text);
        cut := cut + cut_here;
    END LOOP;
    RETURN pg_catalog.json_build_object('rows', pg_catalog.to_json(out_rows), 'more', more, 'cut', cut);
END $$;
ALTER FUNCTION mm_read.query(text, integer, integer, integer) SET search_path = pg_catalog, mm_read, pg_temp;
REVOKE ALL ON FUNCTION mm_read.query(text, integer, integer, integer) FROM PUBLIC;

-- 5. Owner and grants. Without the reader role the function is dropped (the tool then says so):
--    owned by the migrating role it would run queries with the owner's rights.
DO $$
DECLARE
    super boolean := (SELECT r.rolsuper FROM pg_catalog.pg_roles r WHERE r.rolname = current_user);
BEGIN
    IF pg_catalog.to_regrole('mcp_memory_reader') IS NULL THEN
        DROP FUNCTION mm_read.query(text, integer, integer, integer);
        RETURN;
    END IF;
    BEGIN
        IF NOT super THEN
            GRANT mcp_memory_reader TO CURRENT_USER;  -- to hand it the function (ALTER … OWNER)
        END IF;
        GRANT USAGE ON SCHEMA mm_read TO mcp_memory_reader;
        GRANT CREATE ON SCHEMA mm_read TO mcp_memory_reader;  -- only for the change of owner
        ALTER FUNCTION mm_read.query(text, integer, integer, integer) OWNER TO mcp_memory_reader;
        REVOKE CREATE ON SCHEMA mm_read FROM mcp_memory_reader;
    EXCEPTION WHEN insufficient_privilege THEN
        -- the role exists but this owner may not hand it anything (created by another owner)
        RAISE NOTICE 'mcp-memory: cannot make mcp_memory_reader own mm_read.query (needs admin rights on it); '
            'query_memory is unavailable';
        DROP FUNCTION mm_read.query(text, integer, integer, integer);
        RETURN;
    END;
    GRANT SELECT ON mm_read.sessions, mm_read.messages, mm_read.decisions, mm_read.context, mm_read.snapshots
        TO mcp_memory_reader;
    GRANT EXECUTE ON FUNCTION mm_read_scope(), mm_read_caller() TO mcp_memory_reader;
    IF pg_catalog.to_regrole('mcp_memory_rw') IS NOT NULL THEN
        GRANT USAGE ON SCHEMA mm_read TO mcp_memory_ro, mcp_memory_rw, mcp_memory_archiver;
        GRANT EXECUTE ON FUNCTION mm_read.query(text, integer, integer, integer)
            TO mcp_memory_ro, mcp_memory_rw, mcp_memory_archiver;
    END IF;
END $$;

-- 6. mm_secure_schema (migration 0014) named a token's objects before dropping any: when dropping a
--    support function took its aggregate along (CASCADE), the aggregate's name read earlier was a
--    bare OID and the next `db migrate` failed. Same function, each object named when dropped.
CREATE OR REPLACE FUNCTION mm_secure_schema() RETURNS text[]
LANGUAGE plpgsql AS $$
DECLARE
    nsp oid := (SELECT c.relnamespace FROM pg_catalog.pg_class c WHERE c.oid = 'sessions'::regclass);
    nsp_name text := (SELECT n.nspname FROM pg_catalog.pg_namespace n WHERE n.oid = nsp);
    owner_oid oid := (SELECT c.relowner FROM pg_catalog.pg_class c WHERE c.oid = 'sessions'::regclass);
    dropped text[] := '{}';
    creators text;
    obj record;
    obj_name text;
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
    -- what a token role created here while it could (functions, procedures, operators), each named
    -- when it is dropped: an earlier DROP … CASCADE may have taken it already (an aggregate with its
    -- support function), and a name read before that would be a bare OID
    FOR obj IN
        SELECT 'FUNCTION' AS kind, p.oid, p.prokind
        FROM pg_catalog.pg_proc p
        WHERE p.pronamespace = nsp AND p.proowner <> owner_oid
          AND EXISTS (SELECT 1 FROM access_tokens t WHERE t.role_name = (SELECT rolname FROM pg_catalog.pg_roles
                                                                          WHERE oid = p.proowner))
        UNION ALL
        SELECT 'OPERATOR', o.oid, 'o'
        FROM pg_catalog.pg_operator o
        WHERE o.oprnamespace = nsp AND o.oprowner <> owner_oid
          AND EXISTS (SELECT 1 FROM access_tokens t WHERE t.role_name = (SELECT rolname FROM pg_catalog.pg_roles
                                                                          WHERE oid = o.oprowner))
    LOOP
        obj_name := CASE WHEN obj.kind = 'FUNCTION'
                         THEN (SELECT p.oid::regprocedure::text FROM pg_catalog.pg_proc p WHERE p.oid = obj.oid)
                         ELSE (SELECT o.oid::regoperator::text FROM pg_catalog.pg_operator o WHERE o.oid = obj.oid) END;
        CONTINUE WHEN obj_name IS NULL;
        EXECUTE pg_catalog.format('DROP %s IF EXISTS %s CASCADE',
                                  CASE WHEN obj.prokind = 'p' THEN 'PROCEDURE' WHEN obj.prokind = 'a' THEN 'AGGREGATE'
                                       ELSE obj.kind END, obj_name);
        dropped := dropped || (obj.kind || ' ' || obj_name);
    END LOOP;
    RETURN dropped;
END $$;
DO $$
BEGIN
    EXECUTE pg_catalog.format('ALTER FUNCTION mm_secure_schema() SET search_path = pg_catalog, %I, pg_temp',
                              current_schema());
END $$;
