-- Server health seen by `mcp-memory doctor`.

-- name: health_connections
-- Client connections in use against the slots a non-superuser can get, and who holds the most.
SELECT current_setting('max_connections')::int AS max_connections,
       current_setting('superuser_reserved_connections')::int
           + coalesce(current_setting('reserved_connections', true)::int, 0) AS reserved,
       (SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend') AS used,
       (SELECT coalesce(string_agg(holder, ', '), '') FROM (
            SELECT format('%s × %s', count(*), coalesce(nullif(application_name, ''), usename::text, '?')) AS holder
            FROM pg_stat_activity WHERE backend_type = 'client backend'
            GROUP BY coalesce(nullif(application_name, ''), usename::text, '?') ORDER BY count(*) DESC LIMIT 3) top
       ) AS top_holders;

-- name: health_backends_hidden
-- Whether other backends' queries and signals are the owner's only here (migration 0026); NULL on an
-- older schema.
SELECT CASE WHEN to_regprocedure('mm_backends_hidden()') IS NOT NULL THEN mm_backends_hidden() END;
