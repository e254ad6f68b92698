-- Security in the database (README, design note 7): a token is the password of a LOGIN
-- role; group roles carry the table privileges; row-level security limits every project-scoped
-- table to the projects recorded for the role in access_token_projects. The schema owner (the role
-- that runs migrations) and superusers are not limited (RLS is enabled, not forced).
--
-- Generic on purpose: every table of this schema with a project_id column gets the same policies
-- (mm_enable_project_rls), so tables of earlier migrations are covered now and later migrations
-- call the function for their own tables (e.g. `SELECT mm_enable_project_rls('embeddings');`).
-- A table with a session_id but no project_id is scoped through its session (mm_enable_session_rls).

-- 1. Group roles (cluster-wide, shared by every mcp-memory database of the cluster). Creating them
--    needs CREATEROLE; without it the schema still migrates, and `token create` says what is missing.
DO $$
DECLARE
    r text;
BEGIN
    FOREACH r IN ARRAY ARRAY['mcp_memory_rw', 'mcp_memory_ro', 'mcp_memory_archiver'] LOOP
        IF to_regrole(r) IS NULL THEN
            BEGIN
                EXECUTE format('CREATE ROLE %I NOLOGIN', r);
            EXCEPTION
                WHEN insufficient_privilege THEN
                    RAISE NOTICE 'mcp-memory: cannot create role % (needs CREATEROLE); tokens are unavailable', r;
                WHEN duplicate_object OR unique_violation THEN
                    NULL;  -- created at the same moment by a migration of another database
            END;
        END IF;
    END LOOP;
END $$;

-- 2. Token scopes: which projects a role may read, and whether it may write.
CREATE TABLE access_tokens (
    role_name    text PRIMARY KEY,
    read_only    boolean NOT NULL DEFAULT false,
    archiver     boolean NOT NULL DEFAULT false,
    token_sha256 bytea NOT NULL,               -- the REST check; the token itself is never stored
    created_by   text NOT NULL DEFAULT current_user,
    created_at   timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE access_token_projects (
    role_name  text NOT NULL REFERENCES access_tokens (role_name) ON DELETE CASCADE,
    project_id text NOT NULL,                  -- '*' = every project
    PRIMARY KEY (role_name, project_id)
);
ALTER TABLE access_tokens ENABLE ROW LEVEL SECURITY;
ALTER TABLE access_token_projects ENABLE ROW LEVEL SECURITY;
CREATE POLICY mm_own ON access_tokens FOR SELECT USING (role_name = current_user);
CREATE POLICY mm_own ON access_token_projects FOR SELECT USING (role_name = current_user);

-- 3. Audit: which host wrote a message (the connection's application_name is "<purpose>@<host>").
ALTER TABLE messages ADD COLUMN written_host text DEFAULT nullif(current_setting('application_name', true), '');

-- 4. Decisions: visibility private | team | public, honoured by the policies below.
DO $$
BEGIN
    IF to_regclass('decisions') IS NOT NULL THEN
        ALTER TABLE decisions ADD COLUMN IF NOT EXISTS created_by text NOT NULL DEFAULT current_user;
        ALTER TABLE decisions ADD COLUMN IF NOT EXISTS visibility text NOT NULL DEFAULT 'team';
        ALTER TABLE decisions DROP CONSTRAINT IF EXISTS decisions_visibility_check;
        ALTER TABLE decisions ADD CONSTRAINT decisions_visibility_check
            CHECK (visibility IN ('private', 'team', 'public'));
    END IF;
END $$;

-- 5. The projects of the calling role. Policies call it through (SELECT …) so it runs once per
--    statement. search_path is pinned (pg_temp last) so a temporary table cannot stand in for the
--    scope tables.
CREATE FUNCTION mm_token_projects(writable boolean) RETURNS text[]
LANGUAGE sql STABLE AS $$
    SELECT coalesce(array_agg(p.project_id), '{}')
    FROM access_token_projects p JOIN access_tokens t ON t.role_name = p.role_name
    WHERE t.role_name = current_user AND (NOT writable OR NOT t.read_only)
$$;

CREATE FUNCTION mm_session_in_scope(sid text, writable boolean) RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT EXISTS (
        SELECT 1 FROM sessions s
        WHERE s.session_id = sid
          AND (s.project_id = ANY (mm_token_projects(writable)) OR '*' = ANY (mm_token_projects(writable))))
$$;

DO $$
BEGIN
    EXECUTE format('ALTER FUNCTION mm_token_projects(boolean) SET search_path = %I, pg_temp', current_schema());
    EXECUTE format('ALTER FUNCTION mm_session_in_scope(text, boolean) SET search_path = %I, pg_temp',
                   current_schema());
END $$;

-- 6. Privileges of the group roles on one table. Audit columns (`protect`, e.g. created_by) are
--    filled by their defaults only, `frozen` columns are never updated by hosts, and the history
--    tables are append-only for hosts (`deletable` false).
CREATE FUNCTION mm_grant_table(tbl regclass, deletable boolean DEFAULT true, protect text[] DEFAULT '{}',
                               frozen text[] DEFAULT '{}') RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    insertable text;
    updatable text;
BEGIN
    IF to_regrole('mcp_memory_rw') IS NULL THEN
        RETURN;
    END IF;
    EXECUTE format('GRANT SELECT ON %s TO mcp_memory_ro, mcp_memory_rw, mcp_memory_archiver', tbl);
    SELECT string_agg(quote_ident(attname), ', ') FILTER (WHERE NOT attname = ANY (protect)),
           string_agg(quote_ident(attname), ', ') FILTER (WHERE NOT attname = ANY (protect || frozen))
      INTO insertable, updatable
      FROM pg_attribute
     WHERE attrelid = tbl AND attnum > 0 AND NOT attisdropped AND attgenerated = '';
    EXECUTE format('REVOKE INSERT, UPDATE, DELETE ON %s FROM mcp_memory_rw', tbl);
    EXECUTE format('GRANT INSERT (%s) ON %s TO mcp_memory_rw', insertable, tbl);
    IF updatable IS NOT NULL THEN
        EXECUTE format('GRANT UPDATE (%s) ON %s TO mcp_memory_rw', updatable, tbl);
    END IF;
    IF deletable THEN
        EXECUTE format('GRANT DELETE ON %s TO mcp_memory_rw', tbl);
    END IF;
END $$;

-- 7. Row-level security on a table with a project_id column.
CREATE FUNCTION mm_enable_project_rls(tbl regclass, deletable boolean DEFAULT true,
                                      protect text[] DEFAULT '{}', frozen text[] DEFAULT '{}') RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    readable text := '(project_id IS NULL OR project_id = ANY ((SELECT mm_token_projects(false))::text[])'
                     ' OR ''*'' = ANY ((SELECT mm_token_projects(false))::text[]))';
    writable text := '(project_id = ANY ((SELECT mm_token_projects(true))::text[])'
                     ' OR ''*'' = ANY ((SELECT mm_token_projects(true))::text[]))';
BEGIN
    IF EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = tbl AND attname = 'visibility' AND NOT attisdropped)
       AND EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = tbl AND attname = 'created_by' AND NOT attisdropped)
    THEN
        readable := format('(visibility = ''public'' OR (%s AND (visibility <> ''private'' OR created_by = current_user)))',
                           readable);
    END IF;
    PERFORM mm_apply_policies(tbl, readable, writable);
    PERFORM mm_grant_table(tbl, deletable, protect, frozen);
END $$;

-- 8. Row-level security on a table keyed by session_id only: in scope when its session is.
CREATE FUNCTION mm_enable_session_rls(tbl regclass) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM mm_apply_policies(tbl, 'mm_session_in_scope(session_id, false)', 'mm_session_in_scope(session_id, true)');
    PERFORM mm_grant_table(tbl);
END $$;

CREATE FUNCTION mm_apply_policies(tbl regclass, readable text, writable text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE format('ALTER TABLE %s ENABLE ROW LEVEL SECURITY', tbl);
    EXECUTE format('DROP POLICY IF EXISTS mm_read ON %s', tbl);
    EXECUTE format('DROP POLICY IF EXISTS mm_insert ON %s', tbl);
    EXECUTE format('DROP POLICY IF EXISTS mm_update ON %s', tbl);
    EXECUTE format('DROP POLICY IF EXISTS mm_delete ON %s', tbl);
    EXECUTE format('CREATE POLICY mm_read ON %s FOR SELECT USING (%s)', tbl, readable);
    EXECUTE format('CREATE POLICY mm_insert ON %s FOR INSERT WITH CHECK (%s)', tbl, writable);
    EXECUTE format('CREATE POLICY mm_update ON %s FOR UPDATE USING (%s) WITH CHECK (%s)', tbl, writable, writable);
    EXECUTE format('CREATE POLICY mm_delete ON %s FOR DELETE USING (%s)', tbl, writable);
END $$;

REVOKE ALL ON FUNCTION mm_grant_table(regclass, boolean, text[], text[]) FROM PUBLIC;
REVOKE ALL ON FUNCTION mm_enable_project_rls(regclass, boolean, text[], text[]) FROM PUBLIC;
REVOKE ALL ON FUNCTION mm_enable_session_rls(regclass) FROM PUBLIC;
REVOKE ALL ON FUNCTION mm_apply_policies(regclass, text, text) FROM PUBLIC;

-- 9. Apply to every table of the schema as it is now (0001 … 0003).
DO $$
DECLARE
    t record;
    history constant text[] := ARRAY['sessions', 'messages', 'snapshots', 'export_jobs'];
BEGIN
    FOR t IN
        SELECT c.oid::regclass AS tbl, c.relname,
               EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attname = 'project_id'
                       AND NOT a.attisdropped) AS has_project,
               EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attname = 'session_id'
                       AND NOT a.attisdropped) AS has_session
        FROM pg_class c
        WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind IN ('r', 'p') AND NOT c.relispartition
          AND c.relname NOT IN ('access_tokens', 'access_token_projects', 'schema_migrations')
    LOOP
        IF t.relname = 'messages' THEN
            PERFORM mm_enable_project_rls(t.tbl, false, ARRAY['written_by', 'written_host', 'received_at'],
                ARRAY['session_id', 'seq', 'project_id', 'append_id', 'role', 'payload', 'payload_hash', 'created_at']);
        ELSIF t.relname IN ('sessions', 'snapshots') THEN
            PERFORM mm_enable_project_rls(t.tbl, false, ARRAY['created_by'], ARRAY['session_id', 'created_at']);
        ELSIF t.has_project THEN
            PERFORM mm_enable_project_rls(t.tbl, NOT t.relname = ANY (history), ARRAY['created_by']);
        ELSIF t.has_session THEN
            PERFORM mm_enable_session_rls(t.tbl);
        ELSIF to_regrole('mcp_memory_rw') IS NOT NULL THEN
            -- shared, not project data (synonyms, agent registry …): readable by all, kept by writers
            EXECUTE format('GRANT SELECT ON %s TO mcp_memory_ro, mcp_memory_rw, mcp_memory_archiver', t.tbl);
            EXECUTE format('GRANT INSERT, UPDATE ON %s TO mcp_memory_rw, mcp_memory_archiver', t.tbl);
        END IF;
    END LOOP;
END $$;

-- 10. The rest of the group roles' rights: schema, sequences, version check, own scope rows; the
--     archiver claims and finishes export jobs of the projects it reads.
DO $$
BEGIN
    IF to_regrole('mcp_memory_rw') IS NULL THEN
        RETURN;
    END IF;
    EXECUTE format('GRANT USAGE ON SCHEMA %I TO mcp_memory_ro, mcp_memory_rw, mcp_memory_archiver', current_schema());
    EXECUTE format('GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA %I TO mcp_memory_rw', current_schema());
    GRANT SELECT ON schema_migrations, access_tokens, access_token_projects
        TO mcp_memory_ro, mcp_memory_rw, mcp_memory_archiver;
    GRANT UPDATE ON export_jobs TO mcp_memory_archiver;
    CREATE POLICY mm_archive ON export_jobs FOR UPDATE TO mcp_memory_archiver
        USING (project_id = ANY ((SELECT mm_token_projects(false))::text[]) OR '*' = ANY ((SELECT mm_token_projects(false))::text[]))
        WITH CHECK (project_id = ANY ((SELECT mm_token_projects(false))::text[]) OR '*' = ANY ((SELECT mm_token_projects(false))::text[]));
END $$;
