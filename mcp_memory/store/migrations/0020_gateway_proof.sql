-- A switched role counts only with a proof (README, "A connection tier for thousands of agents";
-- install/pgbouncer/README.md).
--
-- Behind PgBouncer every host's transactions run on the server connections of ONE gateway login
-- (the pooler forces it), so that thousands of hosts share a handful of backends. A gateway may
-- SET ROLE to every token role: with raw SQL through the pooler, the holder of token A could run
-- `SET LOCAL ROLE <token B's role>` and be B to every check that read the `role` setting or
-- current_user. From this migration on, a role switched away from the login counts only when this
-- very transaction proved it holds that role's token:
--
--   SELECT mm_enter('<token>');   -- checks the token's SHA-256 against access_tokens (login allowed,
--                                 -- not expired, not revoked), stores a proof, then SET LOCAL ROLE
--
-- The proof is an HMAC-SHA256, under a key only the owner reads (gateway_key), of (role, login,
-- backend pid, transaction start in microseconds), kept in the transaction-local setting
-- mm.gateway_proof. Anybody may write that setting, nobody without the key can compute a valid
-- value, and a value is worth nothing in another transaction or backend. A token role switched to
-- without a valid proof is not the caller: the login itself is (a gateway: no project, no write),
-- while current_user is the switched role, so row-level security (mm_token_projects, own rows of access_tokens) yields
-- nothing. Owners and superusers switching roles are trusted as before; a direct token login is
-- its own caller, unchanged.

-- 1. The key: random, owner-only, the HMAC pads precomputed (k XOR ipad, k XOR opad; RFC 2104). ---------
CREATE TABLE gateway_key (
    id        boolean PRIMARY KEY DEFAULT true CHECK (id),
    inner_pad bytea NOT NULL,
    outer_pad bytea NOT NULL
);
ALTER TABLE gateway_key ENABLE ROW LEVEL SECURITY;  -- no policy: nobody but the owner sees the row
REVOKE ALL ON gateway_key FROM PUBLIC;

-- A new random key (run by this migration; the owner may run it again to renew the key: the proof
-- of a transaction running at that moment fails, the next transaction proves again).
CREATE FUNCTION mm_gateway_new_key() RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    k bytea := pg_catalog.sha256(pg_catalog.convert_to(pg_catalog.gen_random_uuid()::text || pg_catalog.clock_timestamp()::text
                                 || pg_catalog.random()::text || pg_catalog.gen_random_uuid()::text
                                 || pg_catalog.gen_random_uuid()::text, 'UTF8'))
               || pg_catalog.sha256(pg_catalog.convert_to(pg_catalog.gen_random_uuid()::text || pg_catalog.random()::text,
                                                          'UTF8'));
    ipad bytea := k;
    opad bytea := k;
    i integer;
BEGIN
    FOR i IN 0 .. 63 LOOP
        ipad := pg_catalog.set_byte(ipad, i, pg_catalog.get_byte(k, i) # 54);   -- 0x36
        opad := pg_catalog.set_byte(opad, i, pg_catalog.get_byte(k, i) # 92);   -- 0x5c
    END LOOP;
    INSERT INTO gateway_key (id, inner_pad, outer_pad) VALUES (true, ipad, opad)
    ON CONFLICT (id) DO UPDATE SET inner_pad = excluded.inner_pad, outer_pad = excluded.outer_pad;
END $$;
SELECT mm_gateway_new_key();

-- The proof this transaction of this backend would hold for `p_role` (owner-only: it mints proofs).
CREATE FUNCTION mm_gateway_proof(p_role text) RETURNS text
LANGUAGE sql STABLE AS $$
    SELECT pg_catalog.encode(pg_catalog.sha256(k.outer_pad || pg_catalog.sha256(k.inner_pad || pg_catalog.convert_to(
               p_role || '/' || session_user::text || '/' || pg_catalog.pg_backend_pid()::text || '/'
               || (EXTRACT(epoch FROM pg_catalog.now()) * 1000000)::bigint::text, 'UTF8'))), 'hex')
    FROM gateway_key k WHERE k.id
$$;

-- 2. Who calls: a switched role only with its proof ---------------------------------------------------------
CREATE OR REPLACE FUNCTION mm_caller() RETURNS text
LANGUAGE plpgsql STABLE SECURITY DEFINER AS $$
DECLARE
    r text := pg_catalog.current_setting('role');
    shown text := pg_catalog.current_setting('mm.gateway_proof', true);
BEGIN
    IF r = 'none' THEN
        RETURN session_user::text;
    END IF;
    IF r = session_user::text THEN
        RETURN r;
    END IF;
    -- compared as digests: no early exit on the first differing character of the secret value
    IF shown IS NOT NULL AND pg_catalog.sha256(pg_catalog.convert_to(shown, 'UTF8'))
                             = pg_catalog.sha256(pg_catalog.convert_to(mm_gateway_proof(r), 'UTF8')) THEN
        RETURN r;
    END IF;
    IF mm_is_owner(session_user::text) THEN  -- after the proof: a membership check costs (below)
        RETURN r;
    END IF;
    -- unproven: a role that is no token (a token login taking its group role) has no rights of its
    -- own and stays the caller; a token role taken without its proof is not: the login is
    IF NOT EXISTS (SELECT 1 FROM access_tokens t WHERE t.role_name = r) THEN
        RETURN r;
    END IF;
    RETURN session_user::text;
END $$;

-- Owner or superuser? Never a token role, answered from access_tokens without a membership check:
-- PostgreSQL 15 keeps the memberships of ONE role per backend and lists them in time quadratic in
-- their number; a gateway is a member of every token role, so asking about a token role between
-- two SET ROLEs of the gateway rebuilt its list (5,000 tokens: tens of ms per transaction).
CREATE OR REPLACE FUNCTION mm_is_owner(who text) RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT NOT EXISTS (SELECT 1 FROM access_tokens t WHERE t.role_name = who)
       AND (coalesce((SELECT r.rolsuper FROM pg_catalog.pg_roles r WHERE r.rolname = who::name), false)
            OR coalesce(pg_catalog.pg_has_role(who::name, (SELECT c.relowner FROM pg_catalog.pg_class c
                                                           WHERE c.oid = 'sessions'::regclass), 'MEMBER'::text), false))
$$;

-- A token's projects: only for the proven caller (current_user alone can be switched to).
CREATE OR REPLACE FUNCTION mm_token_projects(writable boolean) RETURNS text[]
LANGUAGE sql STABLE AS $$
    SELECT coalesce(pg_catalog.array_agg(p.project_id), '{}')
    FROM access_token_projects p JOIN access_tokens t ON t.role_name = p.role_name
    WHERE t.role_name = current_user AND t.role_name = mm_caller() AND (NOT writable OR NOT t.read_only)
$$;

-- A token's own rows (its scope, its digest): only for the proven caller.
DROP POLICY mm_own ON access_tokens;
CREATE POLICY mm_own ON access_tokens FOR SELECT USING (role_name = current_user AND role_name = (SELECT mm_caller()));
DROP POLICY mm_own ON access_token_projects;
CREATE POLICY mm_own ON access_token_projects FOR SELECT
    USING (role_name = current_user AND role_name = (SELECT mm_caller()));

-- A private decision: readable by its proven author only.
DROP POLICY mm_read ON decisions;
CREATE POLICY mm_read ON decisions FOR SELECT USING (
    visibility = 'public'
    OR ((project_id IS NULL OR project_id = ANY ((SELECT mm_token_projects(false))::text[])
         OR '*' = ANY ((SELECT mm_token_projects(false))::text[]))
        AND (visibility <> 'private' OR created_by = (SELECT mm_caller()))));

-- 3. The proof and the switch ------------------------------------------------------------------------------
CREATE INDEX access_tokens_token_sha256 ON access_tokens (token_sha256);

-- Checks the token (its digest is a token role's, which may log in and has not expired) and stores
-- this transaction's proof for that role; returns the role. Refused tokens are [forbidden].
CREATE FUNCTION mm_gateway_prove(p_token text) RETURNS text
LANGUAGE plpgsql VOLATILE SECURITY DEFINER AS $$
DECLARE
    who text;
BEGIN
    SELECT t.role_name INTO who
    FROM access_tokens t JOIN pg_catalog.pg_roles r ON r.rolname = t.role_name::name
    WHERE t.token_sha256 = pg_catalog.sha256(pg_catalog.convert_to(coalesce(p_token, ''), 'UTF8'))
      AND r.rolcanlogin AND (r.rolvaliduntil IS NULL OR r.rolvaliduntil > pg_catalog.now())
    LIMIT 1;
    IF who IS NULL THEN
        RAISE EXCEPTION 'the token was not accepted (revoked, expired or mistyped)' USING ERRCODE = 'MM403';
    END IF;
    PERFORM pg_catalog.set_config('mm.gateway_proof', mm_gateway_proof(who), true);
    RETURN who;
END $$;

-- One round trip per transaction for a host behind the pooler (and serve-http): the proof, then
-- SET LOCAL ROLE (a SECURITY DEFINER function may not switch roles: this one runs as the caller).
CREATE FUNCTION mm_enter(p_token text) RETURNS text
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    who text := mm_gateway_prove(p_token);
BEGIN
    PERFORM pg_catalog.set_config('role', who, true);
    RETURN who;
END $$;

DO $$
DECLARE
    f text;
BEGIN
    FOREACH f IN ARRAY ARRAY['mm_gateway_new_key()', 'mm_gateway_proof(text)', 'mm_caller()', 'mm_is_owner(text)',
                             'mm_token_projects(boolean)', 'mm_gateway_prove(text)', 'mm_enter(text)'] LOOP
        EXECUTE format('ALTER FUNCTION %s SET search_path = pg_catalog, %I, pg_temp', f, current_schema());
    END LOOP;
    REVOKE ALL ON FUNCTION mm_gateway_new_key(), mm_gateway_proof(text), mm_gateway_prove(text), mm_enter(text)
        FROM PUBLIC;
    IF to_regrole('mcp_memory_gateway') IS NOT NULL THEN
        GRANT EXECUTE ON FUNCTION mm_gateway_prove(text), mm_enter(text), mm_caller() TO mcp_memory_gateway;
    END IF;
    IF to_regrole('mcp_memory_rw') IS NOT NULL THEN
        GRANT EXECUTE ON FUNCTION mm_gateway_prove(text), mm_enter(text)
            TO mcp_memory_ro, mcp_memory_rw, mcp_memory_archiver;
    END IF;
END $$;
