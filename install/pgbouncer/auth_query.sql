-- PgBouncer's auth_query for mcp-memory (install/README.md, section 6). Each host logs in through
-- PgBouncer as its own token role, so row-level security sees the host, not the pooler. PgBouncer
-- asks the server for a role's SCRAM verifier as `mcp_pgbouncer`, which may do nothing but call
-- this lookup. Run as a superuser in the mcp-memory database (pg_authid is readable only by
-- superusers, so the function runs with its owner's rights):
--
--   psql -v ON_ERROR_STOP=1 -d mcp_memory -f install/pgbouncer/auth_query.sql
--   psql -d mcp_memory -c '\password mcp_pgbouncer'     -- the same password goes into userlist.txt
--
-- Only mcp-memory's logins are found: token roles, archiver and gateway logins (members of the
-- mcp_memory_* groups), never a superuser, the owner or an expired token. The owner and
-- `db migrate` connect to PostgreSQL directly. tests/test_pgbouncer.py runs this file.

CREATE ROLE mcp_pgbouncer LOGIN NOINHERIT;
CREATE SCHEMA pgbouncer;
REVOKE ALL ON SCHEMA pgbouncer FROM PUBLIC;
GRANT USAGE ON SCHEMA pgbouncer TO mcp_pgbouncer;

-- No row for an unknown, expired or revoked login (a function returning one record would answer a
-- row of NULLs, which PgBouncer reports as "bouncer config error" instead of a refused password).
CREATE FUNCTION pgbouncer.user_lookup(p_user text)
RETURNS TABLE (username text, password text)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    SELECT a.rolname::text, a.rolpassword
    FROM pg_catalog.pg_authid a
    WHERE a.rolname = p_user AND a.rolcanlogin AND NOT a.rolsuper
      AND (a.rolvaliduntil IS NULL OR a.rolvaliduntil > pg_catalog.now())
      AND EXISTS (SELECT 1 FROM pg_catalog.pg_auth_members m JOIN pg_catalog.pg_roles g ON g.oid = m.roleid
                  WHERE m.member = a.oid
                    AND g.rolname IN ('mcp_memory_rw', 'mcp_memory_ro', 'mcp_memory_archiver', 'mcp_memory_gateway'))
$$;
REVOKE ALL ON FUNCTION pgbouncer.user_lookup(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pgbouncer.user_lookup(text) TO mcp_pgbouncer;

-- Every pooled backend is the gateway's, and a role may see the running queries of its own backends
-- and end them: this database's pg_stat_activity sources, pg_terminate_backend and pg_cancel_backend
-- go to the owner only (install/pgbouncer/README.md, point 4). `db migrate` does the same when it runs
-- as a superuser; here it needs schema 26 (`mcp-memory db migrate` first).
DO $$
BEGIN
    IF pg_catalog.to_regprocedure('mm_harden_backends()') IS NULL THEN
        RAISE EXCEPTION 'run `mcp-memory db migrate` (schema 26) before this file';
    END IF;
    PERFORM mm_harden_backends();
END $$;
