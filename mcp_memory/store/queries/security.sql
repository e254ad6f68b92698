-- Token roles and their scopes (migration 0004). Role DDL cannot take bind parameters: those
-- statements are composed in store/security_store.py with psycopg.sql.Identifier / Literal.

-- name: security_role_exists
SELECT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = %(role)s);

-- name: security_groups_present
SELECT count(*) = 3 FROM pg_roles WHERE rolname IN ('mcp_memory_rw', 'mcp_memory_ro', 'mcp_memory_archiver');

-- name: security_schema
-- The schema that holds the tables: a token role's search_path must reach it.
SELECT n.nspname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE c.oid = to_regclass('sessions');

-- name: security_insert_token
INSERT INTO access_tokens (role_name, read_only, archiver, token_sha256)
VALUES (%(role)s, %(read_only)s, %(archiver)s, %(token_sha256)s);

-- name: security_set_token_name
-- A rotation's role carries the name of the token it continues (migration 0014).
UPDATE access_tokens SET token_name = %(token_name)s WHERE role_name = %(role)s;

-- name: security_token_generations
-- The roles of one token name (rotations), newest first, with what a new generation copies.
SELECT t.role_name, t.read_only, t.archiver,
       coalesce((SELECT array_agg(p.project_id ORDER BY p.project_id) FROM access_token_projects p
                 WHERE p.role_name = t.role_name), '{}') AS projects,
       r.rolconnlimit AS connection_limit, nullif(r.rolvaliduntil, 'infinity') AS valid_until
FROM access_tokens t JOIN pg_roles r ON r.rolname = t.role_name
WHERE coalesce(t.token_name, t.role_name) = %(name)s
ORDER BY t.created_at DESC, t.role_name DESC;

-- name: security_insert_token_project
INSERT INTO access_token_projects (role_name, project_id) VALUES (%(role)s, %(project_id)s);

-- name: security_list_tokens
SELECT t.role_name, coalesce(t.token_name, t.role_name) AS token_name, t.read_only, t.archiver, t.created_by, t.created_at,
       coalesce(array_agg(p.project_id ORDER BY p.project_id) FILTER (WHERE p.project_id IS NOT NULL), '{}')
           AS projects,
       EXISTS (SELECT 1 FROM pg_roles r WHERE r.rolname = t.role_name AND r.rolcanlogin) AS can_login,
       (SELECT count(*) FROM pg_stat_activity a WHERE a.usename = t.role_name) AS connections,
       (SELECT nullif(r.rolvaliduntil, 'infinity') FROM pg_roles r WHERE r.rolname = t.role_name) AS expires
FROM access_tokens t LEFT JOIN access_token_projects p ON p.role_name = t.role_name
GROUP BY t.role_name
ORDER BY coalesce(t.token_name, t.role_name), t.created_at;

-- name: security_delete_token
DELETE FROM access_tokens WHERE role_name = %(role)s RETURNING role_name;

-- name: security_terminate_role
-- Revocation ends the role's open connections (their next statement fails; no new login succeeds).
SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity
WHERE usename = %(role)s AND pid <> pg_backend_pid();

-- name: security_my_token
-- Run as the token's own role, or as a gateway in a transaction that proved the token (mm_enter):
-- the caller's row is the only one row-level security lets it see.
-- (The row of the login itself, whose digest is this token's; the scope is the token's, migration 0029.)
SELECT role_name, read_only, archiver, token_sha256,
       (SELECT coalesce(array_agg(project_id ORDER BY project_id), '{}') FROM access_token_projects
        WHERE role_name = mm_caller()) AS projects
FROM access_tokens WHERE role_name = mm_login_role();

-- name: security_whoami
SELECT current_user::text, session_user::text;

-- name: security_token_count
SELECT mm_token_count();

-- name: security_check_token
-- REST verifies a bearer token with this (as the server's own login, a gateway that reads no
-- table; migration 0014), then runs as the role.
SELECT mm_check_token(%(role)s, %(digest)s);

-- name: security_login_is_owner
-- The connected login is a superuser or a member of the role that owns the tables.
SELECT coalesce((SELECT rolsuper FROM pg_roles WHERE rolname = current_user), false)
    OR coalesce(pg_has_role(current_user, (SELECT relowner FROM pg_class WHERE oid = to_regclass('sessions')),
                            'MEMBER'), false);

-- name: security_gateway_present
SELECT to_regrole('mcp_memory_gateway') IS NOT NULL;

-- name: security_is_superuser
SELECT current_setting('is_superuser') = 'on';

-- name: security_enter
-- A pooled login proves the token in this transaction; the caller is then its role.
SELECT mm_enter(%(token)s);
