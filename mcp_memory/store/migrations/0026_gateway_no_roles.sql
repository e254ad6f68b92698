-- The gateway holds no token's role (install/pgbouncer/README.md, "Why a token holder with raw SQL
-- cannot become another token").
--
-- Until now a gateway login (PgBouncer's forced server login, serve-http's login) was a member of
-- every token role, and mm_enter switched to the proven role with SET LOCAL ROLE. The proof kept
-- row-level security and the write functions honest, but not what PostgreSQL lets a role do to
-- itself: through the pooler, the holder of any token could `SET LOCAL ROLE <another token role>`
-- and then `ALTER ROLE … PASSWORD` / `ALTER ROLE … SET` it (a role may change its own password and
-- session defaults), read its running queries in pg_stat_activity and end its connections.
--
-- From this migration on:
--   1. No gateway is a member of any token role. The gateway group inherits the rights of the three
--      token groups instead (SELECT on the tables under row-level security, EXECUTE on the API),
--      which are worth nothing without a caller: every policy and every function names the caller
--      through mm_caller(), never through current_user.
--   2. mm_enter(token) proves the token and names the proven role in this transaction
--      (mm.gateway_role, with its HMAC in mm.gateway_proof); a gateway stays itself, and mm_caller()
--      answers the proven role. Only an owner login (serve-http --as-owner, which may become every
--      token role anyway) still switches with SET LOCAL ROLE, so that its own rights (an owner
--      bypasses row-level security) are not the token's.
--   3. Where the migrating role is a superuser, this database's copies of the functions that show or
--      signal other backends (pg_stat_activity's sources, pg_terminate_backend, pg_cancel_backend)
--      are taken from PUBLIC and given to the owner: every pooled backend of one gateway is one role,
--      and a role may see and end its own backends. Without a superuser, install/pgbouncer/
--      auth_query.sql (run as a superuser) does the same, and `doctor` says whether it was done.

-- 1. Memberships -------------------------------------------------------------------------------------------
DO $$
DECLARE
    r record;
BEGIN
    IF pg_catalog.to_regrole('mcp_memory_gateway') IS NULL OR pg_catalog.to_regrole('mcp_memory_rw') IS NULL THEN
        RETURN;
    END IF;
    BEGIN
        ALTER ROLE mcp_memory_gateway INHERIT;
        GRANT mcp_memory_ro, mcp_memory_rw, mcp_memory_archiver TO mcp_memory_gateway;
    EXCEPTION WHEN insufficient_privilege THEN
        RAISE NOTICE 'mcp-memory: cannot give mcp_memory_gateway the token groups'' rights (needs CREATEROLE): '
                     'gateways reach nothing until a role with CREATEROLE runs db migrate';
    END;
    -- every membership of a gateway (the group or one of its logins) in a token role ends
    FOR r IN
        SELECT t.role_name AS token, g.rolname AS member
        FROM access_tokens t
        JOIN pg_catalog.pg_roles tr ON tr.rolname = t.role_name::name
        JOIN pg_catalog.pg_auth_members m ON m.roleid = tr.oid
        JOIN pg_catalog.pg_roles g ON g.oid = m.member
        WHERE g.rolname = 'mcp_memory_gateway'
           OR pg_catalog.pg_has_role(g.oid, 'mcp_memory_gateway'::regrole, 'MEMBER')
    LOOP
        BEGIN
            EXECUTE pg_catalog.format('REVOKE %I FROM %I', r.token, r.member);
        EXCEPTION WHEN insufficient_privilege THEN
            RAISE NOTICE 'mcp-memory: cannot take token role % from gateway % (needs CREATEROLE): it may still act as it',
                r.token, r.member;
        END;
    END LOOP;
END $$;

-- 2. The caller --------------------------------------------------------------------------------------------
-- What a gateway may still do to itself: PostgreSQL lets every role change its own session defaults
-- (ALTER ROLE <itself> [IN DATABASE …] SET …), which every later backend of that login starts with —
-- every host's, through the pooler. The defaults a gateway may have are none, or (tables outside
-- `public`) the search_path `token gateway` set; anything else is undone at the next proof, and the
-- gateway's idle backends, which may have started with it, are ended (the pooler opens new ones).
CREATE FUNCTION mm_tables_schema() RETURNS text
LANGUAGE sql STABLE AS $$
    SELECT c.relnamespace::regnamespace::text FROM pg_catalog.pg_class c WHERE c.oid = 'sessions'::regclass
$$;

CREATE FUNCTION mm_gateway_tampered() RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT EXISTS (
        SELECT 1 FROM pg_catalog.pg_db_role_setting s
        WHERE s.setrole = session_user::regrole
          AND NOT (mm_tables_schema() <> 'public'
                   AND s.setdatabase = (SELECT d.oid FROM pg_catalog.pg_database d WHERE d.datname = pg_catalog.current_database())
                   AND s.setconfig = ARRAY['search_path=' || mm_tables_schema()]))
$$;

CREATE FUNCTION mm_gateway_untamper() RETURNS void
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    d text;
BEGIN
    IF NOT pg_catalog.pg_has_role(session_user, 'mcp_memory_gateway', 'MEMBER') THEN
        RETURN;  -- a token role's own limits are set by token create; only a gateway serves others
    END IF;
    RAISE WARNING 'mcp-memory: the session defaults of gateway % were changed; undone', session_user;
    EXECUTE pg_catalog.format('ALTER ROLE %I RESET ALL', session_user);
    FOR d IN SELECT db.datname FROM pg_catalog.pg_db_role_setting s JOIN pg_catalog.pg_database db ON db.oid = s.setdatabase
             WHERE s.setrole = session_user::regrole LOOP
        EXECUTE pg_catalog.format('ALTER ROLE %I IN DATABASE %I RESET ALL', session_user, d);
    END LOOP;
    IF mm_tables_schema() <> 'public' THEN
        EXECUTE pg_catalog.format('ALTER ROLE %I IN DATABASE %I SET search_path = %s', session_user,
                                  pg_catalog.current_database(), mm_tables_schema());
    END IF;
    PERFORM pg_catalog.pg_terminate_backend(a.pid) FROM pg_catalog.pg_stat_activity a
    WHERE a.usename = session_user AND a.state = 'idle' AND a.pid <> pg_catalog.pg_backend_pid();
EXCEPTION WHEN insufficient_privilege THEN
    RAISE WARNING 'mcp-memory: the session defaults of gateway % were changed and this owner may not undo them '
                  '(needs CREATEROLE): ALTER ROLE % RESET ALL', session_user, session_user;
END $$;

-- The proof names its role; a second setting says which role it is for.
CREATE OR REPLACE FUNCTION mm_gateway_prove(p_token text) RETURNS text
LANGUAGE plpgsql VOLATILE SECURITY DEFINER AS $$
DECLARE
    who text;
BEGIN
    IF mm_gateway_tampered() THEN
        PERFORM mm_gateway_untamper();
    END IF;
    SELECT t.role_name INTO who
    FROM access_tokens t JOIN pg_catalog.pg_roles r ON r.rolname = t.role_name::name
    WHERE t.token_sha256 = pg_catalog.sha256(pg_catalog.convert_to(coalesce(p_token, ''), 'UTF8'))
      AND r.rolcanlogin AND (r.rolvaliduntil IS NULL OR r.rolvaliduntil > pg_catalog.now())
    LIMIT 1;
    IF who IS NULL THEN
        RAISE EXCEPTION 'the token was not accepted (revoked, expired or mistyped)' USING ERRCODE = 'MM403';
    END IF;
    PERFORM pg_catalog.set_config('mm.gateway_role', who, true);
    PERFORM pg_catalog.set_config('mm.gateway_proof', mm_gateway_proof(who), true);
    RETURN who;
END $$;

-- Who calls:
--   * a login that did not switch roles: the token it proved in this transaction (the proof is
--     checked: it names the role, this backend and this transaction's start), else itself;
--   * a switched role: the owner or a superuser may act as any role; a token login taking one of its
--     group roles is that group (no token: no project); anybody else is the login itself.
CREATE OR REPLACE FUNCTION mm_caller() RETURNS text
LANGUAGE plpgsql STABLE SECURITY DEFINER AS $$
DECLARE
    r text := pg_catalog.current_setting('role');
    proven text;
    shown text;
BEGIN
    IF r = 'none' OR r = session_user::text THEN
        proven := pg_catalog.current_setting('mm.gateway_role', true);
        IF proven IS NULL OR proven = '' THEN
            RETURN session_user::text;
        END IF;
        shown := pg_catalog.current_setting('mm.gateway_proof', true);
        -- compared as digests: no early exit on the first differing character of the secret value
        IF shown IS NOT NULL AND pg_catalog.sha256(pg_catalog.convert_to(shown, 'UTF8'))
                                 = pg_catalog.sha256(pg_catalog.convert_to(mm_gateway_proof(proven), 'UTF8')) THEN
            RETURN proven;
        END IF;
        RETURN session_user::text;
    END IF;
    IF mm_is_owner(session_user::text) THEN
        RETURN r;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM access_tokens t WHERE t.role_name = r) THEN
        RETURN r;
    END IF;
    RETURN session_user::text;
END $$;

-- Whether this login is an owner (or a superuser): mm_enter switches roles for an owner only.
CREATE FUNCTION mm_login_is_owner() RETURNS boolean
LANGUAGE sql STABLE SECURITY DEFINER AS $$
    SELECT mm_is_owner(session_user::text)
$$;

-- One round trip per transaction for a host behind the pooler (and serve-http): the proof; an owner
-- login also switches to the role (SET LOCAL ROLE; a SECURITY DEFINER function may not switch
-- roles: this one runs as the caller).
CREATE OR REPLACE FUNCTION mm_enter(p_token text) RETURNS text
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    who text := mm_gateway_prove(p_token);
BEGIN
    IF mm_login_is_owner() THEN
        PERFORM pg_catalog.set_config('role', who, true);
    END IF;
    RETURN who;
END $$;

-- A token's projects: for the caller, whoever the current role is.
CREATE OR REPLACE FUNCTION mm_token_projects(writable boolean) RETURNS text[]
LANGUAGE sql STABLE AS $$
    SELECT coalesce(pg_catalog.array_agg(p.project_id), '{}')
    FROM access_token_projects p JOIN access_tokens t ON t.role_name = p.role_name
    WHERE t.role_name = mm_caller() AND (NOT writable OR NOT t.read_only)
$$;

DROP POLICY mm_own ON access_tokens;
CREATE POLICY mm_own ON access_tokens FOR SELECT USING (role_name = (SELECT mm_caller()));
DROP POLICY mm_own ON access_token_projects;
CREATE POLICY mm_own ON access_token_projects FOR SELECT USING (role_name = (SELECT mm_caller()));

-- the policy builder names the author of a private row through mm_caller too (the policy of
-- decisions itself is migration 0020's, which already does)
CREATE OR REPLACE FUNCTION mm_enable_project_rls(tbl regclass, deletable boolean DEFAULT true,
                                                 protect text[] DEFAULT '{}'::text[],
                                                 frozen text[] DEFAULT '{}'::text[]) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    readable text := '(project_id IS NULL OR project_id = ANY ((SELECT mm_token_projects(false))::text[])'
                     ' OR ''*'' = ANY ((SELECT mm_token_projects(false))::text[]))';
    writable text := '(project_id = ANY ((SELECT mm_token_projects(true))::text[])'
                     ' OR ''*'' = ANY ((SELECT mm_token_projects(true))::text[]))';
BEGIN
    IF EXISTS (SELECT 1 FROM pg_catalog.pg_attribute WHERE attrelid = tbl AND attname = 'visibility' AND NOT attisdropped)
       AND EXISTS (SELECT 1 FROM pg_catalog.pg_attribute WHERE attrelid = tbl AND attname = 'created_by' AND NOT attisdropped)
    THEN
        readable := pg_catalog.format('(visibility = ''public'' OR (%s AND (visibility <> ''private'' OR created_by = (SELECT mm_caller()))))',
                                      readable);
    END IF;
    PERFORM mm_apply_policies(tbl, readable, writable);
    PERFORM mm_grant_table(tbl, deletable, protect, frozen);
END $$;

-- query_memory's decisions: a private decision is its author's (or the owner's), for an all-projects
-- token too
CREATE FUNCTION mm_read_owner() RETURNS boolean
LANGUAGE sql STABLE SECURITY DEFINER AS $$
    SELECT mm_is_owner(mm_caller())
$$;
REVOKE ALL ON FUNCTION mm_read_owner() FROM PUBLIC;
DO $$
BEGIN
    IF pg_catalog.to_regrole('mcp_memory_reader') IS NOT NULL THEN
        GRANT EXECUTE ON FUNCTION mm_read_owner() TO mcp_memory_reader;
    END IF;
END $$;

CREATE OR REPLACE VIEW mm_read.decisions WITH (security_barrier = true) AS
SELECT d.decision_id, d.session_id, d.project_id, d.message_seq, d.decision_type, d.summary, d.status,
       d.rationale, d.alternatives, d.supersedes, d.superseded_by, d.metadata, d.visibility, d.version,
       d.created_by, d.created_at, d.updated_at
FROM decisions d
WHERE d.visibility = 'public'
   OR ((d.project_id = ANY ((SELECT mm_read_scope())::text[]) OR '*' = ANY ((SELECT mm_read_scope())::text[]))
       AND (d.visibility <> 'private' OR d.created_by = (SELECT mm_read_caller())
            OR (SELECT mm_read_owner())));

CREATE OR REPLACE FUNCTION mm_append(p_session_id text, p_append_ids text[], p_roles text[], p_payloads text[], p_hashes bytea[], p_created timestamp with time zone[]) RETURNS TABLE(seq bigint, duplicate boolean)
    LANGUAGE plpgsql SECURITY DEFINER

    AS $$
DECLARE
    -- the caller as every check names it: a gateway login is the token it proved in this transaction
    who text := mm_caller();
    s sessions;
    read_only boolean;
    trusted boolean := false;
    n integer := coalesce(pg_catalog.cardinality(p_append_ids), 0);
    last bigint;
    payload jsonb;
    digest bytea;
    stored_seq bigint;
    stored_hash bytea;
BEGIN
    -- mm_writable_session and mm_require_write in one pass over the caller's token row: a session the
    -- caller may not read does not exist (MM404), a read-only token may not write (MM403), and the
    -- owner's own payload hashes are trusted
    SELECT * INTO s FROM sessions WHERE session_id = p_session_id FOR UPDATE;
    IF FOUND THEN
        SELECT t.read_only INTO read_only FROM access_tokens t WHERE t.role_name = who;
        IF FOUND THEN
            IF NOT EXISTS (SELECT 1 FROM access_token_projects p
                           WHERE p.role_name = who AND (p.project_id = s.project_id OR p.project_id = '*')) THEN
                s := NULL;
            ELSIF read_only THEN
                RAISE EXCEPTION 'token % is read-only', who USING ERRCODE = 'MM403';
            END IF;
        ELSIF coalesce((SELECT r.rolsuper FROM pg_catalog.pg_roles r WHERE r.rolname = who::name), false)
              OR coalesce(pg_catalog.pg_has_role(who::name, (SELECT c.relowner FROM pg_catalog.pg_class c
                                                             WHERE c.oid = 'sessions'::regclass), 'MEMBER'), false) THEN
            trusted := true;
        ELSE
            s := NULL;
        END IF;
    END IF;
    IF s.session_id IS NULL THEN
        RAISE EXCEPTION 'session % does not exist', p_session_id USING ERRCODE = 'MM404';
    END IF;
    last := s.last_seq;
    IF n = 0 OR pg_catalog.cardinality(p_roles) <> n OR pg_catalog.cardinality(p_payloads) <> n
       OR (p_hashes IS NOT NULL AND pg_catalog.cardinality(p_hashes) <> n)
       OR (p_created IS NOT NULL AND pg_catalog.cardinality(p_created) <> n) THEN
        RAISE EXCEPTION 'append needs one append_id, role and payload per message' USING ERRCODE = 'MM400';
    END IF;
    IF EXISTS (SELECT 1 FROM retired_months r WHERE r.part_month = s.part_month) THEN
        RAISE EXCEPTION 'session % belongs to month %, which has retired from the hot tables: append to a new session',
            p_session_id, pg_catalog.to_char(s.part_month, 'YYYY-MM') USING ERRCODE = 'MM409';
    END IF;
    FOR i IN 1..n LOOP
        IF p_append_ids[i] IS NULL OR p_append_ids[i] = '' OR pg_catalog.length(p_append_ids[i]) > 200 THEN
            RAISE EXCEPTION 'messages[%] append_id must be 1 to 200 characters', i - 1 USING ERRCODE = 'MM400';
        END IF;
        payload := mm_check_message(i, p_roles[i], p_payloads[i], p_created[i]);
        digest := CASE WHEN trusted AND p_hashes[i] IS NOT NULL THEN p_hashes[i] ELSE mm_payload_hash(payload) END;
        -- the append_id's unique key finds a replay: no lookup before the insert
        INSERT INTO messages (session_id, seq, project_id, append_id, role, payload, payload_hash, created_at,
                              written_by, part_month)
        VALUES (p_session_id, last + 1, s.project_id, p_append_ids[i], p_roles[i], payload, digest,
                coalesce(p_created[i], pg_catalog.now()), who, s.part_month)
        ON CONFLICT (session_id, append_id, part_month) DO NOTHING;
        IF FOUND THEN
            last := last + 1;
            seq := last;
            duplicate := false;
        ELSE
            SELECT m.seq, m.payload_hash INTO stored_seq, stored_hash
            FROM messages m WHERE m.session_id = p_session_id AND m.part_month = s.part_month
                              AND m.append_id = p_append_ids[i];
            IF stored_hash <> digest THEN
                RAISE EXCEPTION 'append_id % was already used with a different payload (seq %)', p_append_ids[i],
                    stored_seq USING ERRCODE = 'MM409';
            END IF;
            seq := stored_seq;
            duplicate := true;
        END IF;
        RETURN NEXT;
    END LOOP;
    IF last <> s.last_seq THEN
        UPDATE sessions SET last_seq = last, updated_at = pg_catalog.now() WHERE session_id = p_session_id;
        UPDATE search_progress SET stored_seq = last WHERE session_id = p_session_id;
    END IF;
END $$;

-- 3. What shows or signals other backends: the owner's only (needs a superuser; see the header) ------------
CREATE FUNCTION mm_harden_backends() RETURNS text[]
LANGUAGE plpgsql AS $$
DECLARE
    f regprocedure;
    owner_name text := (SELECT c.relowner::regrole::text FROM pg_catalog.pg_class c WHERE c.oid = 'sessions'::regclass);
    done text[] := '{}';
BEGIN
    IF NOT coalesce((SELECT r.rolsuper FROM pg_catalog.pg_roles r WHERE r.rolname = current_user), false) THEN
        RAISE NOTICE 'mcp-memory: only a superuser can take pg_stat_activity and pg_terminate_backend from PUBLIC '
                     '(install/pgbouncer/auth_query.sql does it); a gateway''s pooled backends can still see and end each other';
        RETURN done;
    END IF;
    FOR f IN
        SELECT p.oid::regprocedure FROM pg_catalog.pg_proc p
        WHERE p.pronamespace = 'pg_catalog'::regnamespace
          AND (p.proname IN ('pg_stat_get_activity', 'pg_stat_get_progress_info', 'pg_terminate_backend',
                             'pg_cancel_backend')
               OR p.proname LIKE 'pg\_stat\_get\_backend\_%')
    LOOP
        EXECUTE pg_catalog.format('REVOKE EXECUTE ON FUNCTION %s FROM PUBLIC', f);
        EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION %s TO %s', f, owner_name);
        done := done || f::text;
    END LOOP;
    REVOKE SELECT ON pg_catalog.pg_stat_activity FROM PUBLIC;
    EXECUTE pg_catalog.format('GRANT SELECT ON pg_catalog.pg_stat_activity TO %s', owner_name);
    RETURN done;
END $$;
REVOKE ALL ON FUNCTION mm_harden_backends() FROM PUBLIC;
SELECT mm_harden_backends();

-- Whether the backends are hidden from PUBLIC here (doctor's check).
CREATE FUNCTION mm_backends_hidden() RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT NOT pg_catalog.has_function_privilege('public', 'pg_catalog.pg_terminate_backend(integer, bigint)', 'EXECUTE')
       AND NOT pg_catalog.has_function_privilege('public', 'pg_catalog.pg_stat_get_activity(integer)', 'EXECUTE')
$$;

DO $$
DECLARE
    f text;
BEGIN
    FOREACH f IN ARRAY ARRAY['mm_tables_schema()', 'mm_gateway_tampered()', 'mm_gateway_untamper()', 'mm_gateway_prove(text)', 'mm_caller()', 'mm_login_is_owner()', 'mm_enter(text)',
                             'mm_token_projects(boolean)', 'mm_enable_project_rls(regclass, boolean, text[], text[])',
                             'mm_read_owner()', 'mm_harden_backends()', 'mm_backends_hidden()',
                             'mm_append(text, text[], text[], text[], bytea[], timestamp with time zone[])'] LOOP
        EXECUTE pg_catalog.format('ALTER FUNCTION %s SET search_path = pg_catalog, %I, pg_temp', f, current_schema());
    END LOOP;
    REVOKE ALL ON FUNCTION mm_login_is_owner(), mm_backends_hidden(), mm_gateway_tampered(), mm_gateway_untamper(),
        mm_tables_schema() FROM PUBLIC;
    GRANT EXECUTE ON FUNCTION mm_backends_hidden() TO PUBLIC;
    IF pg_catalog.to_regrole('mcp_memory_gateway') IS NOT NULL THEN
        GRANT EXECUTE ON FUNCTION mm_login_is_owner() TO mcp_memory_gateway;
    END IF;
    IF pg_catalog.to_regrole('mcp_memory_rw') IS NOT NULL THEN
        GRANT EXECUTE ON FUNCTION mm_login_is_owner() TO mcp_memory_ro, mcp_memory_rw, mcp_memory_archiver;
    END IF;
END $$;
