-- A token keeps its identity across rotations (README, "Tokens"; install/README.md).
--
-- A PostgreSQL role has one password, so `token rotate NAME` still makes a login role of its own for
-- the new token (NAME_r2, …) while the old one logs in until the grace period ends. Until now the new
-- login was a new caller too: messages it wrote, the archiver lease it held, the private decisions it
-- made carried the new role's name, and a host or archiver had to change the user of its DSN. From
-- this migration on a token's logins are one caller: mm_caller() answers the token's NAME (the first
-- role's, `access_tokens.token_name`) for every generation, so authorship, scopes, leases and
-- private decisions stay the token's; mm_login_role() is the login itself (the role a password or a
-- proof belongs to). Hosts take the login from the token (`mmt.<role>.…`), not from the DSN's user,
-- so writing the new token where the old one was is the whole rotation on a host.

-- The token a login belongs to: its name (itself for a first generation, or for no token at all).
CREATE FUNCTION mm_token_name(p_login text) RETURNS text
LANGUAGE sql STABLE AS $$
    SELECT coalesce((SELECT coalesce(t.token_name, t.role_name) FROM access_tokens t WHERE t.role_name = p_login),
                    p_login)
$$;

-- The login (or the proven role): migration 0026's caller.
ALTER FUNCTION mm_caller() RENAME TO mm_login_role;

CREATE FUNCTION mm_caller() RETURNS text
LANGUAGE sql STABLE SECURITY DEFINER AS $$
    SELECT mm_token_name(mm_login_role())
$$;

-- A token's own rows: every generation of its name, and the token's scope (its name's rows, which
-- every check reads; a rotation's copies are not consulted).
DROP POLICY mm_own ON access_tokens;
CREATE POLICY mm_own ON access_tokens FOR SELECT
    USING (coalesce(token_name, role_name) = (SELECT mm_caller()));
DROP POLICY mm_own ON access_token_projects;
CREATE POLICY mm_own ON access_token_projects FOR SELECT USING (role_name = (SELECT mm_caller()));

-- A private decision: its token's (policies hold functions by identity: named again after the rename).
DROP POLICY mm_read ON decisions;
CREATE POLICY mm_read ON decisions FOR SELECT USING (
    visibility = 'public'
    OR ((project_id IS NULL OR project_id = ANY ((SELECT mm_token_projects(false))::text[])
         OR '*' = ANY ((SELECT mm_token_projects(false))::text[]))
        AND (visibility <> 'private' OR created_by = (SELECT mm_caller()))));

-- The archiver's lease names the token; the backend that holds it logs in as one of its generations.
CREATE OR REPLACE FUNCTION mm_archive_acquire(p_worker text, p_lease double precision) RETURNS boolean
    LANGUAGE plpgsql SECURITY DEFINER
    AS $$
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
                        AND mm_token_name(a.usename::text) = l.role_name) THEN
        UPDATE archive_leader SET worker = pg_catalog."left"(p_worker, 200), role_name = who, pid = me,
                                  since = pg_catalog.now(), lease_until = pg_catalog.now() + lease
        WHERE id;
        RETURN true;
    END IF;
    RETURN false;
END $$;

CREATE OR REPLACE FUNCTION mm_archive_nodes() RETURNS TABLE(worker text, role_name text, pid integer, client text, last_seen timestamp with time zone, leader boolean, alive boolean, since timestamp with time zone, lease_until timestamp with time zone)
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    AS $$
BEGIN
    RETURN QUERY
    SELECT n.worker, n.role_name, n.pid, n.client, n.last_seen,
           (l.pid = n.pid AND l.role_name = n.role_name AND l.worker = n.worker) IS TRUE,
           EXISTS (SELECT 1 FROM pg_catalog.pg_stat_activity a
                   WHERE a.pid = n.pid AND a.datname = pg_catalog.current_database()
                     AND mm_token_name(a.usename::text) = n.role_name),
           l.since, l.lease_until
    FROM archive_nodes n LEFT JOIN archive_leader l ON l.id
    ORDER BY 6 DESC, n.last_seen DESC;
END $$;

DO $$
DECLARE
    f text;
BEGIN
    FOREACH f IN ARRAY ARRAY['mm_token_name(text)', 'mm_login_role()', 'mm_caller()',
                             'mm_archive_acquire(text, double precision)', 'mm_archive_nodes()'] LOOP
        EXECUTE pg_catalog.format('ALTER FUNCTION %s SET search_path = pg_catalog, %I, pg_temp', f, current_schema());
    END LOOP;
    REVOKE ALL ON FUNCTION mm_token_name(text), mm_caller() FROM PUBLIC;
    -- the renamed function keeps its grants (the gateway group, the token groups through 0020)
    IF pg_catalog.to_regrole('mcp_memory_gateway') IS NOT NULL THEN
        GRANT EXECUTE ON FUNCTION mm_caller() TO mcp_memory_gateway;
    END IF;
    IF pg_catalog.to_regrole('mcp_memory_rw') IS NOT NULL THEN
        GRANT EXECUTE ON FUNCTION mm_caller(), mm_login_role() TO mcp_memory_ro, mcp_memory_rw, mcp_memory_archiver;
    END IF;
END $$;
